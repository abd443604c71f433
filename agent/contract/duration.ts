const UNIT_MS: Record<string, number> = {
  ns: 1e-6,
  us: 1e-3,
  µs: 1e-3,
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
};

const PART = /(\d+(?:\.\d+)?|\.\d+)(ns|us|µs|ms|s|m|h)/y;

/**
 * Parses a Go-style duration ("30s", "1m30s", "1.5h", "250ms") into milliseconds.
 * Go syntax because Kubernetes users already write it everywhere (probes, kubectl flags).
 * Returns undefined for anything else; callers turn that into a ConfigError naming their field.
 */
export function parseDuration(text: string): number | undefined {
  if (text === '0') return 0;
  if (text.length === 0 || text.length > 64) return undefined;
  let total = 0;
  PART.lastIndex = 0;
  while (PART.lastIndex < text.length) {
    const at = PART.lastIndex;
    const match = PART.exec(text);
    if (!match || match.index !== at) return undefined;
    total += Number(match[1]) * UNIT_MS[match[2]!]!;
  }
  return Number.isFinite(total) ? total : undefined;
}

/** The inverse of parseDuration for whole milliseconds, in the shortest Go-style form. */
export function formatDuration(ms: number): string {
  if (ms === 0) return '0s';
  const parts: string[] = [];
  let rest = Math.round(ms);
  for (const [unit, size] of [
    ['h', 3_600_000],
    ['m', 60_000],
    ['s', 1000],
  ] as const) {
    if (rest >= size) {
      parts.push(`${Math.floor(rest / size)}${unit}`);
      rest %= size;
    }
  }
  if (rest > 0) parts.push(`${rest}ms`);
  return parts.join('');
}
