import { hash } from 'node:crypto';
import { parseAgentConfig } from '../../agent/config/parse-agent-config.ts';
import { SECRET_VAR } from '../../agent/contract/secret-settings.ts';
import type { Env } from '../../agent/contract/settings.ts';
import { ConfigError, ConfigErrors } from '../../agent/contract/errors.ts';
import { PREFIX } from '../annotations/annotation.ts';
import type { FileAnnotationName } from '../annotations/file-annotations.ts';
import type { InjectionMode } from '../annotations/values.ts';
import type { InjectionDefaults } from '../config/injection-defaults.ts';
import type { InjectionRequest } from '../injection-request.ts';
import { renderAgentEnv } from '../render/agent-env.ts';
import { renderPodPatch } from '../render/pod-patch.ts';
import { RESIDENT_HANDOFF_FDS } from '../render/agent-containers.ts';
import { checkAnnotationLimits } from './annotation-limits.ts';
import { boundRefusal, boundWarnings, patchSizeError } from './answer-limits.ts';
import { decide, type SkipReason } from './decide.ts';
import { parseInjectionRequest } from '../parse/parse-injection-request.ts';
import { forLog, redactMessages } from './redact.ts';
import {
  allowFields,
  denyFields,
  reviewResponse,
  type AdmissionRequest,
  type AdmissionReviewResponse,
  type ReviewFields,
} from './review.ts';

/**
 * One admission decision as the webhook logs it: names of annotations, files and containers, never an
 * annotation's value (refusal problems have their quoted text elided).
 */
export interface DecisionLog {
  readonly pod?: string;
  readonly outcome: 'injected' | 'skipped' | 'denied';
  readonly reason?: SkipReason;
  readonly mode?: InjectionMode;
  readonly files?: readonly string[];
  readonly containers?: readonly string[];
  readonly annotations?: readonly string[];
  readonly problems?: readonly string[];
  /** Problems past MAX_SHOWN_PROBLEMS, counted only. */
  readonly problemsNotShown?: number;
  readonly warnings?: number;
}

export type AdmissionResult =
  | {
      readonly outcome: 'injected';
      readonly review: AdmissionReviewResponse;
      readonly request: InjectionRequest;
      readonly log: DecisionLog;
    }
  | {
      readonly outcome: 'skipped';
      readonly review: AdmissionReviewResponse;
      readonly reason: SkipReason;
      readonly log: DecisionLog;
    }
  | {
      readonly outcome: 'denied';
      readonly review: AdmissionReviewResponse;
      readonly errors: readonly ConfigError[];
      readonly log: DecisionLog;
    };

/** What decides an admission: the namespace and the pod view, with the webhook's InjectionDefaults. */
export type AdmissionInput = Pick<AdmissionRequest, 'namespace' | 'pod'>;

/**
 * An admission decision before it answers a request: the response without its uid, the log line
 * without the pod's name. A pure function of AdmissionInput and InjectionDefaults, which is what lets
 * the admission cache answer a replica with the decision made for the first.
 */
export type AdmissionDecision =
  | (Omit<Extract<AdmissionResult, { outcome: 'injected' }>, 'review'> & { readonly fields: ReviewFields })
  | (Omit<Extract<AdmissionResult, { outcome: 'skipped' }>, 'review'> & { readonly fields: ReviewFields })
  | (Omit<Extract<AdmissionResult, { outcome: 'denied' }>, 'review'> & { readonly fields: ReviewFields });

/** AdmissionRequest in, AdmissionReview response out: decide, parse, check, render, patch. */
export function admitPod(request: AdmissionRequest, defaults: InjectionDefaults): AdmissionResult {
  return answer(request, decideAdmission(request, defaults));
}

/** The decision as the answer to `request`: its uid and apiVersion, its pod's name in the log. */
export function answer(
  request: Pick<AdmissionRequest, 'apiVersion' | 'uid' | 'podName'>,
  decision: AdmissionDecision,
): AdmissionResult {
  const { fields, ...rest } = decision;
  const review = reviewResponse(request, fields);
  const log = request.podName === undefined ? decision.log : { pod: request.podName, ...decision.log };
  return { ...rest, review, log };
}

