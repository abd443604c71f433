/**
 * Runs the built images with podman as a kubelet runs a hardened container: read-only root (and no
 * tmpfs podman would add to it), all capabilities dropped, no new privileges, the image's user unless
 * told otherwise, writable only where a volume is mounted. Every output is scanned for canaries.
 */
import { spawn } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { podmanWithStorage, requirePodman, type ContainerEngine } from '../../images/container-engine.ts';
import { readImagesManifest, type ImagesManifest } from '../../images/manifest.ts';
import type { Platform } from '../../images/platforms.ts';
import { assertNoCanary } from '../support/canary.ts';

let built: { podman: ContainerEngine; manifest: ImagesManifest } | undefined;

/** A podman image store of its own under `dir`, empty. */
export function scratchStore(podman: ContainerEngine, dir: string): ContainerEngine {
  const conf = join(dir, 'storage.conf');
  mkdirSync(join(dir, 'graph'));
  writeFileSync(
    conf,
    `[storage]\ndriver = "overlay"\ngraphroot = "${join(dir, 'graph')}"\nrunroot = "/run/${dir.split('/').at(-1)}"\n`,
  );
  return podmanWithStorage(podman, conf);
}

/**
 * podman and the images `npm run images` built, checked to be the ones podman holds now; fails
 * loudly with what to run otherwise.
 */
export function builtImages(): { podman: ContainerEngine; manifest: ImagesManifest } {
  if (built) return built;
  const podman = requirePodman();
  const manifest = readImagesManifest();
  if (manifest.engine !== 'podman')
    throw new Error(
      `the images were built with ${manifest.engine}; these tests run them with podman. Fix: npm run images`,
    );
  for (const image of Object.values(manifest.images))
    for (const { ref, id: want } of [image, ...image.platforms]) {
      const id = podman.run(['image', 'inspect', '--format', '{{.Id}}', ref], { check: false }).stdout.trim();
      if (id !== want)
        throw new Error(`podman holds ${id || 'no image'} as ${ref}, not ${want}. Fix: npm run images`);
    }
  built = { podman, manifest };
  return built;
}

export interface Mount {
  readonly host: string;
  readonly container: string;
  readonly readOnly?: boolean;
}

export interface ContainerSpec {
  readonly image: string;
  /** The image's platform when it is not this machine's (it then runs under QEMU). */
  readonly platform?: Platform;
  /** The container's env; nothing of this machine's is passed. */
  readonly env?: Readonly<Record<string, string>>;
  /** uid (and gid) to run as; default: the image's USER. */
  readonly user?: number;
  readonly mounts?: readonly Mount[];
  /** `host` to reach moto and fakes on this machine's loopback (and be reached); default `none`. */
  readonly network?: 'host' | 'none';
  /** Replaces the image's entrypoint (e.g. its Node running a probe script). */
  readonly entrypoint?: readonly string[];
  /** Arguments after the image, to its entrypoint (`render --check -f -`). */
  readonly args?: readonly string[];
  /** Written to the container's stdin (podman run --interactive), then closed. */
  readonly stdin?: string;
  /** A memory limit as the kubelet sets one (`256m`), without swap: past it the kernel kills. */
  readonly memory?: string;
}

let counter = 0;

/** The `podman run` arguments for a container, hardened as described above. */
export function podmanRunArgs(spec: ContainerSpec, name: string): string[] {
  return [
    'run',
    '--rm',
    '--name',
    name,
    '--network',
    spec.network ?? 'none',
    '--read-only',
    '--read-only-tmpfs=false',
    '--cap-drop',
    'ALL',
    '--security-opt',
    'no-new-privileges',
    ...(spec.user === undefined ? [] : ['--user', `${spec.user}:${spec.user}`]),
    ...(spec.memory === undefined ? [] : ['--memory', spec.memory, '--memory-swap', spec.memory]),
    // Said, or podman warns on stderr that the image is not of this machine's platform.
    ...(spec.platform === undefined ? [] : ['--platform', spec.platform]),
    ...(spec.mounts ?? []).flatMap((m) => [
      '--mount',
      `type=bind,src=${m.host},dst=${m.container}${m.readOnly ? ',ro=true' : ''}`,
    ]),
    ...Object.entries(spec.env ?? {}).flatMap(([k, v]) => ['--env', `${k}=${v}`]),
    ...(spec.stdin === undefined ? [] : ['--interactive']),
    // podman takes the new entrypoint's first word as --entrypoint and the rest as arguments.
    ...(spec.entrypoint
      ? ['--entrypoint', JSON.stringify(spec.entrypoint.slice(0, 1)), spec.image, ...spec.entrypoint.slice(1)]
      : [spec.image]),
    ...(spec.args ?? []),
  ];
}

export interface RunningContainer {
  readonly name: string;
  output(): { stdout: string; stderr: string };
  /** pino lines from stdout. */
  logs(): Record<string, unknown>[];
  /** Sends a signal to the container's PID 1 (podman kill), as the kubelet does on stop. */
  kill(signal: NodeJS.Signals): Promise<void>;
  /** The container's exit code once it is gone; output canary-checked. */
  readonly exited: Promise<number | null>;
}

/** `podman`: the built images' engine unless given (a test of images it built itself). */
export function startContainer(
  spec: ContainerSpec,
  podman: ContainerEngine = builtImages().podman,
): RunningContainer {
  const name = `secret-agent-test-${process.pid}-${++counter}`;
  const child = spawn('podman', podmanRunArgs(spec, name), {
    env: podman.env,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  // Without --interactive podman does not read it: closing it at once changes nothing.
  child.stdin.end(spec.stdin ?? '');
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((resolve, reject) =>
    child.on('close', (code) => {
      try {
        assertNoCanary(stdout, `${spec.image} stdout`);
        assertNoCanary(stderr, `${spec.image} stderr`);
        resolve(code);
      } catch (e) {
        reject(e as Error);
      }
    }),
  );
  exited.catch(() => undefined);
  return {
    name,
    output: () => ({ stdout, stderr }),
    logs: () =>
      stdout
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as Record<string, unknown>),
    async kill(signal) {
      if (child.exitCode !== null) return;
      await podman.runAsync(['kill', '--signal', signal, name], { check: false });
    },
    exited,
  };
}

export interface ContainerRun {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
  readonly logs: Record<string, unknown>[];
}

/** Runs a container to its end (an init container), killing it after `timeoutMs`. */
export async function runContainer(spec: ContainerSpec, timeoutMs = 60_000): Promise<ContainerRun> {
  const container = startContainer(spec);
  const timer = setTimeout(() => void container.kill('SIGKILL'), timeoutMs);
  try {
    const code = await container.exited;
    return { code, ...container.output(), logs: container.logs() };
  } finally {
    clearTimeout(timer);
  }
}

/** A fresh directory on tmpfs with the mode kubelet gives an emptyDir (0777), removed on dispose. */
export function emptyDirOnTmpfs(): { path: string; [Symbol.dispose](): void } {
  const path = mkdtempSync('/dev/shm/secret-agent-volume-');
  chmodSync(path, 0o777);
  return { path, [Symbol.dispose]: () => rmSync(path, { recursive: true, force: true }) };
}
