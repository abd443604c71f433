/**
 * `secret-agent-webhook versions` (issue 39): which version of each secret the injected pods hold, and
 * a wait until all of them hold one. Real agents (the built bundle; the Node sidecar and the small
 * one) fetch from moto and log what they hold; pods made by the webhook's own patch are served, with
 * those logs, by a Kubernetes API fake that kubectl (the real one) reads through its proxy.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { after, before, describe, it } from 'node:test';
import { STATUS_ANNOTATION } from '../../agent/contract/product-annotations.ts';
import { VERSIONS_EXIT, runVersions } from '../../webhook/versions/versions-command.ts';
import { startKubernetesPodsFake, type KubernetesPodsFake } from '../fakes/kubernetes-pods.ts';
import { startPrometheusFake } from '../fakes/prometheus.ts';
import { FakeVault } from '../fakes/vault.ts';
import { residentBinary } from '../resident/resident-process.ts';
import { assertNoCanary, canary } from '../support/canary.ts';
import { freePort, MOTO_ENV, motoSecrets, startMoto, type Moto, type MotoSecrets } from '../support/moto.ts';
import { memoryDir, ROOT, runAgent, startAgent, type RunningAgent } from '../support/run-agent.ts';
import { admitThroughWebhook, basicPod, injectedPod, type PodDoc } from './fixtures.ts';

const NS = 'shop';
const REF = 'aws:rot/db';

interface Ran {
  code: number;
  stdout: string;
  stderr: string;
}

/** The rules of deploy/versions-reader's ClusterRole, as kubectl kustomize renders them. */
function readerRules(): { verbs: string[]; resources: string[] }[] {
  const out = spawnSync('kubectl', ['kustomize', join(ROOT, 'deploy/versions-reader')], { encoding: 'utf8' });
  assert.equal(out.status, 0, out.stderr);
  const role = parseAllDocuments(out.stdout).map(
    (d) => d.toJS() as { kind: string; rules?: { verbs: string[]; resources: string[] }[] },
  );
  return role.find((o) => o.kind === 'ClusterRole')!.rules!;
}

function kubectlPresent(): void {
  const v = spawnSync('kubectl', ['version', '--client'], { encoding: 'utf8' });
  if (v.error || v.status !== 0)
    throw new Error(
      'kubectl is missing: `versions` reads through it. Fix: apt-get install -y kubectl (or put it on PATH)',
    );
}

/** A pod as the API server stores it once the webhook injected it, running and (un)ready. */
function pod(
  name: string,
  annotations: Record<string, string>,
  ready = true,
  labels: Record<string, string> = {},
): PodDoc & { status: unknown } {
  const base = basicPod({ 'secret-agent.io/aws-region': MOTO_ENV.AWS_REGION, ...annotations });
  base.metadata.labels = { ...base.metadata.labels, ...labels };
  const injected = injectedPod(
    base,
    admitThroughWebhook(base, { AGENT_VAULT_ADDR: 'https://vault.example:8200' }, { namespace: NS }),
  );
  injected.metadata.name = name;
  injected.metadata.namespace = NS;
  return {
    ...injected,
    status: { phase: 'Running', conditions: [{ type: 'Ready', status: ready ? 'True' : 'False' }] },
  };
}

