/**
 * The agent container's resources as numbers: Kubernetes quantities read into bytes or cores.
 */

/** Kubernetes quantity suffixes, as multipliers of one unit (a byte, a core). */
const UNIT: Record<string, number> = {
  '': 1,
  m: 1e-3,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  Ki: 1024,
  Mi: 1024 ** 2,
  Gi: 1024 ** 3,
  Ti: 1024 ** 4,
};

/** A quantity (as annotations.ts `quantity` validates it) in its base unit; NaN when unreadable. */
export function quantityValue(text: string): number {
  const m = /^(\d*\.?\d*)(m|k|M|G|T|Ki|Mi|Gi|Ti)?$/.exec(text);
  return m && m[1] !== '' && m[1] !== '.' ? Number(m[1]) * UNIT[m[2] ?? '']! : NaN;
}

/** A memory quantity in bytes, rounded down. */
export function quantityBytes(text: string): number {
  return Math.floor(quantityValue(text));
}
