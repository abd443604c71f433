/**
 * What an injected pod's agent costs the node, measured as the node measures it (issue 25): agent
 * containers from the agent image, run by podman as the webhook renders them (bench/podman-agent.ts),
 * several at once, each in its own memory cgroup, read as the kubelet reads it
 * (bench/memory-cgroup.ts: working set = usage − inactive_file, anonymous, usage) beside the
 * process's VmRSS:
 *   - init runs (peak, sampled every 2 ms) and sidecars (steady state after `settleSeconds` at a 1 s
 *     REFRESH_INTERVAL, then a burst of 10 rotations of every secret), 1 and 100 secrets, AWS (moto),
 *     GCP and Vault (the local fakes), with and without an HTTP notifier; sidecars at the default
 *     REFRESH_INTERVAL beside them, for the steady state a pod keeps and its CPU;
 *   - the first agent on a node: the image's files dropped from the page cache first
 *     (bench/page-cache.ts), so its cgroup is charged the Node binary's pages it faults in, against
 *     the same agent once they are cached;
 *   - the worst case (that first agent, 100 GCP secrets, HTTP notifier, a rotation burst) under
 *     tighter memory limits than the default: where it starts to thrash or be killed, i.e. the
 *     default limit's margin.
 */
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { AGENT_SETTINGS } from '../agent/contract/agent-settings.ts';
import { requirePodman } from '../images/container-engine.ts';
import { readImagesManifest } from '../images/manifest.ts';
import { freePort, type Moto } from '../test/support/moto.ts';
import { nodeOptions, quantityBytes } from '../webhook/agent-sizing.ts';
import { WEBHOOK_SETTINGS } from '../webhook/config/settings.ts';
import type { PeakFigures } from './cgroup-peak-worker.ts';
import {
  BACKEND_NAMES,
  LARGE_VALUE_BYTES,
  secretValue,
  startBackends,
  VALUE_BYTES,
  type Backend,
  type BackendName,
} from './memory-backends.ts';
import {
  cgroupLayout,
  containerCgroup,
  firstPid,
  readCpuSeconds,
  readLimitCounters,
  readMemory,
  readProcessRss,
  removeCgroupTree,
  resetPeak,
} from './memory-cgroup.ts';
import { dropFromPageCache, imageLayerDirs, residentMiB } from './page-cache.ts';
import { agentHeapFigures, startAgentContainer, watchPeak, type AgentContainer } from './podman-agent.ts';

export const ROTATIONS = 10;
export const STEADY_SECONDS = 10;
/** What the webhook's startupProbe waits for a native sidecar: INIT_DEADLINE (60 s) + 15 s. */
const READY_TIMEOUT_MS = 75_000;
/** Where Dockerfile.agent's runtime base keeps Node. */
const NODE_BINARY = 'nodejs/bin/node';

export interface Steady {
  readonly workingSetMiB: number;
  readonly anonMiB: number;
  readonly usageMiB: number;
  readonly cacheMiB: number;
  readonly mappedFileMiB: number;
  readonly kernelMiB: number;
  readonly rssMiB: number;
  /** Of the RSS, file pages mapped (RssFile): the Node binary's above all, shared with every agent on the node. */
  readonly rssFileMiB: number;
  /** Average CPU over the window, in millicores. */
  readonly cpuMillicores: number;
  /** Over the window: major faults and file refaults (thrashing under the limit). */
  readonly majorFaults: number;
  readonly fileRefaults: number;
  /** From the agent's own /metrics (prom-client): V8 heap used and committed, external buffers. */
  readonly heapUsedMiB: number;
  readonly heapTotalMiB: number;
  readonly externalMiB: number;
}

export interface Case {
  readonly backend: BackendName;
  readonly secrets: number;
  /** Each value's size; default VALUE_BYTES (1 KiB). */
  readonly valueBytes?: number;
  readonly notifier: boolean;
  /** The first agent on the node: charged the image's file pages it faulted in. */
  readonly first: boolean;
}

