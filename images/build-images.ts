/**
 * `npm run images`: builds the agent and webhook images from their Dockerfiles with podman (else
 * docker) for every platform (linux/amd64 and linux/arm64; IMAGE_PLATFORMS=linux/amd64 builds one,
 * for a quick local loop), and writes under dist/images/ what a release job publishes, per image: one
 * OCI archive holding an image index over every platform (images/index-archive.ts), a CycloneDX SBOM
 * per platform, an in-toto provenance statement (images/provenance.ts); and images.json
 * (images/manifest.ts).
 *
 * Another platform's image is built under QEMU (binfmt_misc): its build steps that run code run on
 * its own Node. The build is reproducible: the same commit gives the same digests, on any machine with
 * the same engine version and the same bases (docs/reproducible-builds.md).
 *
 * Bases: BUILD_IMAGE, RUNTIME_IMAGE and NATIVE_BUILD_IMAGE (the agent's resident, compiled per
 * platform) from the env, else the Dockerfiles' defaults. A default base
 * that is neither here nor pullable is assembled offline (images/offline-bases.ts); a base named in
 * the env must exist or be pullable, for every platform built.
 *
 * Options, for test/image/reproducible.test.ts: --out DIR writes there instead of dist/images;
 * --cache DIR keeps compressed layers there instead of node_modules/.cache/secret-agent-images.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { findContainerEngine, type ContainerEngine } from './container-engine.ts';
import { archiveLayersProblem, pruneLayerCache, writeIndexArchive } from './index-archive.ts';
import {
  IMAGE_NAMES,
  IMAGES_DIR,
  ROOT,
  type BaseRecord,
  type ImageName,
  type ImageRecord,
  type ImagesManifest,
  type PlatformImageRecord,
} from './manifest.ts';
import {
  buildBase,
  nativeBuildBase,
  readBaseInputs,
  runtimeBase,
  type OfflineBase,
} from './offline-bases.ts';
import {
  hostPlatform,
  PLATFORM_NAMES,
  requestedPlatforms,
  requireEmulation,
  type Platform,
} from './platforms.ts';
import { provenanceStatement } from './provenance.ts';
import { bundledPackages, imageSbom, LIST_IMAGE_CONTENTS, type ImageContents, type NpmSbom } from './sbom.ts';
import { sourceRevision } from './source-revision.ts';
import { buildContextState, stampedBase } from './stamped-base.ts';

const say = (line: string) => process.stderr.write(`images: ${line}\n`);
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  version: string;
  license: string;
};
const DOCKERFILES: Record<ImageName, string> = { agent: 'Dockerfile.agent', webhook: 'Dockerfile.webhook' };
type BaseArg = 'BUILD_IMAGE' | 'RUNTIME_IMAGE' | 'NATIVE_BUILD_IMAGE';

const { values: options } = parseArgs({
  options: { out: { type: 'string' }, cache: { type: 'string' } },
  strict: true,
});
const outDir = options.out ? resolve(options.out) : IMAGES_DIR;
const cacheDir = options.cache
  ? resolve(options.cache)
  : join(ROOT, 'node_modules/.cache/secret-agent-images');
const manifestPath = join(outDir, 'images.json');

/** The Dockerfiles' default for a base; every one that takes it must name the same one. */
function dockerfileDefault(arg: BaseArg): string {
  const defaults = new Set(
    Object.values(DOCKERFILES).flatMap((file) => {
      const m = new RegExp(`^ARG ${arg}=(\\S+)$`, 'm').exec(readFileSync(join(ROOT, file), 'utf8'));
      return m ? [m[1]!] : [];
    }),
  );
  if (defaults.size !== 1)
    throw new Error(
      `the Dockerfiles ${defaults.size === 0 ? 'have no "ARG ' + arg + '=<default>" line' : 'disagree on ' + arg + ': ' + [...defaults].join(', ')}`,
    );
  return [...defaults][0]!;
}

interface Inspected {
  readonly id: string;
  readonly size: number;
  readonly digest: string;
  readonly arch: string;
}

function inspect(engine: ContainerEngine, ref: string): Inspected | undefined {
  const r = engine.run(
    ['image', 'inspect', '--format', '{{.Id}} {{.Size}} {{.Digest}} {{.Architecture}}', ref],
    {
      check: false,
    },
  );
  if (r.status !== 0) return undefined;
  const [id, size, digest, arch] = r.stdout.trim().split(' ');
  return { id: id!.replace(/^sha256:/, ''), size: Number(size), digest: digest!, arch: arch! };
}

