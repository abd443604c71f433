/**
 * Debian packages for one architecture, downloaded with apt-get into a private state (its own sources,
 * package lists and cache), so any architecture can be fetched without adding it to the machine's
 * dpkg architectures or touching its apt lists. apt checks each .deb against the signed index; the
 * SHA-256 of what it fetched is recorded for the provenance.
 */
import { mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { runTool } from './container-engine.ts';
import { fileDigest } from './oci-layout.ts';

export const DEBIAN_SUITE = 'bookworm';
const KEYRING = '/usr/share/keyrings/debian-archive-keyring.gpg';

export interface DebianPackage {
  readonly name: string;
  readonly version: string;
  readonly architecture: string;
  readonly sha256: string;
  /** The downloaded .deb. */
  readonly file: string;
}

/** DEBIAN_MIRROR and DEBIAN_SECURITY_MIRROR, e.g. snapshot.debian.org at a date to rebuild a release. */
export function debianMirrors(): { main: string; security: string } {
  return {
    main: process.env.DEBIAN_MIRROR ?? 'http://deb.debian.org/debian',
    security: process.env.DEBIAN_SECURITY_MIRROR ?? 'http://deb.debian.org/debian-security',
  };
}

function apt(state: string, arch: string, args: readonly string[], cwd?: string) {
  const options = [
    `APT::Architecture=${arch}`,
    // `::=` empties the list first: only this architecture, whatever the machine's dpkg has.
    `APT::Architectures::=${arch}`,
    `Dir::State=${join(state, 'state')}`,
    `Dir::State::Lists=${join(state, 'lists')}`,
    `Dir::State::status=${join(state, 'status')}`,
    `Dir::Cache=${join(state, 'cache')}`,
    `Dir::Etc::SourceList=${join(state, 'sources.list')}`,
    `Dir::Etc::SourceParts=${join(state, 'sources.list.d')}`,
    `Dir::Etc::Preferences=${join(state, 'preferences')}`,
    `Dir::Etc::PreferencesParts=${join(state, 'preferences.d')}`,
    // Root downloads into directories it made; the _apt sandbox user could not write there.
    'APT::Sandbox::User=root',
    'Acquire::Retries=3',
  ];
  return runTool('apt-get', [...options.flatMap((o) => ['-o', o]), '-q', ...args], {
    ...(cwd ? { cwd } : {}),
    install: 'a Debian machine (apt-get)',
  });
}

/**
 * Downloads the newest `packages` of `arch` from the mirrors into `dir` (which gets apt's private
 * state too) and describes each .deb.
 */
export function downloadDebianPackages(
  arch: string,
  packages: readonly string[],
  dir: string,
): DebianPackage[] {
  const state = join(dir, 'apt');
  const debs = join(dir, 'debs');
  for (const d of ['state', 'lists/partial', 'cache/archives/partial', 'sources.list.d', 'preferences.d'])
    mkdirSync(join(state, d), { recursive: true });
  mkdirSync(debs, { recursive: true });
  writeFileSync(join(state, 'status'), '');
  writeFileSync(join(state, 'preferences'), '');
  const { main, security } = debianMirrors();
  const signed = `[signed-by=${KEYRING}]`;
  writeFileSync(
    join(state, 'sources.list'),
    [
      `deb ${signed} ${main} ${DEBIAN_SUITE} main`,
      `deb ${signed} ${main} ${DEBIAN_SUITE}-updates main`,
      `deb ${signed} ${security} ${DEBIAN_SUITE}-security main`,
      '',
    ].join('\n'),
  );
  apt(state, arch, ['update']);
  apt(state, arch, ['download', ...packages], debs);
  return describeDebs(debs);
}

/** Every .deb in `dir`, described, in name order. */
export function describeDebs(dir: string): DebianPackage[] {
  return readdirSync(dir)
    .filter((f) => f.endsWith('.deb'))
    .sort()
    .map((f) => {
      const file = join(dir, f);
      const fields = runTool('dpkg-deb', ['-f', file, 'Package', 'Version', 'Architecture']);
      const field = (name: string) => new RegExp(`^${name}: (\\S+)$`, 'm').exec(fields)?.[1] ?? '';
      return {
        name: field('Package'),
        version: field('Version'),
        architecture: field('Architecture'),
        sha256: fileDigest(file).replace(/^sha256:/, ''),
        file,
      };
    });
}
