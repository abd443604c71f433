/**
 * Issue 38: the signals of both sidecar processes tell the truth through a backend outage. Vault
 * answers 503 to everything for a while, then recovers. Through it, each process keeps the last good
 * files, /healthz and /readyz answer 200 and `secret_agent_ready` says 1 (the gauge and the endpoint
 * never disagree), every failed refresh is counted as one (in the small sidecar: never as an ok run,
 * and consecutive failures grow), the last success does not move; after it, the new value arrives and
 * every failure series settles. A sidecar started over an init container's files during the outage is
 * ready by both the endpoint and the gauge, and its last success is when those files were written. The built agent (`node images/build.ts`); the fake Vault
 * through node-vault; the resident built from source.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { FakeVault } from '../fakes/vault.ts';
import { assertNoCanary, canary } from '../support/canary.ts';
import { eventually, memoryDir, runAgent } from '../support/run-agent.ts';
import { startServingSidecar, type ServingSidecar, type SidecarProcess } from '../support/serving-sidecar.ts';

const FAILURES = 'secret_agent_fetch_failures_total{provider="vault",reason="unavailable"}';
const FETCH_FAILED = 'secret_agent_fetches_total{provider="vault",outcome="failure"}';
const LAST_SUCCESS = 'secret_agent_last_success_timestamp_seconds{file="password"}';
const OK_RUNS = 'secret_agent_resident_runs_total{outcome="ok"}';
const FAILED_RUNS = 'secret_agent_resident_runs_total{outcome="failed"}';
const IN_A_ROW = 'secret_agent_resident_consecutive_failures';

/** Every sample a test reads, by name: what the process said at one moment. */
async function signals(s: ServingSidecar): Promise<Record<string, number | undefined>> {
  const names = [FAILURES, FETCH_FAILED, LAST_SUCCESS, 'secret_agent_ready', OK_RUNS, FAILED_RUNS, IN_A_ROW];
  const sample = await s.sample();
  return {
    ...Object.fromEntries(names.map((n) => [n, sample(n)])),
    healthz: (await s.get('/healthz')).status,
    readyz: (await s.get('/readyz')).status,
  };
}

/** The versions secret_agent_secret_version_info says the file holds: one, unless a series was left behind. */
async function versionsHeld(s: ServingSidecar): Promise<string[]> {
  const metrics = (await s.get('/metrics')).body;
  assertNoCanary(metrics, '/metrics');
  return [
    ...metrics.matchAll(
      /^secret_agent_secret_version_info\{secret="SECRET_0",file="password",provider="vault",version="([^"]*)"\} 1$/gm,
    ),
  ].map((m) => m[1]!);
}

