export interface BackoffPolicy {
  /** The first delay's ceiling. */
  readonly baseMs: number;
  /** No delay exceeds this. */
  readonly maxMs: number;
}

export const DEFAULT_BACKOFF: BackoffPolicy = { baseMs: 250, maxMs: 10_000 };

/**
 * Delay before retry number `attempt` (1-based): capped exponential with "equal jitter", half fixed
 * and half random, so a fleet of pods restarting together spreads out but never retries at once.
 * A server's Retry-After wins when it asks for longer.
 */
export function backoffDelay(
  attempt: number,
  policy: BackoffPolicy,
  retryAfterMs = 0,
  random: () => number = Math.random,
): number {
  const ceiling = Math.min(policy.maxMs, policy.baseMs * 2 ** Math.max(0, attempt - 1));
  const jittered = ceiling / 2 + random() * (ceiling / 2);
  return Math.round(Math.max(jittered, Math.min(retryAfterMs, policy.maxMs * 6)));
}
