import {
  CreateSecretCommand,
  PutSecretValueCommand,
  SecretsManagerClient,
} from '@aws-sdk/client-secrets-manager';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, beforeEach, describe, it } from 'node:test';
import { assertNoCanary, canary } from '../support/canary.ts';
import { FaultProxy } from '../support/fault-proxy.ts';
import { freePort, MOTO_ENV, startMoto, type Moto } from '../support/moto.ts';
import { residentBinary } from '../resident/resident-process.ts';
import { eventually, memoryDir, runAgent, startAgent, type RunningAgent } from '../support/run-agent.ts';

let moto: Moto;
let proxy: FaultProxy;
let sm: SecretsManagerClient;

const sidecarEnv = (dir: string, extra: Record<string, string>) => ({
  ...MOTO_ENV,
  AWS_ENDPOINT_URL_SECRETS_MANAGER: proxy.endpoint,
  AGENT_MODE: 'sidecar',
  SECRETS_DIR: dir,
  REFRESH_INTERVAL: '1s',
  AGENT_HTTP_ADDR: '127.0.0.1:0',
  ...extra,
});

async function httpPort(agent: RunningAgent): Promise<number> {
  const line = await agent.waitForLog((l) => l.msg === 'serving /healthz, /readyz, /metrics');
  return Number(String(line.addr).split(':').pop());
}

async function get(port: number, path: string): Promise<{ status: number; body: string }> {
  const res = await fetch(`http://127.0.0.1:${port}${path}`);
  return { status: res.status, body: await res.text() };
}

const read = (dir: string, name: string) => {
  try {
    return readFileSync(join(dir, name), 'utf8');
  } catch {
    return undefined;
  }
};