export interface SidecarRow extends Case {
  readonly memoryLimit: string;
  readonly refreshInterval: string;
  /** From `podman run` to /readyz answering (every file written), and the CPU it took. */
  readonly start: { readonly seconds: number; readonly cpuSeconds: number };
  readonly steady: Steady;
  /** Over the burst of rotations: highest working set, anonymous, usage (kernel's peak), VmHWM. */
  readonly burst?: PeakFigures & { readonly seconds: number };
  readonly afterBurst?: Steady;
  /** Over the container's life: times usage reached the memory limit (v1 failcnt), OOM kills. */
  readonly limitHits: number;
  readonly oomKills: number;
}

export interface InitRow extends Case {
  /** From `podman run` to its exit. */
  readonly seconds: number;
  readonly peak: PeakFigures;
}

/** The worst case, first on the node, under one memory limit: its init run, then its sidecar. */
export interface LimitTrial {
  readonly memoryLimit: string;
  readonly nodeOptions: string;
  readonly init: { readonly outcome: string; readonly row?: InitRow; readonly peak?: PeakFigures };
  /** `ran`, or how it ended early (an OOM kill ends the container: exit 137), or never got ready. */
  readonly outcome: string;
  readonly row?: SidecarRow;
  /** When it did not run: its cgroup's counters at that point (thrashing shows in the refaults). */
  readonly faults?: {
    readonly majorFaults: number;
    readonly fileRefaults: number;
    readonly oomKills: number;
  };
}

export interface AgentMemoryFigures {
  readonly cgroupVersion: 1 | 2;
  readonly memoryLimit: string;
  readonly nodeOptions: string;
  readonly settleSeconds: number;
  readonly valueBytes: number;
  /** The Node binary's pages in the page cache before and after the first agent started. */
  readonly nodeBinaryResidentMiB: { readonly before: number; readonly after: number };
  readonly init: InitRow[];
  readonly sidecars: SidecarRow[];
  readonly limitTrials: LimitTrial[];
}

