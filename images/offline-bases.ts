/**
 * Local stand-ins for the Dockerfiles' public bases, for machines that cannot pull them (no
 * registry reachable). Assembled from Debian packages and the Node this project pins (the `node`
 * devDependency), then imported into the engine:
 *  - runtime, one per platform, like gcr.io/distroless/nodejs24-debian12:nonroot: glibc, libstdc++,
 *    CA certificates, tzdata, netbase, Node at /nodejs/bin/node, user nonroot (65532); no shell, no
 *    package manager. Each platform's Debian packages and Node come from that platform's own
 *    (images/debian-packages.ts, images/node-binary.ts).
 *  - build, like docker.io/library/node:24-bookworm-slim: a minimal Debian (debootstrap) with Node
 *    and npm under /usr/local, for this machine's platform only (the Dockerfiles' build stage runs on
 *    the build platform; its output, JavaScript, is the same for every target).
 *  - native build, one per platform, like that image with Debian's musl-tools installed: a minimal
 *    Debian of the platform (debootstrap; another platform's under QEMU) with gcc and musl-tools, and
 *    the platform's Node under /usr/local to run images/build-native.ts. Dockerfile.agent compiles the
 *    resident (agent/native/*.c) on it for the target platform.
 * The runtime base is the same bytes from the same inputs: one tar layer with sorted entries,
 * numeric owners and one modification time, a config with no build time in it, the same loader
 * cache. So is its image ID, and an image built on it can be rebuilt to the same digest.
 * Each carries a recipe label (this file, the platform and the Node version), so a changed recipe
 * rebuilds it, and the inputs it was made from (package names, versions, SHA-256; Node's package and
 * integrity) as an annotation of its manifest, for the provenance.
 */
import { createHash } from 'node:crypto';
import {
  chmodSync,
  chownSync,
  cpSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runTool, type ContainerEngine } from './container-engine.ts';
import { DEBIAN_SUITE, debianMirrors, describeDebs, downloadDebianPackages } from './debian-packages.ts';
import { nodeBinary, type NodePackage } from './node-binary.ts';
import { MEDIA_TYPES, OciLayout, pullableLayoutDir, pullLayout, tarDirectory } from './oci-layout.ts';
import { pinnedNode } from './pinned-node.ts';
import { hostPlatform, PLATFORM_NAMES, type Platform } from './platforms.ts';

export const RECIPE_LABEL = 'io.secret-agent.base.recipe';
/** Manifest annotation: the base's BaseInputs, as JSON. Not a label: images built on it would inherit that. */
const INPUTS_ANNOTATION = 'io.secret-agent.base.inputs';
const NONROOT = 65532;
const RUNTIME_PACKAGES = ['libc6', 'libstdc++6', 'libgcc-s1', 'ca-certificates', 'tzdata', 'netbase'];
/**
 * What musl-gcc needs. gcc named too: musl-dev depends on `gcc-<triplet> | gcc`, and debootstrap,
 * which resolves no alternative or virtual package, takes the first, a name only gcc provides, and
 * so installs no compiler (dpkg then refuses musl-dev).
 */
const NATIVE_BUILD_PACKAGES = ['gcc', 'musl-tools'];

export interface DebianInput {
  readonly name: string;
  readonly version: string;
  readonly architecture: string;
  readonly sha256: string;
}

/** What an offline base was made from. */
export interface BaseInputs {
  readonly platform: Platform;
  /** Every .deb used, whether its files are in the base or it only ran (libc-bin's ldconfig). */
  readonly debian: readonly DebianInput[];
  readonly node: NodePackage;
  /** The build base's npm (the one this machine runs). */
  readonly npm?: string;
}

export interface OfflineBase {
  readonly ref: string;
  readonly platform: Platform;
  /** Builds it (a minute at most) unless an image with the same recipe is already there. */
  ensure(engine: ContainerEngine): void;
}

function recipe(kind: string, platform: Platform, nodeVersion: string): string {
  const sources = ['offline-bases.ts', 'debian-packages.ts', 'node-binary.ts', 'oci-layout.ts'].map((f) =>
    readFileSync(fileURLToPath(new URL(f, import.meta.url))),
  );
  const hash = createHash('sha256').update(kind).update(platform).update(nodeVersion);
  for (const source of sources) hash.update(source);
  return hash.digest('hex').slice(0, 16);
}

