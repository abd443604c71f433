/**
 * Reads the OCI archives `npm run images` writes, member by member with tar(1), checking every blob
 * it hands out against its digest.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { gunzipSync } from 'node:zlib';

export interface ArchiveDescriptor {
  readonly mediaType: string;
  readonly digest: string;
  readonly size: number;
  readonly platform?: { readonly os: string; readonly architecture: string; readonly variant?: string };
  readonly annotations?: Record<string, string>;
}

export interface ArchivePlatform {
  /** os/architecture, as the index names it. */
  readonly platform: string;
  readonly descriptor: ArchiveDescriptor;
  readonly manifest: { readonly config: ArchiveDescriptor; readonly layers: readonly ArchiveDescriptor[] };
  readonly config: {
    readonly architecture: string;
    readonly os: string;
    readonly created: string;
    readonly rootfs: { readonly diff_ids: readonly string[] };
  };
}

export const sha256 = (data: Buffer | string) => createHash('sha256').update(data).digest('hex');

/** One member of a tar archive. */
export function fromTar(archive: string, member: string): Buffer {
  const r = spawnSync('tar', ['-xOf', archive, member], { maxBuffer: 1024 * 1024 * 1024 });
  assert.equal(r.status, 0, `${archive}: ${member}: ${r.stderr}`);
  return r.stdout;
}

/** A blob of the archive, checked against its digest. */
export function blob(archive: string, digest: string): Buffer {
  const data = fromTar(archive, `blobs/sha256/${digest.replace(/^sha256:/, '')}`);
  assert.equal(`sha256:${sha256(data)}`, digest, `${archive}: blob ${digest}`);
  return data;
}

const json = <T>(archive: string, digest: string) => JSON.parse(blob(archive, digest).toString()) as T;

/** index.json's one entry (the image index) and the index itself. */
export function readIndex(archive: string): {
  entry: ArchiveDescriptor;
  index: { mediaType: string; manifests: ArchiveDescriptor[] };
} {
  const top = JSON.parse(fromTar(archive, 'index.json').toString()) as { manifests: ArchiveDescriptor[] };
  assert.equal(top.manifests.length, 1, `${archive}: index.json names one image index`);
  const entry = top.manifests[0]!;
  return { entry, index: json(archive, entry.digest) };
}

/** Every platform's manifest and config, in index order. */
export function readPlatforms(archive: string): ArchivePlatform[] {
  return readIndex(archive).index.manifests.map((descriptor) => {
    const manifest = json<ArchivePlatform['manifest']>(archive, descriptor.digest);
    return {
      platform: `${descriptor.platform?.os}/${descriptor.platform?.architecture}`,
      descriptor,
      manifest,
      config: json<ArchivePlatform['config']>(archive, manifest.config.digest),
    };
  });
}

/**
 * A layer's tar stream (uncompressed), checked against its digest, its media type (gzip's magic for
 * `+gzip`, none otherwise: a registry trusts the label) and its diff_id.
 */
export function layerTar(archive: string, layer: ArchiveDescriptor, diffId: string): Buffer {
  const data = blob(archive, layer.digest);
  const gzip = layer.mediaType.endsWith('+gzip');
  assert.equal(
    data[0] === 0x1f && data[1] === 0x8b,
    gzip,
    `${archive}: layer ${layer.digest} is labelled ${layer.mediaType}, its bytes ${gzip ? 'lack' : 'have'} gzip's magic`,
  );
  const tar = gzip ? gunzipSync(data) : data;
  assert.equal(`sha256:${sha256(tar)}`, diffId, `${archive}: layer ${layer.digest} is its diff_id`);
  return tar;
}

/** `tar -tv` of a layer: mode, size and path (absolute, no trailing slash) of each entry. */
export function layerEntries(tar: Buffer): { mode: string; size: string; path: string }[] {
  const listing = spawnSync('tar', ['-tv'], { input: tar, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  assert.equal(listing.status, 0, listing.stderr);
  return listing.stdout
    .trim()
    .split('\n')
    .map((line) => {
      // drwxr-xr-x 0/0 0 2026-11-23 10:49 app/
      const [mode, , size, , , ...rest] = line.split(/\s+/);
      return { mode: mode!, size: size!, path: `/${rest.join(' ').replace(/\/$/, '')}` };
    });
}

/** One file of a layer. */
export function layerFile(tar: Buffer, path: string): Buffer {
  const r = spawnSync('tar', ['-xO', path.replace(/^\//, '')], { input: tar, maxBuffer: 256 * 1024 * 1024 });
  assert.equal(r.status, 0, `${path}: ${r.stderr}`);
  return r.stdout;
}