describe('secret-agent-webhook versions, against real agents', { timeout: 240_000 }, () => {
  let moto: Moto;
  let secrets: MotoSecrets;
  let api: KubernetesPodsFake;
  const agents: RunningAgent[] = [];
  const values: string[] = [];
  const outputs: string[] = [];
  const ports = new Map<string, number>();

  const run = async (...args: string[]): Promise<Ran> => {
    let stdout = '';
    let stderr = '';
    const code = await runVersions([...args, `--kubeconfig=${api.kubeconfig}`], {
      env: { PATH: process.env.PATH },
      stdout: (t) => (stdout += t),
      stderr: (t) => (stderr += t),
      stderrIsTTY: false,
    });
    outputs.push(stdout, stderr);
    return { code, stdout, stderr };
  };

  /** A sidecar for `name`, its log served as its pod's secret-agent container's. */
  const sidecar = async (name: string, small: boolean): Promise<RunningAgent> => {
    const dir = memoryDir();
    const port = await freePort();
    const agent = startAgent(
      {
        ...MOTO_ENV,
        AWS_ENDPOINT_URL_SECRETS_MANAGER: moto.endpoint,
        AGENT_MODE: 'sidecar',
        SECRETS_DIR: dir.path,
        REFRESH_INTERVAL: '1s',
        AGENT_HTTP_ADDR: `127.0.0.1:${port}`,
        SECRET_0_REF: REF,
        SECRET_0_FILENAME: 'db',
      },
      small ? { resident: residentBinary() } : {},
    );
    agents.push(agent);
    ports.set(name, port);
    api.setLog(NS, name, 'secret-agent', () => agent.output().stdout);
    return agent;
  };

  const holding = (agent: RunningAgent, version?: string) =>
    agent.waitForLog((l) => {
      const v = (l.versions as { version: string }[] | undefined)?.[0]?.version;
      return l.msg === 'holding versions' && v !== undefined && (version === undefined || v === version);
    }, 60_000);

  const versionOf = (line: Record<string, unknown>) => (line.versions as { version: string }[])[0]!.version;

  before(async () => {
    kubectlPresent();
    moto = await startMoto();
    secrets = motoSecrets(moto.endpoint);
    values.push(canary('first'));
    await secrets.put('rot/db', values[0]!);
    api = await startKubernetesPodsFake();
    // What deploy/versions-reader grants, and nothing more: the command must work with exactly that.
    api.allowed.clear();
    for (const rule of readerRules())
      for (const verb of rule.verbs) for (const r of rule.resources) api.allowed.add(`${verb} ${r}`);
    assert.deepEqual([...api.allowed].sort(), ['get pods/log', 'list pods']);
  });
  after(async () => {
    for (const a of agents) await a.stop().catch(() => undefined);
    secrets?.destroy();
    await api?.stop();
    await moto?.stop();
    for (const text of outputs) assertNoCanary(text, 'the command’s output');
  });

  it('lists each pod’s version, marks the one behind, waits: times out naming it, returns 0 once it catches up', async () => {
    const annotations = { 'secret-agent.io/secret-db': REF };
    for (const name of ['web-1', 'web-2'])
      api.putPod(pod(name, { ...annotations, 'secret-agent.io/sidecar-process': 'node' }));
    api.putPod(pod('web-3', annotations));
    const [a1, a2] = [await sidecar('web-1', false), await sidecar('web-2', false)];
    let a3 = await sidecar('web-3', true);
    const first = versionOf(await holding(a1));
    await holding(a2, first);
    await holding(a3, first);

    const listed = await run('-n', NS, '-o', 'json');
    assert.equal(listed.code, 0, listed.stderr);
    const doc = JSON.parse(listed.stdout) as {
      pods: {
        name: string;
        agent: string;
        files: { ref: string; file: string; version: string; state: string }[];
      }[];
      references: { ref: string; version: string; since: string; pods: number; behind: number }[];
    };
    assert.deepEqual(
      doc.pods.map((p) => [p.name, p.agent, p.files.map((f) => [f.ref, f.file, f.version, f.state])]),
      ['web-1', 'web-2', 'web-3'].map((n) => [n, 'sidecar', [[REF, 'db', first, 'current']]]),
    );
    assert.deepEqual(doc.references, [
      { ref: REF, version: first, since: doc.references[0]!.since, pods: 3, behind: 0 },
    ]);

    // web-3's agent stops (its pod not ready); the secret rotates; the other two take the new version.
    await a3.stop();
    api.putPod(pod('web-3', annotations, false));
    values.push(canary('second'));
    await secrets.put('rot/db', values[1]!);
    const second = versionOf(
      await a1.waitForLog((l) => l.msg === 'holding versions' && versionOf(l) !== first, 60_000),
    );
    await holding(a2, second);

    const table = await run('-n', NS);
    assert.equal(table.code, 0, table.stderr);
    const rows = table.stdout.trim().split('\n');
    assert.match(rows[0]!, /^POD\s+FILE\s+REFERENCE\s+VERSION\s+SINCE\s+STATE$/);
    assert.match(
      rows.find((r) => r.startsWith('web-1'))!,
      new RegExp(`db\\s+${REF}\\s+${second}\\s+\\S+\\s+current$`),
    );
    assert.match(
      rows.find((r) => r.startsWith('web-3'))!,
      new RegExp(`${first}\\s+\\S+\\s+behind, not ready$`),
    );

    const timedOut = await run('-n', NS, '--wait-for', REF, '--timeout', '2s', '--interval', '500ms');
    assert.equal(timedOut.code, VERSIONS_EXIT.behind.code, timedOut.stderr);
    assert.match(timedOut.stderr, new RegExp(`1 of 3 pods reading ${REF} do not hold ${second}`));
    assert.match(timedOut.stderr, new RegExp(`${NS}/web-3: holds ${first}; not ready \\(Running\\)`));
    assert.doesNotMatch(timedOut.stderr, /web-1|web-2/);

    // Restarted, it catches up: the wait for the named version returns 0.
    const waiting = run(
      '-n',
      NS,
      '--wait-for',
      `${REF}=${second}`,
      '--timeout',
      '90s',
      '--interval',
      '300ms',
    );
    a3 = await sidecar('web-3', true);
    await holding(a3, second);
    api.putPod(pod('web-3', annotations, true));
    const caughtUp = await waiting;
    assert.equal(caughtUp.code, 0, caughtUp.stderr);
    assert.match(caughtUp.stderr, new RegExp(`all 3 pods reading ${REF} hold ${second}`));
  });

  it('an init-only pod: the version its init container wrote at start, said as such; a pod whose agent has not started: unknown, and why', async () => {
    api.putPod(
      pod('batch-1', { 'secret-agent.io/secret-db': REF, 'secret-agent.io/mode': 'init' }, true, {
        tier: 'batch',
      }),
    );
    api.putPod(
      pod('batch-2', { 'secret-agent.io/secret-db': REF, 'secret-agent.io/mode': 'init' }, false, {
        tier: 'batch',
      }),
    );
    using dir = memoryDir();
    const init = await runAgent({
      ...MOTO_ENV,
      AWS_ENDPOINT_URL_SECRETS_MANAGER: moto.endpoint,
      AGENT_MODE: 'init',
      SECRETS_DIR: dir.path,
      SECRET_0_REF: REF,
      SECRET_0_FILENAME: 'db',
    });
    assert.equal(init.code, 0, init.stderr);
    api.setLog(NS, 'batch-1', 'secret-agent-init', () => init.stdout);
    api.setLog(NS, 'batch-2', 'secret-agent-init', () => undefined);
    const fetched = JSON.parse(init.stdout.split('\n').find((l) => l.includes('"fetched"'))!) as {
      version: string;
    };

    const listed = await run('-n', NS, '-l', 'tier=batch', '-o', 'json');
    assert.equal(listed.code, 0, listed.stderr);
    const doc = JSON.parse(listed.stdout) as {
      pods: { name: string; agent: string; problem?: string; files: { version: string; state: string }[] }[];
    };
    assert.deepEqual(
      doc.pods.map((p) => [p.name, p.agent, p.files.map((f) => [f.version, f.state])]),
      [
        ['batch-1', 'init-only', [[fetched.version, 'current']]],
        ['batch-2', 'init-only', [['', 'unknown']]],
      ],
    );
    assert.match(doc.pods[1]!.problem!, /waiting to start: PodInitializing/);
    const table = await run('-n', NS, '-l', 'tier=batch');
    assert.match(table.stdout, /batch-1 .*current, init only/);
    assert.match(
      table.stdout,
      /shop\/batch-2: its agent's log cannot be read: container "secret-agent-init" in pod "batch-2" is waiting to start/,
    );
  });

  it('--prometheus: the same versions from what Prometheus scraped off the agents; a pod it has no series for, unknown and why', async () => {
    const prometheus = await startPrometheusFake();
    try {
      for (const name of ['web-1', 'web-2', 'web-3']) {
        const text = await (await fetch(`http://127.0.0.1:${ports.get(name)}/metrics`)).text();
        assert.match(text, /^secret_agent_secret_version_info\{/m, `${name} publishes its versions`);
        prometheus.scraped({ namespace: NS, pod: name, container: 'secret-agent' }, text);
      }
      const fromLogs = JSON.parse((await run('-n', NS, '-o', 'json')).stdout) as {
        pods: { name: string; files: unknown[] }[];
      };
      const fromPrometheus = await run('-n', NS, '-o', 'json', '--prometheus', prometheus.url);
      assert.equal(fromPrometheus.code, 0, fromPrometheus.stderr);
      const doc = JSON.parse(fromPrometheus.stdout) as {
        pods: { name: string; problem?: string; files: unknown[] }[];
      };
      for (const name of ['web-1', 'web-2', 'web-3'])
        assert.deepEqual(
          doc.pods.find((p) => p.name === name)!.files,
          fromLogs.pods.find((p) => p.name === name)!.files,
          name,
        );
      assert.match(doc.pods.find((p) => p.name === 'batch-1')!.problem!, /^init only: it serves no metrics/);
      assert.deepEqual(prometheus.queries, [
        `secret_agent_secret_version_info{namespace="${NS}"}`,
        `secret_agent_secret_changed_timestamp_seconds{namespace="${NS}"}`,
      ]);
      const unreachable = await run('-n', NS, '--prometheus', 'http://127.0.0.1:1');
      assert.equal(unreachable.code, VERSIONS_EXIT.kubernetes.code);
      assert.match(unreachable.stderr, /--prometheus: http:\/\/127\.0\.0\.1:1 cannot be reached .*Fix: /);
    } finally {
      await prometheus.stop();
    }
  });

  it('Vault KV v2: the version number Vault names, a pod behind on the old one, and the wait for the new one', async () => {
    const vault = await FakeVault.start();
    const jwt = canary('versions-sa-jwt');
    const credentials = mkdtempSync(join(tmpdir(), 'versions-sa-'));
    writeFileSync(join(credentials, 'token'), jwt);
    try {
      vault.mountKv('secret', 2);
      vault.policy('app', { 'secret/data/app': ['read'] });
      vault.kubernetesRole('kubernetes', 'web', { jwt, policies: ['app'], ttlSec: 3600 });
      values.push(canary('vault-first'));
      vault.putKv('secret/app', { password: values.at(-1) });
      const ref = 'vault:secret/data/app#password';
      const vaultAgent = (name: string) => {
        const dir = memoryDir();
        const agent = startAgent({
          AGENT_MODE: 'sidecar',
          SECRETS_DIR: dir.path,
          AGENT_HTTP_ADDR: '127.0.0.1:0',
          REFRESH_INTERVAL: '1s',
          VAULT_ADDR: vault.addr,
          VAULT_ROLE: 'web',
          VAULT_SA_TOKEN_FILE: join(credentials, 'token'),
          SECRET_0_REF: ref,
          SECRET_0_FILENAME: 'password',
        });
        agents.push(agent);
        api.setLog(NS, name, 'secret-agent', () => agent.output().stdout);
        return agent;
      };
      const annotations = {
        'secret-agent.io/secret-password': ref,
        'secret-agent.io/vault-role': 'web',
        'secret-agent.io/sidecar-process': 'node',
      };
      for (const name of ['kv-1', 'kv-2']) api.putPod(pod(name, annotations, true, { tier: 'kv' }));
      const [k1, k2] = [vaultAgent('kv-1'), vaultAgent('kv-2')];
      await holding(k1, '1');
      await holding(k2, '1');
      await k2.stop();
      values.push(canary('vault-second'));
      vault.putKv('secret/app', { password: values.at(-1) });
      await holding(k1, '2');

      const listed = await run('-n', NS, '-l', 'tier=kv', '-o', 'json');
      assert.equal(listed.code, 0, listed.stderr);
      const doc = JSON.parse(listed.stdout) as {
        pods: { name: string; files: { ref: string; provider: string; version: string; state: string }[] }[];
      };
      assert.deepEqual(
        doc.pods.map((p) => [p.name, p.files.map((f) => [f.ref, f.provider, f.version, f.state])]),
        [
          ['kv-1', [[ref, 'vault', '2', 'current']]],
          ['kv-2', [[ref, 'vault', '1', 'behind']]],
        ],
      );
      const timedOut = await run(
        '-n',
        NS,
        '-l',
        'tier=kv',
        '--wait-for',
        `${ref}=2`,
        '--timeout',
        '1s',
        '--interval',
        '200ms',
      );
      assert.equal(timedOut.code, VERSIONS_EXIT.behind.code, timedOut.stderr);
      assert.match(timedOut.stderr, new RegExp(`${NS}/kv-2: holds 1$`, 'm'));
    } finally {
      await vault.stop();
      rmSync(credentials, { recursive: true, force: true });
    }
  });

  it('a pod that only calls itself injected and writes its own log: nothing it logs reaches the terminal as a control sequence', async () => {
    const forged = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'forged', namespace: 'tenant', annotations: { [STATUS_ANNOTATION]: 'injected' } },
      spec: {
        containers: [
          {
            name: 'secret-agent',
            image: 'busybox',
            env: [
              { name: 'SECRET_0_REF', value: 'aws:x\u001b[2J' },
              { name: 'SECRET_0_FILENAME', value: 'f\u0007' },
            ],
          },
        ],
      },
      status: { phase: 'Running', conditions: [{ type: 'Ready', status: 'True' }] },
    };
    api.putPod(forged);
    const line = JSON.stringify({
      level: 50,
      msg: 'holding versions',
      versions: [
        {
          secret: 'SECRET_0',
          file: 'f\u001b]0;owned\u0007',
          provider: 'aws\u009b',
          version: 'v\u001b[31m9\u202e' + 'x'.repeat(5000),
          changedAt: Date.now(),
        },
      ],
    });
    api.setLog(
      'tenant',
      'forged',
      'secret-agent',
      () => `${line}\n${JSON.stringify({ level: 50, msg: 'boom\u001b[2J' })}\n`,
    );
    const table = await run('-n', 'tenant');
    assert.equal(table.code, 0, table.stderr);
    assert.match(table.stdout, /forged\s+f\?\]0;owned\?\s+aws:x\?\[2J\s+v\?\[31m9\?x+\s/);
    // eslint-disable-next-line no-control-regex
    assert.doesNotMatch(table.stdout + table.stderr, /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202e]/);
    assert.ok(
      table.stdout.split('\n').every((l) => l.length < 1000),
      'a field is bounded',
    );
  });

  it('a tenant’s pod cannot answer for another namespace: a decoy reference holding =, entries of any shape, pages of huge pods', async () => {
    const decoy = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'decoy', namespace: 'evil', annotations: { [STATUS_ANNOTATION]: 'injected' } },
      spec: {
        containers: [
          {
            name: 'secret-agent',
            image: 'busybox',
            env: [
              { name: 'SECRET_0_REF', value: `${REF}=v-next` },
              { name: 'SECRET_1_REF', value: REF },
            ],
          },
        ],
      },
      status: { phase: 'Running', conditions: [{ type: 'Ready', status: 'True' }] },
    };
    api.putPod(decoy);
    const versions: unknown[] = [
      null,
      5,
      'x',
      [],
      { secret: 'SECRET_1', version: 'v-next', changedAt: 1e300 },
    ];
    for (let i = 0; i < 300_000; i++) versions.push({});
    versions.push({ secret: 'SECRET_0', version: 'v-next', changedAt: Date.now() });
    api.setLog(
      'evil',
      'decoy',
      'secret-agent',
      () => `${JSON.stringify({ level: 30, msg: 'holding versions', versions })}\n`,
    );

    // The operator waits for a version no real pod holds: the decoy's own reference must not answer for it.
    const wait = await run('-A', '--wait-for', `${REF}=v-next`, '--timeout', '1s', '--interval', '300ms');
    assert.equal(wait.code, VERSIONS_EXIT.behind.code, wait.stderr);
    assert.match(wait.stderr, /shop\/web-1: holds /);
    const listed = await run('-n', 'evil', '-o', 'json');
    assert.equal(listed.code, 0, listed.stderr);
    const doc = JSON.parse(listed.stdout) as {
      pods: { files: { secret: string; version: string; since: string }[] }[];
    };
    assert.deepEqual(
      doc.pods[0]!.files.map((f) => [f.secret, f.version, f.since === '']),
      [
        ['SECRET_0', 'v-next', false],
        ['SECRET_1', 'v-next', true],
      ],
    );
    assert.equal((await run('-n', 'evil')).code, 0, 'the table too');

    // Pods as large as etcd keeps, not injected: a page past the bound is asked again, smaller.
    for (let i = 0; i < 30; i++)
      api.putPod({
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: `big-${i}`, namespace: 'big', annotations: { note: 'x'.repeat(1_400_000) } },
        spec: { containers: [{ name: 'app', image: 'busybox' }] },
      });
    const big = await run('-n', 'big', '-o', 'json');
    assert.equal(big.code, 0, big.stderr);
    assert.deepEqual((JSON.parse(big.stdout) as { pods: unknown[] }).pods, []);
    assert.ok(
      api.requests.some((r) => r.startsWith('GET /api/v1/namespaces/big/pods?limit=125')),
      'asked again, smaller',
    );
  });

  it('every namespace, with -A: the namespace column', async () => {
    const all = await run('-A');
    assert.equal(all.code, 0, all.stderr);
    assert.match(all.stdout.split('\n')[0]!, /^NAMESPACE\s+POD\s+FILE/);
    assert.match(all.stdout, /^shop\s+web-1\s/m);
  });

  it('without the ClusterRole’s pods/log, 77 and the fix; a reference no pod reads, 2 and those read; bad flags, 2 naming the flag', async () => {
    const unknown = await run('-n', NS, '--wait-for', 'aws:rot/other=v9', '--timeout', '1s');
    assert.equal(unknown.code, VERSIONS_EXIT.arguments.code);
    assert.match(
      unknown.stderr,
      /--wait-for: no injected pod here reads "aws:rot\/other"\. Fix: name a reference as its annotation writes it, then = and the version .*"aws:rot\/db"/,
    );
    for (const [args, flag] of [
      [['-n', NS, '-A'], '--namespace'],
      [['-o', 'yaml'], '--output'],
      [['--timeout', '5m'], '--timeout'],
      [['--wait-for', REF, '--timeout', 'soon'], '--timeout'],
      [['--concurrency', '0'], '--concurrency'],
    ] as const) {
      const bad = await run(...args);
      assert.equal(bad.code, VERSIONS_EXIT.arguments.code, args.join(' '));
      assert.match(bad.stderr, new RegExp(`versions: ${flag}: .*Fix: `), args.join(' '));
    }
    api.allowed.delete('get pods/log');
    try {
      const refused = await run('-n', NS);
      assert.equal(refused.code, VERSIONS_EXIT.missingPermission.code, refused.stderr);
      assert.match(
        refused.stderr,
        /cannot get resource "pods\/log".*Fix: bind the read-only ClusterRole in deploy\/versions-reader/,
      );
    } finally {
      api.allowed.add('get pods/log');
    }
    // Only ever reads: every call the fake saw was a GET of pods or their logs (and kubectl's own /version).
    assert.ok(api.requests.length > 0);
    for (const r of api.requests)
      assert.match(r, /^GET (\/api\/v1\/(namespaces\/[^/]+\/)?pods(\/[^/?]+\/log)?\?|\/version\?)/);
    assert.ok(!api.requests.some((r) => r.includes(STATUS_ANNOTATION)));
  });
  it('5,000 pods in a namespace: read 500 a page, at most --concurrency logs at once, with progress lines', async () => {
    const template = pod('bulk', { 'secret-agent.io/secret-db': REF });
    template.metadata.namespace = 'bulk';
    const log = agents[0]!.output().stdout;
    for (let i = 0; i < 5000; i++) {
      template.metadata.name = `bulk-${i}`;
      api.putPod(template);
      api.setLog('bulk', `bulk-${i}`, 'secret-agent', () => log);
    }
    const before = api.requests.length;
    api.countFromNow();
    const bulk = await run('-n', 'bulk', '-o', 'json', '--concurrency', '6');
    assert.equal(bulk.code, 0, bulk.stderr);
    const doc = JSON.parse(bulk.stdout) as { pods: { files: { state: string }[] }[] };
    assert.equal(doc.pods.length, 5000);
    assert.ok(doc.pods.every((p) => p.files.length === 1 && p.files[0]!.state === 'current'));
    const calls = api.requests.slice(before);
    assert.equal(calls.filter((r) => r.startsWith('GET /api/v1/namespaces/bulk/pods?')).length, 10);
    assert.ok(api.mostLogReadsAtOnce <= 6, `${api.mostLogReadsAtOnce} log reads at once`);
    assert.ok(api.mostLogReadsAtOnce >= 2, 'reads overlap');
    assert.match(bulk.stderr, /^listed 1000 pods$/m);
    assert.match(bulk.stderr, /^read 500 of 5000 agents$/m);
    assert.match(bulk.stderr, /^read 5000 of 5000 agents$/m);
  });
});