function needsRoot(what: string) {
  if (process.getuid?.() !== 0)
    throw new Error(
      `assembling the ${what} base offline needs root (package files keep their owners). Fix: run as root, or pass a base you have as BUILD_IMAGE / RUNTIME_IMAGE.`,
    );
}

function present(engine: ContainerEngine, ref: string, want: string): boolean {
  const r = engine.run(['image', 'inspect', '--format', `{{index .Config.Labels "${RECIPE_LABEL}"}}`, ref], {
    check: false,
  });
  return r.status === 0 && r.stdout.trim() === want;
}

/** The inputs recorded in an offline base's manifest; undefined for any other image. */
export function readBaseInputs(engine: ContainerEngine, ref: string): BaseInputs | undefined {
  const r = engine.run(['image', 'inspect', '--format', '{{json .Annotations}}', ref], { check: false });
  if (r.status !== 0) return undefined;
  const json = (JSON.parse(r.stdout.trim() || 'null') as Record<string, string> | null)?.[INPUTS_ANNOTATION];
  return json === undefined ? undefined : (JSON.parse(json) as BaseInputs);
}

interface ImageConfig {
  readonly User?: string;
  readonly WorkingDir?: string;
  readonly Env: readonly string[];
  readonly Entrypoint?: readonly string[];
  readonly Cmd?: readonly string[];
  readonly Labels: Readonly<Record<string, string>>;
}

/**
 * Imports `rootfs` as a one-layer image named `ref`, through an OCI layout written here rather than
 * `podman import` (which stamps the time of the import): created at `epoch`, nothing else variable.
 */
function importRootfs(
  engine: ContainerEngine,
  work: string,
  rootfs: string,
  platform: Platform,
  ref: string,
  epoch: number,
  config: ImageConfig,
  inputs: BaseInputs,
) {
  const layout = new OciLayout(pullableLayoutDir('secret-agent-base'));
  const tarball = join(work, 'rootfs.tar');
  tarDirectory(rootfs, tarball, epoch);
  const layer = layout.moveIn(MEDIA_TYPES.layer, tarball);
  const created = new Date(epoch * 1000).toISOString().replace('.000Z', 'Z');
  const imageConfig = layout.putJson(MEDIA_TYPES.config, {
    created,
    architecture: PLATFORM_NAMES[platform].arch,
    os: 'linux',
    config: config,
    rootfs: { type: 'layers', diff_ids: [layer.digest] },
    history: [
      {
        created,
        created_by: 'images/offline-bases.ts',
        comment: config.Labels['org.opencontainers.image.description'],
      },
    ],
  });
  const manifest = layout.putJson(MEDIA_TYPES.manifest, {
    schemaVersion: 2,
    mediaType: MEDIA_TYPES.manifest,
    config: imageConfig,
    layers: [layer],
    annotations: { [INPUTS_ANNOTATION]: JSON.stringify(inputs) },
  });
  layout.writeIndex([{ ...manifest, annotations: { 'org.opencontainers.image.ref.name': ref } }]);
  pullLayout(engine, layout, ref);
}

/**
 * The newest modification time of a file under `dir` but in `except`, in seconds: the newest file a
 * package brought (files keep their packaged times; directories are touched by every extraction).
 */
function newestFileMtime(dir: string, except: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    const path = join(entry.parentPath, entry.name);
    if (!entry.isFile() || path.startsWith(except)) continue;
    newest = Math.max(newest, lstatSync(path).mtimeMs);
  }
  return Math.floor(newest / 1000);
}

const describeInput = ({ name, version, architecture, sha256 }: DebianInput): DebianInput => ({
  name,
  version,
  architecture,
  sha256,
});

