import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ManualClock, FakeVault } from '../fakes/vault.ts';
import { startGcpSecretManagerFake, type GcpSecretManagerFake } from '../fakes/gcp-secret-manager.ts';
import { canary } from '../support/canary.ts';
import { eventually, memoryDir, startAgent } from '../support/run-agent.ts';

/**
 * Sidecar refreshes that ask "which version is current?" before reading a value: an unchanged GCP
 * `latest` or Vault KV v2 secret costs a metadata read, never an access of the payload.
 */

const read = (dir: string, name: string) => {
  try {
    return readFileSync(join(dir, name), 'utf8');
  } catch {
    return undefined;
  }
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('version-aware refresh, through the built agent', () => {
  let gcp: GcpSecretManagerFake;
  let vault: FakeVault;
  let clockTicker: NodeJS.Timeout;

  before(async () => {
    gcp = await startGcpSecretManagerFake();
    // The fake Vault's clock follows real time, so the agent's real timers and the fake's TTLs agree.
    const clock = new ManualClock(Date.now());
    clockTicker = setInterval(() => clock.advance(Math.max(0, Date.now() - clock.now())), 20);
    vault = await FakeVault.start({ clock });
  });
  after(async () => {
    clearInterval(clockTicker);
    await gcp?.stop();
    await vault?.stop();
  });

  /** A sidecar refreshing one Vault secret every second, as these tests run it. */
  const vaultSidecar = (dir: string, token: string, ref: string, filename: string) =>
    startAgent({
      AGENT_MODE: 'sidecar',
      SECRETS_DIR: dir,
      AGENT_HTTP_ADDR: '127.0.0.1:0',
      REFRESH_INTERVAL: '1s',
      VAULT_ADDR: vault.addr,
      VAULT_TOKEN: token,
      SECRET_0_REF: ref,
      SECRET_0_FILENAME: filename,
    });

  // gRPC is a sidecar's default transport; REST is asked for.
  for (const transport of ['grpc', 'rest'] as const)
    it(`GCP: checks the version behind latest each cycle and accesses the payload only when it moved (${transport})`, async () => {
      using dir = memoryDir();
      const first = canary('gcp-1');
      const secret = `api-${transport}`;
      gcp.addVersion('va-project', secret, first);
      const agent = startAgent({
        AGENT_MODE: 'sidecar',
        SECRETS_DIR: dir.path,
        AGENT_HTTP_ADDR: '127.0.0.1:0',
        REFRESH_INTERVAL: '1s',
        ...(transport === 'rest'
          ? { GCP_TRANSPORT: 'rest', GCP_SECRET_MANAGER_ENDPOINT: gcp.restEndpoint }
          : { GCP_SECRET_MANAGER_ENDPOINT: gcp.endpoint }),
        GCE_METADATA_HOST: '127.0.0.1:9',
        GOOGLE_APPLICATION_CREDENTIALS: '/nonexistent/adc.json',
        SECRET_0_REF: `projects/va-project/secrets/${secret}`,
        SECRET_0_FILENAME: 'api',
      });
      try {
        await eventually(() => (read(dir.path, 'api') === first ? true : undefined), 'the first value');
        assert.equal(gcp.seen.at(-1)!.transport, transport);
        const accessed = gcp.calls('AccessSecretVersion');
        const peeked = gcp.calls('GetSecretVersion');
        await eventually(
          () => (gcp.calls('GetSecretVersion') >= peeked + 3 ? true : undefined),
          'three refresh cycles',
        );
        assert.equal(gcp.calls('AccessSecretVersion'), accessed, 'unchanged cycles make no access operation');

        const second = canary('gcp-2');
        gcp.addVersion('va-project', secret, second);
        await eventually(() => (read(dir.path, 'api') === second ? true : undefined), 'the new version');
        assert.equal(gcp.calls('AccessSecretVersion'), accessed + 1, 'one access for one new version');
      } finally {
        assert.equal((await agent.stop()).code, 0);
      }
    });

  it('Vault KV v2: reads metadata each cycle and the value only when current_version moved', async () => {
    using dir = memoryDir();
    vault.mountKv('kv', 2);
    const v1 = canary('kv-1');
    vault.putKv('kv/app', { password: v1 });
    vault.policy('sidecar', { 'kv/data/app': ['read'], 'kv/metadata/app': ['read'] });
    const token = vault.createToken({ policies: ['sidecar'], ttlSec: 3600 });
    const agent = vaultSidecar(dir.path, token, 'vault:kv/data/app#password', 'password');
    try {
      await eventually(() => (read(dir.path, 'password') === v1 ? true : undefined), 'the first value');
      const reads = vault.count('GET', 'kv/data/app');
      const peeks = vault.count('GET', 'kv/metadata/app');
      await eventually(
        () => (vault.count('GET', 'kv/metadata/app') >= peeks + 3 ? true : undefined),
        'three cycles',
      );
      assert.equal(vault.count('GET', 'kv/data/app'), reads, 'unchanged cycles never read the value');

      const v2 = canary('kv-2');
      vault.putKv('kv/app', { password: v2 });
      await eventually(() => (read(dir.path, 'password') === v2 ? true : undefined), 'the new version');
      assert.equal(vault.count('GET', 'kv/data/app'), reads + 1);
    } finally {
      assert.equal((await agent.stop()).code, 0);
    }
  });

  it('Vault KV v2 without read on metadata: asks once, then reads the value each cycle', async () => {
    using dir = memoryDir();
    vault.mountKv('kvd', 2);
    const value = canary('kvd');
    vault.putKv('kvd/app', { password: value });
    vault.policy('no-metadata', { 'kvd/data/app': ['read'] });
    const token = vault.createToken({ policies: ['no-metadata'], ttlSec: 3600 });
    const agent = vaultSidecar(dir.path, token, 'vault:kvd/data/app#password', 'password');
    try {
      await eventually(() => (read(dir.path, 'password') === value ? true : undefined), 'the value');
      const reads = vault.count('GET', 'kvd/data/app');
      await eventually(
        () => (vault.count('GET', 'kvd/data/app') >= reads + 3 ? true : undefined),
        'three cycles',
      );
      assert.equal(vault.count('GET', 'kvd/metadata/app'), 1, 'a denied metadata read is not repeated');
    } finally {
      assert.equal((await agent.stop()).code, 0);
    }
  });

  it('Vault dynamic secret: renews the lease, and fetches new credentials before a capped lease ends', async () => {
    using dir = memoryDir();
    vault.mountDatabase('db');
    let issued = 0;
    vault.databaseRole('db', 'app', {
      ttlSec: 2,
      maxTtlSec: 5,
      credentials: () => ({ username: `v-app-${++issued}`, password: canary(`dyn-${issued}`) }),
    });
    vault.policy('dyn', { 'db/creds/app': ['read'] });
    const token = vault.createToken({ policies: ['dyn'], ttlSec: 3600 });
    const agent = vaultSidecar(dir.path, token, 'vault:db/creds/app#username', 'username');
    try {
      await eventually(
        () => (read(dir.path, 'username') === 'v-app-1' ? true : undefined),
        'the first credentials',
      );
      // Refresh cycles reuse the leased credentials instead of minting new ones every second.
      await sleep(1500);
      assert.equal(issued, 1, 'refreshes while the lease lives reuse it');
      await eventually(
        () => (vault.count('PUT', 'sys/leases/renew') >= 1 ? true : undefined),
        'a lease renewal',
      );
      // The lease cannot outlive 5 s: new credentials arrive before it ends.
      // New credentials (v-app-2, or a later one: a scheduled round racing the re-fetch may mint one more).
      await eventually(
        () => (/^v-app-([2-9]|\d{2,})$/.test(read(dir.path, 'username') ?? '') ? true : undefined),
        'credentials rotated before the lease ended',
        15_000,
      ).catch((e: Error) => {
        // Rare under load: say what the agent and Vault saw, so the next failure explains itself.
        const seen = agent
          .output()
          .logs.slice(-12)
          .map((l) => JSON.stringify(l))
          .join('\n');
        throw new Error(
          `${e.message}; file: ${read(dir.path, 'username')}, issued: ${issued}, renewals: ${vault.count('PUT', 'sys/leases/renew')}\n${seen}`,
        );
      });
      await agent.waitForLog((l) => l.msg === 'fetching new credentials before the old ones end');
    } finally {
      assert.equal((await agent.stop()).code, 0);
    }
  });
});
