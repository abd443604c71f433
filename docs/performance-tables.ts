/**
 * The README's and docs/performance.md's figure tables, to be rendered from the last committed bench run
 * (bench/results/latest.json) by `npm run docs` once one is committed (issue 38): nothing in them typed
 * by hand. test/docs/figure-tables.test.ts renders each from a run's figures.
 */
import { AGENT_SETTINGS } from '../agent/contract/agent-settings.ts';
import { WEBHOOK_SETTINGS } from '../webhook/config/settings.ts';
import { formatDuration } from '../bench/progress.ts';
import { FigureBook } from './figure-format.ts';

const table = (
  header: readonly string[],
  align: readonly ('l' | 'r')[],
  rows: readonly (readonly string[])[],
) =>
  [
    `| ${header.join(' | ')} |`,
    `| ${align.map((a) => (a === 'r' ? '---:' : '---')).join(' | ')} |`,
    ...rows.map((r) => `| ${r.map((c) => c.replace(/\|/g, '\\|')).join(' | ')} |`),
  ].join('\n');

/** "3.57 × (107.6 / 30.1 ms)": a ratio and the two figures it is made of. */
function ratioOf(b: FigureBook, id: string): string {
  const f = b.figure(id);
  return `${b.ratio(id)} (${b.number(id)} / ${b.text(f.baseline!)})`;
}

const met = (ok: boolean, target: string) => (ok ? target : `${target}: **missed**`);

/** The run the figures came from: date, commit, machine and the load it ran under. */
export function benchRun(b: FigureBook): string {
  const r = b.results;
  const m = r.machine;
  const load = m.loadAverage;
  return `Latest \`${r.command}\`: ${r.date.slice(0, 10)}, commit \`${r.commit.slice(0, 12)}\`${r.dirty ? ' with uncommitted changes' : ''}, ${formatDuration(r.durationSeconds)}; ${m.cores} cores, ${(m.memoryMiB / 1024).toFixed(1)} GiB, Linux ${m.kernel}, cgroup v${m.cgroupVersion}, Node ${m.node.replace(/^v/, '')}; load average ${load.min}–${load.max} (mean ${load.mean}) during the run. Every figure is beside a baseline measured in the same run: compare the ratios, not the milliseconds, across runs and machines.`;
}

/** The README's figures: one line per claim the front page makes. */
export function readmeFigures(b: FigureBook): string {
  const rows: string[][] = [
    [
      'Init container, one AWS secret, process start to exit',
      b.text('coldStart.snapshot.aws1'),
      `\`node -e 0\` ${b.text('coldStart.floor')}; the AWS SDK alone ${b.text('coldStart.awsSdkAlone')}${b.has('coldStart.awsCli') ? `; the AWS CLI ${b.text('coldStart.awsCli')}` : ''}`,
    ],
    [
      'Sidecar between refreshes, as the node counts it (working set): the small sidecar (default); the Node sidecar',
      `${b.text('smallSidecar.idle.small.workingSet')}; ${b.text('smallSidecar.idle.node.workingSet')}`,
      `an idle \`node\` ${b.text('smallSidecar.idle.idleNode.workingSet')}`,
    ],
    [
      'Sidecar CPU per hour at the default refresh: small; Node',
      `${b.text('smallSidecar.cpu.small.perHourDefault')}; ${b.text('smallSidecar.cpu.node.perHourDefault')}`,
      '',
    ],
    [
      'An injected pod’s start in podman (native sidecar, small), pod created → app running',
      b.text('podStart.nativeSmall'),
      `the same pod without injection ${b.text('podStart.floor')}`,
    ],
    [
      'Native sidecar: the app starts after the last file is written',
      `${b.text('postStart.hookLag.median')} (postStart hook)`,
      `a startupProbe at its 1 s period: ${b.text('postStart.probeLag.median')}`,
    ],
    [
      'Env vars through the wrapper: one app start',
      `${b.text('envExec.start.wrapped')}`,
      `the same start without it ${b.text('envExec.start.direct')}`,
    ],
    [
      `Rotation, backend change → app told, 100 secrets at \`REFRESH_INTERVAL=1s\``,
      `${b.text('soak.propagation.median')} median`,
      'the 1 s interval',
    ],
    [
      'Atomicity: swaps / reads by a concurrent reader',
      `${b.number('atomicity.swaps')} / ${b.number('atomicity.fileReads')}, ${b.number('atomicity.torn')} torn, ${b.number('atomicity.mixed')} mixed`,
      '',
    ],
    [
      'Webhook CPU per admission: replica pods; distinct pods',
      `${b.text('webhook.replicas.cpuPerRequest')}; ${b.text('webhook.distinct.cpuPerRequest')}`,
      `a TLS echo server: ${b.text('webhook.replicas.floorCpuPerRequest')}`,
    ],
    [
      'A release of both images: push, sign, attest, verify',
      b.text('release.total'),
      `the push alone ${b.text('release.push')}`,
    ],
    [
      'Images over the runtime base',
      `agent ${b.text('image.agent')}; webhook ${b.text('image.webhook')}`,
      `the base ${b.text('image.base')}`,
    ],
  ];
  return table(['What', 'Figure', 'Baseline in the same run'], ['l', 'l', 'l'], rows);
}

