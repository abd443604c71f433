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
 * The path as the runtime resolves it in an image where `/var/run` is a link to `/run` (Debian,
 * Alpine, distroless and most others): the link followed where it is met, before any `..` after it,
 * so `/var/run/../x` is `/x` and `/var/run/secrets` is `/run/secrets`.
 */
export function linkedPath(path: string): string {
  const segments: string[] = [];
  for (const s of path.split('/')) {
    if (s === '..') segments.pop();
    else if (s !== '' && s !== '.') segments.push(s);
    if (segments.length === 2 && segments[0] === 'var' && segments[1] === 'run') segments.splice(0, 2, 'run');
  }
  return `/${segments.join('/')}`;
}

const overlap = (x: string, y: string) =>
  x === y || x.startsWith(`${y}/`) || y.startsWith(`${x}/`) || x === '/' || y === '/';

/** Whether two mount paths overlap as written (normal forms), without following the /var/run link. */
export function overlapsAsWritten(a: string, b: string): boolean {
  return overlap(normalPath(a), normalPath(b));
}

/**
 * Whether two mount paths overlap: one at, above or below the other, so that one mount would hide
 * the other or what is under it. `/` overlaps every path. Both are compared in their normal form, and
 * again with `/var/run` taken as the link to `/run` it is in most images: where it is a directory of
 * its own, a pair this refuses did not clash, and another path does.
 */
export function mountsOverlap(a: string, b: string): boolean {
  return overlapsAsWritten(a, b) || overlap(linkedPath(a), linkedPath(b));
}

/** A path where the runtime puts something of a container's own, and the spec field that asks for it. */
export interface OccupiedPath {
  readonly path: string;
  /** The field under the container: `volumeMounts[0]`, `volumeDevices[1]`, `terminationMessagePath`. */
  readonly field: string;
  readonly kind: 'mount' | 'device' | 'termination log';
}

/**
 * Every path where the runtime mounts or creates something for container `c`: its volume mounts, its
 * block devices (`volumeDevices[].devicePath`) and the termination log the kubelet mounts at
 * `terminationMessagePath`. A mount of the webhook's at, above or below one of them hides it or makes
 * the runtime create a mount point inside a read-only volume. A path that is not absolute is taken as
 * the runtime takes it, from the container's root: normalPath does so.
 */
export function occupiedPaths(c: {
  readonly volumeMounts?: readonly { readonly mountPath?: unknown }[];
  readonly volumeDevices?: readonly { readonly devicePath?: unknown }[];
  readonly terminationMessagePath?: unknown;
}): OccupiedPath[] {
  const paths: OccupiedPath[] = [];
  (c.volumeMounts ?? []).forEach((m, j) => {
    if (typeof m.mountPath === 'string')
      paths.push({ path: m.mountPath, field: `volumeMounts[${j}]`, kind: 'mount' });
  });
  (c.volumeDevices ?? []).forEach((d, j) => {
    if (typeof d.devicePath === 'string')
      paths.push({ path: d.devicePath, field: `volumeDevices[${j}]`, kind: 'device' });
  });
  if (typeof c.terminationMessagePath === 'string' && c.terminationMessagePath !== '')
    paths.push({ path: c.terminationMessagePath, field: 'terminationMessagePath', kind: 'termination log' });
  return paths;
}
