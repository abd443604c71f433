/**
 * A CycloneDX 1.5 SBOM per image and platform: the npm packages whose code esbuild put in the image's
 * bundle (the metafile says which; npm's own `npm sbom` records supply purl, licence and hash), the
 * Node runtime and the Debian packages of the base (read inside the image, from the per-package files
 * distroless keeps in /var/lib/dpkg/status.d). Nothing else is in the image.
 * The same image gives the same document: its serial number is derived from the image's manifest
 * digest and its timestamp is the build's SOURCE_DATE_EPOCH.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

interface Metafile {
  readonly outputs: Record<string, { readonly inputs: Record<string, { readonly bytesInOutput: number }> }>;
}

export interface CycloneDxComponent {
  readonly 'bom-ref': string;
  readonly type: string;
  readonly name: string;
  readonly version: string;
  readonly purl?: string;
  readonly licenses?: readonly unknown[];
  readonly hashes?: readonly unknown[];
  readonly [key: string]: unknown;
}

export interface CycloneDx {
  readonly bomFormat: 'CycloneDX';
  readonly specVersion: '1.5';
  readonly serialNumber: string;
  readonly version: 1;
  readonly metadata: Record<string, unknown>;
  readonly components: readonly CycloneDxComponent[];
}

/**
 * Every npm package with at least one byte in the bundle: `name@version` → its directory. Throws for
 * a package the lockfile counts as a dev dependency only: it would ship undeclared.
 */
export function bundledPackages(metafilePath: string, root: string): Map<string, string> {
  const meta = JSON.parse(readFileSync(metafilePath, 'utf8')) as Metafile;
  const dirs = new Set<string>();
  for (const output of Object.values(meta.outputs))
    for (const [input, { bytesInOutput }] of Object.entries(output.inputs)) {
      const at = input.lastIndexOf('node_modules/');
      if (at < 0 || bytesInOutput === 0) continue;
      const rest = input.slice(at + 'node_modules/'.length).split('/');
      const name = rest[0]!.startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0]!;
      dirs.add(input.slice(0, at + 'node_modules/'.length) + name);
    }
  const lock = JSON.parse(readFileSync(join(root, 'package-lock.json'), 'utf8')) as {
    packages: Record<string, { dev?: boolean }>;
  };
  const devOnly = [...dirs].filter((dir) => lock.packages[dir]?.dev === true);
  if (devOnly.length > 0)
    throw new Error(
      `${metafilePath}: the bundle holds dev dependencies: ${devOnly.join(', ')}. Fix: move them to "dependencies" in package.json.`,
    );
  return new Map(
    [...dirs].map((dir) => {
      const pkg = JSON.parse(readFileSync(join(root, dir, 'package.json'), 'utf8')) as {
        name: string;
        version: string;
      };
      return [`${pkg.name}@${pkg.version}`, join(root, dir)];
    }),
  );
}

/**
 * A package's licences from its package.json, for the packages npm's SBOM gives none: those that
 * still use the old object or array form (`[{ "type": "MIT" }]`), which npm does not read.
 */
function declaredLicences(dir: string): unknown[] {
  const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as {
    license?: unknown;
    licenses?: unknown;
  };
  const declared = pkg.license ?? pkg.licenses;
  if (typeof declared === 'string') return [{ expression: declared }];
  const list = Array.isArray(declared) ? declared : declared === undefined ? [] : [declared];
  return list
    .map((l) => (typeof l === 'string' ? l : (l as { type?: unknown }).type))
    .filter((name): name is string => typeof name === 'string')
    .map((name) => ({ license: { name } }));
}

export interface OsPackage {
  readonly name: string;
  readonly version: string;
  readonly architecture: string;
}

/** Run inside the image with its own Node: what the base holds. Prints JSON. */
export const LIST_IMAGE_CONTENTS = `
const fs = require('node:fs');
const dir = '/var/lib/dpkg/status.d';
const packages = [];
for (const f of fs.existsSync(dir) ? fs.readdirSync(dir) : []) {
  if (f.endsWith('.md5sums')) continue;
  const text = fs.readFileSync(dir + '/' + f, 'utf8');
  const field = (k) => (new RegExp('^' + k + ': (.+)$', 'm').exec(text) || [])[1];
  packages.push({ name: field('Package'), version: field('Version'), architecture: field('Architecture') });
}
let os = {};
try { for (const l of fs.readFileSync('/etc/os-release', 'utf8').split('\\n')) { const m = /^(\\w+)="?([^"]*)"?$/.exec(l); if (m) os[m[1]] = m[2]; } } catch {}
process.stdout.write(JSON.stringify({ node: process.version.slice(1), packages, os: { id: os.ID, versionId: os.VERSION_ID } }));
`;

