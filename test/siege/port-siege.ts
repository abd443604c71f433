/**
 * A siege of an agent's port, shared by the node-level test (test/siege/agent-port.test.ts) and the
 * image's (test/image/agent-port-flood.test.ts): flood processes (idle-flood.ts) open their
 * connections while this process probes /healthz from the kubelet's address, as the kubelet does
 * (a new connection each time, the rendered probes' timeout), and samples the agent's memory at every probe.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import type { FloodFigures, FloodPlan } from './idle-flood.ts';
import { PORT_CLIENT_TIMEOUT_SECONDS } from './kubelet-probes.ts';

const FLOOD_JS = new URL('./idle-flood.ts', import.meta.url).pathname;

export interface SiegeResult {
  readonly probes: number;
  readonly answered: number;
  /** The first few probe failures, for the message. */
  readonly failures: readonly string[];
  /** Each flood process's figures once it had opened all its connections. */
  readonly floods: readonly FloodFigures[];
  /** And at the end of the hold, before it closed what it still held. */
  readonly floodsAtEnd: readonly FloodFigures[];

  /** The largest memory sample (whatever `sampleMemory` measures), in bytes. */
  readonly peakMemory: number;
  /** The memory sample taken before the flood. */
  readonly baselineMemory: number;
}

/**
 * At a lower CPU priority (nice 5, about a third of the agent's weight): an attacking pod spends its
 * own CPU, not its target's. On this machine the flood shares two cores with the agent and whatever
 * else runs; at an equal share it would outrun any server by starving it of CPU, which says nothing
 * about the port. Lower still, it would not get through its own closed connections.
 */
function startFlood(plan: FloodPlan): {
  child: ChildProcess;
  done: Promise<FloodFigures>;
  /** Its last report, once it has exited (it reports at SIGTERM, then closes what it holds). */
  last: Promise<FloodFigures | undefined>;
} {
  const child = spawn('nice', ['-n', '5', process.execPath, FLOOD_JS, JSON.stringify(plan)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  const done = new Promise<FloodFigures>((resolve, reject) => {
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const line = out.split('\n').find((l) => l.includes('"done":true'));
      if (line) resolve(JSON.parse(line) as FloodFigures);
    });
    child.once('exit', (code) => reject(new Error(`flood exited with ${code} before it had opened all`)));
  });
  done.catch(() => undefined);
  const last = new Promise<FloodFigures | undefined>((resolve) =>
    child.once('close', () => {
      const line = out.trim().split('\n').at(-1);
      resolve(line ? (JSON.parse(line) as FloodFigures) : undefined);
    }),
  );
  return { child, done, last };
}

/** One probe as the kubelet sends it: its own connection, an answer within the rendered timeoutSeconds. */
async function probe(url: string): Promise<string | undefined> {
  try {
    const res = await fetch(url, {
      signal: AbortSignal.timeout(PORT_CLIENT_TIMEOUT_SECONDS * 1000),
      keepalive: false,
    });
    await res.text();
    return res.status === 200 ? undefined : `HTTP ${res.status}`;
  } catch (e) {
    return (e as Error).name === 'TimeoutError' ? 'timeout' : (e as Error).message;
  }
}

/**
 * Runs the floods and probes `healthz` every `everyMs` until they have all opened their connections,
 * and `holdMs` after (past the port's first-request deadline); bounded by `maxMs` in all.
 */
export async function siege(options: {
  readonly healthz: string;
  readonly floods: readonly FloodPlan[];
  readonly sampleMemory: () => number;
  readonly everyMs?: number;
  readonly holdMs: number;
  readonly maxMs?: number;
}): Promise<SiegeResult> {
  const everyMs = options.everyMs ?? 250;
  const maxMs = options.maxMs ?? 120_000;
  const baselineMemory = options.sampleMemory();
  let peakMemory = baselineMemory;
  const floods = options.floods.map(startFlood);
  let allDone = false;
  const figures = Promise.all(floods.map((f) => f.done)).then((f) => {
    allDone = true;
    return f;
  });
  figures.catch(() => undefined);
  let probes = 0;
  let answered = 0;
  const failures: string[] = [];
  const started = Date.now();
  let doneAt: number | undefined;
  try {
    while (Date.now() - started < maxMs) {
      if (allDone) doneAt ??= Date.now();
      if (doneAt !== undefined && Date.now() - doneAt >= options.holdMs) break;
      const tick = sleep(everyMs);
      const failure = await probe(options.healthz);
      probes++;
      if (failure === undefined) answered++;
      else if (failures.length < 5) failures.push(failure);
      peakMemory = Math.max(peakMemory, options.sampleMemory());
      await tick;
    }
    if (doneAt === undefined) throw new Error(`the floods had not opened their connections in ${maxMs} ms`);
    const opened = await figures;
    for (const f of floods) f.child.kill('SIGTERM');
    const atEnd = await Promise.all(floods.map((f) => f.last));
    if (atEnd.some((f) => f === undefined)) throw new Error('a flood exited without its last report');
    return {
      probes,
      answered,
      failures,
      floods: opened,
      floodsAtEnd: atEnd as FloodFigures[],
      peakMemory,
      baselineMemory,
    };
  } finally {
    for (const f of floods) f.child.kill('SIGTERM');
  }
}
