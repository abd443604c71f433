/**
 * A hash of a value is not a version (issue 39): a short value is guessed from its hash. Sources whose
 * backend names no version (file:, Vault KV v1, an exec helper without a version line) are compared by
 * a digest inside the agent, and nothing derived from that digest leaves it: not the init run's log,
 * not a rotation's HTTP notification, not a restart annotation, not the metrics. The built agent.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startKubernetesWorkloadsFake, type KubernetesWorkloadsFake } from '../fakes/kubernetes-workloads.ts';
import { httpGet, httpPort, metric, readSecret, waitReady } from '../faults/backend.ts';
import { canary } from '../support/canary.ts';
import { eventually, memoryDir, runAgent, startAgent } from '../support/run-agent.ts';

const NS = 'shop';

/** Every way the agent could have written a digest of `value`: hex of SHA-256, any 8-character run of it. */
function assertNoDigest(text: string, value: string, where: string): void {
  const hex = createHash('sha256').update(value).digest('hex');
  for (let i = 0; i + 8 <= 32; i += 4)
    assert.ok(!text.includes(hex.slice(i, i + 8)), `${where} holds a digest of a value`);
  assert.ok(!text.includes('content:'), `${where} holds the agent's content version`);
}

describe('versions a backend does not name are never published', { timeout: 120_000 }, () => {
  let work: string;
  let fake: KubernetesWorkloadsFake;
  let app: Server;
  const bodies: string[] = [];

  before(async () => {
    work = mkdtempSync(join(tmpdir(), 'secret-agent-unnamed-'));
    fake = await startKubernetesWorkloadsFake({ serviceAccount: { namespace: NS, name: 'shop-api' } });
    app = createServer((req, res) => {
      let body = '';
      req.on('data', (d: Buffer) => (body += d.toString()));
      req.on('end', () => {
        bodies.push(body);
        res.end();
      });
    });
    await new Promise<void>((r) => app.listen(0, '127.0.0.1', r));
  });
  after(async () => {
    app?.close();
    await fake?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  it('init: the log names the file, and no version', async () => {
    using dir = memoryDir();
    const value = canary('short');
    const source = join(work, 'init-value');
    writeFileSync(source, value);
    const run = await runAgent({
      AGENT_MODE: 'init',
      SECRETS_DIR: dir.path,
      SECRET_0_REF: `file:${source}`,
      SECRET_0_FILENAME: 'pin',
    });
    assert.equal(run.code, 0, run.stderr);
    const fetched = run.logs.find((l) => l.msg === 'fetched');
    assert.ok(fetched, 'the fetched line');
    assert.equal(fetched.file, 'pin');
    assert.equal('version' in fetched, false, 'no version: file: names none');
    assertNoDigest(run.stdout + run.stderr, value, 'the init run’s output');
  });

  it('sidecar: a rotation tells the app which secret has no version, and restart-on-change refuses it as unversioned, with the fix', async () => {
    using dir = memoryDir();
    const [pod] = fake.addDeployment(NS, 'web', 2);
    const saDir = fake.serviceAccountDir(work, NS);
    const source = join(work, 'sidecar-value');
    const rotate = (value: string) => {
      writeFileSync(`${source}.tmp`, value);
      renameSync(`${source}.tmp`, source);
    };
    const v1 = canary('pin1');
    rotate(v1);
    const agent = startAgent({
      AGENT_MODE: 'sidecar',
      SECRETS_DIR: dir.path,
      AGENT_HTTP_ADDR: '127.0.0.1:0',
      REFRESH_INTERVAL: '1s',
      ROTATION_DEBOUNCE: '0s',
      SECRET_0_REF: `file:${source}`,
      SECRET_0_FILENAME: 'pin',
      ROTATION_HTTP_URL: `http://127.0.0.1:${(app.address() as AddressInfo).port}/reload`,
      RESTART_ON_CHANGE: 'true',
      POD_NAME: pod!,
      POD_NAMESPACE: NS,
      KUBERNETES_SERVICE_HOST: '127.0.0.1',
      KUBERNETES_SERVICE_PORT: new URL(fake.url).port,
      SERVICE_ACCOUNT_DIR: saDir,
    });
    try {
      const port = await httpPort(agent);
      await waitReady(port);
      // What kubectl logs shows whoever waits for a rotation: the file and its backend, no version named.
      const holding = await agent.waitForLog((l) => l.msg === 'holding versions');
      assert.deepEqual(
        (holding.versions as Record<string, unknown>[]).map(({ secret, file, provider, version }) => ({
          secret,
          file,
          provider,
          version,
        })),
        [{ secret: 'SECRET_0', file: 'pin', provider: 'file', version: '' }],
      );
      const v2 = canary('pin2');
      rotate(v2);
      await eventually(() => (readSecret(dir.path, 'pin') === v2 ? true : undefined), 'the rotation written');
      const refused = await agent.waitForLog(
        (l) => typeof l.msg === 'string' && l.msg.startsWith('restart-on-change: a secret has no version'),
      );
      assert.deepEqual(refused.secrets, ['SECRET_0']);
      assert.match(String(refused.fix), /secret-agent-version:/);
      await eventually(() => (bodies.length > 0 ? true : undefined), 'the app told');
      assert.deepEqual(JSON.parse(bodies[0]!), {
        versions: {},
        unnamed: ['SECRET_0'],
        changedFiles: ['pin'],
      });
      const metrics = (await httpGet(port, '/metrics')).body;
      assert.equal(
        metric(metrics, 'secret_agent_notifications_total{kind="restart",outcome="unversioned"}'),
        1,
      );
      assert.equal(fake.rollouts('deployments', NS, 'web'), 0);
      const { stdout, stderr } = agent.output();
      for (const [text, where] of [
        [stdout + stderr, 'the sidecar’s output'],
        [bodies.join('\n'), 'the HTTP notification'],
        [metrics, '/metrics'],
        [JSON.stringify(fake.object('deployments', NS, 'web')), 'the Deployment'],
      ] as const)
        for (const v of [v1, v2]) assertNoDigest(text, v, where);
    } finally {
      assert.equal((await agent.stop()).code, 0);
    }
  });
});
