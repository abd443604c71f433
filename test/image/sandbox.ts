import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensureBubblewrap } from '../support/bubblewrap.ts';
import { assertNoCanary } from '../support/canary.ts';
import { ROOT } from '../support/run-agent.ts';

/** The images' user (distroless `nonroot`). */
export const IMAGE_UID = 65532;
const NODE = process.execPath;

export interface SandboxSpec {
  /** Which bundle runs, laid out as its image lays it out under /app. */
  readonly image: 'agent' | 'webhook';
  /** The container's env: nothing else is inherited. */
  readonly env: Readonly<Record<string, string>>;
  /** Host path → sandbox path, read-only (mounted Secrets, ConfigMaps, the certificate files). */
  readonly readOnly?: readonly (readonly [string, string])[];
  /** Host directory → sandbox path, writable: the pod's emptyDir volumes, and nothing else. */
  readonly writable?: readonly (readonly [string, string])[];
  /**
   * The user inside (default 65532). 0 acts out a Dockerfile RUN before its USER line: Node sees
   * uid 0, while the files it makes still belong to 65532 on this machine.
   */
  readonly uid?: number;
  /** Replaces the bundle's entry point (e.g. a probe script run with the image's Node). */
  readonly command?: readonly string[];
}

let etc: string | undefined;

/** The user database of gcr.io/distroless/nodejs24-debian12:nonroot (Node finds the home directory there). */
function distrolessEtc(): string {
  if (etc) return etc;
  const dir = mkdtempSync(join(tmpdir(), 'secret-agent-image-etc-'));
  etc = dir;
  process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  chmodSync(dir, 0o755);
  writeFileSync(
    join(dir, 'passwd'),
    'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n',
    { mode: 0o644 },
  );
  writeFileSync(join(dir, 'group'), 'root:x:0:\nnobody:x:65534:\ntty:x:5:\nstaff:x:50:\nnonroot:x:65532:\n', {
    mode: 0o644,
  });
  return dir;
}

/**
 * bwrap arguments that run a bundle as the image does: the image's files only (Node at
 * /nodejs/bin/node, the bundle under /app, the system libraries Node links, distroless's
 * /etc/passwd and /etc/group), a read-only root,
 * uid/gid 65532, no capabilities, no new privileges, its own network namespace with nothing but
 * loopback, its own PID namespace with Node as PID 1, and writable only where a volume is mounted.
 */
export function sandboxArgs(spec: SandboxSpec): string[] {
  const app =
    spec.image === 'agent'
      ? [
          '--ro-bind',
          join(ROOT, 'dist/agent.js'),
          '/app/agent.js',
          '--ro-bind',
          join(ROOT, 'dist/agent-chunks'),
          '/app/agent-chunks',
        ]
      : ['--ro-bind', join(ROOT, 'dist/webhook.js'), '/app/webhook.js'];
  return [
    ...[
      '--unshare-user',
      '--unshare-ipc',
      '--unshare-pid',
      '--unshare-net',
      '--unshare-uts',
      '--unshare-cgroup-try',
    ],
    ...['--as-pid-1', '--die-with-parent', '--new-session', '--cap-drop', 'ALL'],
    ...['--uid', String(spec.uid ?? IMAGE_UID), '--gid', String(spec.uid ?? IMAGE_UID)],
    '--clearenv',
    ...Object.entries(spec.env).flatMap(([k, v]) => ['--setenv', k, v]),
    ...['--ro-bind', '/usr', '/usr', '--symlink', 'usr/lib', '/lib', '--symlink', 'usr/lib64', '/lib64'],
    ...['--ro-bind', join(distrolessEtc(), 'passwd'), '/etc/passwd'],
    ...['--ro-bind', join(distrolessEtc(), 'group'), '/etc/group', '--dir', '/home/nonroot'],
    ...['--ro-bind', NODE, '/nodejs/bin/node'],
    ...app,
    ...(spec.readOnly ?? []).flatMap(([from, to]) => ['--ro-bind', from, to]),
    ...(spec.writable ?? []).flatMap(([from, to]) => ['--bind', from, to]),
    ...['--dev', '/dev', '--proc', '/proc', '--remount-ro', '/dev', '--remount-ro', '/'],
    ...['--chdir', '/app', '--info-fd', '3'],
    ...(spec.command ?? ['/nodejs/bin/node', `/app/${spec.image}.js`]),
  ];
}

