/**
 * dist/images/images.json: what `npm run images` built, for the release job, the tests and the
 * bench (which image IDs to run, how big they are, what they were built from).
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { BaseInputs } from './offline-bases.ts';
import type { Platform } from './platforms.ts';

export const ROOT = fileURLToPath(new URL('..', import.meta.url));
export const IMAGES_DIR = join(ROOT, 'dist/images');
export const MANIFEST = join(IMAGES_DIR, 'images.json');
export const IMAGE_NAMES = ['agent', 'webhook'] as const;
export type ImageName = (typeof IMAGE_NAMES)[number];

export interface BaseRecord {
  /** The reference the Dockerfile's FROM was given (a pulled base: the name it was pulled by). */
  readonly ref: string;
  readonly id: string;
  /** sha256:… of its manifest as the engine stores it. */
  readonly digest: string;
  readonly size: number;
  readonly platform: Platform;
  /** Assembled by images/offline-bases.ts because the public base could not be pulled. */
  readonly assembled: boolean;
  /** An assembled base's Debian packages and Node package. */
  readonly inputs?: BaseInputs;
}

export interface PlatformImageRecord {
  readonly platform: Platform;
  /** The engine's tag for this platform's image (podman: localhost/secret-agent/agent:0.1.0-arm64). */
  readonly ref: string;
  /** Image ID: the digest of its config. */
  readonly id: string;
  /** sha256:… of its manifest in the archive: what a registry serves for this platform. */
  readonly digest: string;
  readonly size: number;
  /** CycloneDX SBOM of this platform's image, relative to the repository root. */
  readonly sbom: string;
}

export interface ImageRecord {
  /**
   * The primary platform's image (this machine's, when it was built): what the other tests and the
   * bench run. Its tag has no platform suffix (podman: localhost/secret-agent/agent:0.1.0).
   */
  readonly ref: string;
  readonly id: string;
  readonly size: number;
  readonly sbom: string;
  readonly dockerfile: string;
  /** The OCI archive (an image index over every platform), relative to the repository root. */
  readonly archive: string;
  /** sha256:… of the image index: one digest for every node. */
  readonly index: string;
  /** in-toto statement with the SLSA provenance of the index and every platform's image. */
  readonly provenance: string;
  readonly platforms: readonly PlatformImageRecord[];
}

export interface ImagesManifest {
  readonly version: string;
  readonly revision: string;
  /** What the build context held (images/stamped-base.ts buildContextState). */
  readonly buildContext: string;
  /** Seconds since the epoch: the commit's time, every time a build writes (images/source-revision.ts). */
  readonly sourceDateEpoch: number;
  readonly engine: 'podman' | 'docker';
  /** The engine's version, which a rebuild to the same digests needs too. */
  readonly engineVersion: string;
  /** Platforms built, in index order. */
  readonly platforms: readonly Platform[];
  /** Whose images the unsuffixed tags and `ref`s name: this machine's platform when it was built. */
  readonly primary: Platform;
  /** The build stage's base (it runs on the build machine's platform for every target). */
  readonly builder: BaseRecord;
  /** The primary platform's runtime base. */
  readonly runtime: BaseRecord;
  readonly runtimes: Readonly<Partial<Record<Platform, BaseRecord>>>;
  /** Per platform: the base the agent's resident (agent/native/*.c) is compiled on, for that platform. */
  readonly natives: Readonly<Partial<Record<Platform, BaseRecord>>>;
  readonly images: Readonly<Record<ImageName, ImageRecord>>;
}

/** The last build's record; throws with the command to run when there is none. */
export function readImagesManifest(path = MANIFEST): ImagesManifest {
  if (!existsSync(path))
    throw new Error(`${path} is missing: the images were never built here. Fix: npm run images`);
  const manifest = JSON.parse(readFileSync(path, 'utf8')) as ImagesManifest;
  if (!Array.isArray(manifest.platforms))
    throw new Error(`${path} was written by an older npm run images. Fix: npm run images`);
  return manifest;
}

/** One platform's image, or a loud failure naming the build that would make it. */
export function platformImage(
  manifest: ImagesManifest,
  name: ImageName,
  platform: Platform,
): PlatformImageRecord {
  const found = manifest.images[name].platforms.find((p) => p.platform === platform);
  if (!found)
    throw new Error(
      `the ${platform} ${name} image was not built (images.json lists ${manifest.platforms.join(', ')}). Fix: unset IMAGE_PLATFORMS, then npm run images`,
    );
  return found;
}
