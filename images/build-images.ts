/**
 * `npm run images`: builds the agent and webhook images from their Dockerfiles with podman (else
 * docker), tagged secret-agent/<image>:<version> from package.json, and writes under dist/images/
 * what a release job publishes: one OCI archive (`skopeo copy oci-archive:…`) and one CycloneDX SBOM
 * per image, and images.json (see images/manifest.ts).
 *
 * Bases: BUILD_IMAGE and RUNTIME_IMAGE from the env, else the Dockerfiles' defaults. A default base
 * that is neither here nor pullable is assembled offline (images/offline-bases.ts); a base named in
 * the env must exist or be pullable.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { findContainerEngine, type ContainerEngine } from './container-engine.ts';
import {
  IMAGE_NAMES,
  IMAGES_DIR,
  MANIFEST,
  ROOT,
  type BaseRecord,
  type ImageName,
  type ImageRecord,
  type ImagesManifest,
} from './manifest.ts';
import { buildBase, runtimeBase, type OfflineBase } from './offline-bases.ts';
import { hostPlatform } from './platforms.ts';
import { bundledPackages, imageSbom, LIST_IMAGE_CONTENTS, type ImageContents, type NpmSbom } from './sbom.ts';

const say = (line: string) => process.stderr.write(`images: ${line}\n`);
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  version: string;
  license: string;
};
const DOCKERFILES: Record<ImageName, string> = { agent: 'Dockerfile.agent', webhook: 'Dockerfile.webhook' };
type BaseArg = 'BUILD_IMAGE' | 'RUNTIME_IMAGE';

/** The Dockerfiles' default for a base; both must name the same one. */
function dockerfileDefault(arg: BaseArg): string {
  const defaults = new Set(
    Object.values(DOCKERFILES).map((file) => {
      const m = new RegExp(`^ARG ${arg}=(\\S+)$`, 'm').exec(readFileSync(join(ROOT, file), 'utf8'));
      if (!m) throw new Error(`${file} has no "ARG ${arg}=<default>" line`);
      return m[1]!;
    }),
  );
  if (defaults.size !== 1) throw new Error(`the Dockerfiles disagree on ${arg}: ${[...defaults].join(', ')}`);
  return [...defaults][0]!;
}

function inspect(engine: ContainerEngine, ref: string): { id: string; size: number } | undefined {
  const r = engine.run(['image', 'inspect', '--format', '{{.Id}} {{.Size}}', ref], { check: false });
  if (r.status !== 0) return undefined;
  const [id, size] = r.stdout.trim().split(' ');
  return { id: id!.replace(/^sha256:/, ''), size: Number(size) };
}

function resolveBase(engine: ContainerEngine, arg: BaseArg, offline: () => OfflineBase): BaseRecord {
  const named = process.env[arg];
  const ref = named ?? dockerfileDefault(arg);
  let found = inspect(engine, ref);
  if (!found) {
    const pull = engine.run(['pull', ref], { check: false, timeoutMs: 600_000 });
    found = pull.status === 0 ? inspect(engine, ref) : undefined;
    if (!found) {
      const why = pull.stderr.trim().split('\n').at(-1) ?? '';
      if (named) throw new Error(`${arg}=${ref} is not here and cannot be pulled: ${why}`);
      const base = offline();
      say(`${ref} cannot be pulled (${why.slice(0, 160)}); using ${base.ref}, assembled offline`);
      base.ensure(engine);
      return { ref: base.ref, ...inspect(engine, base.ref)!, assembled: true };
    }
  }
  return { ref, ...found, assembled: false };
}

function gitRevision(): string {
  const head = spawnSync('git', ['rev-parse', 'HEAD'], { cwd: ROOT, encoding: 'utf8' });
  if (head.status !== 0) return 'unknown';
  const dirty = spawnSync('git', ['status', '--porcelain', '--untracked-files=no'], {
    cwd: ROOT,
    encoding: 'utf8',
  });
  return head.stdout.trim() + (dirty.stdout.trim() === '' ? '' : '-dirty');
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
    return JSON.parse(readFileSync(MANIFEST, 'utf8')) as ImagesManifest;
  } catch {
    return undefined;
  }
}

