/**
 * Local stand-ins for the Dockerfiles' public bases, for machines that cannot pull them (no
 * registry reachable). Assembled from Debian packages and the Node binary this project pins (the
 * `node` devDependency), then imported into the engine:
 *  - runtime, like gcr.io/distroless/nodejs24-debian12:nonroot: glibc, libstdc++, CA certificates,
 *    tzdata, netbase, Node at /nodejs/bin/node, user nonroot (65532); no shell, no package manager.
 *  - build, like docker.io/library/node:24-bookworm-slim: a minimal Debian (debootstrap) with Node
 *    and npm under /usr/local.
 * Each carries a recipe label (this file and the Node version), so a changed recipe rebuilds it.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  chownSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { MissingToolError, type ContainerEngine } from './container-engine.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const NODE = join(ROOT, 'node_modules/node/bin/node');
export const RECIPE_LABEL = 'io.secret-agent.base.recipe';
const NONROOT = 65532;
const RUNTIME_PACKAGES = ['libc6', 'libstdc++6', 'libgcc-s1', 'ca-certificates', 'tzdata', 'netbase'];
const SUITE = 'bookworm';

export interface OfflineBase {
  readonly ref: string;
  /** Builds it (a minute at most) unless an image with the same recipe is already there. */
  ensure(engine: ContainerEngine): void;
}

function run(command: string, args: readonly string[], options: { cwd?: string; install?: string } = {}) {
  const r = spawnSync(command, args, {
    cwd: options.cwd,
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
  });
  if (r.error && (r.error as NodeJS.ErrnoException).code === 'ENOENT')
    throw new MissingToolError(
      `${command} is not installed`,
      options.install ?? `apt-get install -y ${command}`,
    );
  if (r.status !== 0)
    throw new Error(`${command} ${args.join(' ')} failed (${r.status}): ${r.stderr.slice(-2000)}`);
  return r.stdout;
}

/** The pinned Node: the binary the `node` devDependency installed. */
export function pinnedNode(): { path: string; version: string } {
  let version: string;
  try {
    version = run(NODE, ['--version']).trim().replace(/^v/, '');
  } catch {
    throw new Error(`${NODE} does not run. Fix: npm ci (the \`node\` devDependency brings Node 24).`);
  }
  if (!version.startsWith('24.')) throw new Error(`the images need Node 24; ${NODE} is ${version}`);
  return { path: NODE, version };
}

function recipe(kind: string, nodeVersion: string): string {
  const source = readFileSync(fileURLToPath(import.meta.url));
  return createHash('sha256').update(kind).update(nodeVersion).update(source).digest('hex').slice(0, 16);
}

function needsRoot(what: string) {
  if (process.getuid?.() !== 0)
    throw new Error(
      `assembling the ${what} base offline needs root (package files keep their owners). Fix: run as root, or pass a base you have as BUILD_IMAGE / RUNTIME_IMAGE.`,
    );
}

function importRootfs(engine: ContainerEngine, rootfs: string, ref: string, changes: readonly string[]) {
  const tarball = `${rootfs}.tar`;
  run('tar', ['--numeric-owner', '-C', rootfs, '-cf', tarball, '.']);
  engine.run(['import', ...changes.flatMap((c) => ['--change', c]), tarball, ref]);
}

function present(engine: ContainerEngine, ref: string, want: string): boolean {
  const r = engine.run(['image', 'inspect', '--format', `{{index .Config.Labels "${RECIPE_LABEL}"}}`, ref], {
    check: false,
  });
  return r.status === 0 && r.stdout.trim() === want;
}

/** apt-get download, refreshing the package lists once if they are missing or stale. */
function downloadDebs(packages: readonly string[], dir: string) {
  const download = () =>
    spawnSync('apt-get', ['-o', 'APT::Sandbox::User=root', 'download', ...packages], {
      cwd: dir,
      encoding: 'utf8',
    });
  let r = download();
  if (r.error) throw new MissingToolError('apt-get is not available', 'a Debian machine (apt-get download)');
  if (r.status !== 0) {
    run('apt-get', ['-o', 'DPkg::Lock::Timeout=180', 'update', '-q']);
    r = download();
  }
  if (r.status !== 0) throw new Error(`apt-get download ${packages.join(' ')} failed: ${r.stderr}`);
}