export function runtimeBase(platform: Platform): OfflineBase {
  const node = pinnedNode();
  const { arch } = PLATFORM_NAMES[platform];
  const ref = `localhost/secret-agent/base-runtime:node${node.version}-${arch}`;
  const want = recipe('runtime', platform, node.version);
  return {
    ref,
    platform,
    ensure(engine) {
      if (present(engine, ref, want)) return;
      needsRoot('runtime');
      const work = mkdtempSync(join(tmpdir(), 'secret-agent-runtime-base-'));
      try {
        const root = join(work, 'rootfs');
        const tools = join(work, 'tools');
        mkdirSync(root, { mode: 0o755 });
        mkdirSync(tools);
        // libc-bin only for its ldconfig, run below; its files are not in the base.
        const debs = downloadDebianPackages(arch, [...RUNTIME_PACKAGES, 'base-files', 'libc-bin'], work);
        const statusDir = join(root, 'var/lib/dpkg/status.d');
        mkdirSync(statusDir, { recursive: true });
        const extract = (file: string, into: string, ...members: string[]) =>
          runTool('sh', [
            '-c',
            'f=$1 d=$2; shift 2; dpkg-deb --fsys-tarfile "$f" | tar -x -C "$d" "$@"',
            'sh',
            file,
            into,
            ...members,
          ]);
        for (const deb of debs) {
          if (deb.name === 'libc-bin') {
            extract(deb.file, tools, './sbin/ldconfig');
            continue;
          }
          // Like distroless: one status file per package, so scanners can list what the image holds.
          writeFileSync(join(statusDir, deb.name), runTool('dpkg-deb', ['-f', deb.file]));
          // Only base-files' os-release: the rest is a full system's /etc.
          if (deb.name === 'base-files') extract(deb.file, root, './usr/lib/os-release');
          else runTool('dpkg-deb', ['-x', deb.file, root]);
        }
        // Documentation is not run; copyright files stay (licence notices).
        for (const dir of ['man', 'info', 'lintian', 'gdb', 'gcc'])
          rmSync(join(root, 'usr/share', dir), { recursive: true, force: true });
        for (const pkg of readdirSync(join(root, 'usr/share/doc'), { withFileTypes: true }))
          if (pkg.isDirectory())
            for (const f of readdirSync(join(pkg.parentPath, pkg.name)))
              if (f !== 'copyright') rmSync(join(pkg.parentPath, pkg.name, f), { recursive: true });
        // The base's time: its newest packaged file, not the time it was assembled.
        const epoch = newestFileMtime(root, statusDir);
        symlinkSync('../usr/lib/os-release', join(root, 'etc/os-release'));
        // dpkg-deb -x runs no maintainer scripts: the CA bundle is what update-ca-certificates makes.
        const mozilla = join(root, 'usr/share/ca-certificates/mozilla');
        mkdirSync(join(root, 'etc/ssl/certs'), { recursive: true });
        writeFileSync(
          join(root, 'etc/ssl/certs/ca-certificates.crt'),
          readdirSync(mozilla)
            .sort()
            .map((f) => readFileSync(join(mozilla, f), 'utf8').trimEnd() + '\n')
            .join(''),
        );
        writeFileSync(
          join(root, 'etc/passwd'),
          'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n',
        );
        writeFileSync(
          join(root, 'etc/group'),
          'root:x:0:\nnobody:x:65534:\ntty:x:5:\nstaff:x:50:\nnonroot:x:65532:\n',
        );
        // Without it glibc asks DNS before /etc/hosts, even for localhost.
        writeFileSync(join(root, 'etc/nsswitch.conf'), 'passwd: files\ngroup: files\nhosts: files dns\n');
        mkdirSync(join(root, 'home/nonroot'), { recursive: true });
        chownSync(join(root, 'home/nonroot'), NONROOT, NONROOT);
        chmodSync(join(root, 'home/nonroot'), 0o700);
        mkdirSync(join(root, 'tmp'), { mode: 0o1777 });
        chmodSync(join(root, 'tmp'), 0o1777);
        mkdirSync(join(root, 'nodejs/bin'), { recursive: true });
        const binary = nodeBinary(platform, work);
        cpSync(binary.path, join(root, 'nodejs/bin/node'));
        chmodSync(join(root, 'nodejs/bin/node'), 0o755);
        // The platform's own ldconfig (static; under QEMU for another platform): the host's would
        // neither know the platform's library directories nor write the same cache on every machine.
        runTool(join(tools, 'sbin/ldconfig'), ['-r', root]);
        const description = `Offline stand-in for gcr.io/distroless/nodejs24-debian12:nonroot (Node ${node.version}, ${platform}), made by images/offline-bases.ts`;
        importRootfs(
          engine,
          work,
          root,
          platform,
          ref,
          epoch,
          {
            User: `${NONROOT}:${NONROOT}`,
            WorkingDir: '/home/nonroot',
            Env: [
              'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
              'SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt',
            ],
            Entrypoint: ['/nodejs/bin/node'],
            Labels: { [RECIPE_LABEL]: want, 'org.opencontainers.image.description': description },
          },
          { platform, debian: debs.map(describeInput), node: binary.package },
        );
        // The platform's Node must run there and be the pinned one: the build refuses anything else.
        const version = engine.run(
          ['run', '--rm', '--platform', platform, '--network', 'none', ref, '--version'],
          {
            check: false,
          },
        );
        if (version.stdout.trim() !== `v${node.version}`) {
          engine.run(['rmi', ref], { check: false });
          throw new Error(
            `the ${platform} runtime base's Node printed "${version.stdout.trim()}" (${version.stderr.trim().slice(-300)}), not v${node.version}`,
          );
        }
      } finally {
        rmSync(work, { recursive: true, force: true });
      }
    },
  };
}

