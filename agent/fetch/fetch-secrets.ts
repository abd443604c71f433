import { setTimeout as sleep } from 'node:timers/promises';
import { sourceKey, type ProviderName, type SecretReference } from '../contract/reference.ts';
import type { Logger } from '../log.ts';
import {
  MAX_SECRET_BYTES,
  ProviderError,
  toProviderError,
  type FetchOutcome,
  type Provider,
  type ProviderFactory,
  type ProviderOptions,
  type SecretValue,
} from '../providers/provider.ts';
import { PROVIDERS } from '../providers/registry.ts';
import { backoffDelay, DEFAULT_BACKOFF, type BackoffPolicy } from './backoff.ts';

/** No single round of requests may take longer than this, whatever the deadline. */
const ATTEMPT_TIMEOUT_MS = 20_000;

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

/** Providers loaded so far, one per backend, created on first use. */
export class ProviderSet {
  readonly #providers = new Map<ProviderName, Promise<Provider>>();
  readonly #kept = new Set<ProviderName>();
  readonly #options: ProviderOptions;

  constructor(options: ProviderOptions) {
    this.#options = options;
  }

  get(name: ProviderName): Promise<Provider> {
    let provider = this.#providers.get(name);
    if (!provider) {
      // Each registry entry's factory takes its own reference type; the caller routes refs by provider name.
      const load = PROVIDERS[name] as (() => Promise<ProviderFactory<SecretReference>>) | undefined;
      provider = load
        ? load().then((factory) => factory(this.#options))
        : Promise.reject(
            new ProviderError(
              'invalid',
              `the ${name} provider is not part of this build`,
              'use a build that includes it',
              { transient: false },
            ),
          );
      this.#providers.set(name, provider);
    }
    return provider;
  }

  /** Starts background upkeep in every provider loaded so far (idempotent per provider). */
  async keepAlive(refetch: (provider: ProviderName, reason: string) => void): Promise<void> {
    for (const [name, p] of this.#providers) {
      if (this.#kept.has(name)) continue;
      const provider = await p.catch(() => undefined);
      if (!provider?.keepAlive) continue;
      this.#kept.add(name);
      provider.keepAlive((reason) => refetch(name, reason));
    }
  }

  async close(): Promise<void> {
    for (const p of this.#providers.values()) (await p.catch(() => undefined))?.close?.();
  }
}

/**
 * Fetches each distinct source once (two files cut from one secret share a fetch), retrying
 * transient failures with backoff until the deadline. Stops early once a failure is permanent:
 * the run fails anyway, and hammering the backend helps nobody. Returns one outcome per source key.
 */
export async function fetchSecrets(
  refs: readonly SecretReference[],
  providers: ProviderSet,
  options: FetchOptions,
): Promise<Map<string, FetchOutcome>> {
  const deadline = Date.now() + options.deadlineMs;
  const policy = options.backoff ?? DEFAULT_BACKOFF;
  const results = new Map<string, FetchOutcome>();
  let pending = [...new Map(refs.map((r) => [sourceKey(r), r])).values()];
  const lastError = new Map<string, ProviderError>();

  const maxAttempts = options.maxAttempts ?? Infinity;
  for (let attempt = 1; pending.length > 0; attempt++) {
    const remaining = deadline - Date.now();
    const signal = AbortSignal.timeout(Math.max(1, Math.min(remaining, ATTEMPT_TIMEOUT_MS)));
    const round = await fetchRound(pending, providers, signal, options);

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
      lastError.set(key, outcome.error);
      retryAfterMs = Math.max(retryAfterMs, outcome.error.retryAfterMs ?? 0);
      retry.push(ref);
    });
    pending = retry;
    if (pending.length === 0) break;

    const delay = backoffDelay(attempt, policy, retryAfterMs);
    if (permanent || attempt >= maxAttempts || Date.now() + delay >= deadline) {
      for (const ref of pending)
        results.set(sourceKey(ref), { ok: false, error: lastError.get(sourceKey(ref))! });
      break;
    }
    options.log.warn(
      {
        attempt,
        retrying: pending.map((r) => r.text),
        reasons: [...new Set(pending.map((r) => lastError.get(sourceKey(r))!.reason))],
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
  signal: AbortSignal,
  { observe, known }: FetchOptions,
): Promise<FetchOutcome[]> {
  const byProvider = new Map<ProviderName, number[]>();
  refs.forEach((ref, i) => byProvider.set(ref.provider, [...(byProvider.get(ref.provider) ?? []), i]));
  const outcomes: FetchOutcome[] = new Array(refs.length);
  await Promise.all(
    [...byProvider].map(async ([name, indices]) => {
      let results: FetchOutcome[];
      const started = performance.now();
      try {
        const provider = await providers.get(name);
        const group = indices.map((i) => refs[i]!);
        const unchanged = await unchangedSince(provider, group, known, signal);
        const toFetch = group.map((_, j) => j).filter((j) => !unchanged.has(j));
        const fetched =
          toFetch.length > 0
            ? await provider.fetch(
                toFetch.map((j) => group[j]!),
                { signal },
              )
            : [];
        results = group.map((_, j): FetchOutcome => {
          const held = unchanged.get(j);
          return held ? { ok: true, value: held } : fetched[toFetch.indexOf(j)]!;
        });
      } catch (e) {
        const error = toProviderError(e);
        results = indices.map(() => ({ ok: false, error }));
      }
      observe?.(name, performance.now() - started, results);
      indices.forEach((refIndex, j) => (outcomes[refIndex] = checkSize(results[j]!)));
    }),
  );
  return outcomes;
}

/**
 * Positions in `refs` whose held value is still current by the provider's cheap version check.
 * Empty when the provider cannot peek.
 */
async function unchangedSince(
  provider: Provider,
  refs: readonly SecretReference[],
  known: ReadonlyMap<string, SecretValue> | undefined,
  signal: AbortSignal,
): Promise<Map<number, SecretValue>> {
  const unchanged = new Map<number, SecretValue>();
  if (!provider.peekVersions || !known) return unchanged;
  const held = refs.map((r) => known.get(sourceKey(r)));
  const ask = refs.filter((_, i) => held[i] !== undefined);
  if (ask.length === 0) return unchanged;
  const versions = await provider.peekVersions(ask, { signal }).catch(() => ask.map(() => undefined));
  let j = 0;
  refs.forEach((_, i) => {
    if (held[i] === undefined) return;
    if (versions[j] !== undefined && versions[j] === held[i]!.version) unchanged.set(i, held[i]!);
    j++;
  });
  return unchanged;
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
