/**
 * What a release will push, checked before anything is: every archive holds exactly the index and
 * platform manifests dist/images/images.json names, every blob in it is the bytes its digest says,
 * every layer is what its media type says and its tar the diff ID its config names,
 * each SBOM and provenance file is there, and the registry does not already hold the tag with other
 * digests. A problem is a ReleaseError naming the file or flag and the fix.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runTool } from './container-engine.ts';
import type { RegistryAccess } from './cosign.ts';
import { checkLayoutLayers, LayerBlobError } from './layer-blobs.ts';
import { IMAGE_NAMES, readImagesManifest, type ImageName, type ImagesManifest } from './manifest.ts';
import { registryDigest } from './registry.ts';

/** A release refused: what (a file, a flag, a registry tag), the problem, and the fix. */
export class ReleaseError extends Error {
  readonly subject: string;
  readonly problem: string;
  readonly fix: string;

  constructor(subject: string, problem: string, fix: string) {
    super(`${subject}: ${problem}. Fix: ${fix}`);
    this.name = 'ReleaseError';
    this.subject = subject;
    this.problem = problem;
    this.fix = fix;
  }
}

export interface PlannedPlatform {
  readonly platform: string;
  readonly digest: string;
  /** The CycloneDX SBOM attested on this platform's manifest (absolute path). */
  readonly sbom: string;
}

export interface PlannedImage {
  readonly name: ImageName;
  /** registry/path/name: what the tag and digests are under. */
  readonly repository: string;
  readonly tag: string;
  readonly archive: string;
  readonly index: string;
  /** The in-toto statement whose SLSA predicate is attested on the index (absolute path). */
  readonly provenance: string;
  readonly platforms: readonly PlannedPlatform[];
  /** The tag already holds this index (an earlier run pushed it): pushing again changes nothing. */
  readonly alreadyPushed: boolean;
}

export interface ReleasePlan {
  readonly manifest: ImagesManifest;
  readonly images: readonly PlannedImage[];
}

const REBUILD = 'npm run images (it rewrites the archives and images.json together)';
const sha256 = (data: Buffer) => `sha256:${createHash('sha256').update(data).digest('hex')}`;

interface Descriptor {
  readonly digest: string;
  readonly size: number;
  readonly platform?: { readonly os: string; readonly architecture: string };
}