/**
 * A minimal Debian of `platform` at `root` with `include` installed (debootstrap; another platform's
 * second stage runs under QEMU, through binfmt_misc); returns every .deb it installed, described.
 */
function debootstrap(root: string, platform: Platform, include: readonly string[]): DebianInput[] {
  runTool(
    'debootstrap',
    [
      '--variant=minbase',
      `--arch=${PLATFORM_NAMES[platform].arch}`,
      ...(include.length > 0 ? [`--include=${include.join(',')}`] : []),
      DEBIAN_SUITE,
      root,
      debianMirrors().main,
    ],
    { install: 'apt-get install -y debootstrap' },
  );
  const debian = describeDebs(join(root, 'var/cache/apt/archives')).map(describeInput);
  rmSync(join(root, 'var/cache/apt/archives'), { recursive: true, force: true });
  rmSync(join(root, 'var/lib/apt/lists'), { recursive: true, force: true });
  return debian;
}

/**
 * The npm package this machine runs: the one that started this process (npm_execpath, under
 * `npm run images`), else the global one. Not `npm root -g` alone: under npm run, PATH puts the `node`
 * devDependency first, and npm takes its global prefix from that Node's directory, where no npm is.
 */
function npmPackageDir(): string {
  const cli = process.env.npm_execpath;
  if (cli !== undefined && basename(cli) === 'npm-cli.js') return dirname(dirname(cli));
  return join(runTool('npm', ['root', '-g']).trim(), 'npm');
}

