import { parseAgentConfig, type Env } from '../../agent/contract/env.ts';
import { ConfigError, ConfigErrors } from '../../agent/contract/errors.ts';
import { PREFIX } from '../annotations.ts';
import type { InjectionDefaults } from '../config.ts';
import type { InjectionRequest } from '../injection-request.ts';
import { renderAgentEnv } from '../render/agent-env.ts';
import { renderPodPatch } from '../render/pod-patch.ts';
import { decide, type SkipReason } from './decide.ts';
import { parseInjectionRequest } from './parse-annotations.ts';
import {
  allowResponse,
  denyResponse,
  type AdmissionRequest,
  type AdmissionReviewResponse,
} from './review.ts';

export type AdmissionResult =
  | {
      readonly outcome: 'injected';
      readonly review: AdmissionReviewResponse;
      readonly request: InjectionRequest;
    }
  | { readonly outcome: 'skipped'; readonly review: AdmissionReviewResponse; readonly reason: SkipReason }
  | {
      readonly outcome: 'denied';
      readonly review: AdmissionReviewResponse;
      readonly errors: readonly ConfigError[];
    };

/** AdmissionRequest in, AdmissionReview response out: decide, parse, check, render, patch. */
export function admitPod(request: AdmissionRequest, defaults: InjectionDefaults): AdmissionResult {
  const decision = decide(request, defaults.ownNamespace);
  if (decision.action === 'skip')
    return { outcome: 'skipped', reason: decision.reason, review: allowResponse(request) };
  const values = Object.entries(request.pod?.metadata?.annotations ?? {})
    .filter(([key]) => key.startsWith(PREFIX))
    .map(([, value]) => value);
  if (decision.action === 'deny') return denied(request, [decision.error], values);
  let injection: InjectionRequest;
  try {
    injection = parseInjectionRequest(decision.pod, defaults);
    checkAgentAccepts(injection);
  } catch (e) {
    if (e instanceof ConfigErrors) return denied(request, e.errors, values);
    throw e;
  }
  return {
    outcome: 'injected',
    request: injection,
    review: allowResponse(request, renderPodPatch(decision.pod, injection, defaults), injection.warnings),
  };
}

function denied(
  request: AdmissionRequest,
  errors: readonly ConfigError[],
  values: readonly string[],
): AdmissionResult {
  const messages = errors.map((e) => scrubValues(e.message, values));
  const message =
    errors.length === 1
      ? `secret-agent cannot inject this pod: ${messages[0]}`
      : `secret-agent cannot inject this pod (${errors.length} problems): ${messages.join(' | ')}`;
  return { outcome: 'denied', errors, review: denyResponse(request, message) };
}

const ACCEPTED_ENV = new Set<string>();
const ACCEPTED_ENV_LIMIT = 1024;

/**
 * Runs the agent's own parser over the env we are about to render, so a pod is denied now (naming
 * the annotation) rather than crash-looping later on a combination only the agent checks.
 */
function checkAgentAccepts(injection: InjectionRequest): void {
  const { env, sources } = renderAgentEnv(injection, 'sidecar');
  const values: Record<string, string> = {};
  for (const e of env) values[e.name] = 'value' in e ? e.value : 'downward-api';
  // The check is a pure function of the env, and every pod of a workload renders the same env:
  // a rollout of N replicas parses it once.
  const key = JSON.stringify(values);
  if (ACCEPTED_ENV.has(key)) return;
  try {
    parseAgentConfig(values satisfies Env);
    if (ACCEPTED_ENV.size >= ACCEPTED_ENV_LIMIT) ACCEPTED_ENV.clear();
    ACCEPTED_ENV.add(key);
  } catch (e) {
    if (!(e instanceof ConfigErrors)) throw e;
    throw new ConfigErrors(
      e.errors.map((err) => {
        const annotation = sources.get(err.field) ?? `${PREFIX}inject`;
        return new ConfigError(annotation, `${err.problem} (agent setting ${err.field})`, err.fix);
      }),
    );
  }
}

const QUOTED = /"(?:[^"\\]|\\.)*"/g;

/**
 * Replaces quoted annotation text in an error with its length. A user who pastes a secret value
 * where a reference belongs must not see it echoed into API server responses, events and audit logs;
 * the annotation name and the fix are enough to act on.
 */
export function scrubValues(message: string, values: readonly string[]): string {
  return message.replace(QUOTED, (quoted) => {
    let text: string;
    try {
      text = JSON.parse(quoted) as string;
    } catch {
      return quoted;
    }
    const core = text.endsWith('…') ? text.slice(0, -1) : text;
    if (core === '' || !values.some((v) => v.includes(core))) return quoted;
    return `(a value of ${core.length}${core === text ? '' : '+'} characters)`;
  });
}
