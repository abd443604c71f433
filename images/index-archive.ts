/**
 * The OCI archive a release job publishes for one image: every platform's image under one image
 * index, so one tag (and one digest) serves every node. `index.json` names the index (ref.name: the
 * version); the index lists each platform's manifest with its `platform`. So
 * `podman pull --arch arm64 oci-archive:…` takes the arm64 image and
 * `skopeo copy --all oci-archive:… docker://…` pushes them all under one tag.
 *
 * Written the same, byte for byte, from the same images: each image is exported from the engine with
 * its layers uncompressed (their digests are the image's diff_ids, the same on every machine), then
 * each layer is compressed here with GNU gzip -n (no name, no time; its output depends on nothing but
 * the input and gzip's version, unlike compressors that tune themselves to the CPU), and the
 * manifests, the index and the tar are written in one fixed way. Compressed in the archive, the
 * layers are pushed as they are, so a registry serves the digests this archive and the provenance
 * name. A compressed layer is kept in a cache by its uncompressed digest: the base layers, the largest,
 * are compressed once.
 */
import { spawnSync } from 'node:child_process';
import {
  closeSync,
  readdirSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
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

/** `layer` (uncompressed, in `from`) compressed into `cacheDir`, or the copy already there. */
function compressed(from: OciLayout, layer: Descriptor, cacheDir: string): string {
  const cached = join(cacheDir, layer.digest.replace(/^sha256:/, ''));
  if (existsSync(cached)) return cached;
  const partial = `${cached}.partial-${process.pid}`;
  const fd = openSync(partial, 'w');
  try {
    const r = spawnSync('gzip', ['-n', '-6', '-c', from.blobPath(layer.digest)], {
      stdio: ['ignore', fd, 'pipe'],
    });
    if (r.status !== 0) throw new Error(`gzip of layer ${layer.digest} failed: ${r.stderr.toString()}`);
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
      const config = exported.layout.readJson<{ architecture: string; os: string; variant?: string }>(
        exported.manifest.config,
      );
      if (config.architecture !== PLATFORM_NAMES[image.platform].arch || config.os !== 'linux')
        throw new Error(`${image.ref} is ${config.os}/${config.architecture}, not ${image.platform}`);
      copyFileSync(
        exported.layout.blobPath(exported.manifest.config.digest),
        layout.blobPath(exported.manifest.config.digest),
      );
      const layers = exported.manifest.layers.map((layer) => {
        if (layer.mediaType === MEDIA_TYPES.layerGzip) {
          copyFileSync(exported.layout.blobPath(layer.digest), layout.blobPath(layer.digest));
          return { mediaType: layer.mediaType, digest: layer.digest, size: layer.size };
        }
        if (
          layer.mediaType !== MEDIA_TYPES.layer &&
          layer.mediaType !== 'application/vnd.docker.image.rootfs.diff.tar'
        )
          throw new Error(
            `${image.ref}: a layer of type ${layer.mediaType}, which this archive does not take`,
          );
        const gz = compressed(exported.layout, layer, cacheDir);
        cached.push(gz);
        const digest = fileDigest(gz);
        copyFileSync(gz, layout.blobPath(digest));
        return { mediaType: MEDIA_TYPES.layerGzip, digest, size: layout.size(digest) };
      });
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

/** Removes from the layer cache every compressed layer but `keep` (those of the archives just written). */
export function pruneLayerCache(cacheDir: string, keep: ReadonlySet<string>): void {
  if (!existsSync(cacheDir)) return;
  for (const entry of readdirSync(cacheDir, { recursive: true, withFileTypes: true }))
    if (entry.isFile() && !keep.has(join(entry.parentPath, entry.name)))
      rmSync(join(entry.parentPath, entry.name), { force: true });
}