/** docs/performance.md's summary: each cost per pod against its floor. */
export function costPerPod(b: FigureBook): string {
  const ratio = (id: string) => b.figure(id).value / b.figure(b.figure(id).baseline!).value;
  const rows: string[][] = [
    [
      'init from the start-up snapshot, 1 AWS secret / `node -e 0`',
      ratioOf(b, 'coldStart.snapshot.aws1'),
      met(ratio('coldStart.snapshot.aws1') <= 1.5, '≤ 1.5 ×'),
    ],
    [
      '— reference: the AWS SDK alone, one `GetSecretValue` / `node -e 0`',
      ratioOf(b, 'coldStart.awsSdkAlone'),
      '',
    ],
    ['— reference: bare Node, one request, no library / `node -e 0`', ratioOf(b, 'coldStart.bareNode'), ''],
    [
      'init from the GCP snapshot, 1 GCP secret (REST) / `node -e 0`',
      ratioOf(b, 'coldStart.snapshot.gcp1'),
      met(ratio('coldStart.snapshot.gcp1') <= 2, '≤ 2 ×'),
    ],
    [
      'init from the snapshot, 1 Vault secret / `node -e 0`',
      ratioOf(b, 'coldStart.snapshot.vault1'),
      met(ratio('coldStart.snapshot.vault1') <= 1.5, '≤ 1.5 ×'),
    ],
    [
      'sidecar between refreshes, working set: small sidecar / an idle `node`',
      ratioOf(b, 'smallSidecar.idle.small.workingSet'),
      `≤ the ${WEBHOOK_SETTINGS.AGENT_SMALL_SIDECAR_MEMORY_REQUEST.default} request`,
    ],
    [
      '— the Node sidecar / an idle `node`',
      ratioOf(b, 'smallSidecar.idle.node.workingSet'),
      `≤ the ${WEBHOOK_SETTINGS.AGENT_MEMORY_REQUEST.default} request`,
    ],
    [
      `sidecar CPU per hour, small; Node: at the default ${AGENT_SETTINGS.REFRESH_INTERVAL.default}; at 60 s`,
      `${b.text('smallSidecar.cpu.small.perHourDefault')}; ${b.text('smallSidecar.cpu.node.perHourDefault')}; ${b.text('smallSidecar.cpu.small.perHour60s')}; ${b.text('smallSidecar.cpu.node.perHour60s')}`,
      '',
    ],
    [
      'an injected pod’s start in podman, native sidecar (small) / the same pod without injection',
      ratioOf(b, 'podStart.nativeSmall'),
      '',
    ],
    ['an app start through the env wrapper / without it', ratioOf(b, 'envExec.start.wrapped'), ''],
    [
      'webhook CPU per admission / TLS echo, replica pods (cache hits); distinct pods',
      `${ratioOf(b, 'webhook.replicas.cpuPerRequest')}; ${b.ratio('webhook.distinct.cpuPerRequest')}`,
      met(ratio('webhook.replicas.cpuPerRequest') <= 2, '≤ 2 ×'),
    ],
    [
      'webhook p99 over the echo’s p99, replica pods; distinct pods',
      `+${(b.figure('webhook.replicas.p99').value - b.figure('webhook.replicas.floorP99').value).toFixed(1)} ms; +${(b.figure('webhook.distinct.p99').value - b.figure('webhook.distinct.floorP99').value).toFixed(1)} ms`,
      '< 2 ms',
    ],
    ['a release of both images / the push alone', ratioOf(b, 'release.total'), ''],
    [
      'agent image; webhook image, over the runtime base',
      `${ratioOf(b, 'image.agent')}; ${ratioOf(b, 'image.webhook')}`,
      '',
    ],
  ];
  return table(
    ['Cost per pod (each against its floor in the same run)', 'value', 'target'],
    ['l', 'r', 'l'],
    rows,
  );
}

