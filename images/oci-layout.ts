/**
 * OCI image layouts (https://github.com/opencontainers/image-spec/blob/main/image-layout.md) written
 * byte for byte the same from the same inputs: blobs named by their SHA-256, JSON serialised in one
 * fixed way, tar archives with sorted entries, numeric owners and one modification time.
 */
import { spawnSync } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import {
  closeSync,
  mkdirSync,
  rmSync,
  openSync,
  readFileSync,
  readSync,
  renameSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ContainerEngine } from './container-engine.ts';

export const MEDIA_TYPES = {
  index: 'application/vnd.oci.image.index.v1+json',
  manifest: 'application/vnd.oci.image.manifest.v1+json',
  config: 'application/vnd.oci.image.config.v1+json',
  layer: 'application/vnd.oci.image.layer.v1.tar',
  layerGzip: 'application/vnd.oci.image.layer.v1.tar+gzip',
} as const;

interface OciPlatform {
  readonly os: string;
  readonly architecture: string;
  readonly variant?: string;
}

export interface Descriptor {
  readonly mediaType: string;
  readonly digest: string;
  readonly size: number;
  readonly platform?: OciPlatform;
  readonly annotations?: Readonly<Record<string, string>>;
}

export interface ImageManifest {
  readonly schemaVersion: 2;
  readonly mediaType: typeof MEDIA_TYPES.manifest;
  readonly config: Descriptor;
  readonly layers: readonly Descriptor[];
  readonly annotations?: Readonly<Record<string, string>>;
}

export interface ImageIndex {
  readonly schemaVersion: 2;
  readonly mediaType: typeof MEDIA_TYPES.index;
  readonly manifests: readonly Descriptor[];
  readonly annotations?: Readonly<Record<string, string>>;
}

/** `sha256:<hex>` of a file, read in chunks (layers are hundreds of MB). */
export function fileDigest(path: string): string {
  const hash = createHash('sha256');
  const buffer = Buffer.alloc(4 * 1024 * 1024);
  const fd = openSync(path, 'r');
  try {
    for (let n; (n = readSync(fd, buffer, 0, buffer.length, null)) > 0;) hash.update(buffer.subarray(0, n));
  } finally {
    closeSync(fd);
  }
  return `sha256:${hash.digest('hex')}`;
}

const digestOf = (data: Buffer | string) => `sha256:${createHash('sha256').update(data).digest('hex')}`;

/**
 * Tars `members` of `dir` (default: all of it, as `./…`) into `out`: entries sorted by name, owners
 * as numbers only (`rootOwned`: all 0), every modification time `mtime` (seconds since the epoch),
 * GNU format (no PAX headers, which would carry access and change times).
 */
export function tarDirectory(
  dir: string,
  out: string,
  mtime: number,
  options: { members?: readonly string[]; rootOwned?: boolean } = {},
): void {
  const r = spawnSync(
    'tar',
    [
      '--sort=name',
      '--format=gnu',
      '--numeric-owner',
      ...(options.rootOwned ? ['--owner=0', '--group=0'] : []),
      `--mtime=@${mtime}`,
      '-C',
      dir,
      '-cf',
      out,
      ...(options.members ?? ['.']),
    ],
    { encoding: 'utf8' },
  );
  if (r.status !== 0) throw new Error(`tar of ${dir} failed (${r.status}): ${r.stderr}`);
}

/** An OCI image layout directory being written. */
export class OciLayout {
  readonly dir: string;

  constructor(dir: string) {
    this.dir = dir;
    mkdirSync(join(dir, 'blobs/sha256'), { recursive: true });
    writeFileSync(join(dir, 'oci-layout'), '{"imageLayoutVersion":"1.0.0"}');
  }

  blobPath(digest: string): string {
    return join(this.dir, 'blobs/sha256', digest.replace(/^sha256:/, ''));
  }

  size(digest: string): number {
    return statSync(this.blobPath(digest)).size;
  }

  /** Stores JSON (serialised compactly, keys in the order given) and describes it. */
  putJson(mediaType: string, value: unknown): Descriptor {
    return this.putBytes(mediaType, Buffer.from(JSON.stringify(value)));
  }

  putBytes(mediaType: string, data: Buffer): Descriptor {
    const digest = digestOf(data);
    writeFileSync(this.blobPath(digest), data);
    return { mediaType, digest, size: data.length };
  }

  /** Moves a file in as a blob. */
  moveIn(mediaType: string, file: string): Descriptor {
    const digest = fileDigest(file);
    const size = statSync(file).size;
    renameSync(file, this.blobPath(digest));
    return { mediaType, digest, size };
  }

  readJson<T>(descriptor: Pick<Descriptor, 'digest'>): T {
    return JSON.parse(readFileSync(this.blobPath(descriptor.digest), 'utf8')) as T;
  }

  /** index.json: what a reader of the layout starts from (`oci:DIR:NAME` picks a manifest by its ref.name). */
  writeIndex(manifests: readonly Descriptor[]): void {
    const index: ImageIndex = { schemaVersion: 2, mediaType: MEDIA_TYPES.index, manifests };
    writeFileSync(join(this.dir, 'index.json'), JSON.stringify(index));
  }

  readIndex(): ImageIndex {
    return JSON.parse(readFileSync(join(this.dir, 'index.json'), 'utf8')) as ImageIndex;
  }
}

/**
 * Imports the manifest of `layout` named `ref` (its index.json entry's ref.name) into the engine,
 * tags it `ref` and removes the layout; returns the image ID. The layout must be in a directory from
 * pullableLayoutDir: podman also names what it pulls after the directory, which must be a valid
 * name, and that name is removed again.
 */
export function pullLayout(engine: ContainerEngine, layout: OciLayout, ref: string): string {
  try {
    const id = engine
      .run(['pull', '-q', `oci:${layout.dir}:${ref}`])
      .stdout.trim()
      .split('\n')
      .at(-1)!;
    engine.run(['tag', id, ref]);
    engine.run(['untag', id, `localhost${layout.dir}:latest`], { check: false });
    return id;
  } finally {
    rmSync(layout.dir, { recursive: true, force: true });
  }
}

/** A fresh directory whose path is a valid image name (lower case), for pullLayout. */
export function pullableLayoutDir(prefix: string): string {
  const dir = join(tmpdir(), `${prefix}-${randomUUID()}`);
  mkdirSync(dir);
  return dir;
}
