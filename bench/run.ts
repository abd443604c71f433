/**
 * `npm run bench`: every figure in one report, each against a baseline measured in the same run, and
 * bench/results/latest.json (bench/report/): the figures the README and docs/performance.md render.
 * Progress on stderr (bench/progress.ts): what it measures, how far it is, what is left. In order:
 *   - agent cold start (process start to exit) against the real moto server and the GCP and Vault fakes,
 *     from the plain bundle and the start-up snapshot, interleaved with `node -e 0` (the floor), two
 *     references (bench/reference/) and `aws secretsmanager get-secret-value`: BENCH_ROUNDS (15);
 *   - the sidecar: 100 secrets at a 1 s interval over a soak (bench/sidecar.ts, BENCH_SOAK_SECONDS, 600),
 *     one secret's RSS against an idle node (bench/sidecar-rss.ts), its postStart hook (bench/post-start.ts);
 *   - the images' sizes and container cold start (bench/images.ts);
 *   - what an agent container costs the node (bench/agent-memory.ts, about 15 minutes:
 *     BENCH_MEMORY_SETTLE_SECONDS 45, BENCH_MEMORY_TRIAL_LIMITS 96Mi,104Mi,112Mi);
 *   - the small sidecar beside the Node sidecar (bench/small-sidecar.ts: BENCH_SMALL_SETTLE_SECONDS 20,
 *     BENCH_SMALL_WINDOW_SECONDS 30, BENCH_SMALL_TIMELINE_SECONDS 200);
 *   - an injected pod's start in podman against the same pod without injection (bench/pod-start.ts,
 *     BENCH_POD_ROUNDS 5);
 *   - atomicity under stress (bench/atomicity.ts); the webhook (bench/webhook/: BENCH_WEBHOOK_SECONDS 10,
 *     BENCH_WEBHOOK_ROUNDS 5); the env wrapper's cost per start (bench/env-exec.ts); a release
 *     (bench/release.ts, BENCH_RELEASE_ROUNDS 3).
 * Figures are medians; ratios are what to compare across machines.
 */
import { CreateSecretCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { startGcpSecretManagerFake } from '../test/fakes/gcp-secret-manager.ts';
import { FakeVault } from '../test/fakes/vault.ts';
import { startMoto } from '../test/support/moto.ts';
import { benchAgentMemory } from './agent-memory.ts';
import { agentMemoryCostRows, formatAgentMemory } from './agent-memory-report.ts';
import { benchAtomicity } from './atomicity.ts';
import { benchEnvExec, formatEnvExec } from './env-exec.ts';
import { benchImages, formatImageFigures } from './images.ts';
import { benchPodStart, formatPodStart } from './pod-start.ts';
import { benchPostStart, formatPostStartFigures } from './post-start.ts';
import { benchSidecar } from './sidecar.ts';
import { benchSidecarRss } from './sidecar-rss.ts';
import { benchSmallSidecar, formatSmallSidecar } from './small-sidecar.ts';
import { BenchProgress } from './progress.ts';
import { benchRelease, formatRelease } from './release.ts';
import { buildReferences } from './reference/build-references.ts';
import { collectFigures, collectSeries } from './report/figures.ts';
import { MachineWatch } from './report/machine.ts';
import { RESULTS_PATH, RESULTS_SCHEMA, type BenchResults } from './report/results-file.ts';
import { benchWebhook } from './webhook/measure.ts';
import { formatWebhookFigures } from './webhook/tables.ts';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 15);
const SOAK_SECONDS = Number(process.env.BENCH_SOAK_SECONDS ?? 600);
const MEMORY_SETTLE_SECONDS = Number(process.env.BENCH_MEMORY_SETTLE_SECONDS ?? 45);
const MEMORY_TRIAL_LIMITS = (process.env.BENCH_MEMORY_TRIAL_LIMITS ?? '96Mi,104Mi,112Mi')
  .split(',')
  .filter(Boolean);