/** A base and what to pass as its build arg (a pulled base: its image ID, as one name holds one platform). */
interface ResolvedBase {
  readonly record: BaseRecord;
  readonly buildArg: string;
}

function resolveBase(
  engine: ContainerEngine,
  arg: BaseArg,
  platform: Platform,
  offline: () => OfflineBase,
): ResolvedBase {
  const named = process.env[arg];
  const ref = named ?? dockerfileDefault(arg);
  const { arch } = PLATFORM_NAMES[platform];
  const local = inspect(engine, ref);
  const record = (found: Inspected, assembled: boolean): BaseRecord => ({
    ref,
    id: found.id,
    digest: found.digest,
    size: found.size,
    platform,
    assembled,
  });
  if (local?.arch === arch) return { record: record(local, false), buildArg: ref };
  const pull = engine.run(['pull', '-q', '--platform', platform, ref], { check: false, timeoutMs: 600_000 });
  const pulled = pull.status === 0 ? inspect(engine, pull.stdout.trim().split('\n').at(-1)!) : undefined;
  if (pulled?.arch === arch) return { record: record(pulled, false), buildArg: pulled.id };
  const why =
    pull.status === 0 ? `it has no ${platform} image` : (pull.stderr.trim().split('\n').at(-1) ?? '');
  if (named) throw new Error(`${arg}=${ref} is not here for ${platform} and cannot be pulled: ${why}`);
  const base = offline();
  base.ensure(engine);
  const found = inspect(engine, base.ref)!;
  say(`${ref} (${platform}) cannot be pulled (${why.slice(0, 120)}); using ${base.ref}, assembled offline`);
  const inputs = readBaseInputs(engine, base.ref);
  return {
    record: { ...record(found, true), ref: base.ref, ...(inputs ? { inputs } : {}) },
    buildArg: base.ref,
  };
}

/** npm's own SBOM of this project; npm refuses one for a node_modules that does not match the lockfile. */
function readNpmSbom(): NpmSbom {
  const r = spawnSync('npm', ['sbom', '--sbom-format', 'cyclonedx'], {
    cwd: ROOT,
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  });
  if (r.status !== 0)
    throw new Error(
      `npm sbom failed (${r.status}), so the images' SBOMs cannot be written. Fix: npm ci.\n${r.stderr
        .split('\n')
        .filter((l) => l.startsWith('npm error'))
        .slice(0, 8)
        .join('\n')}`,
    );
  return JSON.parse(r.stdout) as NpmSbom;
}

function previous(): ImagesManifest | undefined {
  try {
    const last = JSON.parse(readFileSync(manifestPath, 'utf8')) as ImagesManifest;
    return Array.isArray(last.platforms) ? last : undefined;
  } catch {
    return undefined;
  }
}

function toolVersion(command: string, args: string[]): string {
  return spawnSync(command, args, { encoding: 'utf8' }).stdout?.split('\n')[0]?.trim() ?? 'unknown';
}

const platforms = requestedPlatforms();
for (const platform of platforms) requireEmulation(platform);
const host = hostPlatform();
const primary = platforms.includes(host) ? host : platforms[0]!;
const engine = findContainerEngine();
const engineVersion = `${engine.name} ${engine.run(['version', '--format', engine.name === 'podman' ? '{{.Client.Version}}' : '{{.Server.Version}}']).stdout.trim()}`;
const source = sourceRevision(ROOT, say);
const context = buildContextState(ROOT);
const builder = resolveBase(engine, 'BUILD_IMAGE', host, buildBase);
const runtimes = new Map(
  platforms.map((p) => [p, resolveBase(engine, 'RUNTIME_IMAGE', p, () => runtimeBase(p))] as const),
);
// The agent's resident is compiled on the target platform (Dockerfile.agent's native stage).
const natives = new Map(
  platforms.map((p) => [p, resolveBase(engine, 'NATIVE_BUILD_IMAGE', p, () => nativeBuildBase(p))] as const),
);
mkdirSync(outDir, { recursive: true });
const last = previous();
let npmSbom: NpmSbom | undefined;
const mib = (bytes: number) => (bytes / 1048576).toFixed(1);

