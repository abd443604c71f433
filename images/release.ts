/**
 * `npm run release -- --registry HOST[:PORT]/PATH [--key cosign.key] [--insecure]`: pushes both image
 * indexes (every platform, tag = the version, digests as dist/images/images.json names them), signs
 * each index and its platform manifests, attests the SLSA provenance on the index and each platform's
 * CycloneDX SBOM on its manifest, verifies all of it back from the registry, and writes
 * dist/images/release.json. Everything is checked (images/release-plan.ts) before anything is pushed.
 * How to release and verify as a cluster: docs/release.md.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { MissingToolError } from './container-engine.ts';
import {
  attest,
  publicKeyOf,
  signRecursive,
  triangulate,
  verifyAttestation,
  verifySignature,
  type RegistryAccess,
  type Signer,
} from './cosign.ts';
import { IMAGES_DIR } from './manifest.ts';
import { registryDigest, pushArchive } from './registry.ts';
import { planRelease, ReleaseError, type PlannedImage } from './release-plan.ts';

const say = (line: string) => process.stderr.write(`release: ${line}\n`);

/** What was pushed, signed and attested, and where the signatures and attestations live: release.json. */
export interface ReleaseRecord {
  readonly version: string;
  readonly revision: string;
  readonly registry: string;
  readonly signing:
    | { readonly mode: 'key'; readonly publicKey: string; readonly tlog: boolean }
    | { readonly mode: 'keyless'; readonly identity: string; readonly issuer: string };
  readonly images: Record<string, ReleasedImage>;
}

export interface Attached {
  /** cosign's tag for it (`…:sha256-<hex>.sig` / `.att`). */
  readonly ref: string;
  /** sha256:… of that tag's manifest in the registry. */
  readonly digest: string;
}

export interface ReleasedImage {
  /** registry/path/name:version. */
  readonly reference: string;
  /** registry/path/name@sha256:…: what AGENT_IMAGE and the kustomize overlay pin. */
  readonly pinned: string;
  readonly index: string;
  readonly signature: Attached;
  /** The index's attestations: its SLSA provenance. */
  readonly attestation: Attached;
  readonly platforms: readonly {
    readonly platform: string;
    readonly digest: string;
    readonly pinned: string;
    readonly signature: Attached;
    /** The platform's CycloneDX SBOM. */
    readonly attestation: Attached;
  }[];
}

/** The flags (docs/release.md's table lists exactly these). */
export const RELEASE_OPTIONS = {
  registry: { type: 'string' },
  key: { type: 'string' },
  'certificate-identity': { type: 'string' },
  'certificate-oidc-issuer': { type: 'string' },
  insecure: { type: 'boolean', default: false },
  'no-tlog': { type: 'boolean', default: false },
  'images-dir': { type: 'string' },
} as const;

const REGISTRY = /^[a-z0-9.-]+(:\d{1,5})?(\/[a-z0-9._-]+)+$/;

function parseFlags(argv: readonly string[]) {
  let values;
  try {
    ({ values } = parseArgs({
      args: [...argv],
      options: RELEASE_OPTIONS,
      strict: true,
    }));
  } catch (err) {
    throw new ReleaseError('flags', (err as Error).message, 'see docs/release.md for the flags');
  }
  const registry = values.registry?.replace(/\/+$/, '');
  if (!registry)
    throw new ReleaseError(
      '--registry',
      'is required',
      'pass --registry HOST[:PORT]/PATH, e.g. ghcr.io/example/secret-agent',
    );
  if (!REGISTRY.test(registry))
    throw new ReleaseError(
      '--registry',
      `${JSON.stringify(registry)} is not HOST[:PORT]/PATH (lower case, no tag, no scheme)`,
      'pass e.g. ghcr.io/example/secret-agent or 127.0.0.1:5000/secret-agent',
    );
  return {
    registry,
    key: values.key,
    insecure: values.insecure,
    // A plain-HTTP registry is a test or offline one: no Rekor to reach either.
    tlog: !values.insecure && !values['no-tlog'],
    imagesDir: values['images-dir'] ? resolve(values['images-dir']) : IMAGES_DIR,
    identity: values['certificate-identity'],
    issuer: values['certificate-oidc-issuer'],
  };
}

/** The signer, checked before pushing: a key that COSIGN_PASSWORD opens, or a keyless identity to verify against. */
function signerOf(flags: ReturnType<typeof parseFlags>, scratch: string): Signer {
  if (flags.key !== undefined) {
    if (process.env.COSIGN_PASSWORD === undefined)
      throw new ReleaseError(
        'COSIGN_PASSWORD',
        'is not set, and cosign would prompt for the key’s password',
        `export COSIGN_PASSWORD (the password ${flags.key} was made with; empty for none)`,
      );
    let publicKey: string;
    try {
      publicKey = publicKeyOf(resolve(flags.key));
    } catch (err) {
      if (err instanceof MissingToolError) throw err;
      const said = (err as Error).message.trim().split('\n').at(-1)?.slice(0, 200);
      throw new ReleaseError(
        `--key ${flags.key}`,
        `cosign cannot open it (${said}): no such file, not a cosign private key, or COSIGN_PASSWORD is not its password`,
        'pass the cosign.key that `cosign generate-key-pair` wrote, with its password in COSIGN_PASSWORD',
      );
    }
    const pub = join(scratch, 'cosign.pub');
    writeFileSync(pub, publicKey);
    return { mode: 'key', key: resolve(flags.key), publicKey: pub, tlog: flags.tlog };
  }
  if (!flags.identity || !flags.issuer)
    throw new ReleaseError(
      '--key',
      'is not given, so signing is keyless, and verifying it back needs the identity the certificate names',
      'pass --key cosign.key, or (in CI, with an OIDC token) --certificate-identity and --certificate-oidc-issuer as docs/release.md shows',
    );
  return { mode: 'keyless', identity: flags.identity, issuer: flags.issuer };
}

