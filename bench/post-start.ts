/**
 * What the native sidecar's postStart hook (dist/wait-ready.cjs, agent/post-start/) costs, each figure
 * beside its baseline in the same run, hook and agent run as the webhook renders them (the sidecar's
 * command line and NODE_OPTIONS; the hook inherits the container's env):
 *   start      the hook against a /readyz that already answers 200: time and CPU to its exit, against
 *              `node -e 0`, and its resident memory then;
 *   waiting    the hook beside the agent while the backend never answers: its resident memory
 *              (anonymous, and in all) against the agent's and an idle Node's, its CPU per second,
 *              and the agent's CPU per second with the hook asking and without;
 *   gate       the agent and the hook started together against moto: how long after the agent wrote
 *              its set the hook returned (the app's start), against a startupProbe's first success
 *              (periodSeconds 1, its first probe at the container's start, as a kubelet at best).
 * CPU of the short runs comes from the process itself (a preloaded exit handler reads
 * process.cpuUsage and /proc/self/status); CPU of the long-lived ones from /proc/PID/stat.
 * `node bench/post-start.ts` runs it alone (its own moto); `npm run bench` runs it with the rest.
 */
import { CreateSecretCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer, type Server } from 'node:http';
import { createServer as createTcpServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { SIDECAR_V8_FLAGS } from '../agent/contract/sidecar-v8-flags.ts';
import { freePort, startMoto, type Moto } from '../test/support/moto.ts';
import { WEBHOOK_SETTINGS } from '../webhook/config/settings.ts';
import { nodeOptions } from '../webhook/agent-sizing.ts';

const root = new URL('../', import.meta.url).pathname;
const HOOK = join(root, 'dist/wait-ready.cjs');
const AGENT = join(root, 'dist/agent.js');

export interface PostStartFigures {
  readonly rounds: number;
  readonly start: {
    readonly hookMs: number;
    readonly floorMs: number;
    readonly hookCpuMs: number;
    readonly floorCpuMs: number;
    readonly vsFloor: { readonly time: number; readonly cpu: number };
    /** At its exit: anonymous memory (what a cgroup charges for this process alone) and peak RSS. */
    readonly hookAnonMiB: number;
    readonly hookPeakRssMiB: number;
  };
  readonly waiting: {
    readonly seconds: number;
    readonly hook: { readonly anonMiB: number; readonly rssMiB: number; readonly cpuMs: number };
    readonly agent: { readonly anonMiB: number; readonly rssMiB: number };
    readonly idleNode: { readonly anonMiB: number; readonly rssMiB: number };
    readonly hookAnonVsAgentAnon: number;
    readonly agentCpuMsPerSecond: { readonly withHook: number; readonly withoutHook: number };
  };
  readonly gate: {
    readonly agentReadyMs: number;
    readonly hookLagMs: { readonly median: number; readonly max: number };
    readonly probeLagMs: { readonly median: number; readonly max: number };
  };
}

/** Writes the process's own CPU and memory to fd 3 as it exits: the whole run, Node's start included. */
const USAGE_PRELOAD = `process.on('exit', () => {
  const status = require('fs').readFileSync('/proc/self/status', 'utf8');
  const kb = (name) => Number(new RegExp(name + ':\\\\s+(\\\\d+)').exec(status)[1]);
  const cpu = process.cpuUsage();
  require('fs').writeSync(3, JSON.stringify({ cpuMs: (cpu.user + cpu.system) / 1000, anonKb: kb('RssAnon'), hwmKb: kb('VmHWM') }));
});`;

interface Usage {
  readonly ms: number;
  readonly code: number | null;
  readonly cpuMs: number;
  readonly anonKb: number;
  readonly hwmKb: number;
}

function startMeasured(
  preload: string,
  argv: string[],
  env: Record<string, string>,
): { pid: number; done: Promise<Usage> } {
  const start = performance.now();
  const child = spawn(process.execPath, ['-r', preload, ...argv], {
    env,
    stdio: ['ignore', 'ignore', 'pipe', 'pipe'],
  });
  const done = new Promise<Usage>((resolve, reject) => {
    let usage = '';
    let stderr = '';
    (child.stdio[3] as NodeJS.ReadableStream).on('data', (d: Buffer) => (usage += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => {
      const ms = performance.now() - start;
      if (!usage) return reject(new Error(`${argv.join(' ')} reported no usage (exit ${code}): ${stderr}`));
      resolve({ ms, code, ...(JSON.parse(usage) as Omit<Usage, 'ms' | 'code'>) });
    });
  });
  return { pid: child.pid!, done };
}

const runMeasured = (preload: string, argv: string[], env: Record<string, string>) =>
  startMeasured(preload, argv, env).done;

/** VmRSS and RssAnon of a running process, in MiB. */
function memory(pid: number): { rssMiB: number; anonMiB: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (name: string) => Number(new RegExp(`${name}:\\s+(\\d+)`).exec(status)![1]);
  return { rssMiB: kb('VmRSS') / 1024, anonMiB: kb('RssAnon') / 1024 };
}

/** utime + stime from /proc/PID/stat, in ms (clock ticks of 10 ms). */
function cpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

const median = (xs: readonly number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const round = (n: number, digits = 1) => Number(n.toFixed(digits));

function startAgent(env: Record<string, string>): { child: ChildProcess; log: () => string } {
  const child = spawn(process.execPath, [...SIDECAR_V8_FLAGS, AGENT], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.resume();
  return { child, log: () => out };
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const closed = new Promise((r) => child.once('close', r));
  child.kill('SIGTERM');
  await closed;
}

export async function benchPostStart(moto: Moto, rounds = 9, waitSeconds = 5): Promise<PostStartFigures> {
  const work = mkdtempSync(join(tmpdir(), 'secret-agent-bench-post-start-'));
  const preload = join(work, 'usage.cjs');
  writeFileSync(preload, USAGE_PRELOAD);
  const options = nodeOptions(
    WEBHOOK_SETTINGS.AGENT_MEMORY_LIMIT.default!,
    WEBHOOK_SETTINGS.SECRETS_VOLUME_SIZE_LIMIT.default!,
  );
  const base = { PATH: process.env.PATH ?? '', HOME: '/tmp', NODE_OPTIONS: options };
  const sm = new SecretsManagerClient({
    region: 'us-east-1',
    endpoint: moto.endpoint,
    credentials: { accessKeyId: 'bench', secretAccessKey: 'bench' },
  });
  await sm.send(new CreateSecretCommand({ Name: 'post-start/one', SecretString: 'post-start-one' }));
  sm.destroy();
  const agentEnv = (dir: string, port: number, endpoint: string) => ({
    ...base,
    AWS_ACCESS_KEY_ID: 'bench',
    AWS_SECRET_ACCESS_KEY: 'bench',
    AWS_REGION: 'us-east-1',
    AWS_ENDPOINT_URL_SECRETS_MANAGER: endpoint,
    AGENT_MODE: 'sidecar',
    SECRETS_DIR: dir,
    AGENT_HTTP_ADDR: `0.0.0.0:${port}`,
    LOG_LEVEL: 'info',
    SECRET_0_REF: 'aws:post-start/one',
    SECRET_0_FILENAME: 'one',
  });
  const hookArgs = (port: number, deadline: string) => [
    HOOK,
    `--url=http://127.0.0.1:${port}/readyz`,
    `--deadline=${deadline}`,
  ];
  const servers: (Server | ReturnType<typeof createTcpServer>)[] = [];
  const sockets = new Set<Socket>();
  try {
    // start: a /readyz that already answers, interleaved with node -e 0.
    const readyPort = await freePort();
    const ready = createHttpServer((_req, res) => res.end('ready\n'));
    servers.push(ready);
    await new Promise<void>((r) => ready.listen(readyPort, '127.0.0.1', r));
    const hookRuns: Usage[] = [];
    const floorRuns: Usage[] = [];
    for (let i = 0; i <= rounds; i++) {
      const hook = await runMeasured(preload, hookArgs(readyPort, '75s'), base);
      const floor = await runMeasured(preload, ['-e', '0'], base);
      if (hook.code !== 0) throw new Error(`the hook exited ${hook.code} against a ready /readyz`);
      if (i === 0) continue; // the page cache warms on the first
      hookRuns.push(hook);
      floorRuns.push(floor);
    }

    // waiting: the agent whose backend never answers, with the hook asking, then without.
    const silent = createTcpServer((s) => sockets.add(s.on('error', () => undefined)));
    servers.push(silent);
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    const silentEndpoint = `http://127.0.0.1:${(silent.address() as { port: number }).port}`;
    const idle = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], {
      env: base,
      stdio: 'ignore',
    });
    const waitDir = mkdtempSync('/dev/shm/secret-agent-bench-post-start-');
    let waiting: PostStartFigures['waiting'];
    try {
      const agentCpuPerSecond = async (withHook: boolean) => {
        const port = await freePort();
        const agent = startAgent(agentEnv(waitDir, port, silentEndpoint));
        try {
          while (!agent.log().includes('serving /healthz')) await sleep(20);
          const before = cpuMs(agent.child.pid!);
          const t0 = performance.now();
          let hookRun: ReturnType<typeof startMeasured> | undefined;
          const hookSamples: { rssMiB: number; anonMiB: number }[] = [];
          const agentSamples: { rssMiB: number; anonMiB: number }[] = [];
          const idleSamples: { rssMiB: number; anonMiB: number }[] = [];
          if (withHook) {
            hookRun = startMeasured(preload, hookArgs(port, `${waitSeconds}s`), base);
            await sleep(1000);
            while (performance.now() - t0 < (waitSeconds - 1) * 1000) {
              hookSamples.push(memory(hookRun.pid));
              agentSamples.push(memory(agent.child.pid!));
              idleSamples.push(memory(idle.pid!));
              await sleep(250);
            }
          }
          const hook = withHook ? await hookRun!.done : undefined;
          await sleep(Math.max(0, waitSeconds * 1000 - (performance.now() - t0)));
          const agentCpu = ((cpuMs(agent.child.pid!) - before) * 1000) / (performance.now() - t0);
          return { agentCpu, hook, hookSamples, agentSamples, idleSamples };
        } finally {
          await stop(agent.child);
        }
      };
      const withHook = await agentCpuPerSecond(true);
      const withoutHook = await agentCpuPerSecond(false);
      if (withHook.hook!.code !== 1)
        throw new Error(`the hook exited ${withHook.hook!.code}, not 1, at its deadline`);
      const med = (samples: { rssMiB: number; anonMiB: number }[]) => ({
        anonMiB: round(median(samples.map((s) => s.anonMiB))),
        rssMiB: round(median(samples.map((s) => s.rssMiB))),
      });
      const hookMemory = med(withHook.hookSamples);
      const agentMemory = med(withHook.agentSamples);
      waiting = {
        seconds: waitSeconds,
        hook: { ...hookMemory, cpuMs: round(withHook.hook!.cpuMs) },
        agent: agentMemory,
        idleNode: med(withHook.idleSamples),
        hookAnonVsAgentAnon: round(hookMemory.anonMiB / agentMemory.anonMiB, 2),
        agentCpuMsPerSecond: { withHook: round(withHook.agentCpu), withoutHook: round(withoutHook.agentCpu) },
      };
    } finally {
      idle.kill('SIGTERM');
      rmSync(waitDir, { recursive: true, force: true });
    }

    // gate: agent and hook started together, as the kubelet starts them, against moto.
    const hookLags: number[] = [];
    const probeLags: number[] = [];
    const readyMs: number[] = [];
    for (let i = 0; i < rounds; i++) {
      const dir = mkdtempSync('/dev/shm/secret-agent-bench-post-start-');
      const port = await freePort();
      const t0 = Date.now();
      const agent = startAgent(agentEnv(dir, port, moto.endpoint));
      try {
        const hook = runMeasured(preload, hookArgs(port, '75s'), base).then(() => Date.now());
        // A startupProbe at its best: a GET each second, the first as the container starts.
        const probe = (async () => {
          for (let tick = 0; ; tick++) {
            await sleep(Math.max(0, t0 + tick * 1000 - Date.now()));
            const ok = await fetch(`http://127.0.0.1:${port}/readyz`, { signal: AbortSignal.timeout(1000) })
              .then((r) => r.status === 200)
              .catch(() => false);
            if (ok) return Date.now();
          }
        })();
        const [hookAt, probeAt] = await Promise.all([hook, probe]);
        const written = agent
          .log()
          .split('\n')
          .filter((l) => l.startsWith('{'))
          .map((l) => JSON.parse(l) as { msg: string; time: string | number })
          .find((l) => l.msg === 'secrets written');
        if (!written) throw new Error(`the agent wrote nothing: ${agent.log().slice(-2000)}`);
        const writtenAt = new Date(written.time).getTime();
        readyMs.push(writtenAt - t0);
        hookLags.push(hookAt - writtenAt);
        probeLags.push(probeAt - writtenAt);
      } finally {
        await stop(agent.child);
        rmSync(dir, { recursive: true, force: true });
      }
    }

    const hookMs = median(hookRuns.map((r) => r.ms));
    const floorMs = median(floorRuns.map((r) => r.ms));
    const hookCpuMs = median(hookRuns.map((r) => r.cpuMs));
    const floorCpuMs = median(floorRuns.map((r) => r.cpuMs));
    return {
      rounds,
      start: {
        hookMs: round(hookMs),
        floorMs: round(floorMs),
        hookCpuMs: round(hookCpuMs),
        floorCpuMs: round(floorCpuMs),
        vsFloor: { time: round(hookMs / floorMs, 2), cpu: round(hookCpuMs / floorCpuMs, 2) },
        hookAnonMiB: round(median(hookRuns.map((r) => r.anonKb / 1024))),
        hookPeakRssMiB: round(median(hookRuns.map((r) => r.hwmKb / 1024))),
      },
      waiting,
      gate: {
        agentReadyMs: median(readyMs),
        hookLagMs: { median: median(hookLags), max: Math.max(...hookLags) },
        probeLagMs: { median: median(probeLags), max: Math.max(...probeLags) },
      },
    };
  } finally {
    for (const s of sockets) s.destroy();
    for (const s of servers) s.close();
    rmSync(work, { recursive: true, force: true });
  }
}

export function formatPostStartFigures(f: PostStartFigures): string {
  const w = f.waiting;
  return [
    `native sidecar's postStart hook (dist/wait-ready.cjs), ${f.rounds} rounds, medians`,
    '',
    '| figure | hook | baseline |',
    '| --- | ---: | ---: |',
    `| /readyz already 200: spawn to exit | ${f.start.hookMs} ms (${f.start.vsFloor.time}×) | node -e 0: ${f.start.floorMs} ms |`,
    `| /readyz already 200: CPU, Node's start included | ${f.start.hookCpuMs} ms (${f.start.vsFloor.cpu}×) | node -e 0: ${f.start.floorCpuMs} ms |`,
    `| at its exit: anonymous memory / peak RSS | ${f.start.hookAnonMiB} / ${f.start.hookPeakRssMiB} MiB | |`,
    `| waiting (backend never answers): anonymous / resident memory | ${w.hook.anonMiB} / ${w.hook.rssMiB} MiB | agent: ${w.agent.anonMiB} / ${w.agent.rssMiB} MiB; idle node: ${w.idleNode.anonMiB} / ${w.idleNode.rssMiB} MiB |`,
    `| waiting: its anonymous memory / the agent's | ${w.hookAnonVsAgentAnon}× | |`,
    `| waiting: CPU over ${w.seconds} s until its deadline, its start included | ${w.hook.cpuMs} ms | |`,
    `| waiting: the agent's CPU per second, hook asking / not | ${w.agentCpuMsPerSecond.withHook} / ${w.agentCpuMsPerSecond.withoutHook} ms/s | |`,
    `| app's start after the set is written, median / max (agent ready ${f.gate.agentReadyMs} ms after its spawn) | ${f.gate.hookLagMs.median} / ${f.gate.hookLagMs.max} ms | startupProbe, periodSeconds 1: ${f.gate.probeLagMs.median} / ${f.gate.probeLagMs.max} ms |`,
  ].join('\n');
}

if (import.meta.main) {
  const moto = await startMoto();
  try {
    console.log(formatPostStartFigures(await benchPostStart(moto, Number(process.env.BENCH_ROUNDS ?? 9))));
  } finally {
    await moto.stop();
  }
}