const SMALL_SETTLE_SECONDS = Number(process.env.BENCH_SMALL_SETTLE_SECONDS ?? 20);
const SMALL_WINDOW_SECONDS = Number(process.env.BENCH_SMALL_WINDOW_SECONDS ?? 30);
const SMALL_TIMELINE_SECONDS = Number(process.env.BENCH_SMALL_TIMELINE_SECONDS ?? 200);
const POD_ROUNDS = Number(process.env.BENCH_POD_ROUNDS ?? 5);
const RELEASE_ROUNDS = Number(process.env.BENCH_RELEASE_ROUNDS ?? 3);
const root = new URL('../', import.meta.url).pathname;
const machine = new MachineWatch();
const git = (...args: string[]) => spawnSync('git', args, { cwd: root, encoding: 'utf8' }).stdout.trim();
// The commit measured is the one the images and bundles were just built from (npm run bench builds
// them before this starts), not HEAD at the end: a commit made during the 40-minute run was not measured.
const measured = {
  commit: git('rev-parse', 'HEAD'),
  dirty: git('status', '--porcelain', '--untracked-files=no') !== '',
};
// Estimates from the runs so far on a 2-core machine, scaled by this run's settings: what "left" counts.
const progress = new BenchProgress([
  { name: 'agent cold start', estimateSeconds: ROUNDS * 6 + 20 },
  { name: 'sidecar soak', estimateSeconds: SOAK_SECONDS + 40 },
  { name: 'sidecar RSS', estimateSeconds: 60 },
  { name: 'postStart hook', estimateSeconds: 90 },
  { name: 'images', estimateSeconds: 60 },
  {
    name: 'agent memory',
    estimateSeconds: 600 + MEMORY_SETTLE_SECONDS * (8 + MEMORY_TRIAL_LIMITS.length * 2),
  },
  {
    name: 'small sidecar',
    estimateSeconds: 80 + SMALL_SETTLE_SECONDS * 4 + SMALL_WINDOW_SECONDS * 6 + SMALL_TIMELINE_SECONDS,
  },
  { name: 'pod start', estimateSeconds: 40 + (POD_ROUNDS + 1) * 4 * 8 },
  { name: 'atomicity', estimateSeconds: 60 },
  {
    name: 'webhook',
    estimateSeconds:
      8 * Number(process.env.BENCH_WEBHOOK_SECONDS ?? 10) * Number(process.env.BENCH_WEBHOOK_ROUNDS ?? 5) +
      60,
  },
  { name: 'env wrapper', estimateSeconds: 60 },
  { name: 'release', estimateSeconds: RELEASE_ROUNDS * 30 + 10 },
]);
progress.begin('agent cold start');
const moto = await startMoto();
const base = {
  PATH: process.env.PATH ?? '',
  HOME: '/tmp',
  AWS_ACCESS_KEY_ID: 'bench',
  AWS_SECRET_ACCESS_KEY: 'bench',
  AWS_REGION: 'us-east-1',
};
const sm = new SecretsManagerClient({
  region: 'us-east-1',
  endpoint: moto.endpoint,
  credentials: { accessKeyId: 'bench', secretAccessKey: 'bench' },
});
for (let i = 0; i < 10; i++)
  await sm.send(
    new CreateSecretCommand({ Name: `bench/${i}`, SecretString: JSON.stringify({ value: `bench-${i}` }) }),
  );
sm.destroy();

