import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, beforeEach, describe, it } from 'node:test';
import { status } from '@grpc/grpc-js';
import { startGcpSecretManagerFake, type GcpSecretManagerFake } from '../fakes/gcp-secret-manager.ts';
import { FakeVault } from '../fakes/vault.ts';
import { canary } from '../support/canary.ts';
import { FaultInjectingProxy } from '../support/fault-injecting-proxy.ts';
import { memoryDir, runAgent, type AgentRun } from '../support/run-agent.ts';
import { MOTO_ENV, motoSecrets, startMoto, type Moto } from '../support/moto.ts';
import { readSecret, startBackend, type Backend } from './backend.ts';

/**
 * Issue 10, R2: with INIT_DEADLINE below a client's own request timeout, one hung connection used
 * to take the whole deadline (exit 1, never retried). Each attempt now gets a share of the deadline
 * (a third, at least 1 s, at most 15 s) and every client's timeout follows it, so the first hung
 * connection is cut in time for a retry that succeeds. One test per provider, through the built
 * agent: AWS (moto behind the fault proxy), GCP (the fake's hang, over REST and gRPC), Vault (the fake behind the
 * fault proxy).
 */
const DEADLINE = '6s';

/** The run retried once after a timeout of `id` and then wrote the set. */
function assertRetriedOnceAfterTimeout(run: AgentRun, id: string): void {
  assert.equal(run.code, 0, run.stderr);
  const retries = run.logs.filter((l) => l.msg === 'transient backend errors; retrying');
  assert.equal(retries.length, 1, 'one retry: the hung attempt was cut in time for a second one');
  assert.deepEqual(retries[0]!.reasons, ['timeout']);
  const [failed] = retries[0]!.secrets as { id: string; reason: string }[];
  assert.deepEqual([failed?.id, failed?.reason], [id, 'timeout']);
  assert.ok(run.logs.some((l) => l.msg === 'secrets written'));
}

