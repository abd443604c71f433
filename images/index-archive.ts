/**
 * The OCI archive a release job publishes for one image: every platform's image under one image
 * index, so one tag (and one digest) serves every node. `index.json` names the index (ref.name: the
 * version); the index lists each platform's manifest with its `platform`. So
 * `podman pull --arch arm64 oci-archive:…` takes the arm64 image and
 * `skopeo copy --all oci-archive:… docker://…` pushes them all under one tag.
 *
 * Written the same, byte for byte, from the same images, whatever the engine's store held before:
 * each image is exported from the engine, each layer's tar is checked against the diff ID its config
 * names (read from the bytes: the export's label depends on how the image came into the store), then
 * compressed here with GNU gzip -n (no name, no time; its output depends on nothing but
 * the input and gzip's version, unlike compressors that tune themselves to the CPU), and the
 * manifests, the index and the tar are written in one fixed way. Compressed in the archive, the
 * layers are pushed as they are, so a registry serves the digests this archive and the provenance
 * name; each is checked as the release checks it (images/layer-blobs.ts) before the archive is
 * written. A compressed layer is kept in a cache by its diff ID: the base layers, the largest, are
 * compressed once.
 */
import { spawnSync } from 'node:child_process';
import {
  closeSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  renameSync,
  rmSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runTool, type ContainerEngine } from './container-engine.ts';
import {
  fileDigest,
  MEDIA_TYPES,
  OciLayout,
  tarDirectory,
  type Descriptor,
  type ImageIndex,
  type ImageManifest,
} from './oci-layout.ts';
import { checkLayers, checkLayoutLayers, exportedTar, LayerBlobError } from './layer-blobs.ts';
import { PLATFORM_NAMES, type Platform } from './platforms.ts';

export interface PlatformImage {
  readonly platform: Platform;
  /** The engine's name or ID of the image. */
  readonly ref: string;
}

export interface IndexArchive {
  /** sha256:… of the image index: the one digest for every platform. */
  readonly index: string;
  /** sha256:… of each platform's manifest, as a registry serves it. */
  readonly manifests: Readonly<Partial<Record<Platform, string>>>;
  /** The compressed layers of the cache it used. */
  readonly cached: readonly string[];
}

function gzipVersion(): string {
  return runTool('gzip', ['--version']).split('\n')[0]!.replace(/\s+/g, '-');
}

/**
 * The exported `layer` (whose tar its config names `diffId`) gzip'd into `cacheDir`, or the copy
 * already there, keyed by the diff ID. What the engine exported is read, not its label, so the archive
 * depends on the image's content only, never on how the image came into the store.
 */
function compressed(
  from: OciLayout,
  layer: Descriptor,
  diffId: string,
  cacheDir: string,
  name: string,
): string {
  const tar = exportedTar(from.blobPath(layer.digest), layer, diffId, name);
  const cached = join(cacheDir, diffId.replace(/^sha256:/, ''));
  if (existsSync(cached)) return cached;
  const partial = `${cached}.partial-${process.pid}`;
  const fd = openSync(partial, 'w');
  try {
    // -n: no name, no time, so the bytes depend on the tar and gzip's version only.
    const r = spawnSync('gzip', ['-n', '-6', '-c', tar], { stdio: ['ignore', fd, 'pipe'] });
    if (r.status !== 0) throw new Error(`${name}: gzip failed: ${r.stderr.toString().slice(0, 200)}`);
  } finally {
    closeSync(fd);
  }
  renameSync(partial, cached);
  return cached;
}

/** One image exported from the engine as an OCI layout (in `dir`) with uncompressed layers. */
export function exportImage(
  engine: ContainerEngine,
  ref: string,
  dir: string,
): { layout: OciLayout; manifest: ImageManifest } {
  if (engine.name === 'podman')
    engine.run(['save', '-q', '--uncompressed', '--format', 'oci-dir', '-o', dir, ref]);
  else {
    // docker ≥ 25 saves an OCI layout (index.json, blobs/) in its tar.
    mkdirSync(dir);
    engine.run(['save', '-o', `${dir}.tar`, ref]);
    runTool('tar', ['-xf', `${dir}.tar`, '-C', dir]);
    if (!existsSync(join(dir, 'index.json')))
      throw new Error(`docker save ${ref} gave no OCI layout (docker 25 or later does)`);
  }
  const layout = new OciLayout(dir);
  let descriptor = layout.readIndex().manifests[0]!;
  // docker's index.json may point at an index of one.
  if (descriptor.mediaType === MEDIA_TYPES.index)
    descriptor = layout.readJson<ImageIndex>(descriptor).manifests[0]!;
  return { layout, manifest: layout.readJson<ImageManifest>(descriptor) };
}

/**
 * Writes `out` from `images` (one per platform, in the order given), at modification time `epoch`;
 * `cacheDir` keeps compressed layers between runs.
 */