const dir = mkdtempSync('/dev/shm/secret-agent-bench-');
const agentEnv = (n: number): Record<string, string> => {
  const env: Record<string, string> = {
    ...base,
    AWS_ENDPOINT_URL_SECRETS_MANAGER: moto.endpoint,
    SECRETS_DIR: dir,
    LOG_LEVEL: 'silent',
  };
  for (let i = 0; i < n; i++) {
    env[`SECRET_${i}_REF`] = `aws:bench/${i}#value`;
    env[`SECRET_${i}_FILENAME`] = `s${i}`;
  }
  return env;
};
// GCP and Vault: the local wire-level fakes the tests use (no real server can run here).
const gcp = await startGcpSecretManagerFake();
gcp.addVersion('bench-project', 'bench', 'bench-gcp');
const vault = await FakeVault.start();
vault.mountKv('secret', 2);
vault.putKv('secret/bench', { value: 'bench-vault' });
vault.policy('bench', { 'secret/data/bench': ['read'] });
const vaultToken = vault.createToken({ policies: ['bench'], ttlSec: 86_400 });
const oneSecret = (ref: string, extra: Record<string, string>): Record<string, string> => ({
  ...base,
  SECRETS_DIR: dir,
  LOG_LEVEL: 'silent',
  SECRET_0_REF: ref,
  SECRET_0_FILENAME: 'one',
  ...extra,
});
const hasAwsCli = spawnSync('aws', ['--version'], { env: base }).status === 0;

interface Case {
  readonly name: string;
  readonly argv: string[];
  readonly env: Record<string, string>;
}
// The image runs the agent from its V8 start-up snapshots; built here the same way, with this Node:
// the entrypoint's, and the one with GCP that the webhook runs for pods reading GCP (GCP_INIT_COMMAND).
const blob = join(root, 'dist/agent.blob');
const gcpBlob = join(root, 'dist/agent-gcp.blob');
for (const args of [[blob], [gcpBlob, '--with-gcp']]) {
  const built = spawnSync(
    process.execPath,
    [join(root, 'images/build-snapshot.ts'), join(root, 'dist/agent-snapshot.cjs'), ...args],
    { encoding: 'utf8' },
  );
  if (built.status !== 0) throw new Error(`building the start-up snapshot failed: ${built.stderr}`);
}
const starts = {
  plain: [process.execPath, join(root, 'dist/agent.js')],
  snapshot: [process.execPath, '--snapshot-blob', blob, '--'],
  gcpSnapshot: [process.execPath, '--snapshot-blob', gcpBlob, '--'],
};
const backends: { name: string; env: Record<string, string> }[] = [
  { name: '1 AWS secret', env: agentEnv(1) },
  { name: '10 AWS secrets', env: agentEnv(10) },
  // REST is init's default transport (the fake's REST side); gRPC, a sidecar's, is measured beside it.
  {
    name: '1 GCP secret',
    env: oneSecret('projects/bench-project/secrets/bench', {
      GCP_SECRET_MANAGER_ENDPOINT: gcp.restEndpoint,
      GCE_METADATA_HOST: '127.0.0.1:9',
      GOOGLE_APPLICATION_CREDENTIALS: '/nonexistent/adc.json',
    }),
  },
  {
    name: '1 GCP secret, GCP_TRANSPORT=grpc',
    env: oneSecret('projects/bench-project/secrets/bench', {
      GCP_TRANSPORT: 'grpc',
      GCP_SECRET_MANAGER_ENDPOINT: gcp.endpoint,
      GCE_METADATA_HOST: '127.0.0.1:9',
      GOOGLE_APPLICATION_CREDENTIALS: '/nonexistent/adc.json',
    }),
  },
  {
    name: '1 Vault secret',
    env: oneSecret('vault:secret/data/bench#value', { VAULT_ADDR: vault.addr, VAULT_TOKEN: vaultToken }),
  },
];
// References, not the product: the least any Node program can do for one secret, and the AWS SDK
// alone (bench/reference/), so what is left above them is measured in the same run.
const references = await buildReferences();
// Their own volume: the agent refuses to overwrite a file it did not create.
const referenceDir = mkdtempSync('/dev/shm/secret-agent-bench-reference-');
const referenceEnv = { ...agentEnv(0), SECRETS_DIR: referenceDir, BENCH_SECRET_ID: 'bench/0' };
const cases: Case[] = [
  { name: 'node -e 0 (floor)', argv: [process.execPath, '-e', '0'], env: base },
  {
    name: 'reference: bare Node, one request, no library',
    argv: [process.execPath, references.bareNode, 'init'],
    env: referenceEnv,
  },
  {
    name: 'reference: the AWS SDK alone, one GetSecretValue',
    argv: [process.execPath, references.awsSdkAlone, 'init'],
    env: referenceEnv,
  },
  ...backends.flatMap((b) => [
    { name: `agent, ${b.name}`, argv: starts.plain, env: b.env },
    // What the webhook renders: GCP pods' init containers run the snapshot that holds GCP.
    {
      name: `agent snapshot, ${b.name}`,
      argv: b.name.includes('GCP') ? starts.gcpSnapshot : starts.snapshot,
      env: b.env,
    },
  ]),
];
if (hasAwsCli) {
  cases.push({
    name: 'aws secretsmanager get-secret-value',
    argv: [
      'aws',
      'secretsmanager',
      'get-secret-value',
      '--secret-id',
      'bench/0',
      '--endpoint-url',
      moto.endpoint,
      '--region',
      'us-east-1',
    ],
    env: base,
  });
}

