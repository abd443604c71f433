/**
 * Runs the env-var tests' app images (env-app-images.ts) with podman, hardened as test/image/podman.ts
 * runs containers (its podmanRunArgs: read-only root, no capabilities, no new privileges, no network),
 * and reads the app's JSON lines (env-app/report.c). Every output is scanned for canaries. Also reads
 * files out of an image without mounting it (`podman image mount` needs root's storage as it is).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ContainerEngine } from '../../images/container-engine.ts';
import { startContainer, type ContainerSpec } from './podman.ts';

/** A line report.c prints. */
export interface AppEvent {
  readonly event: string;
  readonly [field: string]: unknown;
}

export interface StartedEvent extends AppEvent {
  readonly event: 'started';
  readonly pid: number;
  readonly uid: number;
  readonly argv: readonly string[];
  readonly lengths: Readonly<Record<string, number | null>>;
  readonly env_names: readonly string[];
}

export interface RunningApp {
  readonly name: string;
  output(): { stdout: string; stderr: string };
  events(): AppEvent[];
  /** The first line of `event`, once printed (fails after `timeoutMs` or if the app ends first). */
  waitForEvent(event: string, timeoutMs?: number): Promise<AppEvent>;
  /** A signal to the container's PID 1 (podman kill), as the kubelet sends on stop. */
  kill(signal: NodeJS.Signals): Promise<void>;
  /** The exit code once the container is gone (podman run's, which is the app's); output canary-checked. */
  readonly exited: Promise<number | null>;
}

/** Arguments a shell would mangle: spaces, quotes, a backslash, control and non-ASCII bytes, an empty one. */
export const AWKWARD_ARGS = [
  'plain',
  'with space',
  'quote"and\\backslash',
  'tab\tnew\nline',
  'ünïcödé ✓',
  '',
  '--flag=value',
  '\x01\x1b\x7f',
];

const parse = (stdout: string): AppEvent[] =>
  stdout
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as AppEvent);

/** podman.ts's container, with report.c's lines read as events. */
export function startApp(podman: ContainerEngine, spec: ContainerSpec): RunningApp {
  const container = startContainer(spec, podman);
  let ended = false;
  container.exited.then(
    () => (ended = true),
    () => (ended = true),
  );
  const events = () => parse(container.output().stdout);
  return {
    name: container.name,
    output: () => container.output(),
    events,
    async waitForEvent(event, timeoutMs = 30_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const found = events().find((e) => e.event === event);
        if (found) return found;
        const { stdout, stderr } = container.output();
        if (ended) throw new Error(`${spec.image} ended before it printed "${event}": ${stdout}${stderr}`);
        if (Date.now() > deadline)
          throw new Error(`${spec.image} printed no "${event}" within ${timeoutMs} ms: ${stdout}${stderr}`);
        await sleep(20);
      }
    },
    kill: (signal) => container.kill(signal),
    exited: container.exited,
  };
}

export interface AppRun {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
  readonly events: AppEvent[];
}

/**
 * What a kubelet's stop does to the app: TERM to the container's PID 1, once report.c's handlers are in
 * place. The app must report the signal and exit 128 + 15; the container is killed in any case.
 */
export async function assertTermReachesApp(app: RunningApp): Promise<void> {
  try {
    await app.waitForEvent('waiting');
    await app.kill('SIGTERM');
    assert.equal(await app.exited, 143, app.output().stderr);
    assert.deepEqual(app.events().at(-1), { event: 'signal', signal: 15 });
  } finally {
    await app.kill('SIGKILL');
  }
}

/** Runs an app container to its end, killing it after `timeoutMs`. */
export async function runApp(
  podman: ContainerEngine,
  spec: ContainerSpec,
  timeoutMs = 60_000,
): Promise<AppRun> {
  const app = startApp(podman, spec);
  const timer = setTimeout(() => void app.kill('SIGKILL'), timeoutMs);
  try {
    const code = await app.exited;
    return { code, ...app.output(), events: app.events() };
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The bytes an argv string of report.c's line stands for: it escapes every byte outside printable
 * ASCII as \u00XX, so each character of the parsed string is one byte.
 */
export const argBytes = (reported: string): Buffer => Buffer.from(reported, 'latin1');

/** A file of an image, copied out of a container created (not started) from it. */
export function fileFromImage(podman: ContainerEngine, image: string, path: string): Buffer {
  const container = podman.run(['create', image]).stdout.trim();
  const dir = mkdtempSync(join(tmpdir(), 'secret-agent-env-app-file-'));
  try {
    podman.run(['cp', `${container}:${path}`, join(dir, 'file')]);
    return readFileSync(join(dir, 'file'));
  } finally {
    podman.run(['rm', container], { check: false });
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Every path in an image's filesystem, as `podman export` of a container from it lists them. */
export function imagePaths(podman: ContainerEngine, image: string): string[] {
  const container = podman.run(['create', image]).stdout.trim();
  const dir = mkdtempSync(join(tmpdir(), 'secret-agent-env-app-export-'));
  try {
    const tarball = join(dir, 'fs.tar');
    podman.run(['export', '--output', tarball, container]);
    const list = spawnSync('tar', ['-tf', tarball], { encoding: 'utf8' });
    if (list.status !== 0) throw new Error(`tar -tf failed: ${list.stderr ?? list.error?.message}`);
    return list.stdout.split('\n').filter((p) => p !== '');
  } finally {
    podman.run(['rm', container], { check: false });
    rmSync(dir, { recursive: true, force: true });
  }
}
