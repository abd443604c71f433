/**
 * One bench run's measurements, shaped as the bench modules return them, with plausible values: the
 * input of the results-file and docs-rendering tests (the real file is bench/results/latest.json).
 */
import type { Measured } from '../../bench/report/figures.ts';
import { RESULTS_SCHEMA } from '../../bench/report/results-file.ts';
import { COLD_START_CASES } from '../../bench/report/figures.ts';

const rate = { p50Ms: 1, p99Ms: 3, maxMs: 9, ok: 100, errors: 0, sentPerSec: 1000 };
const max = { reqPerSec: 9000, p99Ms: 4, errors: 0, cpuUsPerRequest: 70 };
const mode = {
  fixedRate: {
    webhook: rate,
    floor: { ...rate, p99Ms: 2 },
    p50VsFloor: 1,
    p99VsFloor: 1.5,
    p99OverFloorMs: 1,
  },
  max: {
    webhook: max,
    floor: { ...max, cpuUsPerRequest: 30 },
    throughputVsFloor: 0.5,
    cpuPerRequestVsFloor: 2.3,
  },
};
const steady = {
  workingSetMiB: 19,
  anonMiB: 16.6,
  usageMiB: 20,
  cacheMiB: 1,
  mappedFileMiB: 40,
  kernelMiB: 1,
  rssMiB: 59.6,
  rssFileMiB: 43,
  cpuMillicores: 0.4,
  majorFaults: 0,
  fileRefaults: 0,
  heapUsedMiB: 9,
  heapTotalMiB: 12,
  externalMiB: 1,
};
const peak = {
  samples: 10,
  workingSetMiB: 34.7,
  anonMiB: 31.8,
  usageMiB: 36,
  cacheMiB: 1,
  kernelPeakUsageMiB: 37,
  rssPeakMiB: 69,
  cpuSeconds: 0.42,
  majorFaults: 0,
  fileRefaults: 12_210,
};

