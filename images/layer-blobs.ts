/**
 * What a layer blob is, read from its bytes, never from the label it came with: the engine's export
 * labels a layer by how the image came into its store (podman 4.3 exports the plain tar of an image
 * pulled back from an archive as `tar+gzip`), and a registry trusts the label. So every layer an
 * archive writes or a release pushes is checked here: its bytes hash to its digest, its content is
 * what its media type says (gzip's magic for `+gzip`), and its uncompressed tar hashes to the diff ID
 * the image's config names for it.
 */
import { spawnSync } from 'node:child_process';
import { closeSync, openSync, readFileSync, readSync, statSync } from 'node:fs';
import { join } from 'node:path';
import {
  fileDigest,
  MEDIA_TYPES,
  type Descriptor,
  type ImageIndex,
  type ImageManifest,
} from './oci-layout.ts';

/** gzip's magic and its one compression method, deflate (RFC 1952). */
const GZIP_MAGIC = Buffer.from([0x1f, 0x8b, 0x08]);
const ZSTD_MAGIC = Buffer.from([0x28, 0xb5, 0x2f, 0xfd]);
/** The uncompressed layer media types an engine exports (OCI's, and Docker's for the same bytes). */
const PLAIN_TAR_TYPES: ReadonlySet<string> = new Set([
  MEDIA_TYPES.layer,
  'application/vnd.docker.image.rootfs.diff.tar',
]);
const GZIP_TYPES: ReadonlySet<string> = new Set([
  MEDIA_TYPES.layerGzip,
  'application/vnd.docker.image.rootfs.diff.tar.gzip',
]);

/** How a blob's bytes are encoded, by their first bytes. An empty layer's tar is all zeros: `tar`. */
export type LayerEncoding = 'gzip' | 'zstd' | 'tar';

export function layerEncoding(path: string): LayerEncoding {
  const head = Buffer.alloc(4);
  const fd = openSync(path, 'r');
  let n: number;
  try {
    n = readSync(fd, head, 0, head.length, 0);
  } finally {
    closeSync(fd);
  }
  if (n >= 3 && head.subarray(0, 3).equals(GZIP_MAGIC)) return 'gzip';
  if (n >= 4 && head.equals(ZSTD_MAGIC)) return 'zstd';
  return 'tar';
}

/**
 * `sha256:…` of a gzip file's decompressed bytes, streamed through GNU gzip. Trailing bytes after the
 * gzip data, or a bad CRC, are an error: a blob is exactly one compressed tar.
 */
export function gunzippedDigest(path: string): string {
  const r = spawnSync('bash', ['-o', 'pipefail', '-c', 'gzip -dc -- "$1" | sha256sum', 'bash', path], {
    encoding: 'utf8',
  });
  if (r.status !== 0)
    throw new Error(`gzip cannot decompress it (${(r.stderr || `exit ${r.status}`).trim().slice(0, 200)})`);
  return `sha256:${r.stdout.split(' ')[0]}`;
}

/**
 * An exported layer as a plain tar that hashes to `diffId`: its own file when its bytes are a plain
 * tar, whatever its label, or decompressed beside it (`<path>.tar`) when they are gzip'd. Throws a
 * LayerBlobError naming `name` when its bytes are not its digest, or its tar is not the diff ID.
 */
export function exportedTar(path: string, layer: Descriptor, diffId: string, name: string): string {
  const fail = (problem: string) => new LayerBlobError(name, `the engine exported ${problem}`);
  if (fileDigest(path) !== layer.digest) throw fail('bytes that do not hash to its digest');
  const encoding = layerEncoding(path);
  if (encoding === 'zstd') throw fail("it zstd-compressed; only plain or gzip'd tars are read");
  let tar = path;
  if (encoding === 'gzip') {
    tar = `${path}.tar`;
    const r = spawnSync('bash', ['-o', 'pipefail', '-c', 'gzip -dc -- "$1" > "$2"', 'bash', path, tar], {
      encoding: 'utf8',
    });
    if (r.status !== 0) throw fail(`a gzip stream that is not whole (${r.stderr.trim().slice(0, 200)})`);
  }
  const digest = tar === path ? layer.digest : fileDigest(tar);
  if (digest !== diffId) throw fail(`a tar that hashes to ${digest}, not to its config's diff ID ${diffId}`);
  return tar;
}

