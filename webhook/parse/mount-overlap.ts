/**
 * Paths as the kernel resolves them: `//`, `.` segments and a trailing `/` change nothing there, so
 * they must change nothing here either, or `/./app` would pass a check that refuses `/app`.
 */

/**
 * The canonical form of an absolute path: one `/` between segments, no `.` segment, no trailing `/`
 * (except `/` itself), each `..` taking the segment before it away (never above `/`), as the
 * runtime resolves a mount's destination inside the container's root.
 */
export function normalPath(path: string): string {
  const segments: string[] = [];
  for (const s of path.split('/'))
    if (s === '..') segments.pop();
    else if (s !== '' && s !== '.') segments.push(s);
  return `/${segments.join('/')}`;
}

/**
 * Whether two mount paths overlap: one at, above or below the other, so that one mount would hide
 * the other or what is under it. `/` overlaps every path; both are compared in their normal form.
 */
export function mountsOverlap(a: string, b: string): boolean {
  const [x, y] = [normalPath(a), normalPath(b)];
  return x === y || x.startsWith(`${y}/`) || y.startsWith(`${x}/`) || x === '/' || y === '/';
}
