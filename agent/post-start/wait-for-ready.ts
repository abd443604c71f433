/**
 * What the native sidecar's postStart hook does (main.ts is the program): ask the agent's
 * GET /readyz until it answers 200, the volume then holding a complete set, or until the deadline.
 *
 * The kubelet runs a postStart handler inside its start of the container and starts the pod's next
 * container only once the handler returns, so the app starts as soon as the files exist instead of at
 * the next tick of a startupProbe's period. Only Node's own http module: no provider, no part of the
 * agent loads here, so the hook costs one bare Node start while it waits.
 */
import { Agent, request } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';

/** How long one GET may take before it counts as unanswered: the startupProbe's timeoutSeconds. */
const REQUEST_TIMEOUT_MS = 1000;
const FIRST_DELAY_MS = 20;
const MAX_DELAY_MS = 250;

/**
 * The pause before the next GET. The app waits at most one pause past the agent's readiness: 20 ms
 * while an ordinary start lasts, then a twentieth of the wait so far (so at most 5 % added to a slow
 * start), capped at 250 ms so a backend that never answers costs four requests a second.
 */
export function pollDelay(elapsedMs: number): number {
  return Math.min(MAX_DELAY_MS, Math.max(FIRST_DELAY_MS, Math.round(elapsedMs / 20)));
}

/** The last answer: a status code, or why there was none (ECONNREFUSED: not listening yet). */
export type Answer = { readonly status: number } | { readonly error: string };

export interface WaitResult {
  readonly ready: boolean;
  /** From `startedAtMs` to the outcome. */
  readonly elapsedMs: number;
  readonly requests: number;
  readonly last: Answer | undefined;
}

export interface WaitOptions {
  readonly url: URL;
  /** Counted from `startedAtMs`: the hook's process start, which is the container's start. */
  readonly deadlineMs: number;
  /** On performance.now()'s clock; 0 is the process start. */
  readonly startedAtMs: number;
}

export async function waitForReady(options: WaitOptions): Promise<WaitResult> {
  const elapsed = () => performance.now() - options.startedAtMs;
  // One kept-alive connection: each poll after the first is a request on an open socket.
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  let requests = 0;
  let last: Answer | undefined;
  const result = (ready: boolean): WaitResult => ({ ready, elapsedMs: elapsed(), requests, last });
  try {
    for (;;) {
      const left = options.deadlineMs - elapsed();
      if (left <= 0) return result(false);
      requests++;
      const timeoutMs = Math.min(REQUEST_TIMEOUT_MS, left);
      const answer = await get(options.url, agent, timeoutMs);
      // A GET the deadline cut short says nothing about the agent: the answer before it does.
      const cutShort = 'error' in answer && answer.error === 'ETIMEDOUT' && timeoutMs < REQUEST_TIMEOUT_MS;
      if (!cutShort || last === undefined) last = answer;
      if ('status' in answer && answer.status === 200) return result(true);
      const pause = Math.min(pollDelay(elapsed()), options.deadlineMs - elapsed());
      if (pause > 0) await sleep(pause);
    }
  } finally {
    agent.destroy();
  }
}

/** One GET. The body is drained unread: whatever answers on the port, none of it reaches the output. */
function get(url: URL, agent: Agent, timeoutMs: number): Promise<Answer> {
  return new Promise((resolve) => {
    const req = request(url, { agent, timeout: timeoutMs }, (res) => {
      res.on('error', (e: NodeJS.ErrnoException) => resolve({ error: e.code ?? e.name }));
      res.on('end', () => resolve({ status: res.statusCode ?? 0 }));
      res.resume();
    });
    req.on('timeout', () => req.destroy(Object.assign(new Error('no answer'), { code: 'ETIMEDOUT' })));
    req.on('error', (e: NodeJS.ErrnoException) => resolve({ error: e.code ?? e.name }));
    req.end();
  });
}

/** The last answer in words, for the hook's output. Never a body: only what our own contract means. */
export function describeAnswer(answer: Answer | undefined): string {
  if (answer === undefined) return 'no request was made';
  if ('status' in answer)
    return answer.status === 503
      ? 'it answered 503: not every secret is written yet'
      : `it answered ${answer.status}`;
  switch (answer.error) {
    case 'ECONNREFUSED':
      return 'the connection was refused: the agent is not listening (it did not start, or exited)';
    case 'ETIMEDOUT':
      return `it did not answer within ${REQUEST_TIMEOUT_MS / 1000} s`;
    default:
      return `the request failed (${answer.error})`;
  }
}