/** A layer that is not what its descriptor or its image's config says. */
export class LayerBlobError extends Error {
  /** Which layer: image, platform, position and digest. */
  readonly layer: string;
  readonly problem: string;

  constructor(layer: string, problem: string) {
    super(`${layer}: ${problem}`);
    this.name = 'LayerBlobError';
    this.layer = layer;
    this.problem = problem;
  }
}

/** One image's layers and where their blobs are. */
export interface ImageLayers {
  /** For messages: the image and platform, e.g. `webhook linux/arm64`. */
  readonly image: string;
  readonly layers: readonly Descriptor[];
  /** The config's rootfs.diff_ids: each layer's uncompressed tar, in order. */
  readonly diffIds: readonly string[];
  readonly blobPath: (digest: string) => string;
}

/**
 * Throws a LayerBlobError for the first layer whose bytes are not its digest and size, whose content is
 * not its media type, or whose tar is not its diff ID. Media types other than plain tar and gzip'd tar
 * are refused: nothing here writes them, and a registry's client would have to trust them unread.
 */
export function checkLayers({ image, layers, diffIds, blobPath }: ImageLayers): void {
  if (layers.length !== diffIds.length)
    throw new LayerBlobError(
      image,
      `its manifest lists ${layers.length} layers, its config ${diffIds.length} diff IDs`,
    );
  for (const [i, layer] of layers.entries()) {
    const name = `${image} layer ${i + 1} of ${layers.length} (${layer.digest})`;
    const fail = (problem: string) => new LayerBlobError(name, problem);
    const path = blobPath(layer.digest);
    let size: number;
    try {
      size = statSync(path).size;
    } catch {
      throw fail('its blob is missing');
    }
    if (size !== layer.size) throw fail(`its blob is ${size} bytes, its descriptor says ${layer.size}`);
    const digest = fileDigest(path);
    if (digest !== layer.digest) throw fail(`its bytes hash to ${digest}, not to its digest`);
    const encoding = layerEncoding(path);
    const gzip = GZIP_TYPES.has(layer.mediaType);
    if (!gzip && !PLAIN_TAR_TYPES.has(layer.mediaType))
      throw fail(`its media type ${layer.mediaType} is neither a tar nor a gzip'd tar`);
    if (gzip && encoding !== 'gzip')
      throw fail(`it is labelled ${layer.mediaType}, but its bytes are ${describe(encoding)}`);
    if (!gzip && encoding !== 'tar')
      throw fail(`it is labelled ${layer.mediaType}, but its bytes are ${describe(encoding)}`);
    let tar: string;
    try {
      tar = gzip ? gunzippedDigest(path) : digest;
    } catch (err) {
      throw fail((err as Error).message);
    }
    if (tar !== diffIds[i])
      throw fail(`its tar hashes to ${tar}, not to the diff ID its config names, ${diffIds[i]}`);
  }
}

function describe(encoding: LayerEncoding): string {
  return { gzip: 'gzip-compressed', zstd: 'zstd-compressed', tar: 'not compressed (no gzip magic)' }[
    encoding
  ];
}

/**
 * Checks every layer of every platform of the image index an OCI layout's index.json names (an
 * archive unpacked into `dir`); `image` names it in errors.
 */
export function checkLayoutLayers(dir: string, image: string): void {
  // Read in place: OciLayout writes its oci-layout file when opened, and a check writes nothing.
  const blobPath = (digest: string) => join(dir, 'blobs/sha256', digest.replace(/^sha256:/, ''));
  const json = <T>(d: Pick<Descriptor, 'digest'>) =>
    JSON.parse(readFileSync(blobPath(d.digest), 'utf8')) as T;
  const top = JSON.parse(readFileSync(join(dir, 'index.json'), 'utf8')) as ImageIndex;
  for (const entry of top.manifests) {
    const manifests = entry.mediaType === MEDIA_TYPES.index ? json<ImageIndex>(entry).manifests : [entry];
    for (const m of manifests) {
      const manifest = json<ImageManifest>(m);
      const config = json<{ rootfs?: { diff_ids?: string[] } }>(manifest.config);
      const platform = m.platform ? `${m.platform.os}/${m.platform.architecture}` : m.digest;
      checkLayers({
        image: `${image} (${platform})`,
        layers: manifest.layers,
        diffIds: config.rootfs?.diff_ids ?? [],
        blobPath,
      });
    }
  }
}