const samples = new Map<string, number[]>(cases.map((c) => [c.name, []]));
/**
 * Runs a case to its exit; resolves with the wall time and the result. Not spawnSync: the GCP and
 * Vault fakes live in this process and must keep answering while the agent runs.
 */
function timeRun(c: Case): Promise<{ ms: number; status: number | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const start = process.hrtime.bigint();
    const child = spawn(c.argv[0]!, c.argv.slice(1), { env: c.env, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (status) =>
      resolve({ ms: Number(process.hrtime.bigint() - start) / 1e6, status, stderr }),
    );
  });
}

for (const c of cases) await timeRun(c); // warm the page cache
for (let round = 0; round < ROUNDS; round++) {
  progress.note(`round ${round + 1} of ${ROUNDS}`);
  for (const c of cases) {
    const run = await timeRun(c);
    if (run.status !== 0) throw new Error(`${c.name} exited ${run.status}: ${run.stderr}`);
    samples.get(c.name)!.push(run.ms);
  }
}
rmSync(dir, { recursive: true, force: true });
rmSync(referenceDir, { recursive: true, force: true });
await gcp.stop();
await vault.stop();
progress.begin('sidecar soak');
progress.note(`100 secrets at a 1 s interval, ${SOAK_SECONDS} s soak`);
const sidecar = await benchSidecar(moto, SOAK_SECONDS);
progress.begin('sidecar RSS');
progress.note('one secret’s RSS against an idle Node');
const sidecarRss = await benchSidecarRss(moto, references);
progress.begin('postStart hook');
progress.note('waiting and returning');
const postStart = await benchPostStart(moto, Math.min(ROUNDS, 9));
progress.begin('images');
progress.note('sizes and container cold start');
const images = await benchImages(moto.endpoint, 'aws:bench/0#value', Math.min(ROUNDS, 9));
progress.begin('agent memory');
progress.note('containers as the node counts them (cgroup working set, anonymous, RSS)');
const agentMemory = await benchAgentMemory(moto, {
  settleSeconds: MEMORY_SETTLE_SECONDS,
  trialLimits: MEMORY_TRIAL_LIMITS,
});
progress.begin('small sidecar');
progress.note('between refreshes, CPU, runs and logins, beside the Node sidecar');
const smallSidecar = await benchSmallSidecar(moto, {
  settleSeconds: SMALL_SETTLE_SECONDS,
  windowSeconds: SMALL_WINDOW_SECONDS,
  timelineSeconds: SMALL_TIMELINE_SECONDS,
});
progress.begin('pod start');
progress.note('an injected pod in podman against the same pod without injection');
const podStart = await benchPodStart(moto, POD_ROUNDS);
await moto.stop();
progress.begin('atomicity');
progress.note('>= 10^6 reads against >= 10^4 swaps');
const atomicity = await benchAtomicity(1_000_000, 10_000);
progress.begin('webhook');
progress.note('admission latency and throughput over keep-alive HTTPS');
const webhook = await benchWebhook();
progress.begin('env wrapper');
progress.note('what it adds to an app container’s start');
const envExec = await benchEnvExec();
progress.begin('release');
progress.note('push, sign, attest and verify both images on a loopback registry');
const release = await benchRelease(RELEASE_ROUNDS);
const durationSeconds = progress.finish();

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const m = Object.fromEntries(cases.map((c) => [c.name, median(samples.get(c.name)!)]));
const floor = m['node -e 0 (floor)']!;
const one = m['agent, 1 AWS secret']!;
const ten = m['agent, 10 AWS secrets']!;
const rows = cases.map((c) => ({
  case: c.name,
  medianMs: Number(m[c.name]!.toFixed(1)),
  vsFloor: Number((m[c.name]! / floor).toFixed(2)),
}));
const vsFloor = (name: string) => Number((m[name]! / floor).toFixed(2));
const ratios = {
  oneSecretVsFloor: Number((one / floor).toFixed(2)),
  tenSecretsVsOne: Number((ten / one).toFixed(2)),
  // What the image's init container runs: its entrypoint, the start-up snapshot.
  snapshot: {
    awsVsFloor: vsFloor('agent snapshot, 1 AWS secret'),
    gcpVsFloor: vsFloor('agent snapshot, 1 GCP secret'),
    vaultVsFloor: vsFloor('agent snapshot, 1 Vault secret'),
    awsVsPlain: Number((m['agent snapshot, 1 AWS secret']! / one).toFixed(2)),
  },
  references: {
    bareNodeVsFloor: vsFloor('reference: bare Node, one request, no library'),
    awsSdkAloneVsFloor: vsFloor('reference: the AWS SDK alone, one GetSecretValue'),
  },
  ...(hasAwsCli
    ? { oneSecretVsAwsCli: Number((one / m['aws secretsmanager get-secret-value']!).toFixed(2)) }
    : {}),
};
const targets = {
  oneSecretVsFloor: 1.5,
  gcpVsFloor: 2,
  vaultVsFloor: 1.5,
  tenSecretsVsOne: 1.2,
  callsPerUnchangedCycle: 5,
  propagationOverIntervalMs: 250,
  sidecarRssMiB: 64,
};

