/**
 * The app images of the env-var tests (issue 32): the test app (env-app/report.c) in the three kinds
 * of image the env-exec wrapper must work in, for every platform the images build for:
 *  - distroless: FROM scratch, the app static (musl), user 65532; no shell, no libc.
 *  - alpine: FROM scratch, musl's dynamic loader at /lib/ld-musl-<arch>.so.1 and the app linked
 *    against it; no shell.
 *  - debian: a Debian bookworm with /bin/sh, the app linked against glibc.
 * Built with env-app/Containerfile on images/offline-bases.ts' native build base of each platform
 * (compiled there, under QEMU for another platform), so nothing is pulled. glibc's development files
 * are not in that base: the build takes libc6-dev (the base's own libc6 version) and linux-libc-dev
 * from Debian's mirror. Tagged by a hash of the sources and the base's image ID, so a run whose images
 * are there builds nothing.
 */
import { createHash } from 'node:crypto';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { requirePodman, type ContainerEngine } from '../../images/container-engine.ts';
import { downloadDebianPackages } from '../../images/debian-packages.ts';
import { nativeBuildBase, readBaseInputs } from '../../images/offline-bases.ts';
import { PLATFORM_NAMES, PLATFORMS, requireEmulation, type Platform } from '../../images/platforms.ts';

export const APP_KINDS = ['distroless', 'alpine', 'debian'] as const;
export type AppKind = (typeof APP_KINDS)[number];

/** Where each image has the app: its entrypoint. */
export const APP_PATH = '/app/report';

/** The user each image runs as (its USER; none said is root). */
export const APP_USER: Readonly<Record<AppKind, number>> = { distroless: 65532, alpine: 0, debian: 0 };

/** The ELF machine (e_machine) and loaders of each platform. */
export const PLATFORM_ELF: Readonly<
  Record<Platform, { readonly machine: number; readonly musl: string; readonly glibc: string }>
> = {
  'linux/amd64': { machine: 62, musl: '/lib/ld-musl-x86_64.so.1', glibc: '/lib64/ld-linux-x86-64.so.2' },
  'linux/arm64': { machine: 183, musl: '/lib/ld-musl-aarch64.so.1', glibc: '/lib/ld-linux-aarch64.so.1' },
};

const CONTEXT = fileURLToPath(new URL('./env-app/', import.meta.url));
const SOURCES = ['Containerfile', 'report.c'];

/** glibc's headers and link files for the debian image: the base has gcc, but not these. */
function glibcDevDebs(podman: ContainerEngine, baseRef: string, platform: Platform, into: string): void {
  const libc6 = readBaseInputs(podman, baseRef)?.debian.find((d) => d.name === 'libc6')?.version;
  if (libc6 === undefined)
    throw new Error(
      `${baseRef} records no libc6 version (not a base made by images/offline-bases.ts?), so the debian app image cannot get glibc's matching headers`,
    );
  const work = mkdtempSync(join(tmpdir(), 'secret-agent-env-app-debs-'));
  try {
    const debs = downloadDebianPackages(
      PLATFORM_NAMES[platform].arch,
      [`libc6-dev=${libc6}`, 'linux-libc-dev'],
      work,
    );
    mkdirSync(into, { recursive: true });
    for (const deb of debs) cpSync(deb.file, join(into, `${deb.name}.deb`));
  } catch (e) {
    throw new Error(
      `libc6-dev ${libc6} (${platform}, the version of the native build base's libc6) cannot be downloaded from Debian's mirror: ${(e as Error).message.slice(-600)}. Fix: reach the mirror (DEBIAN_MIRROR), or rebuild the base (podman rmi ${baseRef}; it is rebuilt with the mirror's libc6)`,
      { cause: e },
    );
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

function tagFor(kind: AppKind, platform: Platform, hash: string): string {
  return `localhost/secret-agent-test/env-app-${kind}:${hash}-${PLATFORM_NAMES[platform].arch}`;
}

const has = (podman: ContainerEngine, ref: string) =>
  podman.run(['image', 'exists', ref], { check: false }).status === 0;

/** The three app images of `platform`, built unless podman has them already. */
function ensurePlatform(podman: ContainerEngine, platform: Platform): Record<AppKind, string> {
  requireEmulation(platform);
  const base = nativeBuildBase(platform);
  base.ensure(podman);
  const baseId = podman.run(['image', 'inspect', '--format', '{{.Id}}', base.ref]).stdout.trim();
  const hash = createHash('sha256').update(platform).update(baseId);
  for (const f of [...SOURCES.map((s) => join(CONTEXT, s)), fileURLToPath(import.meta.url)])
    hash.update(f).update(readFileSync(f));
  const digest = hash.digest('hex').slice(0, 16);
  const refs = Object.fromEntries(APP_KINDS.map((k) => [k, tagFor(k, platform, digest)])) as Record<
    AppKind,
    string
  >;
  if (APP_KINDS.every((k) => has(podman, refs[k]))) return refs;

  const context = mkdtempSync(join(tmpdir(), 'secret-agent-env-app-'));
  try {
    for (const f of SOURCES) cpSync(join(CONTEXT, f), join(context, f));
    glibcDevDebs(podman, base.ref, platform, join(context, 'debs'));
    for (const kind of APP_KINDS)
      podman.run(
        [
          'build',
          '--pull=never',
          '--network',
          'none',
          '--platform',
          platform,
          '--build-arg',
          `NATIVE_BUILD_IMAGE=${base.ref}`,
          '--target',
          kind,
          '--tag',
          refs[kind],
          '--file',
          join(context, 'Containerfile'),
          context,
        ],
        { timeoutMs: 15 * 60_000 },
      );
  } finally {
    rmSync(context, { recursive: true, force: true });
  }
  return refs;
}

let built: Record<AppKind, Record<Platform, string>> | undefined;

/** Every app image, kind by platform (podman refs), built where missing. */
export function envAppImages(): Record<AppKind, Record<Platform, string>> {
  if (built) return built;
  const podman = requirePodman();
  const byPlatform = PLATFORMS.map((p) => [p, ensurePlatform(podman, p)] as const);
  built = Object.fromEntries(
    APP_KINDS.map((k) => [k, Object.fromEntries(byPlatform.map(([p, refs]) => [p, refs[k]]))]),
  ) as Record<AppKind, Record<Platform, string>>;
  return built;
}
