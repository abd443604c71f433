/**
 * Whether two mount paths overlap: one at, above or below the other, so that one mount would hide
 * the other or what is under it. `/` overlaps every path; trailing slashes do not count.
 */
export function mountsOverlap(a: string, b: string): boolean {
  const norm = (p: string) => (p.length > 1 ? p.replace(/\/+$/, '') : p);
  const [x, y] = [norm(a), norm(b)];
  return x === y || x.startsWith(`${y}/`) || y.startsWith(`${x}/`) || x === '/' || y === '/';
}