export interface AgentMemoryOptions {
  readonly settleSeconds: number;
  /** Limits to run the worst case under besides the default, e.g. ['64Mi', '80Mi']. */
  readonly trialLimits: readonly string[];
  /** The backends whose groups run (default all); the first agent runs with GCP's. */
  readonly backends?: readonly BackendName[];
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

interface Sidecar extends Case {
  readonly backendImpl: Backend;
  readonly label: string;
  readonly port: number;
  readonly interval: string;
  readonly memoryLimit: string;
  readonly agent: AgentContainer;
  readonly cgroup: string;
  readonly start: { readonly seconds: number; readonly cpuSeconds: number };
}

export async function benchAgentMemory(moto: Moto, options: AgentMemoryOptions): Promise<AgentMemoryFigures> {
  const layout = cgroupLayout();
  const podman = requirePodman();
  const image = readImagesManifest().images.agent.ref;
  const defaultLimit = WEBHOOK_SETTINGS.AGENT_MEMORY_LIMIT.default!;
  const volumeSizeLimit = WEBHOOK_SETTINGS.SECRETS_VOLUME_SIZE_LIMIT.default!;
  const defaultInterval = AGENT_SETTINGS.REFRESH_INTERVAL.default!;
  const root = `secret-agent-bench-${process.pid}`;
  const backends = await startBackends(moto);
  // What the HTTP notifier calls: the app.
  const app = createServer((req, res) => {
    req.resume();
    res.end();
  });
  await new Promise<void>((r) => app.listen(0, '127.0.0.1', r));
  const appUrl = `http://127.0.0.1:${(app.address() as AddressInfo).port}`;
  const running = new Set<AgentContainer>();
  let serial = 0;

  const labelOf = (c: Case, mode: string, extra = '') =>
    `${mode}-${c.backend.toLowerCase()}-${c.secrets}${c.notifier ? '-http' : ''}${c.first ? '-first' : ''}${extra}-${++serial}`;
  const start = (
    c: Case,
    label: string,
    mode: 'init' | 'sidecar',
    limit: string,
    env: Record<string, string>,
  ) => {
    const agent = startAgentContainer(
      podman,
      {
        image,
        mode,
        gcp: c.backend === 'GCP',
        memoryLimit: limit,
        volumeSizeLimit,
        env: {
          ...backends.all[c.backend].env(label, c.secrets, mode),
          ...(c.notifier ? { ROTATION_HTTP_URL: `POST ${appUrl}/${label}` } : {}),
          ...env,
        },
      },
      `${root}/${label}`,
      `${root}-${label}`,
    );
    running.add(agent);
    return agent;
  };
  const stop = async (agent: AgentContainer) => {
    await agent.stop();
    running.delete(agent);
  };

  /** An init run to its end (killed after READY_TIMEOUT_MS); throws unless it wrote every secret and exited 0. */
  const initRun = async (c: Case, limit = defaultLimit): Promise<InitRow> => {
    const label = labelOf(c, 'init');
    await backends.all[c.backend].create(label, c.secrets, c.valueBytes);
    const watch = await watchPeak(layout, `${root}/${label}`, 2);
    const began = performance.now();
    const agent = start(c, label, 'init', limit, {});
    const timer = setTimeout(() => void agent.stop('SIGKILL'), READY_TIMEOUT_MS);
    const code = await agent.exited;
    clearTimeout(timer);
    const seconds = (performance.now() - began) / 1000;
    const peak = await watch.result;
    try {
      if (code !== 0)
        throw Object.assign(new Error(`init ${label} exited ${code} after ${seconds.toFixed(0)} s`), {
          peak,
        });
      const last = readFileSync(join(agent.volume, `s${c.secrets - 1}`), 'utf8');
      if (last !== secretValue(label, c.secrets - 1, 0, c.valueBytes))
        throw new Error(`init ${label} did not write its secrets`);
    } finally {
      await stop(agent);
    }
    return { ...c, seconds, peak };
  };

  /** A sidecar, started and ready (/readyz: every file written). */
  const startSidecar = async (c: Case, interval: string, limit = defaultLimit): Promise<Sidecar> => {
    const label = labelOf(c, 'sidecar', interval === '1s' ? '' : '-idle');
    const backendImpl = backends.all[c.backend];
    await backendImpl.create(label, c.secrets, c.valueBytes);
    const port = await freePort();
    const began = performance.now();
    const agent = start(c, label, 'sidecar', limit, {
      REFRESH_INTERVAL: interval,
      AGENT_HTTP_ADDR: `127.0.0.1:${port}`,
    });
    for (;;) {
      if (agent.ended())
        throw Object.assign(new Error(`sidecar ${label} exited: ${agent.stderr()}`), { agent, label });
      const ready = await fetch(`http://127.0.0.1:${port}/readyz`).then(
        (r) => r.ok,
        () => false,
      );
      if (ready) break;
      if (performance.now() - began > READY_TIMEOUT_MS)
        throw Object.assign(new Error(`sidecar ${label} not ready in ${READY_TIMEOUT_MS / 1000} s`), {
          agent,
          label,
        });
      await sleep(50);
    }
    const seconds = (performance.now() - began) / 1000;
    const cgroup = containerCgroup(layout, `${root}/${label}`)!;
    const cpuSeconds = readCpuSeconds(layout, cgroup);
    return {
      ...c,
      backendImpl,
      label,
      port,
      interval,
      memoryLimit: limit,
      agent,
      cgroup,
      start: { seconds, cpuSeconds },
    };
  };

  /** Medians of one-second samples of every sidecar at once; CPU, faults over the window. */
  const steady = async (sidecars: readonly Sidecar[], seconds: number): Promise<Steady[]> => {
    const dir = (s: Sidecar) => join(layout.memoryRoot, s.cgroup);
    const cpu0 = sidecars.map((s) => readCpuSeconds(layout, s.cgroup));
    const first = sidecars.map((s) => readMemory(layout, dir(s)));
    const t0 = performance.now();
    const series = sidecars.map(
      () => [] as { m: ReturnType<typeof readMemory>; p: ReturnType<typeof readProcessRss> }[],
    );
    for (let i = 0; i < seconds; i++) {
      sidecars.forEach((s, k) =>
        series[k]!.push({ m: readMemory(layout, dir(s)), p: readProcessRss(firstPid(layout, s.cgroup)!) }),
      );
      await sleep(1000);
    }
    const elapsed = (performance.now() - t0) / 1000;
    return Promise.all(
      sidecars.map(async (s, k) => {
        const xs = series[k]!;
        const pick = (f: (x: (typeof xs)[number]) => number) => median(xs.map(f));
        const last = xs.at(-1)!.m;
        return {
          workingSetMiB: pick((x) => x.m.workingSetMiB),
          anonMiB: pick((x) => x.m.anonMiB),
          usageMiB: pick((x) => x.m.usageMiB),
          cacheMiB: pick((x) => x.m.cacheMiB),
          mappedFileMiB: pick((x) => x.m.mappedFileMiB),
          kernelMiB: pick((x) => x.m.kernelMiB),
          rssMiB: pick((x) => x.p.rssMiB),
          rssFileMiB: pick((x) => x.p.fileMiB),
          cpuMillicores: ((readCpuSeconds(layout, s.cgroup) - cpu0[k]!) / elapsed) * 1000,
          majorFaults: last.majorFaults - first[k]!.majorFaults,
          fileRefaults: last.fileRefaults - first[k]!.fileRefaults,
          ...(await agentHeapFigures(s.port)),
        };
      }),
    );
  };

  /** ROTATIONS rotations of every secret of a sidecar, each once it has written the last one. */
  const burst = async (s: Sidecar) => {
    resetPeak(layout, join(layout.memoryRoot, s.cgroup));
    const watch = await watchPeak(layout, `${root}/${s.label}`, 10);
    const began = performance.now();
    for (let round = 1; round <= ROTATIONS; round++) {
      await s.backendImpl.rotate(s.label, s.secrets, round, s.valueBytes);
      const deadline = Date.now() + 60_000;
      for (let i = 0; i < s.secrets;) {
        if (
          readFileSync(join(s.agent.volume, `s${i}`), 'utf8') === secretValue(s.label, i, round, s.valueBytes)
        )
          i++;
        else if (Date.now() > deadline)
          throw new Error(`${s.label}: rotation ${round} not picked up in 60 s`);
        else await sleep(50);
      }
    }
    const seconds = (performance.now() - began) / 1000;
    return { ...(await watch.stop()), seconds };
  };

  /** Settles, measures the steady state, bursts the rotating ones, measures again. */
  const measure = async (sidecars: readonly Sidecar[]): Promise<SidecarRow[]> => {
    await sleep(options.settleSeconds * 1000);
    const before = await steady(sidecars, STEADY_SECONDS);
    // The ones at the default interval would not see a rotation before their next refresh.
    const rotating = sidecars.filter((s) => s.interval === '1s');
    const bursts = await Promise.all(rotating.map(burst));
    const after = await steady(rotating, 5);
    return sidecars.map((s, k) => {
      const r = rotating.indexOf(s);
      return {
        backend: s.backend,
        secrets: s.secrets,
        ...(s.valueBytes === undefined ? {} : { valueBytes: s.valueBytes }),
        notifier: s.notifier,
        first: s.first,
        memoryLimit: s.memoryLimit,
        refreshInterval: s.interval,
        start: s.start,
        steady: before[k]!,
        ...(r >= 0 ? { burst: bursts[r]!, afterBurst: after[r]! } : {}),
        ...readLimitCounters(layout, s.cgroup),
      };
    });
  };

  const layers = imageLayerDirs(podman, image);
  const worst: Case = { backend: 'GCP', secrets: 100, notifier: true, first: true };
  const init: InitRow[] = [];
  const sidecars: SidecarRow[] = [];
  const limitTrials: LimitTrial[] = [];
  try {
    // The first agent on the node, in the worst case (GCP: the most code): its init run, then, with
    // the image's files dropped again, its sidecar, which then runs on with the GCP group.
    dropFromPageCache(layers);
    init.push(await initRun(worst));
    dropFromPageCache(layers);
    const before = residentMiB(layers, NODE_BINARY);
    const first = await startSidecar(worst, '1s');
    const after = residentMiB(layers, NODE_BINARY);
    for (const backend of options.backends ?? BACKEND_NAMES) {
      const group: Sidecar[] = backend === worst.backend ? [first] : [];
      for (const secrets of [1, 100])
        for (const notifier of [false, true])
          group.push(await startSidecar({ backend, secrets, notifier, first: false }, '1s'));
      // The largest values a backend stores, as many as an 8Mi volume can swap (old and new side by side).
      if (backend === 'AWS')
        group.push(
          await startSidecar(
            { backend, secrets: 60, valueBytes: LARGE_VALUE_BYTES, notifier: false, first: false },
            '1s',
          ),
        );
      // What a pod keeps between refreshes at the default interval: the steady state to reserve.
      group.push(await startSidecar({ backend, secrets: 1, notifier: false, first: false }, defaultInterval));
      group.push(
        await startSidecar({ backend, secrets: 100, notifier: true, first: false }, defaultInterval),
      );
      // Init runs while the group's sidecars run (several agents at once).
      for (const secrets of [1, 100])
        for (const notifier of [false, true])
          init.push(await initRun({ backend, secrets, notifier, first: false }));
      sidecars.push(...(await measure(group)));
      for (const s of group) await stop(s.agent);
    }
    if (running.has(first.agent)) await stop(first.agent);
    // The worst case alone, first on the node, under tighter limits and the default: the default's margin.
    const trialLimits = [...new Set([...options.trialLimits, defaultLimit])].sort(
      (a, b) => quantityBytes(a) - quantityBytes(b),
    );
    for (const limit of trialLimits) {
      const coldCache = () => {
        dropFromPageCache(layers);
        if (residentMiB(layers, NODE_BINARY) > 1)
          throw new Error('the Node binary stayed in the page cache: a process still maps it');
      };
      coldCache();
      let initTrial: LimitTrial['init'];
      try {
        initTrial = { outcome: 'ran', row: await initRun(worst, limit) };
      } catch (e) {
        const peak = (e as { peak?: PeakFigures }).peak;
        initTrial = { outcome: (e as Error).message.replace(/^init \S+ /, ''), ...(peak ? { peak } : {}) };
      }
      coldCache();
      const trial = { memoryLimit: limit, nodeOptions: nodeOptions(limit, volumeSizeLimit), init: initTrial };
      let s: Sidecar | undefined;
      try {
        s = await startSidecar(worst, '1s', limit);
        const [row] = await measure([s]);
        limitTrials.push({ ...trial, outcome: 'ran', row: row! });
      } catch (e) {
        const failed = e as { agent?: AgentContainer; label?: string };
        const agent = s?.agent ?? failed.agent;
        if (!agent) throw e;
        const cgroup = containerCgroup(layout, agent.parent);
        const m = cgroup === undefined ? undefined : readMemory(layout, join(layout.memoryRoot, cgroup));
        limitTrials.push({
          ...trial,
          outcome: agent.ended()
            ? `exited ${await agent.exited}`
            : (e as Error).message.replace(/^sidecar \S+ /, ''),
          ...(m && cgroup
            ? {
                faults: {
                  majorFaults: m.majorFaults,
                  fileRefaults: m.fileRefaults,
                  oomKills: readLimitCounters(layout, cgroup).oomKills,
                },
              }
            : {}),
        });
        if (!s) await stop(agent);
      } finally {
        if (s) await stop(s.agent);
      }
    }
    return {
      cgroupVersion: layout.version,
      memoryLimit: defaultLimit,
      nodeOptions: nodeOptions(defaultLimit, volumeSizeLimit),
      settleSeconds: options.settleSeconds,
      valueBytes: VALUE_BYTES,
      nodeBinaryResidentMiB: { before, after },
      init,
      sidecars,
      limitTrials,
    };
  } finally {
    for (const agent of [...running]) await stop(agent);
    await backends.stop();
    app.close();
    removeCgroupTree(layout, root);
  }
}