const COLD_ROWS: readonly [string, string][] = [
  ['1 AWS secret', 'aws1'],
  ['10 AWS secrets (one `BatchGetSecretValue`)', 'aws10'],
  ['1 GCP secret, REST (init’s default; `/app/agent-gcp.blob`)', 'gcp1'],
  ['1 GCP secret, gRPC (a sidecar’s)', 'gcp1Grpc'],
  ['1 Vault secret', 'vault1'],
];

export function coldStart(b: FigureBook): string {
  const rows = [
    ['`node -e 0` (floor)', b.text('coldStart.floor'), ''],
    ...COLD_ROWS.map(([label, id]) => [
      label,
      b.withRatio(`coldStart.plain.${id}`),
      b.withRatio(`coldStart.snapshot.${id}`),
    ]),
    ['reference: the AWS SDK alone, one `GetSecretValue`', b.withRatio('coldStart.awsSdkAlone'), ''],
    ['reference: bare Node, one request, no library', b.withRatio('coldStart.bareNode'), ''],
    ...(b.has('coldStart.awsCli')
      ? [['`aws secretsmanager get-secret-value`', b.withRatio('coldStart.awsCli'), '']]
      : []),
  ];
  return table(
    ['Agent cold start, process start to exit (× `node -e 0`)', 'plain bundle', 'start-up snapshot'],
    ['l', 'r', 'r'],
    rows,
  );
}

export function smallSidecar(b: FigureBook): string {
  const who: readonly [string, string][] = [
    ['small sidecar (`/app/resident`, the default)', 'small'],
    ['Node sidecar', 'node'],
    ['the resident alone (a run that asks for a day)', 'residentAlone'],
    ['an idle `node` with one HTTP server', 'idleNode'],
  ];
  const cpu = (key: string, which: string) =>
    b.has(`smallSidecar.cpu.${key}.${which}`) ? b.text(`smallSidecar.cpu.${key}.${which}`) : '';
  return table(
    [
      'Between refreshes, 1 AWS secret, in its container',
      'working set',
      'anonymous',
      `CPU per hour, every ${AGENT_SETTINGS.REFRESH_INTERVAL.default}`,
      'every 60 s',
    ],
    ['l', 'r', 'r', 'r', 'r'],
    [
      ...who.map(([label, key]) => [
        label,
        b.text(`smallSidecar.idle.${key}.workingSet`),
        b.text(`smallSidecar.idle.${key}.anon`),
        cpu(key, 'perHourDefault'),
        cpu(key, 'perHour60s'),
      ]),
      [
        'a small-sidecar run: time; the container’s peak over a window of runs',
        b.text('smallSidecar.run.seconds'),
        b.has('smallSidecar.run.peak') ? b.text('smallSidecar.run.peak') : '',
        '',
        '',
      ],
    ],
  );
}