console.log(
  `\nagent cold start, ${ROUNDS} interleaved rounds, medians (machine: ${process.platform} ${process.arch}, node ${process.version})\n`,
);
console.log('| case | median ms | × floor |\n| --- | ---: | ---: |');
for (const r of rows) console.log(`| ${r.case} | ${r.medianMs} | ${r.vsFloor} |`);
console.log('\n| ratio | value | target |\n| --- | ---: | ---: |');
console.log(
  `| init (snapshot), 1 AWS secret / node -e 0 | ${ratios.snapshot.awsVsFloor} | ≤ ${targets.oneSecretVsFloor} |`,
);
console.log(
  `| init (snapshot), 1 GCP secret / node -e 0 | ${ratios.snapshot.gcpVsFloor} | ≤ ${targets.gcpVsFloor} |`,
);
console.log(
  `| init (snapshot), 1 Vault secret / node -e 0 | ${ratios.snapshot.vaultVsFloor} | ≤ ${targets.vaultVsFloor} |`,
);
console.log(`| init, 1 AWS secret: snapshot / plain bundle | ${ratios.snapshot.awsVsPlain} | |`);
console.log(`| plain bundle, 1 AWS secret / node -e 0 | ${ratios.oneSecretVsFloor} | |`);
console.log(`| 10 secrets / 1 secret | ${ratios.tenSecretsVsOne} | ≤ ${targets.tenSecretsVsOne} |`);
if (hasAwsCli) console.log(`| 1 secret / aws CLI | ${ratios.oneSecretVsAwsCli} | |`);
else console.log('(aws CLI not installed: its baseline was skipped)');

