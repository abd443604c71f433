import { setTimeout as sleep } from 'node:timers/promises';
import type { SecretSpec } from '../contract/agent-config.ts';
import { sourceKey, type ProviderName, type SecretReference } from '../contract/reference.ts';
import type { Logger } from '../log.ts';
import {
  MAX_SECRET_BYTES,
  ProviderError,
  toProviderError,
  type FetchContext,
  type FetchOutcome,
  type Provider,
  type SecretValue,
} from '../providers/provider.ts';
import { backoffDelay, DEFAULT_BACKOFF, type BackoffPolicy } from './backoff.ts';
import type { ProviderSet } from './provider-set.ts';

/**
 * Per-attempt time budget: a third of the deadline, so one hung connection leaves time for two more
 * attempts, at most MAX_ATTEMPT_MS (the AWS SDK's old 15 s request timeout, long enough for any
 * healthy backend) and at least MIN_ATTEMPT_MS (a slow but live backend must still be able to answer).
 */
const MAX_ATTEMPT_MS = 15_000;
const MIN_ATTEMPT_MS = 1000;
/**
 * After an attempt's signal fires, how long a provider has to end with its own (more specific)
 * error before the attempt is abandoned as timed out.
 */
const ABANDON_GRACE_MS = 200;

/**
 * How long the next attempt may take, with `remainingMs` of a `deadlineMs` deadline left. The last
 * attempt (`lastAttempt`, or too little left for another one) gets all that is left, up to
 * MAX_ATTEMPT_MS, so a backend slower than a third of the deadline still gets one long try.
 */
export function attemptBudgetMs(deadlineMs: number, remainingMs: number, lastAttempt = false): number {
  // Whole milliseconds: AbortSignal.timeout takes nothing else.
  const share = Math.round(Math.min(MAX_ATTEMPT_MS, Math.max(MIN_ATTEMPT_MS, deadlineMs / 3)));
  const left = Math.max(1, Math.round(remainingMs));
  if (lastAttempt || left - share < MIN_ATTEMPT_MS) return Math.min(left, MAX_ATTEMPT_MS);
  return Math.min(left, share);
}

/** What a fetch names a secret by in its logs: the env prefix, the reference as written, the file. */
export type SecretToFetch = Pick<SecretSpec, 'id' | 'ref' | 'filename'>;

/** One secret that failed an attempt, as logs show it: never a value. */
export interface FailedSecret {
  readonly id: string;
  readonly ref: string;
  readonly file: string;
  readonly reason: string;
  /** The backend's message. */
  readonly detail: string;
  /** The host or URL the provider asked, when known. */
  readonly endpoint: string | undefined;
}

/** A secret's name in logs and metric labels: its file (never a value), `.` for a secret split at the top level. */
export function fileLabel(spec: Pick<SecretSpec, 'filename'>): string {
  return spec.filename || '.';
}

/** A failed outcome of `spec`, described for a log line. */
export function describeFailure(
  spec: SecretToFetch,
  outcome: Extract<FetchOutcome, { ok: false }>,
): FailedSecret {
  return {
    id: spec.id,
    ref: spec.ref.text,
    file: fileLabel(spec),
    reason: outcome.error.reason,
    detail: outcome.error.message,
    endpoint: outcome.endpoint,
  };
}

export interface FetchOptions {
  readonly deadlineMs: number;
  readonly log: Logger;
  readonly backoff?: BackoffPolicy;
  /** Stop after this many rounds (a sidecar refresh makes one; its scheduler backs off instead). */
  readonly maxAttempts?: number;
  /**
   * Values already held, by source key: a provider that can peek at versions skips the fetch of a
   * source whose version did not change, and the held value is returned.
   */
  readonly known?: ReadonlyMap<string, SecretValue>;
  /** Told about every provider call: for metrics. */
  readonly observe?: (provider: ProviderName, durationMs: number, outcomes: readonly FetchOutcome[]) => void;
}

