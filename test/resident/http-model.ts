/**
 * What the resident answers to a request's bytes, written apart from agent/native/resident.c so the
 * fuzz test can check every answer against it: a status, or 'closed' (no complete head before EOF).
 * Assumes a resident that is ready and not stalled.
 */
const HEAD_MAX = 4096;
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+:/;

export function expectedAnswer(bytes: Uint8Array): number | 'closed' {
  const n = Math.min(bytes.length, HEAD_MAX);
  for (let i = 0; i < n; i++) {
    const c = bytes[i]!;
    const afterCr = i > 0 && bytes[i - 1] === 13;
    // Control bytes but tab, CR and LF; CR only before LF; LF only after CR.
    if ((c < 0x20 && c !== 9 && c !== 13 && c !== 10) || c === 0x7f || (c === 10) !== afterCr) return 400;
    if (c === 10 && i >= 3 && bytes[i - 2] === 10)
      return route(Buffer.from(bytes.subarray(0, i + 1)).toString('latin1'));
  }
  if (bytes.length < HEAD_MAX) return 'closed';
  return Buffer.from(bytes.subarray(0, HEAD_MAX)).includes('\r\n') ? 431 : 414;
}

function route(head: string): number {
  const lines = head.slice(0, -4).split('\r\n');
  const m = /^([A-Z]+) (\/[^ ]*) HTTP\/1\.[01]$/.exec(lines[0]!);
  if (!m || !lines.slice(1).every((l) => TOKEN.test(l))) return 400;
  if (m[1] !== 'GET' && m[1] !== 'HEAD') return 405;
  const path = m[2]!.split('?')[0];
  return path === '/healthz' || path === '/readyz' || path === '/metrics' ? 200 : 404;
}
