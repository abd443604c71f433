/**
 * The small sidecar end to end: the resident (agent/native/resident.c, built from source) running the
 * BUILT agent (dist/agent.js) once per refresh, as `/app/resident -- node …` does in the image, against
 * the fake Vault and files. What a sidecar does must survive the process ending after every refresh:
 * the token and leases, the metrics, readiness, the notifiers. Build first: `node images/build.ts`.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { METRIC_DOCS, RESIDENT_METRICS } from '../../agent/serve/metrics.ts';
import { FakeVault } from '../fakes/vault.ts';
import { canary } from '../support/canary.ts';
import { FaultInjectingProxy } from '../support/fault-injecting-proxy.ts';
import { MOTO_ENV, motoSecrets, startMoto } from '../support/moto.ts';
import { eventually, memoryDir, runAgent } from '../support/run-agent.ts';
import { startServingSidecar, type ServingSidecar } from '../support/serving-sidecar.ts';

/** The resident running the built agent once per refresh. */
const startSmallSidecar = (env: Record<string, string>): Promise<ServingSidecar> =>
  startServingSidecar('small', env);

const OK_RUNS = 'secret_agent_resident_runs_total{outcome="ok"}';
const FAILED_RUNS = 'secret_agent_resident_runs_total{outcome="failed"}';

