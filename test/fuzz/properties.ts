import { isDeepStrictEqual } from 'node:util';
import {
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  lstatSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { withConfigFile } from '../../agent/config/agent-config-file.ts';
import { formatDuration, parseDuration } from '../../agent/contract/duration.ts';
import { parseAgentConfig } from '../../agent/config/parse-agent-config.ts';
import type { AgentConfig, SecretSpec } from '../../agent/contract/agent-config.ts';
import { renderSecretEnv } from '../../agent/contract/render-secret-env.ts';
import type { Env } from '../../agent/contract/settings.ts';
import { ConfigError, ConfigErrors } from '../../agent/contract/errors.ts';
import { findPathConflict, validateRelativePath } from '../../agent/contract/path.ts';
import { parseReference, sourceKey, type SecretReference } from '../../agent/contract/reference.ts';
import { renderFiles, SecretFormatError, type FileEntry } from '../../agent/format/render-files.ts';
import {
  checkSecretNames,
  compileTemplate,
  renderTemplate,
  templateValue,
  TemplateError,
  type CompiledTemplate,
  type TemplateValue,
} from '../../agent/format/template.ts';
import { MAX_SECRET_BYTES } from '../../agent/providers/provider.ts';
import { AtomicDir, WriteError } from '../../agent/write/atomic-dir.ts';
import { AGENT_CONTAINER, AGENT_INIT_CONTAINER } from '../../webhook/injected-names.ts';
import { PREFIX } from '../../webhook/annotations/annotation.ts';
import { assertNoCanary, CANARY_MARKER } from '../support/canary.ts';
import { containerEnv, validatePod, type PodDoc } from '../webhook/fixtures.ts';
import { applyJsonPatch, type JsonPatchOperation } from '../../webhook/apply-patch.ts';
import {
  admissionReview,
  anyAgentEnv,
  anyBody,
  anyReference,
  configFileText,
  durationText,
  secretBytes,
  templateNamedSecrets,
  templateSecretBytes,
  templateText,
  validSecretInputs,
  validSegment,
  writerFiles,
  type GeneratedFile,
} from './arbitraries.ts';
import { createArena, diffSnapshots, snapshotTree, type Arena, type ForeignName } from './volume-arena.ts';
import { FOREIGN_NAMES } from './arbitraries.ts';
import { startWebhookTarget, type WebhookReply, type WebhookTarget } from './webhook-target.ts';

/**
 * The fuzzing properties, defined once: `npm test` runs each with a pinned seed and a small budget
 * (test/fuzz/*.test.ts), `npm run fuzz` runs them with ≥ 10^5 cases in total (test/fuzz/run.ts).
 */

// ---------------------------------------------------------------- findings and counters

/** What a broken property means, for the summary. `contract` is any other broken promise. */
export type FindingKind =
  | 'crash'
  | 'server-error'
  | 'connection-error'
  | 'deny-without-message'
  | 'write-outside-volume'
  | 'foreign-entry-changed'
  | 'leaked-canary'
  | 'contract';

export const FINDING_KINDS: readonly FindingKind[] = [
  'crash',
  'server-error',
  'connection-error',
  'deny-without-message',
  'write-outside-volume',
  'foreign-entry-changed',
  'leaked-canary',
  'contract',
];

export class Finding extends Error {
  readonly kind: FindingKind;
  constructor(kind: FindingKind, message: string, cause?: unknown) {
    super(`[${kind}] ${message}`, cause === undefined ? undefined : { cause });
    this.name = 'Finding';
    this.kind = kind;
  }
}

/** An exception of a type the code under test must never throw. */
function crash(where: string, e: unknown): Finding {
  const err = e instanceof Error ? e : new Error(String(e));
  return new Finding('crash', `${where} threw ${err.name}: ${err.message}\n${err.stack ?? ''}`, e);
}

function noCanary(text: string, where: string): void {
  try {
    assertNoCanary(text, where);
  } catch (e) {
    throw new Finding('leaked-canary', (e as Error).message);
  }
}

function expect(condition: boolean, kind: FindingKind, message: () => string): asserts condition {
  if (!condition) throw new Finding(kind, message());
}

/**
 * What the properties saw, by property and label (outcomes, observed violations): the summary
 * prints it, the tests check the generators reach both sides of every parser.
 */
export class Tally {
  readonly #counts = new Map<string, Map<string, number>>();

  add(property: string, label: string, n = 1): void {
    let labels = this.#counts.get(property);
    if (!labels) this.#counts.set(property, (labels = new Map()));
    labels.set(label, (labels.get(label) ?? 0) + n);
  }

  get(property: string, label: string): number {
    return this.#counts.get(property)?.get(label) ?? 0;
  }

  labels(property: string): ReadonlyMap<string, number> {
    return this.#counts.get(property) ?? new Map();
  }

  /** The sum of one label over every property. */
  total(label: string): number {
    let n = 0;
    for (const labels of this.#counts.values()) n += labels.get(label) ?? 0;
    return n;
  }
}

// ---------------------------------------------------------------- context

/** Shared resources, started on first use: the webhook servers, the writer's arena, a scratch dir. */
export class FuzzContext {
  readonly tally = new Tally();
  #webhook: Promise<WebhookTarget> | undefined;
  #arena: Arena | undefined;
  #scratch: string | undefined;

  webhook(): Promise<WebhookTarget> {
    return (this.#webhook ??= startWebhookTarget());
  }

  arena(): Arena {
    return (this.#arena ??= createArena());
  }

  scratch(): string {
    return (this.#scratch ??= mkdtempSync('/dev/shm/secret-agent-fuzz-scratch-'));
  }

  async close(): Promise<void> {
    if (this.#webhook) {
      const target = await this.#webhook;
      noCanary(target.takeLogs(), 'webhook logs');
      await target.close();
    }
    this.#arena?.close();
    if (this.#scratch) rmSync(this.#scratch, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------- property plumbing

export type FuzzGroup = 'webhook' | 'contract' | 'writer';

export interface RunParameters {
  readonly seed: number;
  readonly numRuns: number;
  /** A counterexample path printed by an earlier run, to replay it directly. */
  readonly path?: string;
  /** Stop at the first failure without shrinking (for repeats of a finding already shrunk). */
  readonly endOnFailure?: boolean;
}

export interface PropertyOutcome {
  readonly name: string;
  readonly runs: number;
  readonly failed: boolean;
  readonly kind?: FindingKind;
  readonly seed: number;
  readonly path?: string;
  /** fast-check's report: counterexample, shrunk, and the error. */
  readonly report?: string;
  /** The error's first line with names and numbers blanked: equal for repeats of one finding. */
  readonly signature?: string;
  readonly ms: number;
}

export interface FuzzProperty {
  readonly name: string;
  readonly group: FuzzGroup;
  /** What it checks, for the summary. */
  readonly doc: string;
  /** Share of FUZZ_RUNS in the dedicated run (relative). */
  readonly weight: number;
  /** Cases in `npm test`. */
  readonly testRuns: number;
  /** Tally labels every run must reach, so a generator that lost one side of a parser is noticed. */
  readonly coverage: readonly string[];
  check(ctx: FuzzContext, params: RunParameters): Promise<PropertyOutcome>;
}

const MAX_REPORT = 6000;

function define<Ts>(spec: {
  name: string;
  group: FuzzGroup;
  doc: string;
  weight: number;
  testRuns: number;
  coverage: readonly string[];
  build: (ctx: FuzzContext) => Promise<fc.IRawProperty<Ts>> | fc.IRawProperty<Ts>;
}): FuzzProperty {
  return {
    name: spec.name,
    group: spec.group,
    doc: spec.doc,
    weight: spec.weight,
    testRuns: spec.testRuns,
    coverage: spec.coverage,
    async check(ctx, params) {
      const started = performance.now();
      const property = await spec.build(ctx);
      const details = await fc.check(property, {
        seed: params.seed,
        numRuns: params.numRuns,
        ...(params.path === undefined ? {} : { path: params.path }),
        ...(params.endOnFailure ? { endOnFailure: true } : {}),
      });
      const ms = performance.now() - started;
      if (!details.failed)
        return { name: spec.name, runs: details.numRuns, failed: false, seed: params.seed, ms };
      const error = details.errorInstance;
      const cause = error instanceof Error ? (error.stack ?? error.message) : String(error);
      const report = `${fc.defaultReportMessage(details) ?? ''}\n\n${cause}`;
      return {
        name: spec.name,
        runs: details.numRuns,
        failed: true,
        kind: error instanceof Finding ? error.kind : 'contract',
        seed: details.seed,
        ...(details.counterexamplePath === null ? {} : { path: details.counterexamplePath }),
        signature: signatureOf(error),
        report:
          report.length > MAX_REPORT ? `${report.slice(0, MAX_REPORT)}… (${report.length} chars)` : report,
        ms,
      };
    },
  };
}

/** One line naming a failure, equal for repeats of one bug (an errno code, not the path it hit). */
function signatureOf(error: unknown): string {
  if (error instanceof Finding) {
    const cause = error.cause as { name?: unknown; code?: unknown } | undefined;
    if (typeof cause?.code === 'string') return `[${error.kind}] ${String(cause.name)} ${cause.code}`;
  }
  const text = error instanceof Error ? error.message : String(error);
  return text
    .split('\n')[0]!
    .replace(/'[^']*'|"[^"]*"/g, '…')
    .replace(/\d+/g, 'N')
    .slice(0, 160);
}

// ---------------------------------------------------------------- webhook

interface ReviewAnswer {
  apiVersion?: unknown;
  kind?: unknown;
  response?: {
    uid?: unknown;
    allowed?: unknown;
    patchType?: unknown;
    patch?: unknown;
    status?: { code?: unknown; message?: unknown };
  };
}

interface SentReview {
  apiVersion: string;
  request: { uid: string; object: PodDoc };
}

async function post(
  target: WebhookTarget,
  body: string | Uint8Array,
  options: { native: boolean; contentType: string },
): Promise<WebhookReply> {
  try {
    return await target.post(body, options);
  } catch (e) {
    throw new Finding('connection-error', `the request failed: ${(e as Error).message}`, e);
  }
}

/**
 * The checks every 200 answer passes: a well-formed AdmissionReview for this request; a deny has
 * code 400 and a message naming an annotation; a patch applies strictly, (for a valid pod) yields
 * a valid Pod, and every agent container's env is accepted by the agent's own parser.
 */
function checkAnswer(
  name: string,
  ctx: FuzzContext,
  sent: SentReview,
  reply: WebhookReply,
  options: { validPod: boolean },
): void {
  let answer: ReviewAnswer;
  try {
    answer = JSON.parse(reply.body) as ReviewAnswer;
  } catch {
    throw new Finding('contract', `a 200 answer is not JSON: ${reply.body.slice(0, 200)}`);
  }
  const response = answer.response;
  expect(
    answer.kind === 'AdmissionReview' &&
      answer.apiVersion === sent.apiVersion &&
      typeof response === 'object',
    'contract',
    () => `not an AdmissionReview answer: ${reply.body.slice(0, 300)}`,
  );
  expect(
    response.uid === sent.request.uid,
    'contract',
    () => `uid ${String(response.uid)} != ${sent.request.uid}`,
  );
  expect(typeof response.allowed === 'boolean', 'contract', () => 'response.allowed is not a boolean');
  if (!response.allowed) {
    ctx.tally.add(name, 'denied');
    const message = response.status?.message;
    if (typeof message !== 'string' || message.trim() === '' || response.status?.code !== 400)
      throw new Finding(
        'deny-without-message',
        `deny without code 400 and a message: ${reply.body.slice(0, 300)}`,
      );
    expect(message.includes(PREFIX), 'contract', () => `the deny names no annotation: ${message}`);
    return;
  }
  if (response.patch === undefined) {
    ctx.tally.add(name, 'allowed-unchanged');
    return;
  }
  ctx.tally.add(name, 'injected');
  expect(
    response.patchType === 'JSONPatch' && typeof response.patch === 'string',
    'contract',
    () => 'bad patchType',
  );
  const patchText = Buffer.from(response.patch, 'base64').toString('utf8');
  noCanary(patchText, 'the decoded JSON patch');
  let patched: PodDoc;
  try {
    patched = applyJsonPatch(sent.request.object, JSON.parse(patchText) as JsonPatchOperation[]);
  } catch (e) {
    throw new Finding(
      'contract',
      `the patch does not apply: ${(e as Error).message}\n${patchText.slice(0, 1000)}`,
    );
  }
  if (options.validPod) {
    try {
      validatePod(patched);
    } catch (e) {
      throw new Finding('contract', `the patched pod is not a valid Pod: ${(e as Error).message}`);
    }
  }
  const all = [...(patched.spec.initContainers ?? []), ...patched.spec.containers];
  const agents = all.filter((c) => c.name === AGENT_CONTAINER || c.name === AGENT_INIT_CONTAINER);
  expect(agents.length > 0, 'contract', () => 'a patch without an agent container');
  const annotations = sent.request.object.metadata?.annotations ?? {};
  const references = new Set(
    Object.entries(annotations)
      .filter(([k]) => k.startsWith(`${PREFIX}secret-`))
      .map(([, v]) => v),
  );
  // What the API server fills in and validates after admission, whatever a damaged request claimed.
  const admitted: PodDoc = {
    ...patched,
    metadata: {
      ...patched.metadata,
      name: 'web-7d4b9c-xk2p9',
      namespace: 'apps',
      uid: '6d1f0c5e-27a1-4a1e-9b55-0d6e8c0f2a11',
    },
  };
  for (const agent of agents.slice(0, 2)) {
    let config: AgentConfig;
    try {
      config = parseAgentConfig(containerEnv(agent, admitted));
    } catch (e) {
      if (e instanceof ConfigErrors)
        throw new Finding('contract', `the webhook admitted an env the agent rejects: ${e.message}`);
      throw crash('parseAgentConfig on the rendered env', e);
    }
    for (const s of config.secrets)
      expect(
        references.has(s.ref.text),
        'contract',
        () => `agent reference ${s.ref.text} is no annotation value`,
      );
  }
}

const webhookAnyBody = define({
  name: 'webhook: any body',
  coverage: ['HTTP 200', 'HTTP 400', 'HTTP 415', 'denied'],
  group: 'webhook',
  doc: 'POST /mutate with arbitrary bytes, JSON and damaged AdmissionReviews: never 5xx or a dropped connection; 200 answers are well-formed, 4xx carry an error',
  weight: 10,
  testRuns: 150,
  async build(ctx) {
    const target = await ctx.webhook();
    const name = 'webhook: any body';
    return fc.asyncProperty(anyBody, async (input) => {
      const reply = await post(target, input.body, { native: input.native, contentType: input.contentType });
      noCanary(target.takeLogs(), 'webhook logs');
      ctx.tally.add(name, `HTTP ${reply.status}`);
      if (reply.status >= 500) {
        throw new Finding('server-error', `HTTP ${reply.status}: ${reply.body.slice(0, 300)}`);
      }
      expect(
        [200, 400, 413, 415].includes(reply.status),
        'contract',
        () => `unexpected HTTP ${reply.status}`,
      );
      expect(reply.contentType === 'application/json', 'contract', () => `content-type ${reply.contentType}`);
      noCanary(reply.body, 'the /mutate response');
      if (reply.status !== 200) {
        let error: unknown;
        try {
          error = (JSON.parse(reply.body) as { error?: unknown }).error;
        } catch {
          error = undefined;
        }
        expect(
          typeof error === 'string' && error !== '',
          'contract',
          () => `a ${reply.status} without an error: ${reply.body}`,
        );
        return;
      }
      const text = typeof input.body === 'string' ? input.body : Buffer.from(input.body).toString('utf8');
      checkAnswer(name, ctx, JSON.parse(text) as SentReview, reply, { validPod: false });
    });
  },
});

const webhookAdmissionReview = define({
  name: 'webhook: AdmissionReview',
  coverage: ['injected', 'denied', 'allowed-unchanged'],
  group: 'webhook',
  doc: 'valid AdmissionReviews with generated pods and secret-agent.io annotations: 200, deny = code 400 + message, patches apply, validate and parse; no canary echoed',
  weight: 25,
  testRuns: 250,
  async build(ctx) {
    const target = await ctx.webhook();
    const name = 'webhook: AdmissionReview';
    return fc.asyncProperty(admissionReview, async (review) => {
      const sent = JSON.parse(review.body) as SentReview;
      try {
        validatePod(sent.request.object);
      } catch (e) {
        throw new Error(`generator bug: the pod is invalid: ${(e as Error).message}`, { cause: e });
      }
      const reply = await post(target, review.body, {
        native: review.native,
        contentType: 'application/json',
      });
      noCanary(target.takeLogs(), 'webhook logs');
      if (reply.status >= 500) {
        throw new Finding('server-error', `HTTP ${reply.status}: ${reply.body.slice(0, 300)}`);
      }
      noCanary(reply.body, 'the /mutate response');
      expect(
        reply.status === 200,
        'contract',
        () => `a valid AdmissionReview got HTTP ${reply.status}: ${reply.body}`,
      );
      checkAnswer(name, ctx, sent, reply, { validPod: true });
    });
  },
});

// ---------------------------------------------------------------- agent env and references

function checkConfigErrors(e: unknown, where: string): asserts e is ConfigErrors {
  if (!(e instanceof ConfigErrors)) throw crash(where, e);
  expect(e.errors.length > 0, 'contract', () => 'ConfigErrors without errors');
  for (const err of e.errors)
    expect(
      err instanceof ConfigError && err.field !== '' && err.problem !== '' && err.fix !== '',
      'contract',
      () => `an error without field, problem and fix: ${JSON.stringify(err)}`,
    );
}

function checkAcceptedSecrets(secrets: readonly SecretSpec[]): void {
  const files = secrets.filter((s) => s.format !== 'split');
  for (const s of secrets) {
    if (!(s.format === 'split' && s.filename === '')) {
      try {
        validateRelativePath(s.filename, s.id);
      } catch (e) {
        throw new Finding(
          'contract',
          `accepted file name ${JSON.stringify(s.filename)} fails validateRelativePath: ${(e as Error).message}`,
        );
      }
    }
    expect(
      (s.mode & 0o400) !== 0 && (s.mode & ~0o644) === 0,
      'contract',
      () => `accepted a mode the owner cannot read, or others may write or execute: ${s.mode.toString(8)}`,
    );
    expect(
      isDeepStrictEqual(parseReference(s.ref.text, 'again'), s.ref),
      'contract',
      () => `${s.ref.text} re-parses differently`,
    );
  }
  const conflict = findPathConflict(files.map((s) => s.filename));
  expect(
    conflict === undefined,
    'contract',
    () => `accepted conflicting file names ${JSON.stringify(conflict)}`,
  );
  for (const split of secrets.filter((s) => s.format === 'split' && s.filename !== ''))
    for (const f of files)
      expect(
        split.filename !== f.filename && !split.filename.startsWith(`${f.filename}/`),
        'contract',
        () => `split directory ${split.filename} collides with file ${f.filename}`,
      );
}

const agentEnv = define({
  name: 'agent: parseAgentConfig',
  coverage: ['accepted', 'rejected'],
  group: 'contract',
  doc: 'generated env maps: a config whose files are valid and distinct, or ConfigErrors each with field, problem and fix',
  weight: 12,
  testRuns: 1500,
  build(ctx) {
    return fc.property(anyAgentEnv, (env) => {
      let config: AgentConfig;
      try {
        config = parseAgentConfig(env);
      } catch (e) {
        checkConfigErrors(e, 'parseAgentConfig');
        ctx.tally.add('agent: parseAgentConfig', 'rejected');
        return;
      }
      ctx.tally.add('agent: parseAgentConfig', 'accepted');
      expect(config.secrets.length > 0, 'contract', () => 'accepted a config without secrets');
      config.secrets.forEach((s, i) =>
        expect(
          s.id === 'SECRET_ARN' || s.id === `SECRET_${i}`,
          'contract',
          () => `secret ${i} has id ${s.id}`,
        ),
      );
      checkAcceptedSecrets(config.secrets);
    });
  },
});

const secretEnvRoundTrip = define({
  name: 'agent: renderSecretEnv round trip',
  coverage: [],
  group: 'contract',
  doc: 'valid secrets rendered by renderSecretEnv parse back to the same references, files, formats, modes and intervals',
  weight: 6,
  testRuns: 500,
  build() {
    return fc.property(validSecretInputs, (inputs) => {
      const env = Object.fromEntries(renderSecretEnv(inputs).map((e) => [e.name, e.value]));
      let config: AgentConfig;
      try {
        config = parseAgentConfig(env);
      } catch (e) {
        if (e instanceof ConfigErrors) throw new Finding('contract', `rendered env rejected: ${e.message}`);
        throw crash('parseAgentConfig', e);
      }
      expect(config.secrets.length === inputs.length, 'contract', () => 'secret count differs');
      inputs.forEach((input, i) => {
        const s = config.secrets[i]!;
        const want = {
          ref: input.ref,
          filename: input.filename,
          format: input.format ?? 'raw',
          mode: input.mode === undefined ? 0o400 : parseInt(input.mode.replace(/^0o?/, ''), 8),
          refresh: input.refreshInterval === undefined ? 300_000 : parseDuration(input.refreshInterval),
        };
        const got = {
          ref: s.ref.text,
          filename: s.filename,
          format: s.format,
          mode: s.mode,
          refresh: s.refreshIntervalMs,
        };
        expect(
          isDeepStrictEqual(got, want),
          'contract',
          () => `secret ${i}: ${JSON.stringify(got)} != ${JSON.stringify(want)}`,
        );
      });
      checkAcceptedSecrets(config.secrets);
    });
  },
});

/** A reference written back from its parsed fields, in the canonical form of its kind. */
function renderReference(ref: SecretReference): string {
  const key = ref.key === undefined ? '' : `#${ref.key}`;
  switch (ref.provider) {
    case 'aws': {
      const base = ref.secretId.startsWith('arn:') ? ref.secretId : `aws:${ref.secretId}`;
      const option =
        ref.versionStage !== undefined
          ? `?versionStage=${ref.versionStage}`
          : ref.versionId !== undefined
            ? `?versionId=${ref.versionId}`
            : '';
      return base + option + key;
    }
    case 'gcp':
      return `${ref.project === undefined ? 'gcp:' : `projects/${ref.project}/secrets/`}${ref.secret}/versions/${ref.version}${key}`;
    case 'vault':
      return `vault:${ref.path}${ref.version === undefined ? '' : `?version=${ref.version}`}${key}`;
    case 'file':
      return `file:${ref.path}${key}`;
    case 'exec':
      return `exec:${ref.helper}/${ref.argument}${key}`;
  }
}

const withoutText = (ref: SecretReference): Omit<SecretReference, 'text'> => {
  const { text: _text, ...rest } = ref;
  return rest;
};

const reference = define({
  name: 'agent: parseReference',
  coverage: ['accepted aws', 'accepted gcp', 'accepted vault', 'accepted file', 'accepted exec', 'rejected'],
  group: 'contract',
  doc: 'valid, near-valid and hostile references: only ConfigError naming the field; accepted ones re-render and re-parse to the same value',
  weight: 15,
  testRuns: 2000,
  build(ctx) {
    return fc.property(anyReference, (text) => {
      let ref: SecretReference;
      try {
        ref = parseReference(text, 'SECRET_0_REF');
      } catch (e) {
        if (!(e instanceof ConfigError)) throw crash('parseReference', e);
        expect(
          e.field === 'SECRET_0_REF' && e.problem !== '' && e.fix !== '',
          'contract',
          () => `bad ConfigError ${e.message}`,
        );
        ctx.tally.add('agent: parseReference', 'rejected');
        return;
      }
      ctx.tally.add('agent: parseReference', `accepted ${ref.provider}`);
      expect(ref.text === text, 'contract', () => 'text is not the input');
      expect(
        sourceKey(ref) + (ref.key === undefined ? '' : `#${ref.key}`) === text,
        'contract',
        () => 'sourceKey + #key != text',
      );
      const canonical = renderReference(ref);
      let again: SecretReference;
      try {
        again = parseReference(canonical, 'again');
      } catch (e) {
        throw new Finding(
          'contract',
          `${JSON.stringify(text)} re-rendered as ${JSON.stringify(canonical)} is rejected: ${(e as Error).message}`,
        );
      }
      expect(
        isDeepStrictEqual(withoutText(again), withoutText(ref)),
        'contract',
        () => `${JSON.stringify(text)} and its canonical ${JSON.stringify(canonical)} parse differently`,
      );
    });
  },
});

const UNIT_MS: Readonly<Record<string, number>> = {
  ns: 1e-6,
  us: 1e-3,
  µs: 1e-3,
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
};
const UNITS_LONGEST_FIRST = ['ns', 'us', 'µs', 'ms', 's', 'm', 'h'].sort((a, b) => b.length - a.length);

/**
 * The duration grammar, written as a scanner (the parser under test uses a sticky regex):
 *
 *   duration := "0" | part { part }          at most 64 characters
 *   part     := number unit
 *   number   := digits [ "." digits ] | "." digits       (ASCII digits)
 *   unit     := "ns" | "us" | "µs" (U+00B5) | "ms" | "s" | "m" | "h"
 *
 * Go's time.ParseDuration also takes a sign, "1." and "μs" with U+03BC; this contract does not.
 */
export function durationModel(text: string): number | undefined {
  if (text === '0') return 0;
  if (text.length === 0 || text.length > 64) return undefined;
  const digit = (c: string | undefined) => c !== undefined && c >= '0' && c <= '9';
  let i = 0;
  let total = 0;
  while (i < text.length) {
    let j = i;
    while (digit(text[j])) j++;
    const whole = j - i;
    if (text[j] === '.') {
      const start = ++j;
      while (digit(text[j])) j++;
      if (j === start) return undefined;
    } else if (whole === 0) return undefined;
    const unit = UNITS_LONGEST_FIRST.find((u) => text.startsWith(u, j));
    if (unit === undefined) return undefined;
    total += Number(text.slice(i, j)) * UNIT_MS[unit]!;
    i = j + unit.length;
  }
  return Number.isFinite(total) ? total : undefined;
}

const duration = define({
  name: 'agent: parseDuration',
  coverage: ['accepted', 'rejected'],
  group: 'contract',
  doc: 'parseDuration accepts exactly the grammar of a reference model, with the same value',
  weight: 10,
  testRuns: 2000,
  build(ctx) {
    return fc.property(durationText, (text) => {
      let got: number | undefined;
      try {
        got = parseDuration(text);
      } catch (e) {
        throw crash('parseDuration', e);
      }
      const want = durationModel(text);
      ctx.tally.add('agent: parseDuration', want === undefined ? 'rejected' : 'accepted');
      expect(
        Object.is(got, want),
        'contract',
        () => `parseDuration(${JSON.stringify(text)}) = ${got}, the model says ${want}`,
      );
    });
  },
});

const durationRoundTrip = define({
  name: 'agent: formatDuration round trip',
  coverage: [],
  group: 'contract',
  doc: 'formatDuration(ms) is Go-style text that parseDuration reads back as ms',
  weight: 2,
  testRuns: 500,
  build() {
    return fc.property(fc.oneof(fc.integer({ min: 0, max: 100_000_000 }), fc.maxSafeNat()), (ms) => {
      const text = formatDuration(ms);
      expect(
        /^(?:\d+h)?(?:\d+m)?(?:\d+s)?(?:\d+ms)?$/.test(text) && text !== '',
        'contract',
        () => `odd text ${text}`,
      );
      expect(parseDuration(text) === ms, 'contract', () => `${ms} -> ${text} -> ${parseDuration(text)}`);
    });
  },
});

// ---------------------------------------------------------------- formats and config files

const renderSpec = fc.record({
  key: fc.option(fc.constantFrom('user', 'password', 'A_B', '__proto__', 'missing', 'a/b', '..'), {
    nil: undefined,
    freq: 2,
  }),
  format: fc.constantFrom('raw', 'split', 'dotenv'),
  filename: fc.oneof(validSegment, fc.constant('')),
});

const renderFilesProperty = define({
  name: 'agent: renderFiles',
  coverage: ['rendered', 'rejected'],
  group: 'contract',
  doc: 'generated secret values and specs: file entries with valid paths and sizes, or a SecretFormatError that never quotes the value',
  weight: 8,
  testRuns: 600,
  build(ctx) {
    return fc.property(renderSpec, secretBytes, (shape, bytes) => {
      const ref = parseReference(`aws:db${shape.key === undefined ? '' : `#${shape.key}`}`, 'SECRET_0_REF');
      const filename = shape.filename === '' && shape.format !== 'split' ? 'file' : shape.filename;
      const spec: SecretSpec = {
        id: 'SECRET_0',
        ref,
        filename,
        format: shape.format,
        mode: 0o440,
        refreshIntervalMs: 60_000,
      };
      let files: FileEntry[];
      try {
        files = renderFiles(spec, bytes);
      } catch (e) {
        if (!(e instanceof SecretFormatError)) throw crash('renderFiles', e);
        noCanary(`${e.message} ${e.fix} ${e.secretId}`, 'a SecretFormatError');
        ctx.tally.add('agent: renderFiles', 'rejected');
        return;
      }
      ctx.tally.add('agent: renderFiles', 'rendered');
      for (const f of files) {
        expect(
          f.bytes.byteLength <= MAX_SECRET_BYTES,
          'contract',
          () => `${f.path} is ${f.bytes.byteLength} bytes`,
        );
        expect(f.mode === 0o440, 'contract', () => 'mode not kept');
        try {
          validateRelativePath(f.path, 'rendered file');
        } catch (e) {
          throw new Finding(
            'contract',
            `renderFiles produced a path the writer rejects: ${(e as Error).message}`,
          );
        }
      }
      if (shape.format === 'raw' && shape.key === undefined)
        expect(
          files.length === 1 && Buffer.compare(files[0]!.bytes, bytes) === 0,
          'contract',
          () => 'raw bytes changed',
        );
    });
  },
});

const TEMPLATE_FIELD = 'SECRET_0_TEMPLATE';

/**
 * What rendering must never show: JavaScript's own objects, reached through a prototype (a function
 * such as Object prints as "undefined", since JSON has no text for it).
 */
const JS_INTERNALS = ['[native code]', '[object ', 'function ', '=> ', 'undefined'];

const templates = define({
  name: 'agent: templates',
  coverage: ['syntax error', 'unknown name', 'not text', 'render error', 'rendered', 'rendered a value'],
  group: 'contract',
  doc: 'generated Mustache text over generated values holding canaries: compileTemplate returns or throws ConfigError, renderTemplate returns text or throws TemplateError naming the tag, no error quotes a value, text without {{ renders as itself, nothing of JavaScript’s prototypes is output',
  weight: 8,
  testRuns: 800,
  build(ctx) {
    const name = 'agent: templates';
    return fc.property(templateText, templateSecretBytes, templateNamedSecrets, (text, ownBytes, named) => {
      let compiled: CompiledTemplate;
      try {
        compiled = compileTemplate(text, TEMPLATE_FIELD);
      } catch (e) {
        if (!(e instanceof ConfigError)) throw crash('compileTemplate', e);
        expect(
          e.field === TEMPLATE_FIELD && e.problem !== '' && e.fix !== '',
          'contract',
          () => `bad ConfigError ${e.message}`,
        );
        noCanary(`${e.message} ${e.stack}`, 'a template syntax error');
        ctx.tally.add(name, 'syntax error');
        return;
      }
      // A template without tags can hold no value; it is written as it is.
      if (!text.includes('{{'))
        expect(
          renderTemplate(compiled, { own: null, secrets: new Map() }) === text,
          'contract',
          () => `text without tags rendered differently: ${JSON.stringify(text)}`,
        );

      let unknown: ConfigError[];
      try {
        unknown = checkSecretNames(
          compiled,
          named.map(([n]) => n),
          (path) => `name a secret for ${path}`,
        );
      } catch (e) {
        throw crash('checkSecretNames', e);
      }
      for (const e of unknown) {
        expect(
          e instanceof ConfigError && e.field === TEMPLATE_FIELD && /^line \d+, column \d+: /.test(e.problem),
          'contract',
          () => `bad unknown-name error ${e.message}`,
        );
        noCanary(`${e.message} ${e.stack}`, 'an unknown-name error');
      }
      if (unknown.length > 0) ctx.tally.add(name, 'unknown name');

      // Values as the agent hands them over; bytes that are not text are refused before rendering.
      const decode = (bytes: Uint8Array, whose: string): TemplateValue | undefined => {
        try {
          return templateValue(bytes, whose);
        } catch (e) {
          if (!(e instanceof TemplateError)) throw crash('templateValue', e);
          noCanary(`${e.problem} ${e.fix} ${e.message} ${e.stack}`, 'a TemplateError for bytes');
          ctx.tally.add(name, 'not text');
          return undefined;
        }
      };
      const own = decode(ownBytes, 'the value');
      const secrets = new Map<string, TemplateValue>();
      for (const [n, bytes] of named) {
        const value = decode(bytes, `the secret named ${JSON.stringify(n)}`);
        if (value !== undefined) secrets.set(n, value);
      }
      if (own === undefined) return;

      let out: string;
      try {
        out = renderTemplate(compiled, { own, secrets });
      } catch (e) {
        if (!(e instanceof TemplateError)) throw crash('renderTemplate', e);
        noCanary(`${e.problem} ${e.fix} ${e.message} ${e.stack}`, 'a TemplateError');
        expect(
          /^SECRET_0_TEMPLATE line \d+, column \d+: \{\{.*\}\} (?:is null|names no key of the secret(?: it reads)?)$/s.test(
            e.problem,
          ),
          'contract',
          () => `a render error that does not name the tag and where it is: ${e.problem}`,
        );
        ctx.tally.add(name, 'render error');
        return;
      }
      ctx.tally.add(name, 'rendered');
      if (out.includes(CANARY_MARKER)) ctx.tally.add(name, 'rendered a value');
      for (const internal of JS_INTERNALS)
        expect(
          text.includes(internal) || !out.includes(internal),
          'contract',
          () => `the output shows JavaScript internals (${internal}) for ${JSON.stringify(text)}`,
        );
    });
  },
});

const configFile = define({
  name: 'agent: config file',
  coverage: ['read', 'rejected'],
  group: 'contract',
  doc: 'generated YAML/JSON AGENT_CONFIG_FILE text through withConfigFile (readConfigFile): string settings or ConfigError(s) that never quote a value; parseAgentConfig then gives a config or ConfigErrors',
  weight: 6,
  testRuns: 500,
  build(ctx) {
    const dir = ctx.scratch();
    return fc.asyncProperty(configFileText, async ({ text, json }) => {
      const path = join(dir, json ? 'agent.json' : 'agent.yaml');
      writeFileSync(path, text);
      let env: Env = {};
      // Library warnings (process.emitWarning, printed on stderr) are output too; they arrive on a later tick.
      let warnings = '';
      const onWarning = (w: Error) => (warnings += `${w.name}: ${w.message}\n`);
      process.on('warning', onWarning);
      let thrown: unknown;
      try {
        env = await withConfigFile({}, path);
      } catch (e) {
        thrown = e;
      } finally {
        await new Promise((resolve) => setImmediate(resolve));
        process.off('warning', onWarning);
      }
      noCanary(warnings, 'process warnings (stderr) while reading the config file');
      if (thrown !== undefined) {
        const e = thrown;
        const errors = e instanceof ConfigErrors ? e.errors : e instanceof ConfigError ? [e] : undefined;
        if (errors === undefined) throw crash('withConfigFile (readConfigFile)', e);
        expect(errors.length > 0, 'contract', () => 'ConfigErrors without errors');
        for (const err of errors) {
          expect(
            err instanceof ConfigError && err.problem !== '' && err.fix !== '',
            'contract',
            () => `bad error ${err.message}`,
          );
          noCanary(`${err.problem} ${err.fix}`, 'a config file error');
        }
        ctx.tally.add('agent: config file', 'rejected');
        return;
      }
      ctx.tally.add('agent: config file', 'read');
      for (const [k, v] of Object.entries(env))
        expect(
          /^[A-Z][A-Z0-9_]*$/.test(k) && typeof v === 'string',
          'contract',
          () => `setting ${k} = ${typeof v}`,
        );
      try {
        parseAgentConfig(env);
      } catch (e) {
        checkConfigErrors(e, 'parseAgentConfig on a config file');
      }
    });
  },
});

// ---------------------------------------------------------------- the writer

type Expected = 'ok' | 'config' | 'write';

/** Linux's PATH_MAX: a path of this many bytes or more (its NUL counted) cannot be opened. */
const PATH_MAX = 4096;

/**
 * The writer's contract as a model: which error a write must end in, given what the volume holds.
 * A valid path that does not fit below PATH_MAX once joined under the volume's payload directory
 * (`<volume>/..<set>_<23-char timestamp>_<6 chars>/`) must be refused with a WriteError too.
 */
function expectedOutcome(
  files: readonly GeneratedFile[],
  taken: ReadonlySet<string>,
  volume: string,
  set: string,
): Expected {
  for (const f of files) {
    try {
      validateRelativePath(f.path, 'x');
    } catch {
      return 'config';
    }
  }
  if (findPathConflict(files.map((f) => f.path))) return 'write';
  if (files.some((f) => taken.has(f.path.split('/')[0]!))) return 'write';
  const payload = Buffer.byteLength(volume) + `/..${set}_`.length + 23 + 1 + 6 + 1;
  if (files.some((f) => payload + Buffer.byteLength(f.path) >= PATH_MAX)) return 'write';
  return 'ok';
}

/** Every regular file below `dir`, relative, following no symlinks. */
function listFiles(dir: string, prefix = ''): string[] {
  const out: string[] = [];
  for (const name of readdirSync(join(dir, prefix))) {
    const rel = prefix === '' ? name : `${prefix}/${name}`;
    const info = lstatSync(join(dir, rel));
    if (info.isDirectory()) out.push(...listFiles(dir, rel));
    else out.push(info.isFile() ? rel : `${rel} (not a file)`);
  }
  return out;
}

const SET_NAMES = ['data', 'data-two'] as const;

const atomicDir = define({
  name: 'writer: AtomicDir.write',
  coverage: ['ok', 'config', 'write'],
  group: 'writer',
  doc: 'generated file sets into a tmpfs volume holding foreign files and symlinks to outside: exactly the expected tree, or ConfigError/WriteError changing nothing; nothing outside the volume written',
  weight: 12,
  testRuns: 200,
  build(ctx) {
    const arena = ctx.arena();
    const name = 'writer: AtomicDir.write';
    const writes = fc.array(fc.tuple(fc.constantFrom(...SET_NAMES), writerFiles(arena.outside)), {
      minLength: 1,
      maxLength: 3,
    });
    return fc.asyncProperty(fc.subarray([...FOREIGN_NAMES]), writes, async (foreign, sequence) => {
      const outsideBefore = arena.snapshotOutside();
      const volume = arena.newVolume(foreign as ForeignName[]);
      try {
        const foreignBefore = snapshotTree(volume);
        const writers = new Map<string, AtomicDir>();
        const current = new Map<string, readonly GeneratedFile[]>();
        for (const [set, files] of sequence) {
          let dir = writers.get(set);
          if (!dir)
            writers.set(set, (dir = await AtomicDir.open(volume, { setName: set, requireMemoryFs: true })));
          const taken = new Set<string>(foreign);
          for (const [other, otherFiles] of current)
            if (other !== set) for (const f of otherFiles) taken.add(f.path.split('/')[0]!);
          const expected = expectedOutcome(files, taken, volume, set);
          const before = snapshotTree(volume);
          let outcome: Expected | undefined;
          let failure: unknown;
          try {
            await dir.write(
              files.map((f) => ({ path: f.path, bytes: Buffer.from(f.content), mode: f.mode })),
            );
            outcome = 'ok';
          } catch (e) {
            failure = e;
            outcome = e instanceof ConfigError ? 'config' : e instanceof WriteError ? 'write' : undefined;
          }
          const escaped = diffSnapshots(outsideBefore, arena.snapshotOutside());
          if (escaped.length > 0) throw new Finding('write-outside-volume', escaped.join('\n'));
          const after = snapshotTree(volume);
          for (const [path, what] of foreignBefore) {
            const top = path.split('/')[0]!;
            if (path !== '' && (foreign as string[]).includes(top))
              expect(
                after.get(path) === what,
                'foreign-entry-changed',
                () => `${path}: ${what} -> ${after.get(path)}`,
              );
          }
          if (outcome === undefined) throw crash('AtomicDir.write', failure);
          ctx.tally.add(name, outcome);
          if (failure !== undefined) {
            const e = failure as Error;
            noCanary(`${e.message} ${(e as { fix?: string }).fix ?? ''}`, 'a write error');
            // The volume's own mtime may move (a payload made and removed again); its entries may not.
            const changes = diffSnapshots(before, after).filter((c) => !c.startsWith('changed "":'));
            expect(
              changes.length === 0,
              'contract',
              () => `a refused write changed the volume: ${changes.join('; ')}`,
            );
          }
          expect(
            outcome === expected,
            'contract',
            () =>
              `write ended in ${outcome}, the model expects ${expected}${failure ? `: ${(failure as Error).message}` : ''}`,
          );
          if (outcome === 'ok') current.set(set, files);
          checkVolume(volume, foreign, current);
        }
      } finally {
        arena.removeVolume(volume);
      }
    });
  },
});

/** The volume holds exactly the foreign entries plus each set's links, payload and files. */
function checkVolume(
  volume: string,
  foreign: readonly string[],
  current: ReadonlyMap<string, readonly GeneratedFile[]>,
): void {
  const expectedTop = new Set<string>(foreign);
  for (const [set, files] of current) {
    const link = `..${set}`;
    const payload = readlinkSync(join(volume, link));
    expectedTop.add(link).add(payload);
    const paths = files.map((f) => f.path).sort();
    const listed = listFiles(join(volume, payload)).sort();
    expect(
      isDeepStrictEqual(listed, paths),
      'contract',
      () => `payload of ${set} holds ${JSON.stringify(listed)}, expected ${JSON.stringify(paths)}`,
    );
    for (const f of files) {
      const top = f.path.split('/')[0]!;
      expectedTop.add(top);
      expect(
        readlinkSync(join(volume, top)) === `${link}/${top}`,
        'contract',
        () => `${top} does not link into ${link}`,
      );
      const path = join(volume, f.path);
      expect(readFileSync(path, 'utf8') === f.content, 'contract', () => `${f.path} has the wrong content`);
      expect(
        (statSync(path).mode & 0o777) === f.mode,
        'contract',
        () => `${f.path} has mode ${(statSync(path).mode & 0o777).toString(8)}`,
      );
    }
  }
  const top = readdirSync(volume).sort();
  const want = [...expectedTop].sort();
  expect(
    isDeepStrictEqual(top, want),
    'contract',
    () => `the volume holds ${JSON.stringify(top)}, expected ${JSON.stringify(want)}`,
  );
}

// ---------------------------------------------------------------- the list

export const PROPERTIES: readonly FuzzProperty[] = [
  webhookAnyBody,
  webhookAdmissionReview,
  agentEnv,
  secretEnvRoundTrip,
  reference,
  duration,
  durationRoundTrip,
  renderFilesProperty,
  templates,
  configFile,
  atomicDir,
];

export function propertiesOf(group: FuzzGroup): readonly FuzzProperty[] {
  return PROPERTIES.filter((p) => p.group === group);
}