console.log(`\nsidecar, 100 AWS secrets, REFRESH_INTERVAL=1s\n`);
console.log('| figure | value | target |\n| --- | ---: | ---: |');
console.log(
  `| backend calls per unchanged cycle | ${sidecar.callsPerUnchangedCycle} | ≤ ${targets.callsPerUnchangedCycle} |`,
);
console.log(
  `| rotation propagation, median / max (${sidecar.propagationMs.samples} rotations) | ${sidecar.propagationMs.median} / ${sidecar.propagationMs.max} ms | ≤ 1000 + ${targets.propagationOverIntervalMs} ms |`,
);
console.log(
  `| RSS settled start → end (max) over ${sidecar.rss.seconds} s | ${sidecar.rss.startMiB} → ${sidecar.rss.endMiB} (${sidecar.rss.maxMiB}) MiB | ≤ ${targets.sidecarRssMiB} MiB, flat |`,
);
console.log(`| open fds start → end | ${sidecar.openFds.start} → ${sidecar.openFds.end} | flat |`);

console.log(`\natomicity: a reader process against AtomicDir swaps\n`);
console.log('| figure | value | target |\n| --- | ---: | ---: |');
console.log(`| swaps | ${atomicity.swaps} | ≥ 10000 |`);
console.log(`| file reads (sets) | ${atomicity.fileReads} (${atomicity.consistentSets}) | ≥ 1000000 |`);
console.log(`| torn / mixed sets | ${atomicity.torn} / ${atomicity.mixed} | 0 / 0 |`);
console.log(`| sets retried (payload removed under the reader: ENOENT) | ${atomicity.retriedSets} | |`);

console.log(`\n${formatPostStartFigures(postStart)}`);
console.log(`\n${formatWebhookFigures(webhook)}`);
console.log(`\n${formatImageFigures(images)}`);
console.log(`\n${formatAgentMemory(agentMemory)}`);
console.log(`\n${formatSmallSidecar(smallSidecar)}`);
console.log(`\n${formatEnvExec(envExec)}`);
console.log(`\n${formatPodStart(podStart)}`);
console.log(`\n${formatRelease(release)}`);

