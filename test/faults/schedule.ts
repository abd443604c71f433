import assert from 'node:assert/strict';

/**
 * The documented retry schedules, written out here rather than imported from the agent, so a change
 * to the agent's numbers fails these tests instead of silently moving them along:
 * - init mode (and every round of a sidecar's first fill): 250 ms doubling to 10 s, equal jitter
 *   (each delay between half and all of its ceiling), within INIT_DEADLINE;
 * - the sidecar's first fill, between rounds: 1 s doubling to 30 s, equal jitter;
 * - a failed sidecar refresh: 1 s doubling, capped at the secret's refresh interval, equal jitter.
 */
export const INIT_SCHEDULE = { baseMs: 250, maxMs: 10_000 } as const;
export const FIRST_FILL_SCHEDULE = { baseMs: 1000, maxMs: 30_000 } as const;
export const refreshSchedule = (intervalMs: number) => ({
  baseMs: 1000,
  maxMs: Math.min(60_000, intervalMs),
});

export function ceiling(attempt: number, schedule: { baseMs: number; maxMs: number }): number {
  return Math.min(schedule.maxMs, schedule.baseMs * 2 ** (attempt - 1));
}

/** The most calls a deadline allows: every delay at its shortest, every call instant. */
export function maxCallsWithin(deadlineMs: number, schedule: { baseMs: number; maxMs: number }): number {
  let elapsed = 0;
  let calls = 1;
  for (let attempt = 1; ; attempt++) {
    elapsed += ceiling(attempt, schedule) / 2;
    if (elapsed >= deadlineMs) return calls;
    calls++;
  }
}

type Log = Record<string, unknown>;

/**
 * Init mode's retries, from its own log lines: attempts numbered 1, 2, … with each delay inside its
 * equal-jitter band, all of them inside the deadline, and one backend call per round (`calls`, as a
 * proxy counted them, when it could).
 */
export function assertInitRetries(
  logs: readonly Log[],
  options: { deadlineMs: number; calls?: number; reason?: string },
): number[] {
  const retries = logs.filter((l) => l.msg === 'transient backend errors; retrying');
  assert.ok(retries.length >= 1, 'the agent retried');
  const delays = retries.map((l, i) => {
    assert.equal(l.attempt, i + 1, 'attempts are numbered in order');
    if (options.reason) assert.deepEqual(l.reasons, [options.reason]);
    const delay = l.delayMs as number;
    const top = ceiling(i + 1, INIT_SCHEDULE);
    assert.ok(
      delay >= top / 2 - 1 && delay <= top + 1,
      `retry ${i + 1} waited ${delay} ms, not ${top / 2}–${top}`,
    );
    return delay;
  });
  const total = delays.reduce((a, b) => a + b, 0);
  assert.ok(total < options.deadlineMs, `the retries (${total} ms of waiting) stay within the deadline`);
  const allowed = maxCallsWithin(options.deadlineMs, INIT_SCHEDULE);
  assert.ok(retries.length + 1 <= allowed, `${retries.length + 1} rounds; the schedule allows ${allowed}`);
  if (options.calls !== undefined)
    assert.equal(options.calls, retries.length + 1, 'one backend call per round, no hidden SDK retries');
  return delays;
}

/**
 * Gaps between consecutive failed refresh calls (ms, from the proxy's clock). Timers never fire
 * early, so each gap is at least the lower edge of its band; the upper edge gets `slackMs` for the
 * call itself and a busy machine.
 */
export function assertRefreshBackoff(gaps: readonly number[], intervalMs: number, slackMs = 1500): void {
  const schedule = refreshSchedule(intervalMs);
  gaps.forEach((gap, i) => {
    const top = Math.min(intervalMs, ceiling(i + 1, schedule));
    assert.ok(
      gap >= top / 2 - 5,
      `failure ${i + 1} was retried after ${Math.round(gap)} ms, before ${top / 2} ms`,
    );
    assert.ok(
      gap <= top + slackMs,
      `failure ${i + 1} was retried after ${Math.round(gap)} ms, later than ${top} ms (+${slackMs} ms slack)`,
    );
  });
}

export function gapsBetween(times: readonly number[]): number[] {
  return times.slice(1).map((t, i) => t - times[i]!);
}