/**
 * Fetches each distinct source once (two files cut from one secret share a fetch), retrying
 * transient failures with backoff until the deadline. Each attempt gets a share of the deadline
 * (attemptBudgetMs), so a hung connection is cut in time for a retry. Stops early once a failure is
 * permanent: the run fails anyway, and hammering the backend helps nobody. Returns one outcome per
 * source key.
 */
export async function fetchSecrets(
  secrets: readonly SecretToFetch[],
  providers: ProviderSet,
  options: FetchOptions,
): Promise<Map<string, FetchOutcome>> {
  const deadline = Date.now() + options.deadlineMs;
  const policy = options.backoff ?? DEFAULT_BACKOFF;
  const results = new Map<string, FetchOutcome>();
  let pending = [...new Map(secrets.map((s) => [sourceKey(s.ref), s.ref])).values()];
  const lastFailure = new Map<string, Extract<FetchOutcome, { ok: false }>>();

  const maxAttempts = options.maxAttempts ?? Infinity;
  for (let attempt = 1; pending.length > 0; attempt++) {
    const budget = attemptBudgetMs(options.deadlineMs, deadline - Date.now(), attempt >= maxAttempts);
    const round = await fetchRound(
      pending,
      providers,
      { signal: AbortSignal.timeout(budget), timeoutMs: budget },
      options,
    );

    const retry: SecretReference[] = [];
    let permanent = false;
    let retryAfterMs = 0;
    round.forEach((outcome, i) => {
      const ref = pending[i]!;
      const key = sourceKey(ref);
      if (outcome.ok || !outcome.error.transient) {
        results.set(key, outcome);
        if (!outcome.ok) permanent = true;
        return;
      }
      lastFailure.set(key, outcome);
      retryAfterMs = Math.max(retryAfterMs, outcome.error.retryAfterMs ?? 0);
      retry.push(ref);
    });
    pending = retry;
    if (pending.length === 0) break;

    const delay = backoffDelay(attempt, policy, retryAfterMs);
    if (permanent || attempt >= maxAttempts || Date.now() + delay >= deadline) {
      for (const ref of pending) results.set(sourceKey(ref), lastFailure.get(sourceKey(ref))!);
      break;
    }
    // Every secret still missing, by id, reference and file, with where it was asked and what the
    // backend said: a stuck init container explains itself in `kubectl logs`.
    const waiting = new Set(pending.map(sourceKey));
    options.log.warn(
      {
        attempt,
        retrying: pending.map((r) => r.text),
        reasons: [...new Set(pending.map((r) => lastFailure.get(sourceKey(r))!.error.reason))],
        secrets: secrets
          .filter((s) => waiting.has(sourceKey(s.ref)))
          .map((s) => describeFailure(s, lastFailure.get(sourceKey(s.ref))!)),
        delayMs: delay,
      },
      'transient backend errors; retrying',
    );
    await sleep(delay);
  }
  return results;
}

async function fetchRound(
  refs: readonly SecretReference[],
  providers: ProviderSet,
  ctx: FetchContext,
  { observe, known }: FetchOptions,
): Promise<FetchOutcome[]> {
  const byProvider = new Map<ProviderName, number[]>();
  refs.forEach((ref, i) => byProvider.set(ref.provider, [...(byProvider.get(ref.provider) ?? []), i]));
  const outcomes: FetchOutcome[] = new Array(refs.length);
  await Promise.all(
    [...byProvider].map(async ([name, indices]) => {
      let results: FetchOutcome[];
      const started = performance.now();
      const group = indices.map((i) => refs[i]!);
      let provider: Provider | undefined;
      try {
        provider = await providers.get(name);
        results = await withinBudget(fetchGroup(provider, group, known, ctx), ctx);
      } catch (e) {
        const error = toProviderError(e);
        results = indices.map(() => ({ ok: false, error }));
      }
      observe?.(name, performance.now() - started, results);
      indices.forEach(
        (refIndex, j) => (outcomes[refIndex] = withEndpoint(checkSize(results[j]!), provider, group[j]!)),
      );
    }),
  );
  return outcomes;
}