export interface ImageContents {
  readonly node: string;
  readonly packages: readonly OsPackage[];
  readonly os: { readonly id?: string; readonly versionId?: string };
}

/**
 * `npm sbom --sbom-format cyclonedx` of this project, dev dependencies included: its --omit dev
 * also drops production packages that a devDependency reaches too (@grpc/proto-loader here).
 */
export interface NpmSbom {
  readonly components: readonly CycloneDxComponent[];
}

export interface ImageSbomInput {
  /** e.g. secret-agent/agent */
  readonly image: string;
  readonly version: string;
  readonly imageId: string;
  /** sha256:… of the platform's manifest. */
  readonly manifestDigest: string;
  /** e.g. linux/arm64 */
  readonly platform: string;
  /** Seconds since the epoch. */
  readonly sourceDateEpoch: number;
  readonly license: string;
  /** From bundledPackages. */
  readonly bundled: ReadonlyMap<string, string>;
  readonly npmSbom: NpmSbom;
  readonly contents: ImageContents;
}

/** A version-8 (custom) UUID made of the first 122 bits of SHA-256(`text`). */
function uuidFrom(text: string): string {
  const b = createHash('sha256').update(text).digest().subarray(0, 16);
  b[6] = (b[6]! & 0x0f) | 0x80;
  b[8] = (b[8]! & 0x3f) | 0x80;
  const h = b.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

export function imageSbom(input: ImageSbomInput): CycloneDx {
  const byRef = new Map(input.npmSbom.components.map((c) => [c['bom-ref'], c]));
  const missing = [...input.bundled.keys()].filter((ref) => !byRef.has(ref));
  if (missing.length > 0) throw new Error(`${input.image}: npm sbom does not list ${missing.join(', ')}`);
  const npm = [...input.bundled]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([ref, dir]) => {
      const c = byRef.get(ref)!;
      const licenses = c.licenses && c.licenses.length > 0 ? c.licenses : declaredLicences(dir);
      return {
        'bom-ref': c['bom-ref'],
        type: 'library',
        name: c.name,
        version: c.version,
        ...(c.purl ? { purl: c.purl } : {}),
        ...(licenses.length > 0 ? { licenses } : {}),
        ...(c.hashes ? { hashes: c.hashes } : {}),
      };
    });
  const distro = `${input.contents.os.id ?? 'debian'}-${input.contents.os.versionId ?? ''}`;
  const deb = input.contents.packages.map((p) => ({
    'bom-ref': `deb:${p.name}@${p.version}`,
    type: 'library',
    name: p.name,
    version: p.version,
    purl: `pkg:deb/${input.contents.os.id ?? 'debian'}/${p.name}@${encodeURIComponent(p.version)}?arch=${p.architecture}&distro=${distro}`,
  }));
  return {
    bomFormat: 'CycloneDX',
    specVersion: '1.5',
    serialNumber: `urn:uuid:${uuidFrom(input.manifestDigest)}`,
    version: 1,
    metadata: {
      timestamp: new Date(input.sourceDateEpoch * 1000).toISOString(),
      tools: [{ name: 'secret-agent images/sbom.ts' }],
      component: {
        'bom-ref': `${input.image}@${input.version}`,
        type: 'container',
        name: input.image,
        version: input.version,
        licenses: [{ license: { id: input.license } }],
        properties: [
          { name: 'oci:image:id', value: input.imageId },
          { name: 'oci:image:manifest-digest', value: input.manifestDigest },
          { name: 'oci:image:platform', value: input.platform },
        ],
      },
    },
    components: [
      {
        'bom-ref': `node@${input.contents.node}`,
        type: 'application',
        name: 'node',
        version: input.contents.node,
        purl: `pkg:generic/node@${input.contents.node}`,
        licenses: [{ license: { id: 'MIT' } }],
      },
      ...npm,
      ...(input.contents.os.id
        ? [
            {
              'bom-ref': `os:${distro}`,
              type: 'operating-system',
              name: input.contents.os.id,
              version: input.contents.os.versionId ?? '',
            },
          ]
        : []),
      ...deb,
    ],
  };
}
