import type { SecretSpec } from '../../contract/agent-config.ts';
import { backoffDelay } from '../../fetch/backoff.ts';
import type { FailedSecret } from '../../fetch/fetch-secrets.ts';

/** A refresh makes one attempt per cycle; a failed cycle is retried on this schedule, capped at the interval. */
export const REFRESH_BACKOFF = { baseMs: 1000, maxMs: 60_000 };
/** How long one refresh round may take before it counts as failed. */
export const REFRESH_ROUND_MS = 30_000;
/** Until the app has its first set: retried sooner, every secret with init's deadline. */
export const FILL_BACKOFF = { baseMs: 1000, maxMs: 30_000 };

/** What one refresh round of a group came to. */
export interface RoundResult {
  readonly ok: boolean;
  /** The longest wait a backend asked for (Retry-After, RetryInfo); 0 when none did. */
  readonly retryAfterMs: number;
  readonly failures: readonly FailedSecret[];
}

interface IntervalGroup {
  readonly intervalMs: number;
  readonly specs: readonly SecretSpec[];
}

/**
 * The refresh timers of one configuration. Secrets sharing an interval refresh together (one batch
 * call covers up to 20 AWS secrets), each group on its interval with jitter. A failed round is retried
 * sooner, backing off up to the interval, but never sooner than the backend asked. Cancelled as a
 * whole when the configuration changes or the sidecar stops: a round in flight then schedules nothing.
 */
export class RefreshSchedule {
  readonly #timers = new Set<NodeJS.Timeout>();
  #cancelled = false;
  readonly #round: (specs: readonly SecretSpec[]) => Promise<RoundResult>;
  readonly #afterRound: (failuresInARow: number, result: RoundResult) => void;

  /**
   * `round` refreshes a group once; `afterRound` hears how many rounds of the group have failed in a
   * row (0 after a success).
   */
  constructor(
    round: (specs: readonly SecretSpec[]) => Promise<RoundResult>,
    afterRound: (failuresInARow: number, result: RoundResult) => void,
  ) {
    this.#round = round;
    this.#afterRound = afterRound;
  }

  /** Schedules the first round of every group of `specs`. */
  start(specs: readonly SecretSpec[]): void {
    for (const group of groupByInterval(specs)) this.#schedule(group, jittered(group.intervalMs), 0);
  }

  cancel(): void {
    this.#cancelled = true;
    for (const t of this.#timers) clearTimeout(t);
    this.#timers.clear();
  }

  #schedule(group: IntervalGroup, delayMs: number, failures: number): void {
    const timer = setTimeout(async () => {
      this.#timers.delete(timer);
      if (this.#cancelled) return;
      const result = await this.#round(group.specs);
      if (this.#cancelled) return;
      const nextFailures = result.ok ? 0 : failures + 1;
      this.#afterRound(nextFailures, result);
      // A failed cycle retries sooner than the interval, but never sooner than the backend asked.
      const backoff = { ...REFRESH_BACKOFF, maxMs: Math.min(REFRESH_BACKOFF.maxMs, group.intervalMs) };
      const next = result.ok
        ? jittered(group.intervalMs)
        : Math.max(result.retryAfterMs, Math.min(group.intervalMs, backoffDelay(nextFailures, backoff)));
      this.#schedule(group, next, nextFailures);
    }, delayMs);
    this.#timers.add(timer);
  }
}

/** Secrets sharing an interval refresh together: one batch call covers up to 20 AWS secrets. */
function groupByInterval(specs: readonly SecretSpec[]): IntervalGroup[] {
  const groups = new Map<number, SecretSpec[]>();
  for (const s of specs) groups.set(s.refreshIntervalMs, [...(groups.get(s.refreshIntervalMs) ?? []), s]);
  return [...groups].map(([intervalMs, group]) => ({ intervalMs, specs: group }));
}

/** ±10 % so a fleet started together never refreshes in lockstep. */
export function jittered(ms: number): number {
  return Math.round(ms * (0.9 + Math.random() * 0.2));
}