/** One provider's share of a round: held values it can vouch for, fetches for the rest. */
async function fetchGroup(
  provider: Provider,
  group: readonly SecretReference[],
  known: ReadonlyMap<string, SecretValue> | undefined,
  ctx: FetchContext,
): Promise<FetchOutcome[]> {
  const unchanged = await unchangedSince(provider, group, known, ctx);
  const toFetch = group.map((_, j) => j).filter((j) => !unchanged.has(j));
  const fetched =
    toFetch.length > 0
      ? await provider.fetch(
          toFetch.map((j) => group[j]!),
          ctx,
        )
      : [];
  return group.map((_, j): FetchOutcome => {
    const held = unchanged.get(j);
    return held ? { ok: true, value: held } : fetched[toFetch.indexOf(j)]!;
  });
}

/**
 * `work`, or a timeout once the attempt's signal has fired and `work` has not ended shortly after.
 * Clients abort their requests on the signal, but not all they do first: the AWS SDK's credential
 * lookup (IRSA's STS call, EKS Pod Identity, the metadata server) takes no signal, and a hung one
 * held the attempt, and the init run, past INIT_DEADLINE. The abandoned call settles unobserved.
 */
function withinBudget<T>(work: Promise<T>, ctx: FetchContext): Promise<T> {
  work.catch(() => undefined);
  return new Promise<T>((resolve, reject) => {
    let timer: NodeJS.Timeout | undefined;
    const abandon = () => {
      timer = setTimeout(
        () =>
          reject(
            new ProviderError(
              'timeout',
              `no answer within the attempt's ${ctx.timeoutMs ?? 0} ms (a call the client could not cancel, such as a credential lookup)`,
              'check network reach to the backend and to its credential endpoints (STS, the EKS Pod Identity agent, the metadata server); retried until the deadline',
            ),
          ),
        ABANDON_GRACE_MS,
      );
    };
    if (ctx.signal.aborted) abandon();
    else ctx.signal.addEventListener('abort', abandon, { once: true });
    work.then(resolve, reject).finally(() => {
      ctx.signal.removeEventListener('abort', abandon);
      clearTimeout(timer);
    });
  });
}

/**
 * Positions in `refs` whose held value is still current by the provider's cheap version check.
 * Empty when the provider cannot peek.
 */
async function unchangedSince(
  provider: Provider,
  refs: readonly SecretReference[],
  known: ReadonlyMap<string, SecretValue> | undefined,
  ctx: FetchContext,
): Promise<Map<number, SecretValue>> {
  const unchanged = new Map<number, SecretValue>();
  if (!provider.peekVersions || !known) return unchanged;
  const held = refs.map((r) => known.get(sourceKey(r)));
  const ask = refs.filter((_, i) => held[i] !== undefined);
  if (ask.length === 0) return unchanged;
  const versions = await provider.peekVersions(ask, ctx).catch(() => ask.map(() => undefined));
  let j = 0;
  refs.forEach((_, i) => {
    if (held[i] === undefined) return;
    if (versions[j] !== undefined && versions[j] === held[i]!.version) unchanged.set(i, held[i]!);
    j++;
  });
  return unchanged;
}

/** A failure names where the provider asked; a provider that cannot say leaves it out. */
function withEndpoint(
  outcome: FetchOutcome,
  provider: Provider | undefined,
  ref: SecretReference,
): FetchOutcome {
  if (outcome.ok || outcome.endpoint !== undefined || !provider?.endpoint) return outcome;
  let endpoint: string | undefined;
  try {
    endpoint = provider.endpoint(ref);
  } catch {
    endpoint = undefined; // naming the endpoint must never turn into a failure of its own
  }
  return endpoint === undefined ? outcome : { ...outcome, endpoint };
}

function checkSize(outcome: FetchOutcome): FetchOutcome {
  if (!outcome.ok || outcome.value.bytes.byteLength <= MAX_SECRET_BYTES) return outcome;
  return {
    ok: false,
    error: new ProviderError(
      'too-large',
      `the value is ${outcome.value.bytes.byteLength} bytes`,
      `keep secrets at most ${MAX_SECRET_BYTES} bytes (1 MiB, the Kubernetes Secret limit)`,
      { transient: false },
    ),
  };
}
