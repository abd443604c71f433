/**
 * cosign, found and run: on PATH first, else where `.ci/install-cosign` unpacks Debian trixie's
 * package (/opt/secret-agent-tools/cosign; bookworm has no cosign package, and trixie's needs only
 * libc6 >= 2.34). A missing cosign is a MissingToolError with that install line.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { MissingToolError, runTool } from './container-engine.ts';
import { ROOT } from './manifest.ts';

export const COSIGN_HOME = process.env.COSIGN_HOME ?? '/opt/secret-agent-tools/cosign';
export const COSIGN_INSTALL = `${join(ROOT, '.ci/install-cosign')} (Debian trixie's cosign 2.5.0 unpacked into ${COSIGN_HOME}, no system change; .ci/run runs it)`;

/** A registry's transport: `insecure` is plain HTTP (or a certificate nobody signed), e.g. a loopback test registry. */
export interface RegistryAccess {
  readonly insecure: boolean;
}

/** How signatures are made and checked: a key pair, or keyless (Fulcio certificate for a CI job's OIDC identity). */
export type Signer =
  | {
      readonly mode: 'key';
      readonly key: string;
      readonly publicKey: string;
      /** Signatures are recorded in the public Rekor log (cosign's default); false offline or air-gapped. */
      readonly tlog: boolean;
    }
  | { readonly mode: 'keyless'; readonly identity: string; readonly issuer: string };

let found: string | undefined;

/** The cosign binary to run, or a MissingToolError with the install line. */
export function cosignPath(): string {
  if (found) return found;
  const onPath = spawnSync('cosign', ['version'], { stdio: 'ignore', timeout: 30_000 });
  if (onPath.status === 0) return (found = 'cosign');
  const unpacked = join(COSIGN_HOME, 'usr/bin/cosign');
  if (existsSync(unpacked)) return (found = unpacked);
  throw new MissingToolError(
    `cosign is not installed (not on PATH, not in ${COSIGN_HOME}/usr/bin)`,
    COSIGN_INSTALL,
  );
}

/** Runs cosign to completion (bounded) and returns its stdout; a failure throws with its stderr. */
export function cosign(args: readonly string[]): string {
  return runTool(cosignPath(), args, { install: COSIGN_INSTALL, timeoutMs: 300_000 });
}

const registryFlags = (access: RegistryAccess) =>
  access.insecure ? ['--allow-insecure-registry', '--allow-http-registry'] : [];

/** What signing needs beyond the registry: the key, and no Rekor upload when there is no Rekor to reach. */
function signFlags(signer: Signer): string[] {
  if (signer.mode === 'keyless') return [];
  return ['--key', signer.key, ...(signer.tlog ? [] : ['--tlog-upload=false'])];
}

/** What verifying needs: the public key (and no Rekor entry when none was made), or the identity the certificate names. */
export function verifyFlags(signer: Signer): string[] {
  if (signer.mode === 'keyless')
    return ['--certificate-identity', signer.identity, '--certificate-oidc-issuer', signer.issuer];
  return ['--key', signer.publicKey, ...(signer.tlog ? [] : ['--insecure-ignore-tlog'])];
}

/** Signs an index and, with --recursive, every manifest it lists. */
export function signRecursive(ref: string, signer: Signer, access: RegistryAccess): void {
  cosign(['sign', '--yes', '--recursive', ...signFlags(signer), ...registryFlags(access), ref]);
}

/** Attaches a signed in-toto attestation of `type` (slsaprovenance1, cyclonedx) with the predicate file to `ref`. */
export function attest(
  ref: string,
  type: string,
  predicate: string,
  signer: Signer,
  access: RegistryAccess,
): void {
  cosign([
    'attest',
    '--yes',
    '--type',
    type,
    '--predicate',
    predicate,
    ...signFlags(signer),
    ...registryFlags(access),
    ref,
  ]);
}

/** `cosign verify`: the digest each valid signature's payload names (cosign fails when none is valid). */
export function verifySignature(ref: string, signer: Signer, access: RegistryAccess): string[] {
  const out = cosign(['verify', ...verifyFlags(signer), ...registryFlags(access), ref]);
  return (JSON.parse(out) as { critical: { image: { 'docker-manifest-digest': string } } }[]).map(
    (s) => s.critical.image['docker-manifest-digest'],
  );
}

/** `cosign verify-attestation --type`: each valid attestation's statement (its subject and predicate type). */
export function verifyAttestation(
  ref: string,
  type: string,
  signer: Signer,
  access: RegistryAccess,
): { subject: { digest: { sha256: string } }[]; predicateType: string }[] {
  const out = cosign([
    'verify-attestation',
    '--type',
    type,
    ...verifyFlags(signer),
    ...registryFlags(access),
    ref,
  ]);
  return out
    .trim()
    .split('\n')
    .map((line) => {
      const envelope = JSON.parse(line) as { payload: string };
      return JSON.parse(Buffer.from(envelope.payload, 'base64').toString()) as {
        subject: { digest: { sha256: string } }[];
        predicateType: string;
      };
    });
}

/** Where cosign stores what it attached to `ref`'s digest: its `.sig` or `.att` tag. */
export function triangulate(ref: string, type: 'signature' | 'attestation', access: RegistryAccess): string {
  return cosign(['triangulate', '--type', type, ...registryFlags(access), ref]).trim();
}

/** The public key of a cosign private key: also proves COSIGN_PASSWORD opens it, before anything is pushed. */
export function publicKeyOf(key: string): string {
  return cosign(['public-key', '--key', key]);
}