describe('sidecar mode, through the built agent against moto', () => {
  before(async () => {
    moto = await startMoto();
    proxy = await FaultProxy.start(moto.endpoint);
    sm = new SecretsManagerClient({
      region: MOTO_ENV.AWS_REGION,
      endpoint: moto.endpoint,
      credentials: { accessKeyId: 'testing', secretAccessKey: 'testing' },
    });
  });
  after(async () => {
    sm?.destroy();
    await proxy?.close();
    await moto?.stop();
  });
  beforeEach(() => proxy.reset());

  for (const small of [false, true])
    it(`${small ? 'small sidecar: ' : ''}is ready only after the first write, rotates on change, tells the app once, and leaves unchanged cycles alone`, async () => {
      using dir = memoryDir();
      const first = canary('first');
      const name = small ? `sidecar/rotating-small` : 'sidecar/rotating';
      await sm.send(new CreateSecretCommand({ Name: name, SecretString: first }));

      // The app: an HTTP listener and a process that counts SIGHUPs, found through its pidfile.
      const calls: { method: string; url: string; body: string }[] = [];
      const app: Server = createServer((req, res) => {
        let body = '';
        req.on('data', (d: Buffer) => (body += d.toString()));
        req.on('end', () => {
          calls.push({ method: req.method!, url: req.url!, body });
          res.end('reloaded');
        });
      });
      await new Promise<void>((r) => app.listen(0, '127.0.0.1', r));
      const appPort = (app.address() as AddressInfo).port;
      const pidDir = mkdtempSync(join(tmpdir(), 'secret-agent-pid-'));
      const hupper = spawn(
        process.execPath,
        ['-e', "process.on('SIGHUP', () => console.log('HUP')); setInterval(() => {}, 1000)"],
        { stdio: ['ignore', 'pipe', 'inherit'] },
      );
      let hups = 0;
      hupper.stdout.on('data', (d: Buffer) => (hups += d.toString().split('HUP').length - 1));
      writeFileSync(join(pidDir, 'app.pid'), String(hupper.pid));

      // The small sidecar's port is the resident's, named up front: it logs no JSON line for it.
      const smallPort = small ? await freePort() : 0;
      const agent = startAgent(
        sidecarEnv(dir.path, {
          SECRET_0_REF: `aws:${name}`,
          SECRET_0_FILENAME: 'token',
          ROTATION_HTTP_URL: `POST http://127.0.0.1:${appPort}/-/reload`,
          ROTATION_SIGNAL: 'SIGHUP',
          ROTATION_SIGNAL_PIDFILE: join(pidDir, 'app.pid'),
          ...(small ? { AGENT_HTTP_ADDR: `127.0.0.1:${smallPort}` } : {}),
        }),
        small ? { resident: residentBinary() } : {},
      );
      try {
        const port = small ? smallPort : await httpPort(agent);
        if (small)
          await eventually(
            () =>
              get(port, '/healthz').then(
                () => true,
                () => undefined,
              ),
            'the resident to listen',
          );
        await eventually(
          async () => ((await get(port, '/readyz')).status === 200 ? true : undefined),
          'readiness',
        );
        assert.equal(read(dir.path, 'token'), first, 'ready means the files are there');
        assert.equal((await get(port, '/healthz')).status, 200);

        // Unchanged cycles: the backend is asked, the volume is not touched.
        const payload = readlinkSync(join(dir.path, '..data'));
        const asked = proxy.requests.length;
        await eventually(() => (proxy.requests.length >= asked + 2 ? true : undefined), 'two refresh cycles');
        assert.equal(readlinkSync(join(dir.path, '..data')), payload, 'a no-change cycle swaps nothing');
        assert.equal(calls.length, 0);

        const second = canary('second');
        await sm.send(new PutSecretValueCommand({ SecretId: name, SecretString: second }));
        await eventually(() => (read(dir.path, 'token') === second ? true : undefined), 'the rotated value');
        await eventually(
          () => (calls.length === 1 && hups === 1 ? true : undefined),
          'the app told once by HTTP and by signal',
        );
        assert.equal(calls[0]!.method, 'POST');
        assert.equal(calls[0]!.url, '/-/reload');
        assertNoCanary(calls[0]!.body, 'the rotation request body');
        assert.deepEqual(JSON.parse(calls[0]!.body).changedFiles, ['token']);

        // The small sidecar's metrics are its last run's, handed over as the run ends, after it told the app.
        const metrics = await eventually(async () => {
          const body = (await get(port, '/metrics')).body;
          return /^secret_agent_rotations_total 1$/m.test(body) ? body : undefined;
        }, 'the rotation counted in /metrics');
        assertNoCanary(metrics, '/metrics');
        assert.match(metrics, /^secret_agent_ready 1$/m);
        assert.match(metrics, /^secret_agent_notifications_total\{kind="http",outcome="ok"\} 1$/m);
        assert.match(metrics, /^secret_agent_notifications_total\{kind="signal",outcome="ok"\} 1$/m);
        assert.match(metrics, /^secret_agent_fetches_total\{provider="aws",outcome="success"\} \d+$/m);
        assert.match(metrics, /^secret_agent_last_success_timestamp_seconds\{file="token"\} \d/m);
        assert.match(metrics, /^secret_agent_refresh_interval_seconds\{file="token"\} 1$/m);

        const { code } = await agent.stop();
        assert.equal(code, 0, 'SIGTERM is a clean stop');
        assert.equal(read(dir.path, 'token'), second, 'files stay after the agent stops');
      } finally {
        await agent.stop();
        hupper.kill();
        app.close();
        rmSync(pidDir, { recursive: true, force: true });
      }
    });

  it('keeps the last good files through a backend outage, backs off, stays ready, and recovers by itself', async () => {
    using dir = memoryDir();
    const before = canary('before');
    await sm.send(new CreateSecretCommand({ Name: 'sidecar/outage', SecretString: before }));
    const agent = startAgent(
      sidecarEnv(dir.path, { SECRET_0_REF: 'aws:sidecar/outage', SECRET_0_FILENAME: 'db' }),
    );
    try {
      const port = await httpPort(agent);
      await eventually(
        async () => ((await get(port, '/readyz')).status === 200 ? true : undefined),
        'readiness',
      );

      proxy.setDown(true);
      const downAt = proxy.requests.length;
      await agent.waitForLog(
        (l) => l.msg === 'refresh failed; keeping the last good files' && l.reason === 'unavailable',
      );
      await new Promise((r) => setTimeout(r, 2500));
      const outageCalls = proxy.requests.length - downAt;
      assert.equal(read(dir.path, 'db'), before, 'nothing good is deleted because the backend failed');
      assert.equal(
        (await get(port, '/readyz')).status,
        200,
        'an outage does not take the app out of service',
      );
      assert.ok(
        outageCalls >= 1 && outageCalls <= 6,
        `calls during ~3 s of outage follow the backoff: ${outageCalls}`,
      );
      assert.match(
        (await get(port, '/metrics')).body,
        /secret_agent_fetch_failures_total\{provider="aws",reason="unavailable"\} [1-9]/,
      );

      const after = canary('after');
      await sm.send(new PutSecretValueCommand({ SecretId: 'sidecar/outage', SecretString: after }));
      proxy.setDown(false);
      await eventually(
        () => (read(dir.path, 'db') === after ? true : undefined),
        'recovery with the new value',
      );
    } finally {
      proxy.setDown(false);
      assert.equal((await agent.stop()).code, 0);
    }
  });

  it('applies a valid edit of AGENT_CONFIG_FILE without a restart, and keeps running on a bad one', async () => {
    using dir = memoryDir();
    const cfgDir = mkdtempSync(join(tmpdir(), 'secret-agent-config-'));
    const cfg = join(cfgDir, 'agent.yaml');
    const a = canary('a');
    const b = canary('b');
    await sm.send(new CreateSecretCommand({ Name: 'sidecar/cfg-a', SecretString: a }));
    await sm.send(new CreateSecretCommand({ Name: 'sidecar/cfg-b', SecretString: b }));
    writeFileSync(cfg, 'REFRESH_INTERVAL: 1s\nSECRET_0_REF: aws:sidecar/cfg-a\nSECRET_0_FILENAME: a\n');
    const agent = startAgent({ ...sidecarEnv(dir.path, {}), AGENT_CONFIG_FILE: cfg });
    try {
      const port = await httpPort(agent);
      await eventually(() => (read(dir.path, 'a') === a ? true : undefined), 'the first file');

      writeFileSync(cfg, 'REFRESH_INTERVAL: 1s\nSECRET_0_REF: aws:sidecar/cfg-b\nSECRET_0_FILENAME: b\n');
      await eventually(
        () => (read(dir.path, 'b') === b && read(dir.path, 'a') === undefined ? true : undefined),
        'the edited set',
      );

      writeFileSync(cfg, 'REFRESH_INTERVAL: soon\nSECRET_0_REF: aws:sidecar/cfg-a\nSECRET_0_FILENAME: a\n');
      const rejected = await agent.waitForLog(
        (l) => l.msg === 'configuration file rejected; keeping the running configuration',
      );
      assert.match(JSON.stringify(rejected.problems), /REFRESH_INTERVAL: \\"soon\\" is not a duration/);
      assert.equal(read(dir.path, 'b'), b);
      assert.equal(read(dir.path, 'a'), undefined);
      const metrics = (await get(port, '/metrics')).body;
      assert.match(metrics, /secret_agent_config_reloads_total\{outcome="applied"\} 1/);
      assert.match(metrics, /secret_agent_config_reloads_total\{outcome="rejected"\} 1/);
      // A file the new configuration dropped leaves the per-file series, so it cannot look stale.
      assert.match(metrics, /^secret_agent_last_success_timestamp_seconds\{file="b"\} \d/m);
      assert.match(metrics, /^secret_agent_refresh_interval_seconds\{file="b"\} 1$/m);
      assert.doesNotMatch(metrics, /\{file="a"\}/);
    } finally {
      assert.equal((await agent.stop()).code, 0);
      rmSync(cfgDir, { recursive: true, force: true });
    }
  });

  it('keeps retrying the first fill, not ready until every secret is there', async () => {
    using dir = memoryDir();
    const agent = startAgent(
      sidecarEnv(dir.path, {
        SECRET_0_REF: 'aws:sidecar/late',
        SECRET_0_FILENAME: 'late',
        INIT_DEADLINE: '1s',
      }),
    );
    try {
      const port = await httpPort(agent);
      await agent.waitForLog((l) => l.msg === 'not every secret could be delivered yet; retrying');
      assert.equal((await get(port, '/readyz')).status, 503);
      assert.equal((await get(port, '/healthz')).status, 200);
      const late = canary('late');
      await sm.send(new CreateSecretCommand({ Name: 'sidecar/late', SecretString: late }));
      await eventually(
        async () => ((await get(port, '/readyz')).status === 200 ? true : undefined),
        'readiness once the secret exists',
      );
      assert.equal(read(dir.path, 'late'), late);
    } finally {
      assert.equal((await agent.stop()).code, 0);
    }
  });

  // Classic sidecars start beside the app, after the init container wrote the set: the app may
  // already be reading it. A value that moved on in between is a rotation the app must hear of.
  for (const moved of [false, true])
    it(`takes over the set the init container wrote: ${moved ? 'a value changed since is a rotation the app is told of' : 'an equal set is left untouched, the app not told'}`, async () => {
      using dir = memoryDir();
      const name = `sidecar/takeover-${moved}`;
      const first = canary(`takeover-${moved}-1`);
      await sm.send(new CreateSecretCommand({ Name: name, SecretString: first }));
      const env = { SECRET_0_REF: `aws:${name}`, SECRET_0_FILENAME: 'token' };
      const init = await runAgent({ ...sidecarEnv(dir.path, env), AGENT_MODE: 'init' });
      assert.equal(init.code, 0, init.stderr);
      const payload = readlinkSync(join(dir.path, '..data'));
      const second = canary(`takeover-${moved}-2`);
      if (moved) await sm.send(new PutSecretValueCommand({ SecretId: name, SecretString: second }));

      const calls: string[] = [];
      const app = createServer((req, res) => {
        req.resume().on('end', () => {
          calls.push(`${req.method} ${req.url}`);
          res.end();
        });
      });
      await new Promise<void>((r) => app.listen(0, '127.0.0.1', r));
      const agent = startAgent(
        sidecarEnv(dir.path, {
          ...env,
          ROTATION_HTTP_URL: `POST http://127.0.0.1:${(app.address() as AddressInfo).port}/-/reload`,
        }),
      );
      try {
        const port = await httpPort(agent);
        await eventually(
          async () => ((await get(port, '/readyz')).status === 200 ? true : undefined),
          'readiness',
        );
        if (moved) {
          await eventually(() => (calls.length === 1 ? true : undefined), 'the app told of the change');
          assert.deepEqual(calls, ['POST /-/reload']);
          assert.equal(read(dir.path, 'token'), second);
          assert.notEqual(readlinkSync(join(dir.path, '..data')), payload);
          assert.match((await get(port, '/metrics')).body, /^secret_agent_rotations_total 1$/m);
        } else {
          await agent.waitForLog((l) => l.msg === 'the volume already holds these secrets');
          const asked = proxy.requests.length;
          await eventually(() => (proxy.requests.length > asked ? true : undefined), 'a refresh cycle');
          assert.equal(readlinkSync(join(dir.path, '..data')), payload, 'the init container’s set stays');
          assert.equal(read(dir.path, 'token'), first);
          assert.deepEqual(calls, []);
          assert.match((await get(port, '/metrics')).body, /^secret_agent_rotations_total 0$/m);
        }
      } finally {
        assert.equal((await agent.stop()).code, 0);
        app.close();
      }
    });
});

describe('sidecar in a Job (EXIT_WITH_PROCESS)', () => {
  it('exits 0 once the app process has run and ended', async () => {
    using dir = memoryDir();
    const name = `jobapp${process.pid % 100000}`;
    const agent = startAgent({
      AGENT_MODE: 'sidecar',
      SECRETS_DIR: dir.path,
      AGENT_HTTP_ADDR: '127.0.0.1:0',
      SECRET_0_REF: `file:${new URL('../../package.json', import.meta.url).pathname}`,
      SECRET_0_FILENAME: 'p',
      EXIT_WITH_PROCESS: name,
    });
    const app = spawn(
      process.execPath,
      ['-e', `process.title = ${JSON.stringify(name)}; setTimeout(() => {}, 60000)`],
      { stdio: 'ignore' },
    );
    try {
      await agent.waitForLog((l) => l.msg === 'watching the app; will exit when it ends');
      app.kill('SIGTERM');
      await agent.waitForLog((l) => l.msg === 'stopping' && l.why === `${name} exited`);
      const { code } = await agent.stop();
      assert.equal(code, 0);
      assert.ok(read(dir.path, 'p'), 'files stay');
    } finally {
      app.kill('SIGKILL');
      await agent.stop();
    }
  });
});