export function sidecarSoak(b: FigureBook): string {
  return table(
    [
      `Node sidecar, 100 AWS secrets, \`REFRESH_INTERVAL=1s\`, HTTP notifier on, ${b.number('soak.seconds')} s`,
      'value',
      'target',
    ],
    ['l', 'r', 'l'],
    [
      [
        'backend calls per unchanged cycle',
        b.number('soak.callsPerUnchangedCycle'),
        met(b.figure('soak.callsPerUnchangedCycle').value <= 5, '≤ 5'),
      ],
      [
        `rotation propagation, backend change → app told (median / max of ${b.number('soak.propagation.samples')})`,
        `${b.number('soak.propagation.median')} / ${b.text('soak.propagation.max')}`,
        '≤ interval + 250 ms',
      ],
      ['open fds, start → end', `${b.number('soak.fds.start')} → ${b.number('soak.fds.end')}`, 'flat'],
      [
        'RSS settled start → end (max)',
        `${b.number('soak.rss.start')} → ${b.number('soak.rss.end')} (${b.text('soak.rss.max')})`,
        'flat',
      ],
    ],
  );
}

export function postStart(b: FigureBook): string {
  return table(
    ['Native sidecar’s postStart hook (`dist/wait-ready.cjs`)', 'hook', 'baseline'],
    ['l', 'r', 'r'],
    [
      [
        '`/readyz` already 200: spawn to exit',
        b.withRatio('postStart.hook'),
        `\`node -e 0\`: ${b.text('postStart.floor')}`,
      ],
      [
        'while it waits (a backend that never answers): anonymous / resident memory',
        `${b.number('postStart.waiting.hookAnon')} / ${b.text('postStart.waiting.hookRss')}`,
        `the agent: ${b.number('postStart.waiting.agentAnon')} / ${b.text('postStart.waiting.agentRss')}`,
      ],
      [
        'the app’s start after the last file is written, median / max',
        `${b.number('postStart.hookLag.median')} / ${b.text('postStart.hookLag.max')}`,
        `a startupProbe, period 1 s: ${b.number('postStart.probeLag.median')} / ${b.text('postStart.probeLag.max')}`,
      ],
    ],
  );
}

export function podStart(b: FigureBook): string {
  const rows: readonly [string, string][] = [
    ['the pod without injection (the floor)', 'floor'],
    ['injected, `mode: init`', 'init'],
    ['injected, native sidecar, small (the default render)', 'nativeSmall'],
    ['injected, native sidecar, Node (`sidecar-process: node`)', 'nativeNode'],
  ];
  return table(
    [
      'A pod in podman, ordered as a kubelet orders it: created → the app’s first line',
      'median',
      '× no injection',
    ],
    ['l', 'r', 'r'],
    rows.map(([label, id]) => [
      label,
      b.text(`podStart.${id}`),
      id === 'floor' ? '1' : b.ratio(`podStart.${id}`),
    ]),
  );
}

export function envWrapper(b: FigureBook): string {
  return table(
    [
      'What the env wrapper adds to an app’s start',
      '`/bin/true`',
      'through `env-exec`',
      '`node -e 0`, for scale',
    ],
    ['l', 'r', 'r', 'r'],
    [
      [
        'user-space instructions',
        b.number('envExec.instructions.direct'),
        `${b.number('envExec.instructions.wrapped')} (${b.ratio('envExec.instructions.wrapped')})`,
        b.number('envExec.instructions.node'),
      ],
      [
        'wall time per start, median',
        b.text('envExec.start.direct'),
        `${b.text('envExec.start.wrapped')} (${b.ratio('envExec.start.wrapped')})`,
        b.text('envExec.start.node'),
      ],
    ],
  );
}