/** The build stage's base: this machine's platform only (the Dockerfiles run that stage on the build platform). */
export function buildBase(): OfflineBase {
  const node = pinnedNode();
  const platform = hostPlatform();
  const ref = `localhost/secret-agent/base-build:node${node.version}`;
  const want = recipe('build', platform, node.version);
  return {
    ref,
    platform,
    ensure(engine) {
      if (present(engine, ref, want)) return;
      needsRoot('build');
      const work = mkdtempSync(join(tmpdir(), 'secret-agent-build-base-'));
      try {
        const root = join(work, 'rootfs');
        const debian = debootstrap(root, platform, []);
        mkdirSync(join(root, 'usr/local/lib/node_modules'), { recursive: true });
        const binary = nodeBinary(platform, work);
        cpSync(binary.path, join(root, 'usr/local/bin/node'));
        // npm: the one this machine runs (the build stage only needs `npm ci`).
        const npmDir = npmPackageDir();
        const npmVersion = (
          JSON.parse(readFileSync(join(npmDir, 'package.json'), 'utf8')) as { version: string }
        ).version;
        cpSync(npmDir, join(root, 'usr/local/lib/node_modules/npm'), { recursive: true });
        symlinkSync('../lib/node_modules/npm/bin/npm-cli.js', join(root, 'usr/local/bin/npm'));
        symlinkSync('../lib/node_modules/npm/bin/npx-cli.js', join(root, 'usr/local/bin/npx'));
        // This machine's trust store, for `npm ci` in the build stage: here a proxy re-signs the
        // registry's TLS. Only the build stage has it; no shipped image copies it.
        const hostCa = '/usr/local/share/ca-certificates/build-host.crt';
        const trusted = existsSync('/etc/ssl/certs/ca-certificates.crt');
        if (trusted) {
          mkdirSync(join(root, 'usr/local/share/ca-certificates'), { recursive: true });
          cpSync('/etc/ssl/certs/ca-certificates.crt', join(root, hostCa));
        }
        // Not shipped: only the build stage's output (JavaScript, checked byte for byte) reaches an
        // image, so this base need not be the same bytes twice; its time is when it was made.
        importRootfs(
          engine,
          work,
          root,
          platform,
          ref,
          Math.floor(Date.now() / 1000),
          {
            Env: [
              'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
              ...(trusted ? [`NODE_EXTRA_CA_CERTS=${hostCa}`] : []),
            ],
            Cmd: ['node'],
            Labels: {
              [RECIPE_LABEL]: want,
              'org.opencontainers.image.description': `Offline stand-in for docker.io/library/node:24-bookworm-slim (Node ${node.version}), made by images/offline-bases.ts`,
            },
          },
          { platform, debian, node: binary.package, npm: npmVersion },
        );
      } finally {
        rmSync(work, { recursive: true, force: true });
      }
    },
  };
}

/**
 * The native build stage's base, for `platform` (Dockerfile.agent compiles the resident on the target
 * platform): gcc and musl-tools, and that platform's Node to run images/build-native.ts. Not shipped:
 * only the static executable it compiles reaches an image (the same bytes from the same compiler, which
 * the reproducible test checks), so its time is when it was made. No npm, no trust store: that stage
 * fetches nothing.
 */
export function nativeBuildBase(platform: Platform): OfflineBase {
  const node = pinnedNode();
  const { arch } = PLATFORM_NAMES[platform];
  const ref = `localhost/secret-agent/base-native-build:node${node.version}-${arch}`;
  const want = recipe('native-build', platform, node.version);
  return {
    ref,
    platform,
    ensure(engine) {
      if (present(engine, ref, want)) return;
      needsRoot('native build');
      const work = mkdtempSync(join(tmpdir(), 'secret-agent-native-build-base-'));
      try {
        const root = join(work, 'rootfs');
        const debian = debootstrap(root, platform, NATIVE_BUILD_PACKAGES);
        const binary = nodeBinary(platform, work);
        cpSync(binary.path, join(root, 'usr/local/bin/node'));
        chmodSync(join(root, 'usr/local/bin/node'), 0o755);
        importRootfs(
          engine,
          work,
          root,
          platform,
          ref,
          Math.floor(Date.now() / 1000),
          {
            Env: ['PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'],
            Cmd: ['node'],
            Labels: {
              [RECIPE_LABEL]: want,
              'org.opencontainers.image.description': `Offline stand-in for docker.io/library/node:24-bookworm-slim with musl-tools (Node ${node.version}, ${platform}), made by images/offline-bases.ts`,
            },
          },
          { platform, debian, node: binary.package },
        );
        // What the native stage runs must run there: refused otherwise, not found in the middle of a build.
        const check = engine.run(
          [
            'run',
            '--rm',
            '--platform',
            platform,
            '--network',
            'none',
            ref,
            'sh',
            '-c',
            'musl-gcc --version >/dev/null && node --version',
          ],
          { check: false },
        );
        if (check.stdout.trim() !== `v${node.version}`) {
          engine.run(['rmi', ref], { check: false });
          throw new Error(
            `the ${platform} native build base does not run musl-gcc and Node ${node.version}: ${(check.stdout + check.stderr).trim().slice(-300)}`,
          );
        }
      } finally {
        rmSync(work, { recursive: true, force: true });
      }
    },
  };
}
