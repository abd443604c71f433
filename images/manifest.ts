/**
 * dist/images/images.json: what `npm run images` built, for the release job, the tests and the
 * bench (which image IDs to run, how big they are, what they were built from).
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('..', import.meta.url));
export const IMAGES_DIR = join(ROOT, 'dist/images');
export const MANIFEST = join(IMAGES_DIR, 'images.json');
export const IMAGE_NAMES = ['agent', 'webhook'] as const;
export type ImageName = (typeof IMAGE_NAMES)[number];

export interface BaseRecord {
  /** The reference the Dockerfile's FROM was given. */
  readonly ref: string;
  readonly id: string;
  readonly size: number;
  /** Assembled by images/offline-bases.ts because the public base could not be pulled. */
  readonly assembled: boolean;
}

export interface ImageRecord {
  /** The tag, as the engine names it (podman: localhost/secret-agent/agent:0.1.0). */
  readonly ref: string;
  readonly id: string;
  readonly size: number;
  readonly dockerfile: string;
  /** OCI archive and CycloneDX SBOM, relative to the repository root. */
  readonly archive: string;
  readonly sbom: string;
}

export interface ImagesManifest {
  readonly version: string;
  readonly revision: string;
  readonly engine: 'podman' | 'docker';
  readonly builder: BaseRecord;
  readonly runtime: BaseRecord;
  readonly images: Readonly<Record<ImageName, ImageRecord>>;
}

/** The last build's record; throws with the command to run when there is none. */
export function readImagesManifest(): ImagesManifest {
  if (!existsSync(MANIFEST))
    throw new Error(`${MANIFEST} is missing: the images were never built here. Fix: npm run images`);
  return JSON.parse(readFileSync(MANIFEST, 'utf8')) as ImagesManifest;
}
