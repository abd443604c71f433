/**
 * The container engine that builds and runs the images: podman where it is installed (what these
 * machines run, with the settings in images/podman/containers.conf), else a docker whose daemon
 * answers. Every call goes through `run`, so the engine's configuration lives in one place.
 */
import { spawn, spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const PODMAN_INSTALL =
  'apt-get update && apt-get install -y podman runc (Debian; as root). .ci/run installs them on a fresh machine.';

/** Thrown when no engine can run, with the command that installs one. */
export class MissingToolError extends Error {
  constructor(what: string, install: string) {
    super(`${what}. Install: ${install}`);
    this.name = 'MissingToolError';
  }
}

/**
 * Runs a build tool (apt-get, dpkg-deb, gzip, tar, npm, git, …) to completion and returns its stdout:
 * a tool that is not there is a MissingToolError with `install` (default: its Debian package of the
 * same name); a failure throws with the end of its stderr.
 */
export function runTool(
  command: string,
  args: readonly string[],
  options: { cwd?: string; install?: string; timeoutMs?: number } = {},
): string {
  const r = spawnSync(command, args, {
    cwd: options.cwd,
    ...(options.timeoutMs === undefined
      ? {}
      : { timeout: options.timeoutMs, killSignal: 'SIGKILL' as const }),
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
    throw new Error(
      `${command} ${args.join(' ')} failed (${r.signal ? `killed by ${r.signal} after ${options.timeoutMs} ms` : r.status}): ${r.stderr.slice(-2000)}`,
    );
  return r.stdout;
}

export interface EngineResult {
  readonly status: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

export interface ContainerEngine {
  readonly name: 'podman' | 'docker';
  /** Runs the engine to completion; throws with its stderr when it fails, unless `check` is false. */
  run(args: readonly string[], options?: RunOptions): EngineResult;
  /** Runs the engine without blocking the event loop. */
  runAsync(args: readonly string[], options?: RunOptions): Promise<EngineResult>;
  /** The env every engine process gets (CONTAINERS_CONF for podman). */
  readonly env: NodeJS.ProcessEnv;
}

export interface RunOptions {
  readonly check?: boolean;
  readonly timeoutMs?: number;
}

const PODMAN_CONF = fileURLToPath(new URL('./podman/containers.conf', import.meta.url));

function engine(name: 'podman' | 'docker', env: NodeJS.ProcessEnv): ContainerEngine {
  const fail = (args: readonly string[], r: EngineResult) =>
    new Error(`${name} ${args.join(' ')} failed (${r.status}): ${r.stderr.trim().slice(-4000)}`);
  return {
    name,
    env,
    run(args, options = {}) {
      const r: SpawnSyncReturns<string> = spawnSync(name, args, {
        env,
        encoding: 'utf8',
        maxBuffer: 256 * 1024 * 1024,
        stdio: ['ignore', 'pipe', 'pipe'],
        ...(options.timeoutMs === undefined ? {} : { timeout: options.timeoutMs }),
      });
      const result = { status: r.status, stdout: r.stdout ?? '', stderr: r.stderr ?? '' };
      if (options.check !== false && r.status !== 0) throw fail(args, result);
      return result;
    },
    runAsync(args, options = {}) {
      return new Promise((resolve, reject) => {
        const child = spawn(name, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
        let stdout = '';
        let stderr = '';
        child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
        child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
        const timer =
          options.timeoutMs === undefined
            ? undefined
            : setTimeout(() => child.kill('SIGKILL'), options.timeoutMs);
        child.on('error', reject);
        child.on('close', (status) => {
          clearTimeout(timer);
          const result = { status, stdout, stderr };
          if (options.check !== false && status !== 0) reject(fail(args, result));
          else resolve(result);
        });
      });
    },
  };
}

const answers = (command: string, args: string[], env: NodeJS.ProcessEnv = process.env) =>
  spawnSync(command, args, { env, stdio: 'ignore', timeout: 30_000 }).status === 0;

/** podman, configured for these machines unless CONTAINERS_CONF says otherwise. */
export function findPodman(): ContainerEngine | undefined {
  const env = { ...process.env, CONTAINERS_CONF: process.env.CONTAINERS_CONF ?? PODMAN_CONF };
  return answers('podman', ['--version'], env) ? engine('podman', env) : undefined;
}

/**
 * podman on another image store (a storage.conf): the same configuration otherwise, e.g. to build
 * from scratch beside the images the tests run.
 */
export function podmanWithStorage(podman: ContainerEngine, storageConf: string): ContainerEngine {
  return engine('podman', { ...podman.env, CONTAINERS_STORAGE_CONF: storageConf });
}

/**
 * podman, or fail loudly: the tests that run images and pods need it (kube play, and runc, which
 * the configuration names).
 */
export function requirePodman(): ContainerEngine {
  const podman = findPodman();
  if (!podman)
    throw new MissingToolError(
      'podman is not installed (the image tests run the images with it)',
      PODMAN_INSTALL,
    );
  if (podman.env.CONTAINERS_CONF === PODMAN_CONF && !answers('runc', ['--version']))
    throw new MissingToolError(
      'runc is not installed (images/podman/containers.conf runs containers with it)',
      PODMAN_INSTALL,
    );
  return podman;
}

/** podman where present, else docker with a daemon that answers; fails loudly with the install line. */
export function findContainerEngine(): ContainerEngine {
  if (findPodman()) return requirePodman();
  if (answers('docker', ['info'])) return engine('docker', process.env);
  throw new MissingToolError(
    'no container engine: podman is not installed and docker has no daemon that answers',
    PODMAN_INSTALL,
  );
}