export function runtimeBase(): OfflineBase {
  const node = pinnedNode();
  const ref = `localhost/secret-agent/base-runtime:node${node.version}`;
  const want = recipe('runtime', node.version);
  return {
    ref,
    ensure(engine) {
      if (present(engine, ref, want)) return;
      needsRoot('runtime');
      const work = mkdtempSync(join(tmpdir(), 'secret-agent-runtime-base-'));
      try {
        const debs = join(work, 'debs');
        const root = join(work, 'rootfs');
        mkdirSync(debs);
        mkdirSync(root);
        downloadDebs([...RUNTIME_PACKAGES, 'base-files'], debs);
        const statusDir = join(root, 'var/lib/dpkg/status.d');
        mkdirSync(statusDir, { recursive: true });
        for (const deb of readdirSync(debs).filter((f) => f.endsWith('.deb'))) {
          const file = join(debs, deb);
          const control = run('dpkg-deb', ['-f', file]);
          const name = /^Package: (\S+)$/m.exec(control)![1]!;
          // Like distroless: one status file per package, so scanners can list what the image holds.
          writeFileSync(join(statusDir, name), control);
          if (name === 'base-files')
            // Only its os-release: the rest is a full system's /etc.
            run('sh', [
              '-c',
              `dpkg-deb --fsys-tarfile "$1" | tar -x -C "$2" ./usr/lib/os-release`,
              'sh',
              file,
              root,
            ]);
          else run('dpkg-deb', ['-x', file, root]);
        }
        // Documentation is not run; copyright files stay (licence notices).
        for (const dir of ['man', 'info', 'lintian', 'gdb', 'gcc'])
          rmSync(join(root, 'usr/share', dir), { recursive: true, force: true });
        for (const pkg of readdirSync(join(root, 'usr/share/doc'), { withFileTypes: true }))
          if (pkg.isDirectory())
            for (const f of readdirSync(join(pkg.parentPath, pkg.name)))
              if (f !== 'copyright') rmSync(join(pkg.parentPath, pkg.name, f), { recursive: true });
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
        cpSync(node.path, join(root, 'nodejs/bin/node'));
        run('ldconfig', ['-r', root]);
        importRootfs(engine, root, ref, [
          'USER 65532:65532',
          'WORKDIR /home/nonroot',
          'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
          'ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt',
          'ENTRYPOINT ["/nodejs/bin/node"]',
          `LABEL ${RECIPE_LABEL}=${want}`,
          `LABEL org.opencontainers.image.description="Offline stand-in for gcr.io/distroless/nodejs24-debian12:nonroot (Node ${node.version}), made by images/offline-bases.ts"`,
        ]);
      } finally {
        rmSync(work, { recursive: true, force: true });
      }
    },
  };
}

export function buildBase(): OfflineBase {
  const node = pinnedNode();
  const ref = `localhost/secret-agent/base-build:node${node.version}`;
  const want = recipe('build', node.version);
  return {
    ref,
    ensure(engine) {
      if (present(engine, ref, want)) return;
      needsRoot('build');
      const work = mkdtempSync(join(tmpdir(), 'secret-agent-build-base-'));
      try {
        const root = join(work, 'rootfs');
        run(
          'debootstrap',
          ['--variant=minbase', SUITE, root, process.env.DEBIAN_MIRROR ?? 'http://deb.debian.org/debian'],
          {
            install: 'apt-get install -y debootstrap',
          },
        );
        rmSync(join(root, 'var/cache/apt/archives'), { recursive: true, force: true });
        rmSync(join(root, 'var/lib/apt/lists'), { recursive: true, force: true });
        mkdirSync(join(root, 'usr/local/lib/node_modules'), { recursive: true });
        cpSync(node.path, join(root, 'usr/local/bin/node'));
        // npm: the one this machine runs (the build stage only needs `npm ci`).
        const globalModules = run('npm', ['root', '-g']).trim();
        cpSync(join(globalModules, 'npm'), join(root, 'usr/local/lib/node_modules/npm'), { recursive: true });
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
        importRootfs(engine, root, ref, [
          'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
          ...(trusted ? [`ENV NODE_EXTRA_CA_CERTS=${hostCa}`] : []),
          'CMD ["node"]',
          `LABEL ${RECIPE_LABEL}=${want}`,
          `LABEL org.opencontainers.image.description="Offline stand-in for docker.io/library/node:24-bookworm-slim (Node ${node.version}), made by images/offline-bases.ts"`,
        ]);
      } finally {
        rmSync(work, { recursive: true, force: true });
      }
    },
  };
}