export function atomicity(b: FigureBook): string {
  return table(
    ['Atomicity under stress', 'value', 'target'],
    ['l', 'r', 'l'],
    [
      [
        'swaps / file reads by a concurrent reader',
        `${b.number('atomicity.swaps')} / ${b.number('atomicity.fileReads')}`,
        '≥ 10⁴ / ≥ 10⁶',
      ],
      ['torn / mixed sets', `${b.number('atomicity.torn')} / ${b.number('atomicity.mixed')}`, '0 / 0'],
    ],
  );
}

export function webhook(b: FigureBook): string {
  const cell = (mode: string, what: string) => b.text(`webhook.${mode}.${what}`);
  return table(
    [
      'Webhook, keep-alive HTTPS, pod with 3 secrets, each request its own uid',
      'floor (TLS echo): replica rounds; distinct rounds',
      'webhook, replica pods (cache hits)',
      'webhook, distinct pods (misses)',
    ],
    ['l', 'r', 'r', 'r'],
    [
      [
        'p99 at a fixed rate',
        `${cell('replicas', 'floorP99')}; ${cell('distinct', 'floorP99')}`,
        cell('replicas', 'p99'),
        cell('distinct', 'p99'),
      ],
      [
        'max throughput',
        `${cell('replicas', 'floorReqPerSec')}; ${cell('distinct', 'floorReqPerSec')}`,
        cell('replicas', 'reqPerSec'),
        cell('distinct', 'reqPerSec'),
      ],
      [
        'server CPU per request',
        `${cell('replicas', 'floorCpuPerRequest')}; ${cell('distinct', 'floorCpuPerRequest')}`,
        b.withRatio('webhook.replicas.cpuPerRequest'),
        b.withRatio('webhook.distinct.cpuPerRequest'),
      ],
    ],
  );
}

export function imagesAndRelease(b: FigureBook): string {
  return table(
    ['Images and a release', 'value', 'baseline'],
    ['l', 'r', 'r'],
    [
      ['agent image', b.withRatio('image.agent'), `the runtime base: ${b.text('image.base')}`],
      ['webhook image', b.withRatio('image.webhook'), ''],
      [
        'container cold start, `podman run` read-only to exit, 1 AWS secret',
        b.withRatio('image.coldStart.agent'),
        `the base image’s \`node -e 0\`: ${b.text('image.coldStart.base')}`,
      ],
      [
        '`npm run release` of both images: push, sign, attest, verify',
        b.withRatio('release.total'),
        `\`skopeo copy --all\` of both alone: ${b.text('release.push')}`,
      ],
    ],
  );
}

/** An agent-memory case id (bench/report/figures.ts caseId) in words. */
function caseWords(id: string): string {
  const parts = id.split('-');
  const [backend, secrets] = parts;
  const size = parts.find((p) => /^\d+k$/.test(p));
  const every = parts.find((p) => p.startsWith('every'))?.slice('every'.length);
  return `${parts.includes('first') ? 'first on the node: ' : ''}${secrets} ${backend!.toUpperCase()} secret${secrets === '1' ? '' : 's'}${size ? ` of ${size.replace('k', ' KiB')}` : ''}${parts.includes('notifier') ? ' + HTTP notifier' : ''}${every ? `, every ${every}` : ''}`;
}

