/**
 * The first agent on a node is charged the page-cache pages it faults in first: above all the Node
 * binary's, which every later agent then shares without being charged. To reproduce that here, the
 * agent image's files are dropped from the page cache before it starts: each file of each of the
 * image's layers (this bench's own image store, which no one else's containers map) is synced and
 * given POSIX_FADV_DONTNEED, which drops its clean pages that no process maps. No system-wide
 * drop_caches: the other work on this machine keeps its cache (and a sandbox may not allow it).
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import type { ContainerEngine } from '../images/container-engine.ts';

/** The directories of an image's layers in the local store (podman's overlay driver). */
export function imageLayerDirs(engine: ContainerEngine, image: string): string[] {
  const data = engine
    .run([
      'image',
      'inspect',
      '--format',
      '{{.GraphDriver.Data.UpperDir}}:{{.GraphDriver.Data.LowerDir}}',
      image,
    ])
    .stdout.trim();
  const dirs = data.split(':').filter((d) => d !== '' && d !== '<no value>');
  if (dirs.length === 0)
    throw new Error(`no overlay layer directories for ${image}: the bench needs podman's overlay driver`);
  return dirs;
}

const DROP = `
import os, sys
for top in sys.argv[1:]:
    for base, _, files in os.walk(top):
        for name in files:
            path = os.path.join(base, name)
            if os.path.islink(path) or not os.path.isfile(path):
                continue
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)
`;

/** Drops every file of these layers from the page cache (python3: Node has no posix_fadvise). */
export function dropFromPageCache(layers: readonly string[]): void {
  const r = spawnSync('python3', ['-c', DROP, ...layers], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`dropping the image's files from the page cache failed: ${r.stderr}`);
}

/** How much of a file of the image (path inside it) is in the page cache, in MiB (util-linux fincore). */
export function residentMiB(layers: readonly string[], path: string): number {
  for (const layer of layers) {
    const r = spawnSync('fincore', ['--bytes', '--noheadings', '--output', 'RES', join(layer, path)], {
      encoding: 'utf8',
    });
    if (r.status === 0) return Number(r.stdout.trim()) / 1048576;
  }
  throw new Error(`${path} is in none of the image's layers, or fincore (util-linux) is missing`);
}
