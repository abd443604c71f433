import { closeSync, readSync, writeSync } from 'node:fs';

/**
 * The small sidecar's side of the resident's handoff (docs/design.md, "The resident"): the state the
 * last good run handed back arrives on one fd, read to its end; the run's outcome leaves on another,
 * as the resident's line protocol. The state is JSON made by an earlier run of this agent; it carries
 * credentials, so nothing here logs or quotes it.
 */

/** The resident hands over at most this much state (resident.c, STATE_MAX). */
export const MAX_STATE_BYTES = 1024 * 1024;
/** And serves at most this much metrics text (resident.c, METRICS_MAX). */
export const MAX_METRICS_BYTES = 256 * 1024;

/** What runs hand to each other through the resident; `v` changes when the shape does. */
export interface HandoffState {
  readonly v: 1;
  /** Failed runs since the last good one: the backoff and SecretRefreshFailing count them. */
  readonly failuresInARow: number;
  /** Each provider's Provider.handOff state, by provider name. */
  readonly providers: Readonly<Record<string, unknown>>;
  /** The metrics so far (carried-metrics.ts). */
  readonly metrics: unknown;
  /** What each secret's files hold (held-versions.ts): a run that cannot refresh one keeps saying it. */
  readonly versions?: unknown;
}

export interface RunOutcome {
  /** Whether the app has a whole set to read: /readyz until the next good run. */
  readonly ready: boolean;
  /** Whether every secret was fetched and written: the resident counts a run that was not as failed. */
  readonly refreshed: boolean;
  /** When the next run starts, counted from this run's end. */
  readonly nextMs: number;
  readonly metrics: string;
  readonly state: HandoffState;
}

/**
 * Reads the previous run's state from `fd` to its end. Empty (the first run), unreadable or of another
 * shape: undefined, and the run starts as a first one (`problem` says which, never with the bytes).
 */
export function readHandoffState(fd: number): { state?: HandoffState; problem?: string } {
  const chunks: Buffer[] = [];
  let total = 0;
  const chunk = Buffer.alloc(64 * 1024);
  for (;;) {
    let n: number;
    try {
      n = readSync(fd, chunk, 0, chunk.length, null);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code === 'EAGAIN') continue;
      return { problem: `the handoff fd ${fd} could not be read (${code ?? 'error'})` };
    }
    if (n === 0) break;
    total += n;
    if (total > MAX_STATE_BYTES) return { problem: `the handed-over state is over ${MAX_STATE_BYTES} bytes` };
    chunks.push(Buffer.from(chunk.subarray(0, n)));
  }
  closeSync(fd);
  if (total === 0) return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    return { problem: `the handed-over state (${total} bytes) is not JSON` };
  }
  const s = parsed as Partial<HandoffState> | null;
  if (
    typeof s !== 'object' ||
    s === null ||
    s.v !== 1 ||
    !Number.isSafeInteger(s.failuresInARow) ||
    s.failuresInARow! < 0 ||
    typeof s.providers !== 'object' ||
    s.providers === null
  )
    return { problem: `the handed-over state (${total} bytes) is not of this agent's version 1 shape` };
  return { state: s as HandoffState };
}

/**
 * The outcome as the resident reads it. What would be over the resident's bounds is left out rather
 * than have the whole run counted as failed: metrics over 256 KiB (the resident then serves only its
 * own), providers' state over 1 MiB (the next run logs in again). `dropped` names what was.
 */
export function encodeOutcome(outcome: RunOutcome): { bytes: Buffer; dropped: string[] } {
  const dropped: string[] = [];
  const metrics = Buffer.from(outcome.metrics, 'utf8');
  if (metrics.length > MAX_METRICS_BYTES) dropped.push(`metrics (${metrics.length} bytes)`);
  let state = Buffer.from(JSON.stringify(outcome.state), 'utf8');
  if (state.length > MAX_STATE_BYTES) {
    dropped.push(`providers' state (${state.length} bytes)`);
    state = Buffer.from(JSON.stringify({ ...outcome.state, providers: {} }), 'utf8');
  }
  if (state.length > MAX_STATE_BYTES) {
    dropped.push(`metrics carried over (${state.length} bytes)`);
    state = Buffer.from(JSON.stringify({ ...outcome.state, providers: {}, metrics: [] }), 'utf8');
  }
  if (state.length > MAX_STATE_BYTES) {
    dropped.push(`versions held (${state.length} bytes)`);
    state = Buffer.from(
      JSON.stringify({ ...outcome.state, providers: {}, metrics: [], versions: [] }),
      'utf8',
    );
  }
  const nextMs = Math.min(86_400_000, Math.max(1000, Math.round(outcome.nextMs)));
  const bytes = Buffer.concat([
    Buffer.from(
      `secret-agent-outcome 1\nready ${outcome.ready ? 1 : 0}\nrefreshed ${outcome.refreshed ? 1 : 0}\nnext-ms ${nextMs}\n`,
    ),
    ...(metrics.length > 0 && metrics.length <= MAX_METRICS_BYTES
      ? [Buffer.from(`metrics ${metrics.length}\n`), metrics, Buffer.from('\n')]
      : []),
    Buffer.from(`state ${state.length}\n`),
    state,
    Buffer.from('\nend\n'),
  ]);
  return { bytes, dropped };
}

/** Writes `bytes` whole to `fd` (a pipe the resident drains), then closes it. */
export function writeOutcome(fd: number, bytes: Buffer): void {
  let off = 0;
  while (off < bytes.length) {
    try {
      off += writeSync(fd, bytes, off);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EAGAIN') throw e;
    }
  }
  closeSync(fd);
}