/** Unpacks the archive and checks every blob, the index and each platform against images.json. */
function checkArchive(manifest: ImagesManifest, name: ImageName, archive: string): void {
  const image = manifest.images[name];
  const fail = (problem: string) => new ReleaseError(archive, problem, REBUILD);
  if (!existsSync(archive)) throw fail('is missing');
  const dir = mkdtempSync(join(tmpdir(), 'secret-agent-release-'));
  try {
    try {
      runTool('tar', ['-xf', archive, '-C', dir], { timeoutMs: 300_000 });
    } catch (err) {
      throw fail(`is not a readable tar archive (${(err as Error).message.slice(-200)})`);
    }
    const blobs = join(dir, 'blobs/sha256');
    const held = new Map<string, Buffer>();
    for (const file of existsSync(blobs) ? readdirSync(blobs) : []) {
      const data = readFileSync(join(blobs, file));
      if (sha256(data) !== `sha256:${file}`)
        throw fail(
          `blob sha256:${file.slice(0, 12)}… is not the bytes its digest names (tampered or corrupt)`,
        );
      held.set(`sha256:${file}`, data);
    }
    const json = <T>(d: Descriptor, what: string): T => {
      const data = held.get(d.digest);
      if (!data) throw fail(`lacks ${what} ${d.digest}`);
      if (data.length !== d.size) throw fail(`${what} ${d.digest} is ${data.length} bytes, not ${d.size}`);
      return JSON.parse(data.toString()) as T;
    };
    let top: { manifests?: Descriptor[] };
    try {
      top = JSON.parse(readFileSync(join(dir, 'index.json'), 'utf8')) as typeof top;
    } catch {
      throw fail('has no readable index.json');
    }
    if (top.manifests?.length !== 1) throw fail('index.json does not name exactly one image index');
    const entry = top.manifests[0]!;
    if (entry.digest !== image.index)
      throw fail(`holds index ${entry.digest}, not images.json's ${image.index} for ${name}`);
    const index = json<{ manifests: Descriptor[] }>(entry, 'the image index');
    const listed = index.manifests.map((m) => [`${m.platform?.os}/${m.platform?.architecture}`, m.digest]);
    const want = image.platforms.map((p) => [p.platform, p.digest]);
    if (JSON.stringify(listed) !== JSON.stringify(want))
      throw fail(`its index lists ${JSON.stringify(listed)}, images.json ${JSON.stringify(want)}`);
    for (const m of index.manifests) {
      const platform = json<{ config: Descriptor; layers: Descriptor[] }>(m, 'platform manifest');
      for (const d of [platform.config, ...platform.layers])
        if (!held.has(d.digest)) throw fail(`lacks blob ${d.digest}`);
    }
    // What a registry will serve: each layer what its media type says, its tar its config's diff ID.
    try {
      checkLayoutLayers(dir, name);
    } catch (err) {
      if (err instanceof LayerBlobError) throw fail(err.message);
      throw err;
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Checks `imagesDir` (its images.json, archives, SBOMs and provenance) and the registry's tags,
 * pushing nothing. `registry` is HOST[:PORT]/PATH.
 */
export function planRelease(imagesDir: string, registry: string, access: RegistryAccess): ReleasePlan {
  const manifestPath = join(imagesDir, 'images.json');
  let manifest: ImagesManifest;
  try {
    manifest = readImagesManifest(manifestPath);
  } catch (err) {
    throw new ReleaseError(manifestPath, (err as Error).message.replace(/\. Fix: .*$/, ''), REBUILD);
  }
  // images.json names files relative to the repository it was built in; --images-dir moves them all.
  const local = (path: string) => join(imagesDir, path.replace(/^dist\/images\//, ''));
  const images = IMAGE_NAMES.map((name): PlannedImage => {
    const image = manifest.images[name];
    const archive = local(image.archive);
    checkArchive(manifest, name, archive);
    const provenance = local(image.provenance);
    const statement = readJson<{ subject?: { digest?: { sha256?: string } }[] }>(provenance);
    if (!statement.subject?.some((s) => `sha256:${s.digest?.sha256}` === image.index))
      throw new ReleaseError(provenance, `its subjects do not include the index ${image.index}`, REBUILD);
    const platforms = image.platforms.map((p) => {
      const sbom = local(p.sbom);
      if (readJson<{ bomFormat?: string }>(sbom).bomFormat !== 'CycloneDX')
        throw new ReleaseError(sbom, 'is not a CycloneDX SBOM', REBUILD);
      return { platform: p.platform, digest: p.digest, sbom };
    });
    const repository = `${registry}/${name}`;
    const held = registryDigest(`${repository}:${manifest.version}`, access);
    if (held !== undefined && held !== image.index)
      throw new ReleaseError(
        `${repository}:${manifest.version}`,
        `the registry already holds this tag as ${held}, not this build's index ${image.index}`,
        'a published version never changes: bump the version in package.json and rebuild, or release to another --registry',
      );
    return {
      name,
      repository,
      tag: manifest.version,
      archive,
      index: image.index,
      provenance,
      platforms,
      alreadyPushed: held === image.index,
    };
  });
  return { manifest, images };
}

function readJson<T>(path: string): T {
  if (!existsSync(path)) throw new ReleaseError(path, 'is missing', REBUILD);
  try {
    return JSON.parse(readFileSync(path, 'utf8')) as T;
  } catch {
    throw new ReleaseError(path, 'is not JSON', REBUILD);
  }
}
