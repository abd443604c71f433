/**
 * The small sidecar against today's (issue 31), side by side in one run, each an agent container from
 * the agent image run by podman as the webhook renders it, in its own memory cgroup read as the kubelet
 * reads it (bench/memory-cgroup.ts):
 *   - between refreshes: working set and anonymous memory of the Node sidecar (SIDECAR_COMMAND), the small
 *     sidecar (`/app/resident -- <snapshot run>`), the resident alone (one run that hands back nothing and
 *     asks for a day), and an idle `node` with one HTTP server: the floor no Node sidecar gets under;
 *   - CPU: each sidecar's idle rate (a window with no refresh in it) and its CPU per refresh (a window at
 *     a 1 s REFRESH_INTERVAL, less the idle rate, over the refreshes counted in /metrics); CPU-seconds an
 *     hour follow for the default interval and for 60 s;
 *   - a small-sidecar run: its duration (the resident's secret_agent_resident_last_run_seconds) and the
 *     cgroup's peak over a window of runs;
 *   - backend calls per run with the token carried from run to run, and what the first run (no token
 *     yet) made: Vault kubernetes login, AWS web identity through STS (moto behind a counting proxy).
 * One AWS secret from moto unless said; the first agent on the node is not measured (the image's pages
 * are in the page cache from the warm-up container).
 */
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { CreateSecretCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { AGENT_SETTINGS } from '../agent/contract/agent-settings.ts';
import { parseDuration } from '../agent/contract/duration.ts';
import { requirePodman } from '../images/container-engine.ts';
import { readImagesManifest } from '../images/manifest.ts';
import { FakeVault } from '../test/fakes/vault.ts';
import { FaultInjectingProxy } from '../test/support/fault-injecting-proxy.ts';
import { freePort, startMoto, type Moto } from '../test/support/moto.ts';
import { eventually } from '../test/support/run-agent.ts';
import { SIDECAR_COMMAND, smallSidecarCommand } from '../webhook/render/agent-containers.ts';

const SMALL_SIDECAR_COMMAND = smallSidecarCommand(false);
import { WEBHOOK_SETTINGS } from '../webhook/config/settings.ts';
import {
  cgroupLayout,
  containerCgroup,
  readCpuSeconds,
  readMemory,
  removeCgroupTree,
  resetPeak,
  type MemorySample,
} from './memory-cgroup.ts';
import { startAgentContainer, type AgentContainer } from './podman-agent.ts';

export interface SmallSidecarOptions {
  /** How long each container settles after its first run before memory is read. */
  readonly settleSeconds: number;
  /** The idle CPU window, and the 1 s-interval window. */
  readonly windowSeconds: number;
  /** The timeline: how long the three containers run side by side at a 60 s interval, sampled each second. */
  readonly timelineSeconds: number;
}

/** One container's memory each second of the timeline: [seconds since it was ready, MiB]. */
export interface TimelineSeries {
  readonly label: string;
  readonly what: 'working set' | 'peak usage within the second';
  readonly points: readonly (readonly [number, number])[];
}

export interface IdleRow {
  readonly label: string;
  readonly workingSetMiB: number;
  readonly anonMiB: number;
  readonly kernelMiB: number;
  /** Page cache charged to the container: the image's files it was first to read, or read again once dropped. */
  readonly cacheMiB: number;
  /** File pages faulted in again after the machine dropped them: the container was charged for them anew. */
  readonly fileRefaults: number;
}

export interface CpuRow {
  readonly label: string;
  readonly idleMillicores: number;
  readonly cpuSecondsPerRefresh: number;
  readonly cpuSecondsPerHourDefault: number;
  readonly cpuSecondsPerHour60s: number;
}

export interface SmallSidecarFigures {
  readonly idle: readonly IdleRow[];
  readonly cpu: readonly CpuRow[];
  readonly run: { readonly seconds: number; readonly peakMiB: number | undefined };
  /** Logins (Vault kubernetes login, STS AssumeRoleWithWebIdentity): the first run's, and per later run. */
  readonly logins: readonly {
    readonly backend: string;
    readonly firstRun: number;
    readonly perLaterRun: number;
    readonly laterRuns: number;
  }[];
  /** Side by side at TIMELINE_INTERVAL: the working set of each, and the small sidecar's peaks (its runs). */
  readonly timeline: { readonly refreshInterval: string; readonly series: readonly TimelineSeries[] };
}

/** The timeline's refresh interval: the shortest the webhook gives the small sidecar. */
const TIMELINE_INTERVAL = '60s';

/** A run that hands back nothing and asks for a day: the resident, then, alone. */
const IDLE_RUN = [
  '/nodejs/bin/node',
  '-e',
  "require('fs').writeSync(4, 'secret-agent-outcome 1\\nready 1\\nnext-ms 86400000\\nend\\n')",
];
// PID 1 of its container: SIGTERM's default action does not apply to it, so it is handled.
const IDLE_NODE = [
  '/nodejs/bin/node',
  '-e',
  "process.on('SIGTERM', () => process.exit(0)); require('http').createServer((q, s) => s.end('ok')).listen(+process.env.PORT)",
];

export async function benchSmallSidecar(
  moto: Moto,
  options: SmallSidecarOptions,
): Promise<SmallSidecarFigures> {
  const layout = cgroupLayout();
  const podman = requirePodman();
  const image = readImagesManifest().images.agent.ref;
  const memoryLimit = WEBHOOK_SETTINGS.AGENT_MEMORY_LIMIT.default!;
  const volumeSizeLimit = WEBHOOK_SETTINGS.SECRETS_VOLUME_SIZE_LIMIT.default!;
  const defaultIntervalMs = parseDuration(AGENT_SETTINGS.REFRESH_INTERVAL.default!)!;
  const root = `secret-agent-small-${process.pid}`;
  const running = new Set<AgentContainer>();
  const sts = await FaultInjectingProxy.start(moto.endpoint);
  const vault = await FakeVault.start();
  vault.mountKv('secret', 2);
  vault.putKv('secret/bench', { value: 'small-sidecar-bench' });
  vault.policy('bench', { 'secret/data/bench': ['read'] });
  const jwt = 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJiZW5jaCJ9.c2ln';
  vault.kubernetesRole('kubernetes', 'bench', { jwt, policies: ['bench'], ttlSec: 3600 });
  const client = new SecretsManagerClient({
    region: 'us-east-1',
    endpoint: moto.endpoint,
    credentials: { accessKeyId: 'bench', secretAccessKey: 'bench' },
  });
  await client
    .send(new CreateSecretCommand({ Name: 'small/bench', SecretString: 'x'.repeat(1024) }))
    .catch(() => undefined); // made by an earlier round
  client.destroy();
  let serial = 0;
  const run: { seconds: number; peakMiB: number | undefined } = { seconds: NaN, peakMiB: undefined };
  // The pod's service-account token, for both logins: mounted read-only at /jwt.
  const jwtDir = mkdtempSync('/dev/shm/small-sidecar-jwt-');
  writeFileSync(`${jwtDir}/token`, jwt);
  chmodSync(jwtDir, 0o755);
  chmodSync(`${jwtDir}/token`, 0o644);

  const aws = (extra: Record<string, string> = {}) => ({
    AWS_ACCESS_KEY_ID: 'bench',
    AWS_SECRET_ACCESS_KEY: 'bench',
    AWS_REGION: 'us-east-1',
    AWS_ENDPOINT_URL_SECRETS_MANAGER: moto.endpoint,
    SECRET_0_REF: 'aws:small/bench',
    SECRET_0_FILENAME: 'bench',
    ...extra,
  });
  const start = async (label: string, command: readonly string[], env: Record<string, string>) => {
    const port = await freePort();
    // Container and cgroup names: letters, digits and dashes only.
    const name = `${label.toLowerCase().replace(/[^a-z0-9]+/g, '-')}-${++serial}`;
    const agent = startAgentContainer(
      podman,
      {
        image,
        mode: 'sidecar',
        gcp: false,
        memoryLimit,
        volumeSizeLimit,
        command,
        mounts: [{ host: jwtDir, container: '/jwt', readOnly: true }],
        env: { AGENT_HTTP_ADDR: `127.0.0.1:${port}`, PORT: String(port), ...env },
      },
      `${root}/${name}`,
      `${root}-${name}`,
    );
    running.add(agent);
    const cgroup = await eventually(() => containerCgroup(layout, `${root}/${name}`), `${label}'s cgroup`);
    await eventually(
      () =>
        fetch(`http://127.0.0.1:${port}/readyz`).then(
          (r) => (r.status === 200 ? true : undefined),
          () => undefined,
        ),
      `${label} ready`,
      90_000,
    );
    return { agent, port, cgroup };
  };
  const metric = async (port: number, series: string) => {
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    const line = text.split('\n').find((l) => l.startsWith(`${series} `));
    return line === undefined ? NaN : Number(line.slice(series.length + 1));
  };
  const settled = async (cgroup: string): Promise<MemorySample> => {
    await sleep(options.settleSeconds * 1000);
    // The median of five reads a second apart: one read can land on a page-cache flush.
    const samples: MemorySample[] = [];
    for (let i = 0; i < 5; i++) {
      samples.push(readMemory(layout, join(layout.memoryRoot, cgroup)));
      await sleep(1000);
    }
    return samples.sort((a, b) => a.workingSetMiB - b.workingSetMiB)[2]!;
  };

  try {
    // The image's files into the page cache, so no measured container is the first on the node.
    const warm = await start('warm', SMALL_SIDECAR_COMMAND, aws());
    await warm.agent.stop();
    running.delete(warm.agent);

    const idle: IdleRow[] = [];
    const cpu: CpuRow[] = [];
    const variants = [
      {
        label: 'Node sidecar (today)',
        command: SIDECAR_COMMAND,
        env: aws(),
        refreshes: 'secret_agent_fetches_total{provider="aws",outcome="success"}',
      },
      {
        label: 'small sidecar',
        command: SMALL_SIDECAR_COMMAND,
        env: aws(),
        refreshes: 'secret_agent_resident_runs_total{outcome="ok"}',
      },
      {
        label: 'resident alone',
        command: ['/app/resident', '--', ...IDLE_RUN],
        env: {},
        refreshes: undefined,
      },
      { label: 'idle node, one HTTP server', command: IDLE_NODE, env: {}, refreshes: undefined },
    ];
    for (const v of variants) {
      const c = await start(v.label, v.command, v.env);
      const m = await settled(c.cgroup);
      idle.push({
        label: v.label,
        workingSetMiB: m.workingSetMiB,
        anonMiB: m.anonMiB,
        kernelMiB: m.kernelMiB,
        cacheMiB: m.cacheMiB,
        fileRefaults: m.fileRefaults,
      });
      // Idle CPU: a window after the settle, at the default interval, with no refresh in it.
      const cpu0 = readCpuSeconds(layout, c.cgroup);
      if (v.refreshes) await sleep(options.windowSeconds * 1000);
      const idleRate = (readCpuSeconds(layout, c.cgroup) - cpu0) / options.windowSeconds;
      await c.agent.stop();
      running.delete(c.agent);
      if (!v.refreshes) continue;
      // CPU per refresh: a window at a 1 s interval, less the idle rate, over the refreshes it counted.
      const busy = await start(v.label, v.command, { ...v.env, REFRESH_INTERVAL: '1s' });
      await sleep(2000);
      const n0 = await metric(busy.port, v.refreshes);
      const b0 = readCpuSeconds(layout, busy.cgroup);
      resetPeak(layout, join(layout.memoryRoot, busy.cgroup));
      await sleep(options.windowSeconds * 1000);
      const refreshes = (await metric(busy.port, v.refreshes)) - n0;
      const busyCpu = readCpuSeconds(layout, busy.cgroup) - b0;
      const perRefresh = Math.max(0, busyCpu - idleRate * options.windowSeconds) / Math.max(1, refreshes);
      if (v.label === 'small sidecar') {
        run.seconds = await metric(busy.port, 'secret_agent_resident_last_run_seconds');
        run.peakMiB = readMemory(layout, join(layout.memoryRoot, busy.cgroup)).peakUsageMiB;
      }
      await busy.agent.stop();
      running.delete(busy.agent);
      const perHour = (intervalMs: number) => idleRate * 3600 + (3_600_000 / intervalMs) * perRefresh;
      cpu.push({
        label: v.label,
        idleMillicores: idleRate * 1000,
        cpuSecondsPerRefresh: perRefresh,
        cpuSecondsPerHourDefault: perHour(defaultIntervalMs),
        cpuSecondsPerHour60s: perHour(60_000),
      });
    }

    // Logins per run: the first run logs in, later ones use what the last handed back.
    const logins: SmallSidecarFigures['logins'][number][] = [];
    for (const backend of ['Vault', 'AWS'] as const) {
      vault.reset();
      sts.calls.length = 0;
      const count = () =>
        backend === 'Vault' ? vault.count('POST', 'auth/kubernetes/login') : sts.calls.length;
      const env: Record<string, string> =
        backend === 'Vault'
          ? {
              VAULT_ADDR: vault.addr,
              VAULT_ROLE: 'bench',
              VAULT_SA_TOKEN_FILE: '/jwt/token',
              SECRET_0_REF: 'vault:secret/data/bench#value',
              SECRET_0_FILENAME: 'bench',
              REFRESH_INTERVAL: '1s',
            }
          : {
              AWS_REGION: 'us-east-1',
              AWS_ENDPOINT_URL_SECRETS_MANAGER: moto.endpoint,
              AWS_ROLE_ARN: 'arn:aws:iam::123456789012:role/bench',
              AWS_WEB_IDENTITY_TOKEN_FILE: '/jwt/token',
              AWS_ENDPOINT_URL_STS: sts.endpoint,
              SECRET_0_REF: 'aws:small/bench',
              SECRET_0_FILENAME: 'bench',
              REFRESH_INTERVAL: '1s',
            };
      const c = await start(`logins-${backend}`, SMALL_SIDECAR_COMMAND, env);
      const firstRun = count();
      const runs0 = await metric(c.port, 'secret_agent_resident_runs_total{outcome="ok"}');
      await sleep(options.windowSeconds * 1000);
      const laterRuns = (await metric(c.port, 'secret_agent_resident_runs_total{outcome="ok"}')) - runs0;
      logins.push({
        backend,
        firstRun,
        perLaterRun: (count() - firstRun) / Math.max(1, laterRuns),
        laterRuns,
      });
      await c.agent.stop();
      running.delete(c.agent);
    }
    // The timeline: the three side by side, each sampled once a second over a few refresh intervals; the
    // small sidecar's peak is reset each second, so a run's brief rise shows although a sample misses it.
    const timed = [];
    for (const v of variants.filter((x) => x.label !== 'resident alone'))
      timed.push({
        ...v,
        c: await start(`timeline ${v.label}`, v.command, { ...v.env, REFRESH_INTERVAL: TIMELINE_INTERVAL }),
      });
    const series = timed.flatMap((t) => [
      { label: t.label, what: 'working set' as const, points: [] as [number, number][] },
      ...(t.label === 'small sidecar'
        ? [
            {
              label: t.label,
              what: 'peak usage within the second' as const,
              points: [] as [number, number][],
            },
          ]
        : []),
    ]);
    const began = Date.now();
    for (const t of timed) resetPeak(layout, join(layout.memoryRoot, t.c.cgroup));
    while (Date.now() - began < options.timelineSeconds * 1000) {
      await sleep(1000 - ((Date.now() - began) % 1000));
      const at = Math.round((Date.now() - began) / 100) / 10;
      for (const t of timed) {
        const dir = join(layout.memoryRoot, t.c.cgroup);
        const m = readMemory(layout, dir);
        series
          .find((x) => x.label === t.label && x.what === 'working set')!
          .points.push([at, m.workingSetMiB]);
        const peak = series.find((x) => x.label === t.label && x.what !== 'working set');
        if (peak && m.peakUsageMiB !== undefined) {
          peak.points.push([at, m.peakUsageMiB]);
          resetPeak(layout, dir);
        }
      }
    }
    for (const t of timed) {
      await t.c.agent.stop();
      running.delete(t.c.agent);
    }
    return { idle, cpu, run, logins, timeline: { refreshInterval: TIMELINE_INTERVAL, series } };
  } finally {
    for (const a of running) await a.stop().catch(() => undefined);
    removeCgroupTree(layout, root);
    await sts.close();
    await vault.stop();
    rmSync(jwtDir, { recursive: true, force: true });
  }
}

/** The figures as tables, each beside today's sidecar measured in the same run. */
export function formatSmallSidecar(f: SmallSidecarFigures): string {
  const base = f.idle[0]!;
  const lines = [
    '## Small sidecar (issue 31): between refreshes, beside today’s sidecar in the same run',
    '',
    '| container | working set MiB | anonymous MiB | kernel MiB | page cache MiB (refaults) | × today’s working set |',
    '| --- | --- | --- | --- | --- | --- |',
    ...f.idle.map(
      (r) =>
        `| ${r.label} | ${r.workingSetMiB.toFixed(2)} | ${r.anonMiB.toFixed(2)} | ${r.kernelMiB.toFixed(2)} | ${r.cacheMiB.toFixed(2)} (${r.fileRefaults}) | ${(r.workingSetMiB / base.workingSetMiB).toFixed(3)} |`,
    ),
    '',
    '| sidecar | idle m | CPU-s a refresh | CPU-s an hour at 5m | at 60s |',
    '| --- | --- | --- | --- | --- |',
    ...f.cpu.map(
      (r) =>
        `| ${r.label} | ${r.idleMillicores.toFixed(3)} | ${r.cpuSecondsPerRefresh.toFixed(3)} | ${r.cpuSecondsPerHourDefault.toFixed(2)} | ${r.cpuSecondsPerHour60s.toFixed(2)} |`,
    ),
    '',
    `A run: ${f.run.seconds.toFixed(3)} s; the cgroup's peak over runs at a 1 s interval: ${f.run.peakMiB?.toFixed(1) ?? 'n/a'} MiB.`,
    '',
    '| backend | logins, first run | logins per later run | later runs |',
    '| --- | --- | --- | --- |',
    ...f.logins.map((c) => `| ${c.backend} | ${c.firstRun} | ${c.perLaterRun.toFixed(2)} | ${c.laterRuns} |`),
  ];
  return lines.join('\n');
}

// `node bench/small-sidecar.ts`: this part of `npm run bench` alone, after `npm run images`.
if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const moto = await startMoto();
  try {
    const figures = await benchSmallSidecar(moto, {
      settleSeconds: Number(process.env.BENCH_SMALL_SETTLE_SECONDS ?? 20),
      windowSeconds: Number(process.env.BENCH_SMALL_WINDOW_SECONDS ?? 30),
      timelineSeconds: Number(process.env.BENCH_SMALL_TIMELINE_SECONDS ?? 200),
    });
    console.log(formatSmallSidecar(figures));
  } finally {
    await moto.stop();
  }
}