function attached(ref: string, type: 'signature' | 'attestation', access: RegistryAccess): Attached {
  const tag = triangulate(ref, type, access);
  const digest = registryDigest(tag, access);
  if (!digest)
    throw new Error(`${ref}: cosign reported its ${type} at ${tag}, but the registry has no such tag`);
  return { ref: tag, digest };
}

/** Reads back what a cluster would check; throws when anything does not verify. */
function verifyImage(image: PlannedImage, signer: Signer, access: RegistryAccess): ReleasedImage {
  // The tag's digest was read back right after the push; signing adds tags of its own, never this one.
  const pinned = `${image.repository}@${image.index}`;
  const signed = (ref: string, digest: string) => {
    if (!verifySignature(ref, signer, access).includes(digest))
      throw new Error(`${ref}: no verified signature names ${digest}`);
  };
  const attested = (ref: string, type: string, digest: string) => {
    const statements = verifyAttestation(ref, type, signer, access);
    if (!statements.some((s) => s.subject.some((x) => `sha256:${x.digest.sha256}` === digest)))
      throw new Error(`${ref}: no verified ${type} attestation is about ${digest}`);
  };
  signed(pinned, image.index);
  attested(pinned, 'slsaprovenance1', image.index);
  const platforms = image.platforms.map((p) => {
    const ref = `${image.repository}@${p.digest}`;
    signed(ref, p.digest);
    attested(ref, 'cyclonedx', p.digest);
    return {
      platform: p.platform,
      digest: p.digest,
      pinned: ref,
      signature: attached(ref, 'signature', access),
      attestation: attached(ref, 'attestation', access),
    };
  });
  return {
    reference: `${image.repository}:${image.tag}`,
    pinned,
    index: image.index,
    signature: attached(pinned, 'signature', access),
    attestation: attached(pinned, 'attestation', access),
    platforms,
  };
}

export function release(argv: readonly string[]): ReleaseRecord {
  const flags = parseFlags(argv);
  const access: RegistryAccess = { insecure: flags.insecure };
  const scratch = mkdtempSync(join(tmpdir(), 'secret-agent-release-'));
  try {
    const signer = signerOf(flags, scratch);
    const plan = planRelease(flags.imagesDir, flags.registry, access);
    say(`checked ${plan.images.map((i) => `${i.archive} (${i.index})`).join(', ')}`);
    for (const image of plan.images) {
      const ref = `${image.repository}:${image.tag}`;
      if (image.alreadyPushed) say(`${ref} already holds ${image.index}: not pushed again`);
      else pushArchive(image.archive, ref, access);
      const served = registryDigest(ref, access);
      if (served !== image.index)
        throw new Error(
          `${ref}: pushed ${image.archive}, but the registry serves ${served ?? 'nothing'}, not ${image.index}`,
        );
      if (!image.alreadyPushed) say(`pushed ${ref} (${image.index})`);
    }
    for (const image of plan.images) {
      const pinned = `${image.repository}@${image.index}`;
      signRecursive(pinned, signer, access);
      const predicate = join(scratch, `${image.name}.slsa.json`);
      // cosign wraps the predicate in a statement of its own about the digest it signs.
      const statement = JSON.parse(readText(image.provenance)) as { predicate: unknown };
      writeFileSync(predicate, JSON.stringify(statement.predicate));
      attest(pinned, 'slsaprovenance1', predicate, signer, access);
      for (const p of image.platforms)
        attest(`${image.repository}@${p.digest}`, 'cyclonedx', p.sbom, signer, access);
      say(`signed and attested ${pinned} and its ${image.platforms.length} platforms`);
    }
    const images: Record<string, ReleasedImage> = {};
    for (const image of plan.images) images[image.name] = verifyImage(image, signer, access);
    say('verified every signature and attestation back from the registry');
    const record: ReleaseRecord = {
      version: plan.manifest.version,
      revision: plan.manifest.revision,
      registry: flags.registry,
      signing:
        signer.mode === 'key'
          ? { mode: 'key', publicKey: readText(signer.publicKey), tlog: signer.tlog }
          : { mode: 'keyless', identity: signer.identity, issuer: signer.issuer },
      images,
    };
    writeFileSync(join(flags.imagesDir, 'release.json'), `${JSON.stringify(record, null, 2)}\n`);
    say(`wrote ${join(flags.imagesDir, 'release.json')}`);
    return record;
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

function readText(path: string): string {
  return readFileSync(path, 'utf8');
}

if (import.meta.main) {
  try {
    release(process.argv.slice(2));
  } catch (err) {
    say(err instanceof Error ? err.message : String(err));
    process.exitCode = err instanceof ReleaseError || err instanceof MissingToolError ? 2 : 1;
  }
}
