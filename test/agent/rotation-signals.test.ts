import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync, mkdirSync, unlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { assertNoCanary, canary } from '../support/canary.ts';
import { residentBinary } from '../resident/resident-process.ts';
import { eventually, memoryDir, runAgent, startAgent } from '../support/run-agent.ts';
import { startKubernetesWorkloadsFake, type KubernetesWorkloadsFake } from '../fakes/kubernetes-workloads.ts';

/**
 * The ways a rotation is told beyond the notifiers, through the built agent: the sentinel file a
 * liveness probe checks, and Kubernetes Events on the pod (checked by a fake API server that
 * validates them against the real Event schema).
 */

const NS = 'apps';
const POD = 'web-7d4b9-x2x5q';

interface StoredEvent {
  readonly reason: string;
  readonly type: string;
  readonly message: string;
  readonly involvedObject: { readonly kind: string; readonly name: string; readonly uid?: string };
  readonly reportingInstance?: string;
}

describe('rotation signals: sentinel file and Kubernetes Events, through the built agent', () => {
  let fake: KubernetesWorkloadsFake;
  let work: string;
  let saDir: string;

  before(async () => {
    fake = await startKubernetesWorkloadsFake({ serviceAccount: { namespace: NS, name: 'web' } });
    fake.allowed.add('create events');
    work = mkdtempSync(join(tmpdir(), 'rotation-signals-'));
    saDir = join(work, 'sa');
    mkdirSync(saDir);
    writeFileSync(join(saDir, 'token'), fake.token);
    writeFileSync(join(saDir, 'ca.crt'), fake.caPem);
    writeFileSync(join(saDir, 'namespace'), NS);
  });
  after(async () => {
    await fake?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  const events = () => fake.events(NS) as unknown as StoredEvent[];
  const podEnv = () => {
    const url = new URL(fake.url);
    return {
      KUBERNETES_SERVICE_HOST: url.hostname,
      KUBERNETES_SERVICE_PORT: url.port,
      SERVICE_ACCOUNT_DIR: saDir,
      POD_NAME: POD,
      POD_NAMESPACE: NS,
      POD_UID: '6f0c6f7e-4a53-4c1e-9b4a-2f7d8e1c0a11',
    };
  };

  it('init: one SecretsDelivered event naming the files, from the init container', async () => {
    using dir = memoryDir();
    const source = join(work, 'init.json');
    const secret = canary('init');
    writeFileSync(source, JSON.stringify({ password: secret }));
    const before = events().length;
    const run = await runAgent({
      ...podEnv(),
      SECRETS_DIR: dir.path,
      KUBERNETES_EVENTS: 'true',
      SECRET_0_REF: `file:${source}#password`,
      SECRET_0_FILENAME: 'db-password',
    });
    assert.equal(run.code, 0, run.stderr);
    const added = events().slice(before);
    assert.equal(added.length, 1);
    assert.equal(added[0]!.reason, 'SecretsDelivered');
    assert.equal(added[0]!.type, 'Normal');
    assert.equal(added[0]!.involvedObject.name, POD);
    assert.equal(added[0]!.reportingInstance, `${POD}/secret-agent-init`);
    assert.match(added[0]!.message, /1 files ready: db-password/);
    assertNoCanary(JSON.stringify(added), 'events');
  });

  for (const small of [false, true])
    it(`${small ? 'small sidecar' : 'sidecar'}: SecretsRotated once per rotation, the sentinel file for its hold, SecretRefreshFailing once per streak`, async () => {
      using dir = memoryDir();
      const source = join(work, 'sidecar.json');
      writeFileSync(source, JSON.stringify({ password: canary('v1') }));
      const before = events().length;
      const agent = startAgent(
        {
          ...podEnv(),
          AGENT_MODE: 'sidecar',
          SECRETS_DIR: dir.path,
          REFRESH_INTERVAL: '1s',
          AGENT_HTTP_ADDR: '127.0.0.1:0',
          KUBERNETES_EVENTS: 'true',
          KUBERNETES_EVENTS_FAILING_AFTER: '2',
          ROTATION_SENTINEL_FILE: '.secret-agent/rotated',
          ROTATION_SENTINEL_HOLD: '3s',
          SECRET_0_REF: `file:${source}#password`,
          SECRET_0_FILENAME: 'db-password',
        },
        small ? { resident: residentBinary() } : {},
      );
      try {
        await agent.waitForLog((l) => l.msg === 'secrets written');
        const sentinel = join(dir.path, '.secret-agent/rotated');
        const reasons = () =>
          events()
            .slice(before)
            .map((e) => e.reason);
        await eventually(
          () => (reasons().includes('SecretsDelivered') ? true : undefined),
          'SecretsDelivered',
        );
        assert.equal(existsSync(sentinel), false, 'no sentinel before any rotation');

        writeFileSync(source, JSON.stringify({ password: canary('v2') }));
        const text = await eventually(
          () => (existsSync(sentinel) ? readFileSync(sentinel, 'utf8') : undefined),
          'the sentinel file',
        );
        assert.match(text, /^rotated \d{4}-\d\d-\d\dT[\d:.]+Z\ndb-password\n$/);
        await eventually(() => (reasons().includes('SecretsRotated') ? true : undefined), 'SecretsRotated');
        const rotated = events()
          .slice(before)
          .filter((e) => e.reason === 'SecretsRotated');
        assert.equal(rotated.length, 1);
        assert.match(rotated[0]!.message, /db-password/);
        // Gone once the hold is over, so the restarted app's probe passes.
        await eventually(
          () => (existsSync(sentinel) ? undefined : true),
          'the sentinel file removed',
          10_000,
        );

        // The source disappears: every cycle fails; one Warning after 2 cycles, none after the third.
        unlinkSync(source);
        await eventually(
          () => (reasons().includes('SecretRefreshFailing') ? true : undefined),
          'SecretRefreshFailing',
        );
        await agent.waitForLog(
          (l) => l.msg === 'refresh failed; keeping the last good files' && l.id === 'SECRET_0',
        );
        await new Promise((r) => setTimeout(r, 4000));
        const failing = events()
          .slice(before)
          .filter((e) => e.reason === 'SecretRefreshFailing');
        assert.equal(failing.length, 1, 'one event per failing streak');
        assert.equal(failing[0]!.type, 'Warning');
        assert.match(
          failing[0]!.message,
          /refresh failed 2 times in a row.*db-password \(SECRET_0\): not-found/,
        );
        assertNoCanary(JSON.stringify(events()), 'events');
      } finally {
        assert.equal((await agent.stop()).code, 0);
      }
    });

  it('refuses KUBERNETES_EVENTS without the pod’s name, before any fetch (exit 2)', async () => {
    using dir = memoryDir();
    const { POD_NAME: _name, ...env } = podEnv();
    const run = await runAgent({
      ...env,
      SECRETS_DIR: dir.path,
      KUBERNETES_EVENTS: 'true',
      SECRET_0_REF: `file:${join(work, 'never-read')}`,
      SECRET_0_FILENAME: 'x',
    });
    assert.equal(run.code, 2);
    assert.match(run.stderr, /POD_NAME: is not set, and KUBERNETES_EVENTS needs it/);
    assert.doesNotMatch(run.stdout, /no file at/);
  });

  it('refuses a sentinel file where a secret is written (exit 2)', async () => {
    using dir = memoryDir();
    const run = await runAgent({
      AGENT_MODE: 'sidecar',
      SECRETS_DIR: dir.path,
      ROTATION_SENTINEL_FILE: 'db/password',
      SECRET_0_REF: `file:${join(work, 'never-read')}`,
      SECRET_0_FILENAME: 'db',
    });
    assert.equal(run.code, 2);
    assert.match(run.stderr, /ROTATION_SENTINEL_FILE: "db\/password" is where SECRET_0 writes its files/);
  });
});
