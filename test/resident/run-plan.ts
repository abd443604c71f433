/**
 * What each fake run does (test/resident/fake-run.ts), and the outcome protocol written the way
 * agent/native/resident.c reads it, as a test's independent model of it: `encodeOutcome` writes a
 * good outcome, `outcomeVerdict` says whether bytes are one (and what it asks for).
 */

export interface RunStep {
  /** write: the outcome, then exit `code`; slow: the outcome in small pieces; close-early: the
   * outcome, fd 4 closed, then a pause; crash: the outcome, then SIGSEGV; hang: never exits. */
  readonly kind: 'write' | 'slow' | 'close-early' | 'crash' | 'hang';
  /** Base64 of the bytes written on fd 4. */
  readonly outcome?: string;
  readonly code?: number;
  /** hang: SIGTERM does not end it (the resident's SIGKILL does). */
  readonly ignoreTerm?: boolean;
}

export interface Outcome {
  readonly ready: boolean;
  /** Left out: the run had nothing to refresh (counted ok). */
  readonly refreshed?: boolean;
  readonly nextMs?: number;
  readonly exit?: number;
  readonly metrics?: string;
  readonly state?: Uint8Array;
}

export const MAGIC = 'secret-agent-outcome 1';
export const METRICS_MAX = 256 * 1024;
export const STATE_MAX = 1024 * 1024;

/** A good outcome's bytes. */
export function encodeOutcome(o: Outcome): Buffer {
  const parts: Buffer[] = [Buffer.from(`${MAGIC}\nready ${o.ready ? 1 : 0}\n`)];
  if (o.refreshed !== undefined) parts.push(Buffer.from(`refreshed ${o.refreshed ? 1 : 0}\n`));
  if (o.nextMs !== undefined) parts.push(Buffer.from(`next-ms ${o.nextMs}\n`));
  if (o.exit !== undefined) parts.push(Buffer.from(`exit ${o.exit}\n`));
  const sized = (name: string, bytes: Uint8Array) =>
    parts.push(Buffer.from(`${name} ${bytes.length}\n`), Buffer.from(bytes), Buffer.from('\n'));
  if (o.metrics !== undefined) sized('metrics', Buffer.from(o.metrics));
  if (o.state !== undefined) sized('state', o.state);
  parts.push(Buffer.from('end\n'));
  return Buffer.concat(parts);
}

export function step(
  kind: RunStep['kind'],
  outcome: Uint8Array = new Uint8Array(),
  extra: Partial<RunStep> = {},
): RunStep {
  return { kind, outcome: Buffer.from(outcome).toString('base64'), ...extra };
}

const LIMITS: Record<string, [number, number]> = {
  ready: [0, 1],
  refreshed: [0, 1],
  'next-ms': [1000, 86_400_000],
  exit: [0, 255],
  metrics: [0, METRICS_MAX],
  state: [0, STATE_MAX],
};

/** Prometheus text as the resident takes it: UTF-8, no control byte but tab and LF, ends with LF. */
export function isMetricsText(bytes: Uint8Array): boolean {
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return false;
  }
  // eslint-disable-next-line no-control-regex
  return !/[\x00-\x08\x0b-\x1f\x7f]/.test(text) && (text === '' || text.endsWith('\n'));
}

/** Whether `bytes` are a complete good outcome, and its fields; a model written apart from the C. */
export function outcomeVerdict(
  bytes: Uint8Array,
): { ok: false } | { ok: true; fields: Map<string, number>; state: Buffer } {
  const fields = new Map<string, number>();
  let state = Buffer.alloc(0);
  let at = 0;
  const line = (): string | undefined => {
    const nl = bytes.indexOf(10, at);
    if (nl < 0 || nl - at > 63) return undefined;
    const text = Buffer.from(bytes.subarray(at, nl)).toString('latin1');
    at = nl + 1;
    return /^[\x20-\x7e]*$/.test(text) ? text : undefined;
  };
  if (line() !== MAGIC) return { ok: false };
  for (;;) {
    const text = line();
    if (text === undefined) return { ok: false };
    if (text === 'end') break;
    const m = /^(ready|refreshed|next-ms|exit|metrics|state) (0|[1-9][0-9]{0,9})$/.exec(text);
    if (!m || fields.has(m[1]!)) return { ok: false };
    const [min, max] = LIMITS[m[1]!]!;
    const value = Number(m[2]);
    if (value < min || value > max) return { ok: false };
    fields.set(m[1]!, value);
    if (m[1] === 'metrics' || m[1] === 'state') {
      if (at + value + 1 > bytes.length || bytes[at + value] !== 10) return { ok: false };
      if (m[1] === 'metrics' && !isMetricsText(bytes.subarray(at, at + value))) return { ok: false };
      if (m[1] === 'state') state = Buffer.from(bytes.subarray(at, at + value));
      at += value + 1;
    }
  }
  if (at !== bytes.length || !fields.has('ready') || !(fields.has('next-ms') || fields.has('exit')))
    return { ok: false };
  return { ok: true, fields, state };
}
