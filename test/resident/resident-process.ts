/**
 * The resident (agent/native/resident.c) as the tests run it: built from source with musl-gcc, started
 * with a fake run (fake-run.ts) and a plan of what each run does, its HTTP port on loopback.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildNative } from '../../images/build-native.ts';
import type { RunStep } from './run-plan.ts';

const FAKE_RUN = new URL('./fake-run.ts', import.meta.url).pathname;
let built: string | undefined;

/**
 * The resident binary, compiled once per test process (fails with the install line without musl-gcc).
 * RESIDENT_BINARY runs the tests against another build of it, e.g. one with sanitizers:
 *   gcc -std=c11 -D_GNU_SOURCE -g -fsanitize=address,undefined -o /tmp/resident agent/native/resident.c
 *   RESIDENT_BINARY=/tmp/resident UBSAN_OPTIONS=halt_on_error=1 node --test test/resident/fuzz.test.ts
 */
export function residentBinary(): string {
  const dir = join(tmpdir(), `secret-agent-native-${process.pid}`);
  built ??= process.env.RESIDENT_BINARY ?? buildNative(dir).find((f) => f.endsWith('/resident'))!;
  return built;
}

/** The sanitizers' settings pass through to the resident, whose env is otherwise the test's own. */
const SANITIZER_ENV = Object.fromEntries(
  Object.entries(process.env).filter(([k]) => k === 'ASAN_OPTIONS' || k === 'UBSAN_OPTIONS'),
) as Record<string, string>;

export interface HttpAnswer {
  /** Everything the server sent before it closed ('' when it closed without a word). */
  readonly raw: string;
  readonly status: number | undefined;
  readonly body: string;
}

/**
 * Sends `request` on a new connection (from `localAddress`), half-closes when `end`, and resolves with
 * what came back once the server closes; rejects if it does not within `withinMs`.
 */
export function rawRequest(
  port: number,
  request: string | Uint8Array,
  options: { host?: string; localAddress?: string; end?: boolean; withinMs?: number } = {},
): Promise<HttpAnswer> {
  return new Promise((resolve, reject) => {
    const host = options.host ?? '127.0.0.1';
    const socket = connect({
      port,
      host,
      localAddress: options.localAddress ?? (host === '127.0.0.1' ? host : undefined),
    });
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no close within ${options.withinMs ?? 5000} ms`));
    }, options.withinMs ?? 5000);
    socket.on('data', (d: Buffer) => chunks.push(d));
    socket.on('error', () => {}); // a reset after the answer: what was read is the answer
    socket.on('close', () => {
      clearTimeout(timer);
      const raw = Buffer.concat(chunks).toString('latin1');
      const status = /^HTTP\/1\.1 (\d{3}) /.exec(raw)?.[1];
      const split = raw.indexOf('\r\n\r\n');
      resolve({
        raw,
        status: status === undefined ? undefined : Number(status),
        body: split < 0 ? '' : raw.slice(split + 4),
      });
    });
    socket.write(request);
    if (options.end !== false) socket.end();
  });
}

export interface Resident extends AsyncDisposable {
  readonly child: ChildProcess;
  readonly host: string;
  readonly port: number;
  /** Its stderr so far. */
  stderr(): string;
  /** What each run logged: the state it was handed, its pid. */
  runs(): { pid: number; state: Buffer }[];
  get(path: string, localAddress?: string): Promise<HttpAnswer>;
  /** A sample of /metrics, e.g. `secret_agent_resident_runs_total{outcome="ok"}`. */
  sample(series: string): Promise<number | undefined>;
  /** Polls `check` every 50 ms until it holds; fails after `withinMs`. */
  until(what: string, check: () => boolean | Promise<boolean>, withinMs?: number): Promise<void>;
  /** Resolves with the exit code or signal; fails after `withinMs`. */
  exited(withinMs?: number): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

export async function startResident(
  plan: readonly RunStep[],
  options: {
    env?: Record<string, string>;
    argv?: readonly string[];
    /** Limits its fds (RLIMIT_NOFILE). */
    nofile?: number;
    /** Open fds it inherits past stderr (3, 4, ...), as a careless parent would leave them. */
    extraFds?: number;
  } = {},
): Promise<Resident> {
  const dir = mkdtempSync(join(tmpdir(), 'resident-test-'));
  const log = join(dir, 'runs.log');
  writeFileSync(log, '');
  writeFileSync(join(dir, 'plan.json'), JSON.stringify(plan));
  const args = [residentBinary(), '--', ...(options.argv ?? [process.execPath, FAKE_RUN])];
  // With `nofile`, under that RLIMIT_NOFILE: the shell sets it and becomes the resident (same pid).
  const [command, ...rest] =
    options.nofile === undefined
      ? args
      : ['/bin/sh', '-c', `ulimit -n ${options.nofile} && exec "$0" "$@"`, ...args];
  const child = spawn(command!, rest, {
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      ...SANITIZER_ENV,
      AGENT_HTTP_ADDR: '127.0.0.1:0',
      FAKE_RUN_PLAN: join(dir, 'plan.json'),
      FAKE_RUN_LOG: log,
      ...options.env,
    },
    stdio: ['ignore', 'inherit', 'pipe', ...Array<'pipe'>(options.extraFds ?? 0).fill('pipe')],
  });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal })),
  );
  const [host, port] = await new Promise<[string, number]>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`resident did not listen: ${stderr}`)), 5000);
    child.stderr!.on('data', () => {
      const m = / on \[?([0-9a-f:.]+?)\]?:(\d+)\n/.exec(stderr);
      if (!m) return;
      clearTimeout(timer);
      resolve([m[1]!, Number(m[2])]);
    });
    void exit.then(() => reject(new Error(`resident exited: ${stderr}`)));
  });
  const bounded = <T>(p: Promise<T>, ms: number, what: string) =>
    Promise.race([
      p,
      new Promise<never>((_, reject) =>
        setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms).unref(),
      ),
    ]);
  const resident: Resident = {
    child,
    host,
    port,
    stderr: () => stderr,
    runs: () =>
      readFileSync(log, 'utf8')
        .split('\n')
        .filter((l) => l !== '')
        .map((l) => JSON.parse(l) as { pid: number; state: string })
        .map((r) => ({ pid: r.pid, state: Buffer.from(r.state, 'base64') })),
    get: (path, localAddress) =>
      rawRequest(port, `GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`, { host, localAddress }),
    sample: async (series) => metricValue((await resident.get('/metrics')).body, series),
    async until(what, check, withinMs = 20_000) {
      const end = Date.now() + withinMs;
      while (!(await check())) {
        if (Date.now() > end) throw new Error(`${what}: not within ${withinMs} ms. stderr:\n${stderr}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    },
    exited: (withinMs = 10_000) => bounded(exit, withinMs, 'resident exit'),
    async [Symbol.asyncDispose]() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exit;
      for (const run of resident.runs()) {
        try {
          process.kill(run.pid, 'SIGKILL');
        } catch {
          // gone already
        }
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return resident;
}

/** A counter's value from /metrics text, e.g. `secret_agent_resident_runs_total{outcome="ok"}`. */
export function metricValue(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

/** The resident's resident set (VmRSS) in KiB, from /proc. */
export function residentKiB(pid: number): number {
  const m = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!m) throw new Error(`no VmRSS for ${pid}`);
  return Number(m[1]);
}