describe('signals through a Vault outage and its recovery, in both sidecar processes', () => {
  let vault: FakeVault;
  const saJwt = canary('outage-sa-jwt');
  let credentials: string;

  before(async () => {
    vault = await FakeVault.start();
    vault.mountKv('secret', 2);
    vault.policy('app', { 'secret/data/app': ['read'] });
    vault.kubernetesRole('kubernetes', 'web', { jwt: saJwt, policies: ['app'], ttlSec: 3600 });
    credentials = mkdtempSync(join(tmpdir(), 'outage-sa-'));
    writeFileSync(join(credentials, 'token'), saJwt);
  });
  after(async () => {
    await vault?.stop();
    rmSync(credentials, { recursive: true, force: true });
  });

  const env = (dir: string): Record<string, string> => ({
    SECRETS_DIR: dir,
    VAULT_ADDR: vault.addr,
    VAULT_ROLE: 'web',
    VAULT_SA_TOKEN_FILE: join(credentials, 'token'),
    REFRESH_INTERVAL: '1s',
    SECRET_0_REF: 'vault:secret/data/app#password',
    SECRET_0_FILENAME: 'password',
  });

  for (const process_ of ['small', 'node'] as const satisfies readonly SidecarProcess[]) {
    it(`${process_} sidecar: every failed refresh counted as one, the files and readiness kept, the gauge agreeing with /readyz, and all settled after recovery`, async () => {
      vault.reset();
      const before = canary('outage-before');
      vault.putKv('secret/app', { password: before });
      using dir = memoryDir();
      const sidecar = await startServingSidecar(process_, env(dir.path));
      try {
        const up = await eventually(async () => {
          const s = await signals(sidecar);
          return s.readyz === 200 && s[LAST_SUCCESS] !== undefined ? s : undefined;
        }, 'the first set');
        assert.equal(up['secret_agent_ready'], 1, 'ready by the gauge as by /readyz');
        const upVersions = await versionsHeld(sidecar);
        assert.equal(upVersions.length, 1, `one version series: ${upVersions.join(', ')}`);
        const held = upVersions[0]!;
        assert.match(held, /^[1-9]\d*$/, 'the KV v2 version Vault names');
        if (process_ === 'small') assert.equal(up[IN_A_ROW], 0);

        // The outage: every call answered 503, while the value rotates behind it.
        vault.fail({ status: 503, times: 1_000_000 });
        const after = canary('outage-after');
        vault.putKv('secret/app', { password: after });
        const early = await eventually(async () => {
          const s = await signals(sidecar);
          return (s[FAILURES] ?? 0) >= 1 && (process_ === 'node' || (s[IN_A_ROW] ?? 0) >= 1) ? s : undefined;
        }, 'the first failed refresh counted');
        const late = await eventually(async () => {
          const s = await signals(sidecar);
          return (s[FAILURES] ?? 0) >= early[FAILURES]! + 2 &&
            (process_ === 'node' || (s[IN_A_ROW] ?? 0) >= early[IN_A_ROW]! + 2)
            ? s
            : undefined;
        }, 'two more failed refreshes counted');
        for (const [when, s] of [
          ['early in the outage', early],
          ['late in the outage', late],
        ] as const) {
          assert.equal(s.healthz, 200, `${when}: live`);
          assert.equal(s.readyz, 200, `${when}: /readyz, the app has its files`);
          assert.equal(s['secret_agent_ready'], 1, `${when}: the gauge agrees with /readyz`);
          assert.equal(s[LAST_SUCCESS], up[LAST_SUCCESS], `${when}: no success while Vault fails`);
        }
        assert.deepEqual(await versionsHeld(sidecar), [held], 'the version the file still holds');
        assert.ok(late[FETCH_FAILED]! >= late[FAILURES]!, 'each failure is a failed fetch');
        assert.equal(readFileSync(join(dir.path, 'password'), 'utf8'), before, 'the last good file stays');
        if (process_ === 'small') {
          // A run that could not refresh is a failed run: the ok count stands still, the failures grow.
          assert.equal(late[OK_RUNS], early[OK_RUNS], 'no run counted ok during the outage');
          assert.equal(late[FAILED_RUNS]! - early[FAILED_RUNS]!, late[IN_A_ROW]! - early[IN_A_ROW]!);
          assert.ok(late[IN_A_ROW]! >= 3, `consecutive failures: ${late[IN_A_ROW]}`);
        }

        // Recovery.
        vault.reset();
        await eventually(
          () => (readFileSync(join(dir.path, 'password'), 'utf8') === after ? true : undefined),
          'the rotated value after recovery',
        );
        const recovered = await eventually(async () => {
          const s = await signals(sidecar);
          return s[LAST_SUCCESS]! > up[LAST_SUCCESS]! && (process_ === 'node' || s[IN_A_ROW] === 0)
            ? s
            : undefined;
        }, 'every series settled');
        assert.equal(recovered.healthz, 200);
        assert.equal(recovered.readyz, 200);
        assert.equal(recovered['secret_agent_ready'], 1);
        assert.deepEqual(
          await versionsHeld(sidecar),
          [String(Number(held) + 1)],
          'the new version, in place of the old',
        );
        assert.ok(recovered[FAILURES]! >= late[FAILURES]!, 'counters never go back');
        if (process_ === 'small') assert.ok(recovered[OK_RUNS]! > late[OK_RUNS]!, 'an ok run again');
      } finally {
        assert.equal(await sidecar.stop(), 0);
      }
    });

    it(`${process_} sidecar started over an init container's files while Vault is down: ready by /readyz and by the gauge`, async () => {
      vault.reset();
      const value = canary('outage-inherited');
      vault.putKv('secret/app', { password: value });
      using dir = memoryDir();
      const initStarted = Date.now() / 1000;
      const init = await runAgent({ ...env(dir.path), AGENT_MODE: 'init' });
      assert.equal(init.code, 0, init.stderr);
      vault.fail({ status: 503, times: 1_000_000 });
      const sidecar = await startServingSidecar(process_, env(dir.path));
      try {
        const s = await eventually(async () => {
          const now = await signals(sidecar);
          return (now[FAILURES] ?? 0) >= 1 ? now : undefined;
        }, 'a failed refresh counted');
        assert.equal(s.readyz, 200, 'the app has the init container’s files');
        assert.equal(s['secret_agent_ready'], 1, 'and the gauge says so');
        // The init container's fetch is the last success, so an alert on its age still fires.
        const last = s[LAST_SUCCESS]!;
        assert.ok(last >= Math.floor(initStarted) && last <= Date.now() / 1000, `last success ${last}`);
        assert.equal(readFileSync(join(dir.path, 'password'), 'utf8'), value);
        if (process_ === 'small') {
          assert.equal(s[OK_RUNS] ?? 0, 0, 'no run refreshed');
          assert.ok(s[IN_A_ROW]! >= 1);
        }
      } finally {
        assert.equal(await sidecar.stop(), 0);
      }
    });
  }
});
