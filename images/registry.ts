/**
 * The registry a release pushes to, through skopeo (which uses the machine's registry logins):
 * what a tag holds now, and pushing an OCI archive's image index with every platform.
 */
import { createHash } from 'node:crypto';
import { runTool } from './container-engine.ts';
import type { RegistryAccess } from './cosign.ts';

export const SKOPEO_INSTALL = 'apt-get install -y skopeo (Debian; .ci/run installs it)';

const tlsFlag = (access: RegistryAccess, flag: string) => (access.insecure ? [`${flag}=false`] : []);

/** sha256:… of the manifest (or index) `ref` names, as the registry serves it; undefined when there is none. */
export function registryDigest(ref: string, access: RegistryAccess): string | undefined {
  let raw: string;
  try {
    raw = runTool('skopeo', ['inspect', '--raw', ...tlsFlag(access, '--tls-verify'), `docker://${ref}`], {
      install: SKOPEO_INSTALL,
      timeoutMs: 120_000,
    });
  } catch (err) {
    // Only "no such tag" means absent; an unreachable or refusing registry is an error to report.
    if (/manifest unknown|not found|name unknown/i.test((err as Error).message)) return undefined;
    throw err;
  }
  return `sha256:${createHash('sha256').update(raw).digest('hex')}`;
}

/** Pushes every platform of the archive's one index to `ref`, digests unchanged (skopeo copy --all). */
export function pushArchive(archive: string, ref: string, access: RegistryAccess): void {
  runTool(
    'skopeo',
    [
      'copy',
      '--all',
      '--quiet',
      ...tlsFlag(access, '--dest-tls-verify'),
      `oci-archive:${archive}`,
      `docker://${ref}`,
    ],
    { install: SKOPEO_INSTALL, timeoutMs: 900_000 },
  );
}