describe('the small sidecar: the resident runs the agent once per refresh', () => {
  let vault: FakeVault;
  const saJwt = canary('sa-jwt');
  let credentials: string;
  let notified: { body: unknown }[];
  let app: Server;
  let appPort: number;

  before(async () => {
    vault = await FakeVault.start();
    vault.mountKv('secret', 2);
    vault.mountDatabase('database');
    vault.databaseRole('database', 'app', {
      ttlSec: 3600,
      maxTtlSec: 7200,
      credentials: () => ({ username: 'v-app', password: canary('dynamic') }),
    });
    vault.policy('app', { 'secret/data/app': ['read'], 'database/creds/app': ['read'] });
    vault.kubernetesRole('kubernetes', 'web', { jwt: saJwt, policies: ['app'], ttlSec: 3600 });
    credentials = mkdtempSync(join(tmpdir(), 'small-sidecar-sa-'));
    writeFileSync(join(credentials, 'token'), saJwt);
    notified = [];
    app = createServer((req, res) => {
      let body = '';
      req.on('data', (d: Buffer) => (body += d.toString()));
      req.on('end', () => {
        notified.push({ body: JSON.parse(body) as unknown });
        res.end('ok');
      });
    });
    appPort = await new Promise<number>((resolve) =>
      app.listen(0, '127.0.0.1', () => resolve((app.address() as { port: number }).port)),
    );
  });
  after(async () => {
    await vault?.stop();
    app?.close();
    rmSync(credentials, { recursive: true, force: true });
  });

  it('logs in once and keeps the lease over many runs; a rotation reaches the files and every notifier', async () => {
    vault.reset();
    const first = canary('kv-v1');
    vault.putKv('secret/app', { password: first });
    using dir = memoryDir();
    const sidecar = await startSmallSidecar({
      SECRETS_DIR: dir.path,
      REQUIRE_MEMORY_FS: 'true',
      VAULT_ADDR: vault.addr,
      VAULT_ROLE: 'web',
      VAULT_SA_TOKEN_FILE: join(credentials, 'token'),
      REFRESH_INTERVAL: '1s',
      SECRET_0_REF: 'vault:secret/data/app#password',
      SECRET_0_FILENAME: 'password',
      SECRET_1_REF: 'vault:database/creds/app',
      SECRET_1_FILENAME: 'db.json',
      ROTATION_HTTP_URL: `POST http://127.0.0.1:${appPort}/-/reload`,
      ROTATION_SENTINEL_FILE: '.rotated',
      ROTATION_SENTINEL_HOLD: '4s',
      POD_NAMESPACE: 'shop',
      POD_NAME: 'web-1',
    });
    try {
      await eventually(
        async () => ((await sidecar.metric(OK_RUNS)) ?? 0) >= 4 || undefined,
        'four good runs',
      );
      assert.equal((await sidecar.get('/readyz')).status, 200);
      assert.equal(readFileSync(join(dir.path, 'password'), 'utf8'), first);
      // The token and the lease outlive each run: one login, one set of database credentials.
      assert.equal(vault.count('POST', 'auth/kubernetes/login'), 1, 'one login over every run');
      assert.equal(vault.count('GET', 'database/creds/app'), 1, 'the lease is reused, not re-minted');
      assert.ok(vault.count('GET', 'secret/data/app') >= 4, 'each run reads the KV secret');
      // Counters add up over the runs; the process metrics are the resident's own.
      const fetched = await sidecar.metric('secret_agent_fetches_total{provider="vault",outcome="success"}');
      assert.ok(fetched !== undefined && fetched >= 8, `fetches counted over the runs: ${fetched}`);
      assert.equal(await sidecar.metric('secret_agent_ready'), 1);
      assert.equal(await sidecar.metric('secret_agent_rotations_total'), 0);
      const { body } = await sidecar.get('/metrics');
      for (const name of RESIDENT_METRICS) {
        const declared = METRIC_DOCS.find((m) => m.name === name)!;
        assert.ok(body.includes(`# HELP ${name} ${declared.help}\n`), `${name} as declared`);
      }
      const lastRun = await sidecar.metric('secret_agent_resident_last_run_seconds');
      assert.ok(lastRun !== undefined && lastRun > 0 && lastRun < 30, `the last run took ${lastRun} s`);
      const rss = await sidecar.metric('secret_agent_process_resident_memory_bytes');
      assert.ok(rss !== undefined && rss < 4 * 1024 * 1024, `the resident holds ${rss} bytes`);

      // Watched from now on: on a loaded machine the hold may be over by the time the notifier is seen.
      let sentinelSeen = false;
      const watch = setInterval(() => (sentinelSeen ||= existsSync(join(dir.path, '.rotated'))), 20);
      const second = canary('kv-v2');
      vault.putKv('secret/app', { password: second });
      await eventually(
        () => (readFileSync(join(dir.path, 'password'), 'utf8') === second ? true : undefined),
        'the rotation to reach the file',
      );
      await eventually(() => (notified.length > 0 ? true : undefined), 'the HTTP notifier');
      assert.deepEqual((notified[0]!.body as { changedFiles: string[] }).changedFiles, ['password']);
      await eventually(() => (sentinelSeen ? true : undefined), 'the sentinel file during its hold');
      clearInterval(watch);
      // A later run removes it once the hold is over: the run after the rotation came in time for it.
      await eventually(
        () => (existsSync(join(dir.path, '.rotated')) ? undefined : true),
        'the hold to end',
        15_000,
      );
      await eventually(
        async () => ((await sidecar.metric('secret_agent_rotations_total')) === 1 ? true : undefined),
        'the rotation counted',
      );
      assert.equal(await sidecar.metric('secret_agent_notifications_total{kind="http",outcome="ok"}'), 1);
      assert.equal(await sidecar.metric(FAILED_RUNS), 0, sidecar.output().stderr);
    } finally {
      assert.equal(await sidecar.stop(), 0, 'SIGTERM ends it with 0');
    }
    const logs = sidecar.output().stdout;
    assert.ok(!logs.includes(saJwt) && !logs.includes('hvs.'), 'no credential in the logs');
  });

  it('AWS with IRSA: one STS login over many runs, while the credentials last', async () => {
    const moto = await startMoto();
    const sts = await FaultInjectingProxy.start(moto.endpoint);
    const secrets = motoSecrets(moto.endpoint);
    using dir = memoryDir();
    try {
      await secrets.put('irsa/db', canary('aws-value'));
      writeFileSync(join(dir.path, '..jwt'), 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhcHAifQ.c2ln');
      const sidecar = await startSmallSidecar({
        AWS_REGION: MOTO_ENV.AWS_REGION,
        AWS_ROLE_ARN: 'arn:aws:iam::123456789012:role/app',
        AWS_WEB_IDENTITY_TOKEN_FILE: join(dir.path, '..jwt'),
        AWS_ENDPOINT_URL_STS: sts.endpoint,
        AWS_ENDPOINT_URL_SECRETS_MANAGER: moto.endpoint,
        SECRETS_DIR: dir.path,
        REFRESH_INTERVAL: '1s',
        SECRET_0_REF: 'aws:irsa/db',
        SECRET_0_FILENAME: 'db',
      });
      try {
        await eventually(
          async () => ((await sidecar.metric(OK_RUNS)) ?? 0) >= 3 || undefined,
          'three good runs',
        );
        const fetched = await sidecar.metric('secret_agent_fetches_total{provider="aws",outcome="success"}');
        assert.ok(fetched !== undefined && fetched >= 3, `a fetch per run: ${fetched}`);
        assert.equal(sts.calls.length, 1, 'one AssumeRoleWithWebIdentity over every run');
      } finally {
        assert.equal(await sidecar.stop(), 0);
      }
    } finally {
      secrets.destroy();
      await sts.close();
      await moto.stop();
    }
  });

  it('a backend failure keeps the last good files and readiness, counts it, and recovers', async () => {
    using dir = memoryDir();
    const source = mkdtempSync(join(tmpdir(), 'small-sidecar-file-'));
    const file = join(source, 'value');
    const value = canary('file-value');
    writeFileSync(file, value);
    const sidecar = await startSmallSidecar({
      SECRETS_DIR: dir.path,
      REFRESH_INTERVAL: '1s',
      SECRET_0_REF: `file:${file}`,
      SECRET_0_FILENAME: 'value',
    });
    try {
      await eventually(async () => ((await sidecar.metric(OK_RUNS)) ?? 0) >= 1 || undefined, 'a good run');
      rmSync(file);
      await eventually(
        async () =>
          ((await sidecar.metric('secret_agent_fetch_failures_total{provider="file",reason="not-found"}')) ??
            0) >= 2 || undefined,
        'failures counted over runs',
      );
      assert.equal(readFileSync(join(dir.path, 'value'), 'utf8'), value, 'the last good file stays');
      assert.equal((await sidecar.get('/readyz')).status, 200, 'still ready: the app has its files');
      const next = canary('file-value-2');
      writeFileSync(file, next);
      await eventually(
        () => (readFileSync(join(dir.path, 'value'), 'utf8') === next ? true : undefined),
        'recovery',
      );
    } finally {
      assert.equal(await sidecar.stop(), 0);
      rmSync(source, { recursive: true, force: true });
    }
  });

  it('a configuration error on the first run ends the resident with 2, as a misconfigured sidecar', async () => {
    using dir = memoryDir();
    const sidecar = await startSmallSidecar({ SECRETS_DIR: dir.path, SECRET_0_FILENAME: 'x' });
    const timeout = new Promise<'timeout'>((resolve) => setTimeout(() => resolve('timeout'), 20_000).unref());
    const code = await Promise.race([sidecar.exited, timeout]);
    await sidecar.stop();
    assert.equal(code, 2, sidecar.output().stderr);
    assert.match(sidecar.output().stderr, /SECRET_0_FILENAME is set without SECRET_0_REF|SECRET_0_REF/);
    assert.equal(
      await fetch(`http://127.0.0.1:${sidecar.port}/healthz`).catch(() => undefined),
      undefined,
      'the port is closed',
    );
  });

  it('AGENT_HANDOFF_FDS is the resident’s alone: refused in init mode and with EXIT_WITH_PROCESS, before any fetch', async () => {
    using dir = memoryDir();
    const base = { SECRETS_DIR: dir.path, SECRET_0_REF: 'file:/nonexistent', SECRET_0_FILENAME: 'x' };
    const init = await runAgent({ ...base, AGENT_HANDOFF_FDS: '3,4' });
    assert.equal(init.code, 2);
    assert.match(init.stderr, /AGENT_HANDOFF_FDS: is set in "init" mode/);
    const job = await runAgent({
      ...base,
      AGENT_MODE: 'sidecar',
      AGENT_HANDOFF_FDS: '3,4',
      EXIT_WITH_PROCESS: 'app',
    });
    assert.equal(job.code, 2);
    assert.match(job.stderr, /EXIT_WITH_PROCESS: needs the agent to stay running/);
    const other = await runAgent({ ...base, AGENT_MODE: 'sidecar', AGENT_HANDOFF_FDS: '0,1' });
    assert.equal(other.code, 2);
    assert.match(other.stderr, /AGENT_HANDOFF_FDS: "0,1" is not the resident's handoff/);
  });
});