export function writeIndexArchive(
  engine: ContainerEngine,
  images: readonly PlatformImage[],
  out: string,
  options: { epoch: number; refName: string; cacheDir: string },
): IndexArchive {
  const work = mkdtempSync(join(tmpdir(), 'secret-agent-index-'));
  const cacheDir = join(options.cacheDir, gzipVersion());
  mkdirSync(cacheDir, { recursive: true });
  try {
    const layout = new OciLayout(join(work, 'layout'));
    const entries: Descriptor[] = [];
    const cached: string[] = [];
    const manifests: Partial<Record<Platform, string>> = {};
    for (const [i, image] of images.entries()) {
      const exported = exportImage(engine, image.ref, join(work, `image-${i}`));
      const config = exported.layout.readJson<{
        architecture: string;
        os: string;
        variant?: string;
        rootfs: { diff_ids: string[] };
      }>(exported.manifest.config);
      if (config.architecture !== PLATFORM_NAMES[image.platform].arch || config.os !== 'linux')
        throw new Error(`${image.ref} is ${config.os}/${config.architecture}, not ${image.platform}`);
      copyFileSync(
        exported.layout.blobPath(exported.manifest.config.digest),
        layout.blobPath(exported.manifest.config.digest),
      );
      const name = `${image.ref} (${image.platform})`;
      const diffIds = config.rootfs.diff_ids;
      if (exported.manifest.layers.length !== diffIds.length)
        throw new LayerBlobError(
          name,
          `the engine exported ${exported.manifest.layers.length} layers for ${diffIds.length} diff IDs`,
        );
      const layers = exported.manifest.layers.map((layer, n) => {
        const gz = compressed(
          exported.layout,
          layer,
          diffIds[n]!,
          cacheDir,
          `${name} layer ${n + 1} of ${diffIds.length}`,
        );
        cached.push(gz);
        const digest = fileDigest(gz);
        copyFileSync(gz, layout.blobPath(digest));
        return { mediaType: MEDIA_TYPES.layerGzip, digest, size: layout.size(digest) };
      });
      // What a registry will serve, checked as the release checks it: a cached blob that is not its
      // tar (a disk error, an interrupted run of an older build) goes, so the next build writes it anew.
      try {
        checkLayers({ image: name, layers, diffIds, blobPath: (d) => layout.blobPath(d) });
      } catch (err) {
        for (const gz of cached) rmSync(gz, { force: true });
        throw err;
      }
      // The engine's annotations name the base as this machine's store knows it (a local name, the
      // digest of its uncompressed copy): nothing a registry's client could resolve. Left out.
      const manifest = layout.putJson(MEDIA_TYPES.manifest, {
        schemaVersion: 2,
        mediaType: MEDIA_TYPES.manifest,
        config: {
          mediaType: MEDIA_TYPES.config,
          digest: exported.manifest.config.digest,
          size: exported.manifest.config.size,
        },
        layers,
      } satisfies ImageManifest);
      manifests[image.platform] = manifest.digest;
      entries.push({
        ...manifest,
        platform: {
          architecture: config.architecture,
          os: config.os,
          ...(config.variant ? { variant: config.variant } : {}),
        },
      });
      rmSync(exported.layout.dir, { recursive: true, force: true });
    }
    const index = layout.putJson(MEDIA_TYPES.index, {
      schemaVersion: 2,
      mediaType: MEDIA_TYPES.index,
      manifests: entries,
    } satisfies ImageIndex);
    layout.writeIndex([{ ...index, annotations: { 'org.opencontainers.image.ref.name': options.refName } }]);
    const partial = `${out}.partial`;
    tarDirectory(layout.dir, partial, options.epoch, {
      members: ['oci-layout', 'index.json', 'blobs'],
      rootOwned: true,
    });
    renameSync(partial, out);
    return { index: index.digest, manifests, cached };
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

/**
 * Why the archive at `path` must not be kept (a layer not what its media type says or not its diff
 * ID, an unreadable tar), or undefined when every layer holds: an archive an older build wrote is
 * checked before it is reused.
 */
export function archiveLayersProblem(path: string, image: string): string | undefined {
  const dir = mkdtempSync(join(tmpdir(), 'secret-agent-archive-check-'));
  try {
    runTool('tar', ['-xf', path, '-C', dir], { timeoutMs: 300_000 });
    checkLayoutLayers(dir, image);
    return undefined;
  } catch (err) {
    return (err as Error).message.slice(0, 400);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Removes from the layer cache every compressed layer but `keep` (those of the archives just written). */
export function pruneLayerCache(cacheDir: string, keep: ReadonlySet<string>): void {
  if (!existsSync(cacheDir)) return;
  for (const entry of readdirSync(cacheDir, { recursive: true, withFileTypes: true }))
    if (entry.isFile() && !keep.has(join(entry.parentPath, entry.name)))
      rmSync(join(entry.parentPath, entry.name), { force: true });
}