/** Decides from AdmissionInput alone: decide, parse, check, render, patch. */
export function decideAdmission(input: AdmissionInput, defaults: InjectionDefaults): AdmissionDecision {
  const decision = decide(input, defaults.ownNamespace);
  if (decision.action === 'skip') {
    const warnings = decision.warnings ?? [];
    return {
      outcome: 'skipped',
      reason: decision.reason,
      fields: allowFields(undefined, warnings),
      log: {
        outcome: 'skipped',
        reason: decision.reason,
        ...(warnings.length ? { warnings: warnings.length } : {}),
      },
    };
  }
  const annotations = input.pod?.metadata?.annotations ?? {};
  if (decision.action === 'deny') return denied([decision.error], annotations);
  // Sizes before anything parses them: what a pod's annotations can cost is bounded here.
  const oversized = checkAnnotationLimits(annotations);
  if (oversized.length > 0) return denied(oversized, annotations);
  let injection: InjectionRequest;
  try {
    injection = parseInjectionRequest(
      decision.pod,
      defaults,
      input.namespace || (decision.pod.metadata?.namespace ?? ''),
    );
    checkAgentAccepts(injection, annotations);
  } catch (e) {
    if (e instanceof ConfigErrors) return denied(e.errors, annotations);
    throw e;
  }
  const spec = decision.pod.spec;
  const containers =
    injection.containers ?? [...(spec.initContainers ?? []), ...spec.containers].map((c) => c.name);
  // Measured before base64 makes it a third larger: past its limit, the pod is refused instead.
  const patchJson = JSON.stringify(renderPodPatch(decision.pod, injection, defaults));
  const tooLarge = patchSizeError(Buffer.byteLength(patchJson), containers.length);
  if (tooLarge) return denied([tooLarge], annotations);
  return {
    outcome: 'injected',
    request: injection,
    fields: allowFields(patchJson, boundWarnings(injection.warnings)),
    log: {
      outcome: 'injected',
      mode: injection.mode,
      files: injection.secrets.filter((s) => s.env === undefined).map((s) => s.file),
      ...(injection.envExec ? { env: injection.envExec.names } : {}),
      containers,
      ...(injection.warnings.length ? { warnings: injection.warnings.length } : {}),
    },
  };
}

/**
 * A refusal shows this many problems and counts the rest: enough to fix in one pass, while a pod with
 * hundreds of bad annotations gets an answer (and a log line) of a few KiB, redacted in milliseconds.
 */
export const MAX_SHOWN_PROBLEMS = 20;

function denied(
  errors: readonly ConfigError[],
  annotations: Readonly<Record<string, string>>,
): AdmissionDecision {
  const shown = errors.slice(0, MAX_SHOWN_PROBLEMS);
  const notShown = errors.length - shown.length;
  const messages = redactMessages(shown, annotations);
  const message =
    errors.length === 1
      ? `secret-agent cannot inject this pod: ${messages[0]}`
      : `secret-agent cannot inject this pod (${errors.length} problems${notShown > 0 ? `, the first ${shown.length} shown` : ''}): ${messages.join(' | ')}`;
  return {
    outcome: 'denied',
    errors,
    fields: denyFields(boundRefusal(message)),
    log: {
      outcome: 'denied',
      annotations: [...new Set(shown.map((e) => e.field))],
      problems: messages.map(forLog),
      ...(notShown > 0 ? { problemsNotShown: notShown } : {}),
    },
  };
}

/** SHA-256 digests of env the agent's parser accepted, least recently used first: 1,024 × 44 bytes. */
const ACCEPTED_ENV = new Set<string>();
export const ACCEPTED_ENV_LIMIT = 1024;

/**
 * Runs the agent's own parser over the env we are about to render, so a pod is denied now (naming
 * the annotation) rather than crash-looping later on a combination only the agent checks. A small
 * sidecar's runs see that env with the handoff the resident adds (what it refuses in a run included).
 */
function checkAgentAccepts(injection: InjectionRequest, annotations: Readonly<Record<string, string>>): void {
  const { env, sources } = renderAgentEnv(injection, 'sidecar');
  const values: Record<string, string> = {};
  for (const e of env) values[e.name] = 'value' in e ? e.value : 'downward-api';
  if (injection.sidecarProcess?.kind === 'small') values.AGENT_HANDOFF_FDS = RESIDENT_HANDOFF_FDS;
  // The check is a pure function of the env, and every pod of a workload renders the same env:
  // a rollout of N replicas parses it once. Kept as a digest: the env may be a few hundred KiB.
  const key = hash('sha256', JSON.stringify(values), 'base64');
  if (ACCEPTED_ENV.delete(key)) {
    ACCEPTED_ENV.add(key);
    return;
  }
  try {
    parseAgentConfig(values satisfies Env);
    if (ACCEPTED_ENV.size >= ACCEPTED_ENV_LIMIT) ACCEPTED_ENV.delete(ACCEPTED_ENV.values().next().value!);
    ACCEPTED_ENV.add(key);
  } catch (e) {
    if (!(e instanceof ConfigErrors)) throw e;
    throw new ConfigErrors(
      e.errors.map((err) => {
        const annotation =
          fileAnnotation(err.field, injection, annotations) ?? sources.get(err.field) ?? `${PREFIX}inject`;
        return new ConfigError(annotation, `${err.problem} (agent setting ${err.field})`, err.fix);
      }),
    );
  }
}

/** The per-file setting behind SECRET_<N>_<NAME>, so an error names (and shows) the annotation the user wrote. */
const FILE_SETTING: Readonly<Record<string, FileAnnotationName>> = {
  REF: 'secret',
  FILENAME: 'path',
  FORMAT: 'format',
  MODE: 'file-mode',
  REFRESH_INTERVAL: 'refresh-interval',
};

function fileAnnotation(
  env: string,
  injection: InjectionRequest,
  annotations: Readonly<Record<string, string>>,
): string | undefined {
  const m = SECRET_VAR.exec(env);
  const secret = m ? injection.secrets[Number(m[1])] : undefined;
  const setting = m ? FILE_SETTING[m[2]!] : undefined;
  if (!secret || !setting) return undefined;
  const key = `${PREFIX}${setting}-${secret.file}`;
  return Object.hasOwn(annotations, key) ? key : secret.annotation;
}
