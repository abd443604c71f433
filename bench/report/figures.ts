/**
 * Every figure a bench run measured, flattened into the results file's `figures` (results-file.ts):
 * one id per number the docs may quote, its unit and the baseline it is read against. Ids are stable
 * names (`coldStart.snapshot.aws1`), so a document names a figure, never a position in a report.
 */
import type { AgentMemoryFigures, Case } from '../agent-memory.ts';
import type { AtomicityFigures } from '../atomicity.ts';
import type { EnvExecFigures } from '../env-exec.ts';
import type { ImageFigures } from '../images.ts';
import type { PodStartFigures } from '../pod-start.ts';
import type { PostStartFigures } from '../post-start.ts';
import type { ReleaseFigures } from '../release.ts';
import type { SidecarFigures } from '../sidecar.ts';
import type { SidecarRssFigures } from '../sidecar-rss.ts';
import type { SmallSidecarFigures } from '../small-sidecar.ts';
import type { WebhookFigures } from '../webhook/figures.ts';
import type { Figure, Series, Unit } from './results-file.ts';

/** What bench/run.ts measured, by step. */
export interface Measured {
  /** Cold start medians by case name (bench/run.ts). */
  readonly coldStartMs: Readonly<Record<string, number>>;
  readonly sidecar: SidecarFigures;
  readonly sidecarRss: SidecarRssFigures;
  readonly postStart: PostStartFigures;
  readonly images: ImageFigures;
  readonly agentMemory: AgentMemoryFigures;
  readonly smallSidecar: SmallSidecarFigures;
  readonly atomicity: AtomicityFigures;
  readonly webhook: WebhookFigures;
  readonly envExec: EnvExecFigures;
  readonly podStart: PodStartFigures;
  readonly release: ReleaseFigures;
}

/** The cold-start cases by id: what bench/run.ts names each. */
export const COLD_START_CASES: Readonly<Record<string, string>> = {
  floor: 'node -e 0 (floor)',
  bareNode: 'reference: bare Node, one request, no library',
  awsSdkAlone: 'reference: the AWS SDK alone, one GetSecretValue',
  'plain.aws1': 'agent, 1 AWS secret',
  'plain.aws10': 'agent, 10 AWS secrets',
  'plain.gcp1': 'agent, 1 GCP secret',
  'plain.gcp1Grpc': 'agent, 1 GCP secret, GCP_TRANSPORT=grpc',
  'plain.vault1': 'agent, 1 Vault secret',
  'snapshot.aws1': 'agent snapshot, 1 AWS secret',
  'snapshot.aws10': 'agent snapshot, 10 AWS secrets',
  'snapshot.gcp1': 'agent snapshot, 1 GCP secret',
  'snapshot.gcp1Grpc': 'agent snapshot, 1 GCP secret, GCP_TRANSPORT=grpc',
  'snapshot.vault1': 'agent snapshot, 1 Vault secret',
  awsCli: 'aws secretsmanager get-secret-value',
};

/** A small-sidecar bench row's id from its label. */
const SMALL_ROWS: Readonly<Record<string, string>> = {
  'Node sidecar (today)': 'node',
  'small sidecar': 'small',
  'resident alone': 'residentAlone',
  'idle node, one HTTP server': 'idleNode',
};

/** An agent-memory case's id: backend, secrets, value size, notifier, first on the node. */
export function caseId(c: Case & { readonly refreshInterval?: string }): string {
  return [
    c.backend.toLowerCase(),
    `${c.secrets}`,
    ...(c.valueBytes === undefined ? [] : [`${c.valueBytes / 1024}k`]),
    ...(c.notifier ? ['notifier'] : []),
    ...(c.refreshInterval ? [`every${c.refreshInterval}`] : []),
    ...(c.first ? ['first'] : []),
  ].join('-');
}