const images = {} as Record<ImageName, ImageRecord>;
const written = new Set<string>([manifestPath]);
/** Compressed layers the archives hold; undefined once an archive was kept as it was (its are unknown). */
let cachedLayers: Set<string> | undefined = new Set();
for (const name of IMAGE_NAMES) {
  const tag = `secret-agent/${name}:${pkg.version}`;
  const local = (t: string) => (engine.name === 'podman' ? `localhost/${t}` : t);
  const built = platforms.map((platform) => {
    const started = Date.now();
    const runtime = runtimes.get(platform)!;
    const from =
      engine.name === 'podman'
        ? stampedBase(engine, runtime.record.id, platform, source.sourceDateEpoch, context)
        : runtime.buildArg;
    const platformTag = `${tag}-${PLATFORM_NAMES[platform].arch}`;
    const build = engine.run(
      [
        'build',
        '--platform',
        platform,
        // podman: every file and the config carry the commit's time; buildah 1.28 sets no
        // BUILDPLATFORM itself. docker (BuildKit) takes the time from the SOURCE_DATE_EPOCH arg.
        ...(engine.name === 'podman'
          ? [
              '--pull=never',
              '--timestamp',
              String(source.sourceDateEpoch),
              '--build-arg',
              `BUILDPLATFORM=${host}`,
            ]
          : ['--build-arg', `SOURCE_DATE_EPOCH=${source.sourceDateEpoch}`]),
        '-f',
        join(ROOT, DOCKERFILES[name]),
        '--build-arg',
        `BUILD_IMAGE=${builder.buildArg}`,
        '--build-arg',
        `RUNTIME_IMAGE=${from}`,
        ...(name === 'agent' ? ['--build-arg', `NATIVE_BUILD_IMAGE=${natives.get(platform)!.buildArg}`] : []),
        '--build-arg',
        `VERSION=${pkg.version}`,
        '--build-arg',
        `REVISION=${source.revision}`,
        // The same again as labels: buildah 1.28 reuses a cached LABEL layer when only a build arg
        // changed (seen: a new commit's image kept the previous revision); --label is in its cache key.
        '--label',
        `org.opencontainers.image.version=${pkg.version}`,
        '--label',
        `org.opencontainers.image.revision=${source.revision}`,
        '-t',
        platformTag,
        ...(platform === primary ? ['-t', tag] : []),
        ROOT,
      ],
      { check: false },
    );
    if (build.status !== 0)
      throw new Error(
        `building ${platformTag} failed:\n${(build.stdout + build.stderr).split('\n').slice(-40).join('\n')}`,
      );
    const ref = local(platformTag);
    const found = inspect(engine, ref)!;
    const base = runtime.record.size;
    say(
      `${ref} ${found.id.slice(0, 12)}: ${mib(found.size)} MiB, base ${mib(base)} MiB + ${mib(found.size - base)} MiB (${((Date.now() - started) / 1000).toFixed(1)} s)`,
    );
    return { platform, ref, id: found.id, size: found.size };
  });

  const base = `${name}-${pkg.version}`;
  const archive = join(outDir, `${base}.oci.tar`);
  const provenance = join(outDir, `${base}.provenance.json`);
  const sbomOf = (platform: Platform) => join(outDir, `${base}-${PLATFORM_NAMES[platform].arch}.cdx.json`);
  for (const file of [archive, provenance, ...platforms.map(sbomOf)]) written.add(file);
  const before = last?.images[name];
  const sameImages =
    before !== undefined &&
    before.platforms.length === built.length &&
    built.every((b, i) => before.platforms[i]?.platform === b.platform && before.platforms[i]?.id === b.id) &&
    [archive, provenance, ...platforms.map(sbomOf)].every((f) => existsSync(f));
  // The same images, but an archive is kept only if every layer is what it says: an older build's may not be.
  const problem = sameImages ? archiveLayersProblem(archive, name) : undefined;
  if (problem !== undefined) say(`${relative(ROOT, archive)} is written again: ${problem}`);
  const unchanged = sameImages && problem === undefined;
  let index: string;
  let digests: Partial<Record<Platform, string>>;
  if (unchanged) {
    cachedLayers = undefined;
    index = before.index;
    digests = Object.fromEntries(before.platforms.map((p) => [p.platform, p.digest]));
  } else {
    const started = Date.now();
    const result = writeIndexArchive(engine, built, archive, {
      epoch: source.sourceDateEpoch,
      refName: pkg.version,
      cacheDir,
    });
    ({ index, manifests: digests } = result);
    for (const file of result.cached) cachedLayers?.add(file);
    say(`${relative(ROOT, archive)}: index ${index} (${((Date.now() - started) / 1000).toFixed(1)} s)`);
    npmSbom ??= readNpmSbom();
    for (const b of built) {
      const contents = JSON.parse(
        engine.run([
          'run',
          '--rm',
          '--platform',
          b.platform,
          '--network',
          'none',
          '--read-only',
          '--entrypoint',
          '/nodejs/bin/node',
          b.ref,
          '-e',
          LIST_IMAGE_CONTENTS,
        ]).stdout,
      ) as ImageContents;
      const document = imageSbom({
        image: `secret-agent/${name}`,
        version: pkg.version,
        imageId: b.id,
        manifestDigest: digests[b.platform]!,
        platform: b.platform,
        sourceDateEpoch: source.sourceDateEpoch,
        license: pkg.license,
        bundled: bundledPackages(join(ROOT, `dist/${name}.meta.json`), ROOT),
        npmSbom,
        contents,
      });
      writeFileSync(sbomOf(b.platform), JSON.stringify(document, null, 2) + '\n');
    }
    const statement = provenanceStatement({
      root: ROOT,
      name,
      version: pkg.version,
      revision: source.revision,
      ...(source.repository ? { repository: source.repository } : {}),
      sourceDateEpoch: source.sourceDateEpoch,
      dockerfile: DOCKERFILES[name],
      index,
      platforms: built.map((b) => ({ platform: b.platform, digest: digests[b.platform]!, id: b.id })),
      builder: builder.record,
      runtimes: platforms.map((p) => runtimes.get(p)!.record),
      natives: name === 'agent' ? platforms.map((p) => natives.get(p)!.record) : [],
      // As given; the bases they resolved to are among the resolved dependencies.
      buildArgs: {
        BUILD_IMAGE: process.env.BUILD_IMAGE ?? dockerfileDefault('BUILD_IMAGE'),
        RUNTIME_IMAGE: process.env.RUNTIME_IMAGE ?? dockerfileDefault('RUNTIME_IMAGE'),
        ...(name === 'agent'
          ? { NATIVE_BUILD_IMAGE: process.env.NATIVE_BUILD_IMAGE ?? dockerfileDefault('NATIVE_BUILD_IMAGE') }
          : {}),
        VERSION: pkg.version,
        REVISION: source.revision,
        SOURCE_DATE_EPOCH: String(source.sourceDateEpoch),
      },
      engine: engineVersion,
      tools: { gzip: toolVersion('gzip', ['--version']), tar: toolVersion('tar', ['--version']) },
    });
    writeFileSync(provenance, JSON.stringify(statement, null, 2) + '\n');
  }
  const records: PlatformImageRecord[] = built.map((b) => ({
    platform: b.platform,
    ref: b.ref,
    id: b.id,
    digest: digests[b.platform]!,
    size: b.size,
    sbom: relative(ROOT, sbomOf(b.platform)),
  }));
  const main = records.find((r) => r.platform === primary)!;
  images[name] = {
    ref: local(tag),
    id: main.id,
    size: main.size,
    sbom: main.sbom,
    dockerfile: DOCKERFILES[name],
    archive: relative(ROOT, archive),
    index,
    provenance: relative(ROOT, provenance),
    platforms: records,
  };
}

const manifest: ImagesManifest = {
  version: pkg.version,
  revision: source.revision,
  buildContext: context,
  sourceDateEpoch: source.sourceDateEpoch,
  engine: engine.name,
  engineVersion,
  platforms,
  primary,
  builder: builder.record,
  runtime: runtimes.get(primary)!.record,
  runtimes: Object.fromEntries([...runtimes].map(([p, r]) => [p, r.record])),
  natives: Object.fromEntries([...natives].map(([p, r]) => [p, r.record])),
  images,
};
writeFileSync(manifestPath, JSON.stringify(manifest, null, 2) + '\n');
// What an earlier build wrote and this one did not (another version, a platform no longer built, an
// older layout) would be published beside it: removed. So is an earlier release's record
// (images/release.ts): it names that build's digests, and this build is not released yet.
for (const file of readdirSync(outDir))
  if (
    (/\.(oci\.tar|cdx\.json|provenance\.json)$/.test(file) && !written.has(join(outDir, file))) ||
    file === 'release.json'
  )
    rmSync(join(outDir, file));
// The layer cache keeps what the archives just written hold, so it does not grow with every build.
if (cachedLayers) pruneLayerCache(cacheDir, cachedLayers);