/** One run's measurements, shaped as the bench modules return them. */
export const measured = {
  coldStartMs: Object.fromEntries(Object.values(COLD_START_CASES).map((name, i) => [name, 30 + i])),
  sidecar: {
    callsPerUnchangedCycle: 4.5,
    propagationMs: { median: 769, max: 835, samples: 8 },
    rss: { startMiB: 67.3, endMiB: 67.5, maxMiB: 68.7, seconds: 600 },
    openFds: { start: 24, end: 23 },
  },
  sidecarRss: {
    floorMiB: 41.8,
    oneSecretMiB: 61.6,
    oneSecretVsFloor: 1.47,
    bareNodeMiB: 49.8,
    bareNodeVsFloor: 1.19,
    awsSdkAloneMiB: 62.9,
    awsSdkAloneVsFloor: 1.5,
    seconds: 30,
  },
  postStart: {
    rounds: 9,
    start: {
      hookMs: 33.4,
      floorMs: 22.3,
      hookCpuMs: 30,
      floorCpuMs: 20,
      vsFloor: { time: 1.5, cpu: 1.5 },
      hookAnonMiB: 10,
      hookPeakRssMiB: 40,
    },
    waiting: {
      seconds: 5,
      hook: { anonMiB: 12.8, rssMiB: 52.2, cpuMs: 5 },
      agent: { anonMiB: 17.5, rssMiB: 60.1 },
      idleNode: { anonMiB: 10, rssMiB: 40 },
      hookAnonVsAgentAnon: 0.73,
      agentCpuMsPerSecond: { withHook: 1, withoutHook: 1 },
    },
    gate: { agentReadyMs: 300, hookLagMs: { median: 12, max: 30 }, probeLagMs: { median: 810, max: 851 } },
  },
  images: {
    engine: 'podman 4.3.1',
    baseMiB: 138,
    images: [
      { name: 'agent', MiB: 166.6, addedMiB: 28.6, vsBase: 1.21 },
      { name: 'webhook', MiB: 138.7, addedMiB: 0.7, vsBase: 1.005 },
    ],
    platforms: [
      { name: 'agent', platform: 'linux/amd64', MiB: 166.6, baseMiB: 138, pulledMiB: 58.7 },
      { name: 'agent', platform: 'linux/arm64', MiB: 173.2, baseMiB: 144.4, pulledMiB: 58.4 },
      { name: 'webhook', platform: 'linux/amd64', MiB: 138.6, baseMiB: 138, pulledMiB: 48.7 },
      { name: 'webhook', platform: 'linux/arm64', MiB: 145.1, baseMiB: 144.4, pulledMiB: 48.4 },
    ],
    coldStart: { baseMs: 218, agentMs: 330, vsBase: 1.51, rounds: 9 },
  },
  agentMemory: {
    cgroupVersion: 2,
    memoryLimit: '128Mi',
    nodeOptions: '--max-old-space-size=44',
    settleSeconds: 45,
    valueBytes: 1024,
    nodeBinaryResidentMiB: { before: 0, after: 43 },
    init: [{ backend: 'AWS', secrets: 1, notifier: false, first: false, seconds: 0.6, peak }],
    sidecars: [
      {
        backend: 'AWS',
        secrets: 1,
        notifier: false,
        first: false,
        memoryLimit: '128Mi',
        refreshInterval: '5m',
        start: { seconds: 1, cpuSeconds: 0.4 },
        steady,
        limitHits: 0,
        oomKills: 0,
      },
    ],
    limitTrials: [
      {
        memoryLimit: '96Mi',
        nodeOptions: '',
        init: { outcome: 'ran' },
        outcome: 'exit 137',
        faults: { majorFaults: 9, fileRefaults: 731_086, oomKills: 1 },
      },
    ],
  },
  smallSidecar: {
    idle: [
      {
        label: 'resident alone',
        workingSetMiB: 0.6,
        anonMiB: 0.2,
        kernelMiB: 0.3,
        cacheMiB: 0.1,
        fileRefaults: 0,
      },
      {
        label: 'Node sidecar (today)',
        workingSetMiB: 19,
        anonMiB: 16,
        kernelMiB: 1,
        cacheMiB: 1,
        fileRefaults: 0,
      },
      {
        label: 'small sidecar',
        workingSetMiB: 2.1,
        anonMiB: 0.4,
        kernelMiB: 1,
        cacheMiB: 0.5,
        fileRefaults: 0,
      },
      {
        label: 'idle node, one HTTP server',
        workingSetMiB: 15,
        anonMiB: 12,
        kernelMiB: 1,
        cacheMiB: 1,
        fileRefaults: 0,
      },
    ],
    cpu: [
      {
        label: 'Node sidecar (today)',
        idleMillicores: 0.4,
        cpuSecondsPerRefresh: 0.05,
        cpuSecondsPerHourDefault: 2,
        cpuSecondsPerHour60s: 4.4,
      },
      {
        label: 'small sidecar',
        idleMillicores: 0,
        cpuSecondsPerRefresh: 0.2,
        cpuSecondsPerHourDefault: 2.4,
        cpuSecondsPerHour60s: 12,
      },
    ],
    run: { seconds: 0.3, peakMiB: 45 },
    logins: [],
    timeline: {
      refreshInterval: '60s',
      series: [
        {
          label: 'small sidecar',
          what: 'working set',
          points: [
            [1, 2.1],
            [2, 2.1],
          ],
        },
        {
          label: 'small sidecar',
          what: 'peak usage within the second',
          points: [
            [1, 2.3],
            [2, 44.8],
          ],
        },
        {
          label: 'Node sidecar (today)',
          what: 'working set',
          points: [
            [1, 19],
            [2, 19.2],
          ],
        },
      ],
    },
  },
  atomicity: {
    swaps: 10_000,
    fileReads: 1_289_952,
    consistentSets: 1,
    retriedSets: 0,
    torn: 0,
    mixed: 0,
    versionsSeen: 10,
  },
  webhook: {
    requestBytes: 3900,
    responseBytes: 2000,
    rounds: 5,
    rate: 1000,
    connections: 16,
    seconds: 10,
    modes: { replicas: mode, distinct: mode },
    targets: { cpuPerAdmissionVsFloor: 2, p99OverFloorMsAtRate: 2, minReqPerSec: 1000 },
    machine: { cpus: 2, loadAverage: [0.5, 1.2] },
  },
  envExec: {
    rounds: 15,
    instructions: { direct: 100_000, wrapped: 160_000, node: 90_000_000 },
    directUs: 500,
    wrappedUs: 540,
    nodeUs: 30_000,
  },
  podStart: { rounds: 5, medianMs: { floor: 1300, init: 1500, nativeSmall: 1650, nativeNode: 1530 } },
  release: { rounds: 3, releaseSeconds: 13, pushSeconds: 4 },
} satisfies Measured;

export const file = (figures: unknown) => ({
  schema: RESULTS_SCHEMA,
  commit: 'abc1234',
  dirty: false,
  date: '2026-11-29T05:00:00.000Z',
  durationSeconds: 1800,
  command: 'npm run bench',
  settings: {},
  machine: { cores: 2 },
  figures,
  series: {},
});