export function agentContainers(b: FigureBook): string {
  const cases = [
    ...new Set(
      Object.keys(b.results.figures)
        .filter(
          (id) =>
            id.startsWith('agentMemory.sidecar.') &&
            id.endsWith('.workingSet') &&
            !id.includes('.afterBurst.') &&
            !id.includes('.burst.'),
        )
        .map((id) => id.slice('agentMemory.sidecar.'.length, -'.workingSet'.length)),
    ),
  ];
  const arrow = (id: string, what: string) => {
    const before = b.number(`agentMemory.sidecar.${id}.${what}`);
    const after = `agentMemory.sidecar.${id}.afterBurst.${what}`;
    return b.has(after) ? `${before} → ${b.number(after)}` : before;
  };
  const inits = [
    ...new Set(
      Object.keys(b.results.figures)
        .filter((id) => id.startsWith('agentMemory.init.') && id.endsWith('.workingSet'))
        .map((id) => id.slice('agentMemory.init.'.length, -'.workingSet'.length)),
    ),
  ];
  return table(
    [
      'Agent container, MiB (→ after the rotations)',
      'working set',
      'anonymous',
      'RSS (of it file-backed, shared)',
    ],
    ['l', 'r', 'r', 'r'],
    [
      ...cases.map((id) => [
        `sidecar, ${caseWords(id)}`,
        arrow(id, 'workingSet'),
        arrow(id, 'anon'),
        `${arrow(id, 'rss')} (${b.number(`agentMemory.sidecar.${id}.rssFile`)})`,
      ]),
      ...inits.map((id) => [
        `init run, peak: ${caseWords(id)}`,
        b.number(`agentMemory.init.${id}.workingSet`),
        b.number(`agentMemory.init.${id}.anon`),
        b.number(`agentMemory.init.${id}.rss`),
      ]),
    ],
  );
}

export function limitTrials(b: FigureBook): string {
  const limits = [
    ...new Set(
      Object.keys(b.results.figures)
        .filter((id) => id.startsWith('agentMemory.limit.'))
        .map((id) => id.split('.')[2]!),
    ),
  ];
  const cell = (limit: string, what: string) =>
    b.has(`agentMemory.limit.${limit}.${what}`) ? b.text(`agentMemory.limit.${limit}.${what}`) : '—';
  return table(
    [
      'The worst case under a memory limit: first on the node, 100 GCP secrets, HTTP notifier',
      ...limits.map((l) => (l === WEBHOOK_SETTINGS.AGENT_MEMORY_LIMIT.default ? `${l} (default)` : l)),
    ],
    ['l', ...limits.map(() => 'r' as const)],
    [
      ['init run: time; CPU', ...limits.map((l) => `${cell(l, 'init.seconds')}; ${cell(l, 'init.cpu')}`)],
      ['init run: pages re-read', ...limits.map((l) => cell(l, 'init.fileRefaults'))],
      [
        'sidecar through the rotations: working set; peak',
        ...limits.map((l) => `${cell(l, 'sidecar.workingSet')}; ${cell(l, 'sidecar.peak')}`),
      ],
      ['OOM kills', ...limits.map((l) => cell(l, 'oomKills'))],
    ],
  );
}

/** The README's images table: each image on each platform, over its base, and what a node pulls. */
export function readmeImages(b: FigureBook): string {
  const platforms = ['amd64', 'arm64'].filter((arch) => b.has(`image.agent.${arch}`));
  return table(
    ['Image', ...platforms.map((a) => `linux/${a}`), `Pulled (compressed), ${platforms.join(' / ')}`],
    ['l', ...platforms.map(() => 'r' as const), 'r'],
    ['agent', 'webhook'].map((name) => [
      `\`secret-agent/${name}:<version>\``,
      ...platforms.map((a) => {
        const size = b.figure(`image.${name}.${a}`);
        return `${b.text(`image.${name}.${a}`)} (base + ${(size.value - b.figure(size.baseline!).value).toFixed(1)})`;
      }),
      `${platforms.map((a) => b.number(`image.${name}.${a}.pulled`)).join(' / ')} MiB`,
    ]),
  );
}

/** Every generated block of README.md and docs/performance.md, by name. */
export const PERFORMANCE_TABLES: Readonly<Record<string, (b: FigureBook) => string>> = {
  'bench-run': benchRun,
  'readme-figures': readmeFigures,
  'readme-images': readmeImages,
  'cost-per-pod': costPerPod,
  'cold-start': coldStart,
  'small-sidecar': smallSidecar,
  'sidecar-soak': sidecarSoak,
  'post-start': postStart,
  'pod-start': podStart,
  'env-wrapper': envWrapper,
  atomicity,
  webhook,
  'images-and-release': imagesAndRelease,
  'agent-containers': agentContainers,
  'limit-trials': limitTrials,
};