export interface Sandboxed {
  /** The bundle's process (PID 1 in the sandbox), as this machine numbers it. */
  readonly pid: Promise<number>;
  output(): { stdout: string; stderr: string };
  /** pino lines from stdout. */
  logs(): Record<string, unknown>[];
  /** Sends a signal to the bundle's process. */
  kill(signal: NodeJS.Signals): Promise<void>;
  /** Resolves when the sandbox is gone; output is canary-checked. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Starts a sandbox; bwrap itself runs as uid 65532, so every file it creates belongs to 65532 here too. */
export function startSandboxed(spec: SandboxSpec): Sandboxed {
  ensureBubblewrap();
  const child: ChildProcess = spawn('bwrap', sandboxArgs(spec), {
    uid: IMAGE_UID,
    gid: IMAGE_UID,
    cwd: '/',
    stdio: ['ignore', 'pipe', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  let info = '';
  child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const pid = new Promise<number>((resolve, reject) => {
    const stream = child.stdio[3] as NodeJS.ReadableStream;
    stream.on('data', (d: Buffer) => {
      info += d.toString();
      const match = /"child-pid":\s*(\d+)/.exec(info);
      if (match) resolve(Number(match[1]));
    });
    child.on('close', () => reject(new Error(`the sandbox ended before it started: ${stderr}`)));
  });
  pid.catch(() => undefined);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve, reject) =>
    child.on('close', (code, signal) => {
      try {
        assertNoCanary(stdout, `${spec.image} stdout (sandboxed)`);
        assertNoCanary(stderr, `${spec.image} stderr (sandboxed)`);
        resolve({ code, signal });
      } catch (e) {
        reject(e as Error);
      }
    }),
  );
  exited.catch(() => undefined);
  return {
    pid,
    output: () => ({ stdout, stderr }),
    logs: () =>
      stdout
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as Record<string, unknown>),
    async kill(signal) {
      if (child.exitCode !== null || child.signalCode !== null) return;
      process.kill(await pid, signal);
    },
    exited,
  };
}

/** Runs a sandbox to its end (an init container), killing it after `timeoutMs`. */
export async function runSandboxed(
  spec: SandboxSpec,
  timeoutMs = 30_000,
): Promise<{ code: number | null; stdout: string; stderr: string; logs: Record<string, unknown>[] }> {
  const box = startSandboxed(spec);
  const timer = setTimeout(() => void box.kill('SIGKILL').catch(() => undefined), timeoutMs);
  try {
    const { code } = await box.exited;
    return { code, ...box.output(), logs: box.logs() };
  } finally {
    clearTimeout(timer);
  }
}

export interface ProbeRequest {
  readonly url: string;
  readonly method?: string;
  readonly body?: string;
  /** For https: the CA to trust and the name to ask for. */
  readonly ca?: string;
  readonly servername?: string;
}

/**
 * Makes an HTTP(S) request from inside the sandbox's network namespace (the only place its
 * loopback is reachable from), with this machine's Node entered there by nsenter as root.
 */
export function requestInside(pid: number, probe: ProbeRequest): { status: number; body: string } {
  const script = `
    const probe = JSON.parse(process.env.PROBE);
    const { request } = require(probe.url.startsWith('https:') ? 'node:https' : 'node:http');
    const req = request(probe.url, { method: probe.method ?? 'GET', ca: probe.ca, servername: probe.servername,
      headers: probe.body === undefined ? {} : { 'content-type': 'application/json' } }, (res) => {
      let body = '';
      res.on('data', (d) => (body += d));
      res.on('end', () => process.stdout.write(JSON.stringify({ status: res.statusCode, body })));
    });
    req.on('error', (e) => { process.stdout.write(JSON.stringify({ status: 0, body: e.code ?? e.message })); });
    req.end(probe.body);`;
  const run = spawnSync('nsenter', [`--net=/proc/${pid}/ns/net`, '--', NODE, '-e', script], {
    encoding: 'utf8',
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', PROBE: JSON.stringify(probe) },
    timeout: 15_000,
  });
  if (run.status !== 0) throw new Error(`nsenter probe failed (${run.status}): ${run.stderr}`);
  const reply = JSON.parse(run.stdout) as { status: number; body: string };
  assertNoCanary(reply.body, `${probe.method ?? 'GET'} ${probe.url} (sandboxed)`);
  return reply;
}
