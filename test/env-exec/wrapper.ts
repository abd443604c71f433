/**
 * The env-exec wrapper (agent/native/env-exec.c) as the tests run it: built from source with musl-gcc,
 * reading a secrets volume the agent's own writer (AtomicDir) lays out on tmpfs, run to its end with a
 * bound on time, its output canary-checked (a value never appears in what it prints).
 */
import { spawn } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { envValuePath } from '../../agent/contract/env-exec.ts';
import { AtomicDir } from '../../agent/write/atomic-dir.ts';
import { buildNative } from '../../images/build-native.ts';
import { assertNoCanary } from '../support/canary.ts';

let built: string | undefined;

/**
 * The wrapper, compiled once per test process (fails with the install line without musl-gcc).
 * ENV_EXEC_BINARY runs the tests against another build of it, e.g. one with sanitizers:
 *   gcc -std=c11 -D_GNU_SOURCE -g -fsanitize=address,undefined -o /tmp/env-exec agent/native/env-exec.c
 *   ENV_EXEC_BINARY=/tmp/env-exec node --test test/env-exec/*.test.ts
 */
export function envExecBinary(): string {
  built ??=
    process.env.ENV_EXEC_BINARY ??
    buildNative(join(tmpdir(), `secret-agent-native-${process.pid}`)).find((f) => f.endsWith('/env-exec'))!;
  return built;
}

/** The agent's writer on `dir`, and a helper that writes one set of variables (mode 0400, as the agent). */
export async function envVolume(
  dir: string,
): Promise<{ writer: AtomicDir; write(vars: Record<string, string | Buffer>): Promise<void> }> {
  const writer = await AtomicDir.open(dir, { requireMemoryFs: true });
  return {
    writer,
    write: (vars) =>
      writer.write(
        Object.entries(vars).map(([name, value]) => ({
          path: envValuePath(name),
          bytes: Buffer.isBuffer(value) ? value : Buffer.from(value),
          mode: 0o400,
        })),
      ),
  };
}

export interface WrapperRun {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
  readonly pid: number;
}

export interface RunOptions {
  readonly env?: Record<string, string>;
  readonly cwd?: string;
  /** Kills it (SIGKILL) and fails past this. */
  readonly withinMs?: number;
  /** Called once it runs, with its pid (to signal it). */
  readonly started?: (pid: number) => void;
  /** Called with its stdout so far, each time more comes. */
  readonly stdoutSoFar?: (stdout: string) => void;
}

/** Runs `command` (argv[0] first) to its end; the env is exactly `env` (nothing of the test's). */
export function runCommand(command: readonly string[], options: RunOptions = {}): Promise<WrapperRun> {
  const withinMs = options.withinMs ?? 20_000;
  return new Promise((resolve, reject) => {
    const child = spawn(command[0]!, command.slice(1), {
      env: options.env ?? {},
      cwd: options.cwd,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => {
      stdout += d.toString('latin1');
      options.stdoutSoFar?.(stdout);
    });
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString('latin1')));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(
        new Error(`${command.slice(0, 6).join(' ')}: not ended within ${withinMs} ms; stderr: ${stderr}`),
      );
    }, withinMs);
    child.on('error', reject);
    child.on('spawn', () => options.started?.(child.pid!));
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      try {
        assertNoCanary(stderr, 'env-exec stderr');
      } catch (e) {
        reject(e as Error);
        return;
      }
      resolve({ code, signal, stdout, stderr, pid: child.pid! });
    });
  });
}

/** The wrapper with `args` (its own and, after `--`, the command's). */
export function runWrapper(args: readonly string[], options: RunOptions = {}): Promise<WrapperRun> {
  return runCommand([envExecBinary(), ...args], options);
}
