import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, chownSync } from 'node:fs';
import { join } from 'node:path';
import { assertNoCanary } from './canary.ts';

export const ROOT = new URL('../../', import.meta.url).pathname;
export const AGENT_JS = join(ROOT, 'dist/agent.js');

export interface AgentRun {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
  /** stdout parsed as pino JSON lines. */
  readonly logs: Record<string, unknown>[];
}

/**
 * Runs the built agent the way the image does: `node dist/agent.js`, configured by env only, with
 * nothing inherited from this machine's env but PATH. Every run's output is checked for canaries.
 */
export function runAgent(
  env: Record<string, string>,
  options: { uid?: number; gid?: number; timeoutMs?: number; argv?: readonly string[] } = {},
): Promise<AgentRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, options.argv ?? [AGENT_JS], {
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
      ...(options.uid !== undefined ? { uid: options.uid, gid: options.gid ?? options.uid } : {}),
      timeout: options.timeoutMs ?? 60_000,
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code, signal) => {
      try {
        assertNoCanary(stdout, 'agent stdout (logs)');
        assertNoCanary(stderr, 'agent stderr');
      } catch (e) {
        reject(e as Error);
        return;
      }
      const logs = stdout
        .split('\n')
        .filter((l) => l.trim() !== '')
        .map((l) => JSON.parse(l) as Record<string, unknown>);
      resolve({ code, signal, stdout, stderr, logs });
    });
  });
}

/** A fresh directory on tmpfs (/dev/shm), as the pod's memory-medium emptyDir would be. */
export function memoryDir(owner?: number): { path: string; [Symbol.dispose](): void } {
  const path = mkdtempSync('/dev/shm/secret-agent-test-');
  if (owner !== undefined) chownSync(path, owner, owner);
  return { path, [Symbol.dispose]: () => rmSync(path, { recursive: true, force: true }) };
}

export interface RunningAgent {
  readonly pid: number;
  /** Output so far. */
  output(): { stdout: string; stderr: string; logs: Record<string, unknown>[] };
  /** Resolves when a log line matches, or rejects after `timeoutMs`. */
  waitForLog(
    match: (line: Record<string, unknown>) => boolean,
    timeoutMs?: number,
  ): Promise<Record<string, unknown>>;
  /** Sends SIGTERM and resolves with the exit code once the process is gone (output canary-checked). */
  stop(signal?: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/**
 * Starts the built agent in the background (sidecar mode), as the image would. `argv`: Node's
 * arguments instead of the plain bundle's path (the start-up snapshot's, in test/agent/snapshot.test.ts).
 */
export function startAgent(
  env: Record<string, string>,
  options: { uid?: number; argv?: readonly string[]; resident?: string } = {},
): RunningAgent {
  // `resident`: the small sidecar, the resident binary (test/resident/resident-process.ts) running the agent per refresh.
  const [command, args] = options.resident
    ? [options.resident, ['--', process.execPath, ...(options.argv ?? [AGENT_JS])]]
    : [process.execPath, options.argv ?? [AGENT_JS]];
  const child = spawn(command, args, {
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    ...(options.uid !== undefined ? { uid: options.uid, gid: options.uid } : {}),
  });
  let stdout = '';
  let stderr = '';
  const waiters: (() => void)[] = [];
  child.stdout.on('data', (d: Buffer) => {
    stdout += d.toString();
    for (const w of waiters) w();
  });
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('close', (code, signal) => resolve({ code, signal })),
  );
  const logs = () =>
    stdout
      .split('\n')
      .filter((l) => l.trim().startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
  return {
    pid: child.pid!,
    output: () => ({ stdout, stderr, logs: logs() }),
    waitForLog(match, timeoutMs = 20_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const hit = logs().find(match);
          if (hit) {
            clearTimeout(timer);
            waiters.splice(waiters.indexOf(check), 1);
            resolve(hit);
          }
        };
        const timer = setTimeout(() => {
          waiters.splice(waiters.indexOf(check), 1);
          reject(
            new Error(
              `no matching log line within ${timeoutMs} ms; stderr: ${stderr}; stdout tail: ${stdout.slice(-2000)}`,
            ),
          );
        }, timeoutMs);
        waiters.push(check);
        check();
      });
    },
    async stop(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      const result = await exited;
      assertNoCanary(stdout, 'agent stdout (logs)');
      assertNoCanary(stderr, 'agent stderr');
      return result;
    },
  };
}

/** Polls `probe` until it returns a value (not undefined), or fails after `timeoutMs`. */
export async function eventually<T>(
  probe: () => T | undefined | Promise<T | undefined>,
  what: string,
  timeoutMs = 20_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