// Issue 12's table, "cost per pod": every row against its floor, measured in this run.
const replicas = webhook.modes.replicas;
const costPerPod = [
  [
    'init (snapshot), 1 AWS secret / node -e 0',
    `${ratios.snapshot.awsVsFloor}×`,
    `≤ ${targets.oneSecretVsFloor}×`,
  ],
  [
    'reference: bare Node, one request and a file, no library / node -e 0',
    `${ratios.references.bareNodeVsFloor}×`,
    '',
  ],
  [
    'reference: the AWS SDK alone, one GetSecretValue and a file / node -e 0',
    `${ratios.references.awsSdkAloneVsFloor}×`,
    '',
  ],
  [
    'init (snapshot, REST), 1 GCP secret / node -e 0',
    `${ratios.snapshot.gcpVsFloor}×`,
    `≤ ${targets.gcpVsFloor}×`,
  ],
  [
    'init (snapshot), 1 Vault secret / node -e 0',
    `${ratios.snapshot.vaultVsFloor}×`,
    `≤ ${targets.vaultVsFloor}×`,
  ],
  [
    `sidecar RSS, 100 AWS secrets, settled start → end over ${sidecar.rss.seconds} s`,
    `${sidecar.rss.startMiB} → ${sidecar.rss.endMiB} MiB (${(sidecar.rss.endMiB / sidecarRss.floorMiB).toFixed(2)}× idle node)`,
    `≤ ${targets.sidecarRssMiB} MiB, flat`,
  ],
  [
    `sidecar RSS, 1 AWS secret, median over ${sidecarRss.seconds} s / idle node (${sidecarRss.floorMiB} MiB)`,
    `${sidecarRss.oneSecretMiB} MiB (${sidecarRss.oneSecretVsFloor}×)`,
    '≤ 56 MiB',
  ],
  [
    'reference sidecars, 1 secret each second, RSS: bare Node, no library; the AWS SDK alone',
    `${sidecarRss.bareNodeMiB} MiB (${sidecarRss.bareNodeVsFloor}×); ${sidecarRss.awsSdkAloneMiB} MiB (${sidecarRss.awsSdkAloneVsFloor}×)`,
    '',
  ],
  [
    "native sidecar's postStart hook while it waits: anonymous memory / the agent's",
    `${postStart.waiting.hook.anonMiB} / ${postStart.waiting.agent.anonMiB} MiB (${postStart.waiting.hookAnonVsAgentAnon}×)`,
    '< 1×',
  ],
  [
    "app's start after the set is written: postStart hook; startupProbe (periodSeconds 1), median / max",
    `${postStart.gate.hookLagMs.median} / ${postStart.gate.hookLagMs.max} ms; ${postStart.gate.probeLagMs.median} / ${postStart.gate.probeLagMs.max} ms`,
    '',
  ],
  [
    'webhook CPU per admission / TLS echo floor (replica pods; distinct pods)',
    `${replicas.max.cpuPerRequestVsFloor}×; ${webhook.modes.distinct.max.cpuPerRequestVsFloor}×`,
    '≤ 2×',
  ],
  [
    `webhook p99 at ${webhook.rate} req/s over the floor's p99 (replica pods; distinct pods)`,
    `${replicas.fixedRate.p99OverFloorMs} ms; ${webhook.modes.distinct.fixedRate.p99OverFloorMs} ms`,
    '< 2 ms',
  ],
  ...images.images.map((i) => [`${i.name} image / runtime base`, `${i.vsBase}× (${i.MiB} MiB)`, '']),
  ...agentMemoryCostRows(agentMemory),
];
console.log(`\ncost per pod (issue 12), each against its floor in this run\n`);
console.log('| figure | value | target |\n| --- | ---: | ---: |');
for (const [figure, value, target] of costPerPod) console.log(`| ${figure} | ${value} | ${target} |`);

const results: BenchResults = {
  schema: RESULTS_SCHEMA,
  ...measured,
  date: new Date().toISOString(),
  durationSeconds: Math.round(durationSeconds),
  command: 'npm run bench',
  settings: {
    BENCH_ROUNDS: ROUNDS,
    BENCH_SOAK_SECONDS: SOAK_SECONDS,
    BENCH_MEMORY_SETTLE_SECONDS: MEMORY_SETTLE_SECONDS,
    BENCH_MEMORY_TRIAL_LIMITS: MEMORY_TRIAL_LIMITS.join(','),
    BENCH_SMALL_SETTLE_SECONDS: SMALL_SETTLE_SECONDS,
    BENCH_SMALL_WINDOW_SECONDS: SMALL_WINDOW_SECONDS,
    BENCH_SMALL_TIMELINE_SECONDS: SMALL_TIMELINE_SECONDS,
    BENCH_POD_ROUNDS: POD_ROUNDS,
    BENCH_RELEASE_ROUNDS: RELEASE_ROUNDS,
  },
  machine: machine.stop(),
  figures: collectFigures({
    coldStartMs: m,
    sidecar,
    sidecarRss,
    postStart,
    images,
    agentMemory,
    smallSidecar,
    atomicity,
    webhook,
    envExec,
    podStart,
    release,
  }),
  series: collectSeries(smallSidecar),
};
mkdirSync(dirname(RESULTS_PATH), { recursive: true });
writeFileSync(RESULTS_PATH, `${JSON.stringify(results, null, 2)}\n`);
console.log(`\n${Object.keys(results.figures).length} figures written to ${RESULTS_PATH}`);
