import type { SecretSpec } from '../../contract/agent-config.ts';
import { sourceKey } from '../../contract/reference.ts';
import { describeFailure, fetchSecrets, fileLabel, type FailedSecret } from '../../fetch/fetch-secrets.ts';
import type { ProviderSet } from '../../fetch/provider-set.ts';
import type { Logger } from '../../log.ts';
import type { FetchOutcome } from '../../providers/provider.ts';
import type { AgentMetrics } from '../../serve/metrics.ts';
import type { RoundResult } from './refresh-schedule.ts';
import type { SecretSet, SourceValue } from './secret-set.ts';

export interface RefreshDeps {
  readonly providers: ProviderSet;
  readonly set: SecretSet;
  readonly log: Logger;
  readonly metrics: AgentMetrics;
}

export interface RefreshOptions {
  readonly deadlineMs: number;
  /**
   * Re-render even when no fetched value changed: the first fill, and after a reconfigure (a secret
   * may have been removed or moved to another file).
   */
  readonly full: boolean;
  readonly maxAttempts?: number;
  /** Fetch every value; else providers that can peek at versions skip values whose version is unchanged. */
  readonly fresh?: boolean;
}

/**
 * One refresh of `specs`, for the sidecar and for a run of the small sidecar: fetch, and when content
 * changed, render the whole set and swap it. Failures are logged and counted; the last good files stay.
 */
export async function refreshSecrets(
  specs: readonly SecretSpec[],
  { providers, set, log, metrics }: RefreshDeps,
  opts: RefreshOptions,
): Promise<RoundResult> {
  const outcomes = await fetchSecrets(specs, providers, {
    deadlineMs: opts.deadlineMs,
    log,
    ...(opts.maxAttempts ? { maxAttempts: opts.maxAttempts } : {}),
    ...(opts.fresh ? {} : { known: set.values }),
    observe: (provider, ms, results) => observe(metrics, provider, ms, results),
  });
  let allOk = true;
  let retryAfterMs = 0;
  const failures: FailedSecret[] = [];
  const fresh = new Map<string, SourceValue>();
  for (const spec of specs) {
    const key = sourceKey(spec.ref);
    const outcome = outcomes.get(key)!;
    if (outcome.ok) {
      fresh.set(key, outcome.value);
    } else {
      allOk = false;
      retryAfterMs = Math.max(retryAfterMs, outcome.error.retryAfterMs ?? 0);
      const failed = describeFailure(spec, outcome);
      failures.push(failed);
      log.warn(
        {
          id: failed.id,
          ref: failed.ref,
          file: failed.file,
          endpoint: failed.endpoint,
          reason: failed.reason,
          detail: failed.detail,
          fix: outcome.error.fix,
        },
        set.readable ? 'refresh failed; keeping the last good files' : 'secret not delivered',
      );
    }
  }
  const wrote = await set.apply(fresh, opts.full, failures);
  // Fresh only when fetched and written: a file kept because its value does not fit is stale.
  for (const spec of specs)
    if (fresh.has(sourceKey(spec.ref)) && wrote && !set.isMisfit(spec.id))
      metrics.lastSuccess.set({ file: fileLabel(spec) }, Date.now() / 1000);
  return { ok: allOk && wrote, retryAfterMs, failures };
}

function observe(
  metrics: AgentMetrics,
  provider: string,
  ms: number,
  results: readonly FetchOutcome[],
): void {
  metrics.latency.observe({ provider }, ms / 1000);
  for (const r of results) {
    metrics.fetches.inc({ provider, outcome: r.ok ? 'success' : 'failure' });
    if (!r.ok) metrics.failures.inc({ provider, reason: r.error.reason });
  }
}