const engine = findContainerEngine();
const revision = gitRevision();
const builder = resolveBase(engine, 'BUILD_IMAGE', buildBase);
const runtime = resolveBase(engine, 'RUNTIME_IMAGE', () => runtimeBase(hostPlatform()));
mkdirSync(IMAGES_DIR, { recursive: true });
const last = previous();
let npmSbom: NpmSbom | undefined;

const images = {} as Record<ImageName, ImageRecord>;
for (const name of IMAGE_NAMES) {
  const tag = `secret-agent/${name}:${pkg.version}`;
  const started = Date.now();
  const build = engine.run(
    [
      'build',
      ...(engine.name === 'podman' ? ['--pull=never'] : []),
      '-f',
      join(ROOT, DOCKERFILES[name]),
      '--build-arg',
      `BUILD_IMAGE=${builder.ref}`,
      '--build-arg',
      `RUNTIME_IMAGE=${runtime.ref}`,
      '--build-arg',
      `VERSION=${pkg.version}`,
      '--build-arg',
      `REVISION=${revision}`,
      // The same again as labels: buildah 1.28 reuses a cached LABEL layer when only a build arg
      // changed (seen: a new commit's image kept the previous revision); --label is in its cache key.
      '--label',
      `org.opencontainers.image.version=${pkg.version}`,
      '--label',
      `org.opencontainers.image.revision=${revision}`,
      '-t',
      tag,
      ROOT,
    ],
    { check: false },
  );
  if (build.status !== 0)
    throw new Error(
      `building ${tag} failed:\n${(build.stdout + build.stderr).split('\n').slice(-40).join('\n')}`,
    );
  const ref = engine.name === 'podman' ? `localhost/${tag}` : tag;
  const built = inspect(engine, ref)!;
  const base = `${name}-${pkg.version}`;
  const archive = join(IMAGES_DIR, `${base}.oci.tar`);
  const sbom = join(IMAGES_DIR, `${base}.cdx.json`);
  const unchanged = last?.images[name]?.id === built.id && existsSync(archive) && existsSync(sbom);
  if (!unchanged) {
    rmSync(archive, { force: true });
    // podman writes an OCI archive; docker ≥ 25 writes an OCI image layout in its tar too.
    engine.run(
      engine.name === 'podman'
        ? ['save', '--format', 'oci-archive', '-o', archive, ref]
        : ['save', '-o', archive, ref],
    );
    npmSbom ??= readNpmSbom();
    const contents = JSON.parse(
      engine.run([
        'run',
        '--rm',
        '--network',
        'none',
        '--read-only',
        '--entrypoint',
        '/nodejs/bin/node',
        ref,
        '-e',
        LIST_IMAGE_CONTENTS,
      ]).stdout,
    ) as ImageContents;
    const document = imageSbom({
      image: `secret-agent/${name}`,
      version: pkg.version,
      imageId: built.id,
      license: pkg.license,
      bundled: bundledPackages(join(ROOT, `dist/${name}.meta.json`), ROOT),
      npmSbom,
      contents,
    });
    writeFileSync(sbom, JSON.stringify(document, null, 2) + '\n');
  }
  images[name] = {
    ref,
    ...built,
    dockerfile: DOCKERFILES[name],
    archive: relative(ROOT, archive),
    sbom: relative(ROOT, sbom),
  };
  const mib = (bytes: number) => (bytes / 1048576).toFixed(1);
  say(
    `${ref} ${built.id.slice(0, 12)}: ${mib(built.size)} MiB, base ${mib(runtime.size)} MiB + ${mib(built.size - runtime.size)} MiB (${((Date.now() - started) / 1000).toFixed(1)} s${unchanged ? ', unchanged' : ''})`,
  );
}

const manifest: ImagesManifest = {
  version: pkg.version,
  revision,
  engine: engine.name,
  builder,
  runtime,
  images,
};
writeFileSync(MANIFEST, JSON.stringify(manifest, null, 2) + '\n');