export function collectFigures(m: Measured): Record<string, Figure> {
  const figures: Record<string, Figure> = {};
  const add = (
    id: string,
    label: string,
    value: number | null | undefined,
    unit: Unit,
    by: string,
    baseline?: string,
  ) => {
    if (value === null || value === undefined || !Number.isFinite(value)) return;
    figures[id] = { label, value, unit, measuredBy: by, ...(baseline ? { baseline } : {}) };
  };

  const cold = 'bench/run.ts › agent cold start, process start to exit, median';
  for (const [id, name] of Object.entries(COLD_START_CASES))
    add(
      `coldStart.${id}`,
      name,
      m.coldStartMs[name],
      'ms',
      cold,
      id === 'floor' ? undefined : 'coldStart.floor',
    );

  const soak = `bench/sidecar.ts › 100 AWS secrets at REFRESH_INTERVAL=1s, ${m.sidecar.rss.seconds} s soak`;
  add(
    'soak.callsPerUnchangedCycle',
    'backend calls per unchanged cycle',
    m.sidecar.callsPerUnchangedCycle,
    'count',
    soak,
  );
  add('soak.propagation.median', 'rotation propagation, median', m.sidecar.propagationMs.median, 'ms', soak);
  add('soak.propagation.max', 'rotation propagation, max', m.sidecar.propagationMs.max, 'ms', soak);
  add('soak.propagation.samples', 'rotations timed', m.sidecar.propagationMs.samples, 'count', soak);
  add('soak.rss.start', 'RSS settled at the start', m.sidecar.rss.startMiB, 'MiB', soak, 'rss.idleNode');
  add('soak.rss.end', 'RSS at the end', m.sidecar.rss.endMiB, 'MiB', soak, 'rss.idleNode');
  add('soak.rss.max', 'RSS, highest', m.sidecar.rss.maxMiB, 'MiB', soak);
  add('soak.seconds', 'soak length', m.sidecar.rss.seconds, 's', soak);
  add('soak.fds.start', 'open fds at the start', m.sidecar.openFds.start, 'count', soak);
  add('soak.fds.end', 'open fds at the end', m.sidecar.openFds.end, 'count', soak);

  const rss = 'bench/sidecar-rss.ts › RSS, median of samples once a second';
  add('rss.idleNode', 'an idle node with the same options', m.sidecarRss.floorMiB, 'MiB', rss);
  add('rss.oneSecret', 'Node sidecar, 1 AWS secret', m.sidecarRss.oneSecretMiB, 'MiB', rss, 'rss.idleNode');
  add('rss.bareNode', 'reference sidecar: bare Node', m.sidecarRss.bareNodeMiB, 'MiB', rss, 'rss.idleNode');
  add(
    'rss.awsSdkAlone',
    'reference sidecar: the AWS SDK alone',
    m.sidecarRss.awsSdkAloneMiB,
    'MiB',
    rss,
    'rss.idleNode',
  );

  const ps = 'bench/post-start.ts › the native sidecar’s postStart hook';
  const p = m.postStart;
  add('postStart.floor', 'node -e 0, spawn to exit', p.start.floorMs, 'ms', ps);
  add(
    'postStart.hook',
    'the hook, /readyz already 200: spawn to exit',
    p.start.hookMs,
    'ms',
    ps,
    'postStart.floor',
  );
  add(
    'postStart.waiting.hookAnon',
    'the hook while it waits: anonymous',
    p.waiting.hook.anonMiB,
    'MiB',
    ps,
    'postStart.waiting.agentAnon',
  );
  add(
    'postStart.waiting.hookRss',
    'the hook while it waits: RSS',
    p.waiting.hook.rssMiB,
    'MiB',
    ps,
    'postStart.waiting.agentRss',
  );
  add('postStart.waiting.agentAnon', 'the agent: anonymous', p.waiting.agent.anonMiB, 'MiB', ps);
  add('postStart.waiting.agentRss', 'the agent: RSS', p.waiting.agent.rssMiB, 'MiB', ps);
  add(
    'postStart.hookLag.median',
    'app start after the set is written, postStart hook, median',
    p.gate.hookLagMs.median,
    'ms',
    ps,
    'postStart.probeLag.median',
  );
  add('postStart.hookLag.max', 'the same, max', p.gate.hookLagMs.max, 'ms', ps, 'postStart.probeLag.max');
  add(
    'postStart.probeLag.median',
    'a startupProbe at period 1 s, median',
    p.gate.probeLagMs.median,
    'ms',
    ps,
  );
  add('postStart.probeLag.max', 'a startupProbe at period 1 s, max', p.gate.probeLagMs.max, 'ms', ps);

  const at = 'bench/atomicity.ts › a reader process against AtomicDir swaps';
  add('atomicity.swaps', 'swaps', m.atomicity.swaps, 'count', at);
  add('atomicity.fileReads', 'file reads by a concurrent reader', m.atomicity.fileReads, 'count', at);
  add('atomicity.torn', 'torn sets', m.atomicity.torn, 'count', at);
  add('atomicity.mixed', 'mixed sets', m.atomicity.mixed, 'count', at);

  const wh = `bench/webhook/ › keep-alive HTTPS, pod with 3 secrets, ${m.webhook.rounds} rounds`;
  for (const [mode, f] of Object.entries(m.webhook.modes)) {
    add(
      `webhook.${mode}.p99`,
      `webhook p99 at ${m.webhook.rate} req/s, ${mode}`,
      f.fixedRate.webhook.p99Ms,
      'ms',
      wh,
      `webhook.${mode}.floorP99`,
    );
    add(
      `webhook.${mode}.floorP99`,
      `TLS echo p99 at ${m.webhook.rate} req/s, ${mode} rounds`,
      f.fixedRate.floor.p99Ms,
      'ms',
      wh,
    );
    add(
      `webhook.${mode}.reqPerSec`,
      `webhook max throughput, ${mode}`,
      f.max.webhook.reqPerSec,
      'req/s',
      wh,
      `webhook.${mode}.floorReqPerSec`,
    );
    add(
      `webhook.${mode}.floorReqPerSec`,
      `TLS echo max throughput, ${mode} rounds`,
      f.max.floor.reqPerSec,
      'req/s',
      wh,
    );
    add(
      `webhook.${mode}.cpuPerRequest`,
      `webhook CPU per admission, ${mode}`,
      f.max.webhook.cpuUsPerRequest,
      'µs',
      wh,
      `webhook.${mode}.floorCpuPerRequest`,
    );
    add(
      `webhook.${mode}.floorCpuPerRequest`,
      `TLS echo CPU per request, ${mode} rounds`,
      f.max.floor.cpuUsPerRequest,
      'µs',
      wh,
    );
  }

  const im = `bench/images.ts › ${m.images.engine}`;
  add('image.base', 'the runtime base image', m.images.baseMiB, 'MiB', im);
  for (const i of m.images.images)
    add(`image.${i.name}`, `the ${i.name} image`, i.MiB, 'MiB', im, 'image.base');
  for (const p of m.images.platforms) {
    const arch = p.platform.split('/')[1]!;
    add(`image.base.${arch}`, `the runtime base, ${p.platform}`, p.baseMiB, 'MiB', im);
    add(
      `image.${p.name}.${arch}`,
      `the ${p.name} image, ${p.platform}`,
      p.MiB,
      'MiB',
      im,
      `image.base.${arch}`,
    );
    add(
      `image.${p.name}.${arch}.pulled`,
      `the ${p.name} image, ${p.platform}, as pulled (compressed)`,
      p.pulledMiB,
      'MiB',
      im,
    );
  }
  add(
    'image.coldStart.base',
    'podman run read-only to exit: the base image’s node -e 0',
    m.images.coldStart.baseMs,
    'ms',
    im,
  );
  add(
    'image.coldStart.agent',
    'podman run read-only to exit: the agent image, 1 AWS secret',
    m.images.coldStart.agentMs,
    'ms',
    im,
    'image.coldStart.base',
  );

  const am = `bench/agent-memory.ts › agent containers in podman, limit ${m.agentMemory.memoryLimit}, as the kubelet reads their cgroups`;
  for (const r of m.agentMemory.sidecars) {
    const id = `agentMemory.sidecar.${caseId(r)}`;
    add(`${id}.workingSet`, `sidecar ${caseId(r)}: working set`, r.steady.workingSetMiB, 'MiB', am);
    add(`${id}.anon`, `sidecar ${caseId(r)}: anonymous`, r.steady.anonMiB, 'MiB', am);
    add(`${id}.rss`, `sidecar ${caseId(r)}: RSS`, r.steady.rssMiB, 'MiB', am);
    add(`${id}.rssFile`, `sidecar ${caseId(r)}: RSS, file-backed`, r.steady.rssFileMiB, 'MiB', am);
    add(`${id}.cpu`, `sidecar ${caseId(r)}: CPU between refreshes`, r.steady.cpuMillicores, 'millicores', am);
    add(
      `${id}.afterBurst.workingSet`,
      `sidecar ${caseId(r)}: working set after the rotations`,
      r.afterBurst?.workingSetMiB,
      'MiB',
      am,
    );
    add(
      `${id}.afterBurst.anon`,
      `sidecar ${caseId(r)}: anonymous after the rotations`,
      r.afterBurst?.anonMiB,
      'MiB',
      am,
    );
    add(
      `${id}.afterBurst.rss`,
      `sidecar ${caseId(r)}: RSS after the rotations`,
      r.afterBurst?.rssMiB,
      'MiB',
      am,
    );
    add(
      `${id}.burst.workingSet`,
      `sidecar ${caseId(r)}: working set, peak over the rotations`,
      r.burst?.workingSetMiB,
      'MiB',
      am,
    );
    add(`${id}.oomKills`, `sidecar ${caseId(r)}: OOM kills`, r.oomKills, 'count', am);
  }
  for (const r of m.agentMemory.init) {
    const id = `agentMemory.init.${caseId(r)}`;
    add(`${id}.workingSet`, `init ${caseId(r)}: working set, peak`, r.peak.workingSetMiB, 'MiB', am);
    add(`${id}.anon`, `init ${caseId(r)}: anonymous, peak`, r.peak.anonMiB, 'MiB', am);
    add(`${id}.rss`, `init ${caseId(r)}: RSS, peak`, r.peak.rssPeakMiB, 'MiB', am);
  }
  for (const t of m.agentMemory.limitTrials) {
    const id = `agentMemory.limit.${t.memoryLimit}`;
    add(
      `${id}.init.seconds`,
      `worst case under ${t.memoryLimit}: init run time`,
      t.init.row?.seconds,
      's',
      am,
    );
    add(
      `${id}.init.cpu`,
      `worst case under ${t.memoryLimit}: init CPU`,
      t.init.row?.peak.cpuSeconds,
      'CPU-s',
      am,
    );
    add(
      `${id}.init.fileRefaults`,
      `worst case under ${t.memoryLimit}: init pages re-read`,
      t.init.row?.peak.fileRefaults,
      'count',
      am,
    );
    add(
      `${id}.sidecar.workingSet`,
      `worst case under ${t.memoryLimit}: sidecar working set`,
      t.row?.steady.workingSetMiB,
      'MiB',
      am,
    );
    add(
      `${id}.sidecar.peak`,
      `worst case under ${t.memoryLimit}: sidecar working set, peak`,
      t.row?.burst?.workingSetMiB,
      'MiB',
      am,
    );
    add(
      `${id}.oomKills`,
      `worst case under ${t.memoryLimit}: OOM kills`,
      t.row?.oomKills ?? t.faults?.oomKills,
      'count',
      am,
    );
  }

  const ss = 'bench/small-sidecar.ts › agent containers in podman, between refreshes';
  for (const r of m.smallSidecar.idle) {
    const key = SMALL_ROWS[r.label] ?? r.label;
    const id = `smallSidecar.idle.${key}`;
    const floor = key === 'idleNode' ? undefined : 'smallSidecar.idle.idleNode.workingSet';
    add(`${id}.workingSet`, `${r.label}: working set between refreshes`, r.workingSetMiB, 'MiB', ss, floor);
    add(`${id}.anon`, `${r.label}: anonymous between refreshes`, r.anonMiB, 'MiB', ss);
  }
  for (const r of m.smallSidecar.cpu) {
    const id = `smallSidecar.cpu.${SMALL_ROWS[r.label] ?? r.label}`;
    add(`${id}.idle`, `${r.label}: CPU between refreshes`, r.idleMillicores, 'millicores', ss);
    add(
      `${id}.perHourDefault`,
      `${r.label}: CPU per hour at the default interval`,
      r.cpuSecondsPerHourDefault,
      'CPU-s/h',
      ss,
    );
    add(`${id}.perHour60s`, `${r.label}: CPU per hour at 60 s`, r.cpuSecondsPerHour60s, 'CPU-s/h', ss);
  }
  add('smallSidecar.run.seconds', 'a small-sidecar run, start to end', m.smallSidecar.run.seconds, 's', ss);
  add(
    'smallSidecar.run.peak',
    'a small-sidecar container’s peak over a window of runs',
    m.smallSidecar.run.peakMiB,
    'MiB',
    ss,
  );

  const ee = `bench/env-exec.ts › ${m.envExec.rounds} rounds`;
  add(
    'envExec.instructions.direct',
    '/bin/true: user-space instructions',
    m.envExec.instructions.direct,
    'instructions',
    ee,
  );
  add(
    'envExec.instructions.wrapped',
    'env-exec … -- /bin/true: user-space instructions',
    m.envExec.instructions.wrapped,
    'instructions',
    ee,
    'envExec.instructions.direct',
  );
  add(
    'envExec.instructions.node',
    'node -e 0: user-space instructions',
    m.envExec.instructions.node,
    'instructions',
    ee,
  );
  add('envExec.start.direct', '/bin/true: per start', m.envExec.directUs, 'µs', ee);
  add(
    'envExec.start.wrapped',
    'env-exec … -- /bin/true: per start',
    m.envExec.wrappedUs,
    'µs',
    ee,
    'envExec.start.direct',
  );
  add('envExec.start.node', 'node -e 0: per start', m.envExec.nodeUs, 'µs', ee);

  const pod = `bench/pod-start.ts › in podman, the pod's creation to the app's first line, median of ${m.podStart.rounds} rounds`;
  const podLabels = {
    floor: 'the pod without injection',
    init: 'injected, mode init',
    nativeSmall: 'injected, native sidecar, small (the default)',
    nativeNode: 'injected, native sidecar, Node',
  } as const;
  for (const [c, label] of Object.entries(podLabels))
    add(
      `podStart.${c}`,
      label,
      m.podStart.medianMs[c as keyof typeof podLabels],
      'ms',
      pod,
      c === 'floor' ? undefined : 'podStart.floor',
    );

  const rel = `bench/release.ts › both images to a loopback registry, median of ${m.release.rounds} rounds`;
  add('release.push', 'skopeo copy --all of both archives alone', m.release.pushSeconds, 's', rel);
  add(
    'release.total',
    'npm run release: push, sign, attest, verify',
    m.release.releaseSeconds,
    's',
    rel,
    'release.push',
  );
  return figures;
}

/** The series the charts draw: each container's memory over the small-sidecar bench's timeline. */
export function collectSeries(small: SmallSidecarFigures): Record<string, Series> {
  const by = `bench/small-sidecar.ts › side by side at a ${small.timeline.refreshInterval} refresh interval, once a second`;
  return Object.fromEntries(
    small.timeline.series.map((s) => [
      `timeline.${SMALL_ROWS[s.label] ?? s.label}.${s.what === 'working set' ? 'workingSet' : 'peak'}`,
      { label: `${s.label}: ${s.what}`, unit: 'MiB', points: s.points, measuredBy: by },
    ]),
  );
}
