/**
 * The runtime base as `npm run images` (podman) hands it to the Dockerfiles: the same layers, with one
 * more (empty) history entry naming the commit's time and the build context, so the runtime stage is
 * built again whenever either changes. buildah 1.28 (podman 4.3) finds a cached layer by the base's
 * layers and history and the instruction, and leaves out of that:
 *  - `--timestamp`: a layer cached while building another commit would come back with that commit's
 *    file times, and the image would differ from one built from scratch;
 *  - the content of a RUN's bind mounts (the agent's snapshot and compile-cache steps read the build
 *    stage through them): a changed agent/snapshot.ts would come back as the previous blob.
 * The entry stays in the image's history. It is the same for the same commit: the build context is
 * named by the commit when git has no changes to it, else by the commit and a digest of the changes.
 * The build stage, on a base of its own, stays cached.
 *
 * One change to the base's files: /nodejs/bin/node is made execute-only (root's, 0511) in the layer that
 * holds it, its header rewritten and nothing else (images/execute-only.ts says why, and why there).
 * That layer is then the same for every commit, so a release pulls nothing new of the base.
 */
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import type { ContainerEngine } from './container-engine.ts';
import { EXECUTE_ONLY_MODE, NODE_PATH, setModeInLayer } from './execute-only.ts';
import { exportImage } from './index-archive.ts';
import { exportedTar } from './layer-blobs.ts';
import { MEDIA_TYPES, OciLayout, pullableLayoutDir, pullLayout } from './oci-layout.ts';
import { PLATFORM_NAMES, type Platform } from './platforms.ts';
import { git } from './source-revision.ts';

/** The paths .dockerignore lets into the build context (it ignores `*`, then keeps `!path` each). */
function contextPaths(root: string): string[] {
  return readFileSync(join(root, '.dockerignore'), 'utf8')
    .split('\n')
    .filter((l) => l.startsWith('!'))
    .map((l) => l.slice(1).replace(/\/$/, ''))
    .sort();
}

/** SHA-256 over every file under `paths` (names, executable bits, contents). */
function filesDigest(root: string, paths: readonly string[]): string {
  const hash = createHash('sha256');
  const add = (path: string) => {
    const stat = statSync(path);
    if (stat.isDirectory()) {
      for (const entry of readdirSync(path).sort()) add(join(path, entry));
      return;
    }
    hash.update(`${relative(root, path)}\0${stat.mode & 0o111 ? 'x' : '-'}\0`);
    hash.update(readFileSync(path));
  };
  for (const path of paths) add(join(root, path));
  return hash.digest('hex');
}

/**
 * What the build context holds: `git:<commit>` when git has no change to it, `git:<commit>+<digest of
 * the changed and untracked files>` when it has, `files:<digest>` outside git.
 */
export function buildContextState(root: string): string {
  const paths = contextPaths(root);
  const head = git(root, 'rev-parse', 'HEAD')?.trim();
  const changed = git(
    root,
    'status',
    '--porcelain',
    '--untracked-files=all',
    '--no-renames',
    '-z',
    '--',
    ...paths,
  );
  if (head === undefined || changed === undefined) return `files:${filesDigest(root, paths)}`;
  const files = changed
    .split('\0')
    .filter((e) => e !== '')
    .map((e) => e.slice(3))
    .sort();
  if (files.length === 0) return `git:${head}`;
  const present = files.filter((f) => {
    try {
      return statSync(join(root, f)).isFile();
    } catch {
      return false;
    }
  });
  const deleted = files.filter((f) => !present.includes(f));
  return `git:${head}+${createHash('sha256').update(filesDigest(root, present)).update(deleted.join('\0')).digest('hex').slice(0, 16)}`;
}

/** Tags and returns `baseId` stamped with this commit time and build context (made once for each). */
export function stampedBase(
  engine: ContainerEngine,
  baseId: string,
  platform: Platform,
  epoch: number,
  context: string,
): string {
  const stamp = `secret-agent images/stamped-base.ts: SOURCE_DATE_EPOCH=${epoch}, build context ${context}, /${NODE_PATH} mode 0${EXECUTE_ONLY_MODE.toString(8)}`;
  const tag = createHash('sha256').update(stamp).digest('hex').slice(0, 12);
  const ref = `localhost/secret-agent/base-runtime-stamped:${PLATFORM_NAMES[platform].arch}-${baseId.slice(0, 12)}-${tag}`;
  if (engine.run(['image', 'exists', ref], { check: false }).status === 0) return ref;
  const work = mkdtempSync(join(tmpdir(), 'secret-agent-stamp-'));
  try {
    const { layout: source, manifest } = exportImage(engine, baseId, join(work, 'export'));
    const layout = new OciLayout(pullableLayoutDir('secret-agent-stamped'));
    const config = source.readJson<{ history?: unknown[]; rootfs: { type: string; diff_ids: string[] } }>(
      manifest.config,
    );
    let holdsNode = false;
    // Each layer as its plain tar (read from its bytes, whatever the export labels it), so its digest
    // is its diff_id, before and after.
    const layers = manifest.layers.map((layer, n) => {
      const file = exportedTar(
        source.blobPath(layer.digest),
        layer,
        config.rootfs.diff_ids[n]!,
        `the runtime base ${baseId} layer ${n + 1} of ${manifest.layers.length}`,
      );
      if (setModeInLayer(file, NODE_PATH, EXECUTE_ONLY_MODE)) holdsNode = true;
      return layout.moveIn(MEDIA_TYPES.layer, file);
    });
    if (!holdsNode) throw new Error(`the runtime base ${baseId} has no /${NODE_PATH}, which the images run`);
    const created = new Date(epoch * 1000).toISOString().replace('.000Z', 'Z');
    const stamped = layout.putJson(MEDIA_TYPES.manifest, {
      ...manifest,
      layers,
      config: layout.putJson(MEDIA_TYPES.config, {
        ...config,
        rootfs: { ...config.rootfs, diff_ids: layers.map((l) => l.digest) },
        created,
        history: [...(config.history ?? []), { created, created_by: stamp, empty_layer: true }],
      }),
    });
    layout.writeIndex([{ ...stamped, annotations: { 'org.opencontainers.image.ref.name': ref } }]);
    pullLayout(engine, layout, ref);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  return ref;
}