describe('R2: per-attempt timeouts are a share of INIT_DEADLINE', () => {
  describe('AWS', () => {
    let backend: Backend;
    before(async () => {
      backend = await startBackend();
    });
    after(() => backend?.stop());
    beforeEach(() => backend.proxy.reset());

    it('the first connection hangs: cut after a share of the deadline, retried, written', async () => {
      using dir = memoryDir();
      const value = canary('aws-hang-once');
      await backend.put('hang/once', value);
      backend.proxy.next({ kind: 'hang' });
      const run = await runAgent(
        backend.env(dir.path, {
          SECRET_0_REF: 'aws:hang/once',
          SECRET_0_FILENAME: 'db',
          INIT_DEADLINE: DEADLINE,
        }),
      );
      assertRetriedOnceAfterTimeout(run, 'SECRET_0');
      assert.equal(readSecret(dir.path, 'db'), value);
      assert.deepEqual(
        backend.proxy.calls.map((c) => c.fault),
        ['hang', 'pass'],
      );
    });
  });

  describe('AWS credentials (IRSA)', () => {
    let moto: Moto;
    let sts: FaultInjectingProxy;
    before(async () => {
      moto = await startMoto();
      const secrets = motoSecrets(moto.endpoint);
      await secrets.put('irsa/db', canary('irsa-db'));
      secrets.destroy();
      sts = await FaultInjectingProxy.start(moto.endpoint);
    });
    after(async () => {
      await sts?.close();
      await moto?.stop();
    });

    it('STS never answers the web-identity login: the run ends at INIT_DEADLINE with "timeout" instead of hanging', async () => {
      using dir = memoryDir();
      // The SDK's credential lookup takes no abort signal: only the attempt's own budget bounds it.
      sts.always({ kind: 'hang' });
      writeFileSync(join(dir.path, '..jwt'), 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhcHAifQ.c2ln');
      const run = await runAgent(
        {
          AWS_REGION: MOTO_ENV.AWS_REGION,
          AWS_ROLE_ARN: 'arn:aws:iam::123456789012:role/app',
          AWS_WEB_IDENTITY_TOKEN_FILE: join(dir.path, '..jwt'),
          AWS_ENDPOINT_URL_STS: sts.endpoint,
          AWS_ENDPOINT_URL_SECRETS_MANAGER: moto.endpoint,
          HOME: dir.path,
          SECRETS_DIR: dir.path,
          SECRET_0_REF: 'aws:irsa/db',
          SECRET_0_FILENAME: 'db',
          INIT_DEADLINE: '3s',
        },
        // Far beyond the deadline: before the fix the run was still waiting for STS when this killed it.
        { timeoutMs: 30_000 },
      );
      assert.equal(run.signal, null, 'the run ended by itself');
      assert.equal(run.code, 1, run.stderr);
      assert.match(run.stderr, /SECRET_0 \(aws:irsa\/db\): timeout: /);
      const retries = run.logs.filter((l) => l.msg === 'transient backend errors; retrying');
      assert.ok(retries.length >= 1, 'the hung attempt was given up and retried');
      assert.equal(readSecret(dir.path, 'db'), undefined, 'nothing written');
      sts.always(undefined);
    });
  });

  describe('GCP', () => {
    let fake: GcpSecretManagerFake;
    before(async () => {
      fake = await startGcpSecretManagerFake();
    });
    after(() => fake?.stop());

    /** The agent's env for the fake over a transport: a loopback endpoint is plaintext and credential-less. */
    const gcpEnv = (transport: 'rest' | 'grpc') => ({
      GCE_METADATA_HOST: '127.0.0.1:9',
      GCE_METADATA_IP: '127.0.0.1:9',
      GOOGLE_APPLICATION_CREDENTIALS: '/nonexistent/adc.json',
      GCP_SECRET_MANAGER_ENDPOINT: transport === 'rest' ? fake.restEndpoint : fake.endpoint,
      GCP_TRANSPORT: transport,
    });

    for (const transport of ['rest', 'grpc'] as const) {
      it(`the first AccessSecretVersion hangs: its deadline ends the attempt, retried, written (${transport})`, async () => {
        using dir = memoryDir();
        const value = canary('gcp-hang-once');
        fake.addVersion('attempt-project', `hang-once-${transport}`, value);
        fake.inject('AccessSecretVersion', { hang: true });
        const before = fake.calls('AccessSecretVersion');
        const run = await runAgent({
          ...gcpEnv(transport),
          SECRETS_DIR: dir.path,
          SECRET_0_REF: `projects/attempt-project/secrets/hang-once-${transport}`,
          SECRET_0_FILENAME: 'api',
          INIT_DEADLINE: DEADLINE,
        });
        assertRetriedOnceAfterTimeout(run, 'SECRET_0');
        assert.equal(readSecret(dir.path, 'api'), value);
        assert.equal(fake.calls('AccessSecretVersion') - before, 2);
      });

      it(`RESOURCE_EXHAUSTED with RetryInfo: the next attempt waits as long as the server asks, then written (${transport})`, async () => {
        using dir = memoryDir();
        const value = canary('gcp-retry-info');
        fake.addVersion('attempt-project', `quota-${transport}`, value);
        fake.inject('AccessSecretVersion', {
          code: status.RESOURCE_EXHAUSTED,
          details: 'Quota exceeded for quota metric Access requests.',
          retryDelayMs: 2500,
        });
        const run = await runAgent({
          ...gcpEnv(transport),
          SECRETS_DIR: dir.path,
          SECRET_0_REF: `projects/attempt-project/secrets/quota-${transport}`,
          SECRET_0_FILENAME: 'api',
          INIT_DEADLINE: '30s',
        });
        assert.equal(run.code, 0, run.stderr);
        const retries = run.logs.filter((l) => l.msg === 'transient backend errors; retrying');
        assert.equal(retries.length, 1);
        // The first backoff is at most 250 ms; the server’s 2.5 s wins (what the built agent decoded).
        assert.equal(retries[0]!.delayMs, 2500);
        assert.deepEqual(retries[0]!.reasons, ['throttled']);
        assert.equal(readSecret(dir.path, 'api'), value);
      });
    }
  });

  describe('Vault', () => {
    let vault: FakeVault;
    let proxy: FaultInjectingProxy;
    let token: string;
    before(async () => {
      vault = await FakeVault.start();
      vault.mountKv('secret', 2);
      vault.policy('reader', { 'secret/data/*': ['read'] });
      token = vault.createToken({ policies: ['reader'] });
      proxy = await FaultInjectingProxy.start(vault.addr);
    });
    after(async () => {
      await proxy?.close();
      await vault?.stop();
    });

    it('the first read hangs: the attempt is cut, retried on a new connection, written', async () => {
      using dir = memoryDir();
      const password = canary('vault-hang-once');
      vault.putKv('secret/hang-once', { password });
      proxy.reset();
      proxy.next({ kind: 'hang' });
      const run = await runAgent({
        VAULT_ADDR: proxy.endpoint,
        VAULT_TOKEN: token,
        VAULT_KV_VERSION: '2',
        SECRETS_DIR: dir.path,
        SECRET_0_REF: 'vault:secret/hang-once#password',
        SECRET_0_FILENAME: 'password',
        INIT_DEADLINE: DEADLINE,
      });
      assertRetriedOnceAfterTimeout(run, 'SECRET_0');
      assert.equal(readSecret(dir.path, 'password'), password);
      assert.deepEqual(
        proxy.calls.map((c) => c.fault),
        ['hang', 'pass'],
      );
    });
  });
});
