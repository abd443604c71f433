/**
 * The native sidecar's postStart hook (agent/post-start/), as the image runs it: the built
 * dist/wait-ready.cjs under this Node, against stand-in /readyz servers and against the built agent.
 */
import { CreateSecretCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { createServer as createTcpServer, type Socket } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { pollDelay } from '../../agent/post-start/wait-for-ready.ts';
import { assertNoCanary, canary } from '../support/canary.ts';
import { FaultProxy } from '../support/fault-proxy.ts';
import { freePort, MOTO_ENV, startMoto, type Moto } from '../support/moto.ts';
import { memoryDir, ROOT, startAgent } from '../support/run-agent.ts';

const HOOK = join(ROOT, 'dist/wait-ready.cjs');

interface HookRun {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
  /** As this test saw it, from spawn to exit. */
  readonly ms: number;
}

/** Runs the hook as the kubelet's exec does: its own arguments, the container's env (here: none but PATH). */
function runHook(args: readonly string[]): Promise<HookRun> {
  return new Promise((resolve, reject) => {
    const start = performance.now();
    const child = spawn(process.execPath, [HOOK, ...args], {
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: 60_000,
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => {
      // A leak fails the test that ran the hook, not the whole run as an uncaught exception.
      try {
        assertNoCanary(stdout, 'hook stdout');
        assertNoCanary(stderr, 'hook stderr');
        resolve({ code, stdout, stderr, ms: performance.now() - start });
      } catch (e) {
        reject(e as Error);
      }
    });
  });
}

/** A /readyz stand-in whose every answer carries a canary in its body: the hook must never print one. */
async function readyzServer(
  port: number,
  answer: (request: number) => number,
): Promise<Server & { seen: number[] }> {
  const seen: number[] = [];
  const server = createServer((req, res) => {
    const status = answer(seen.length + 1);
    seen.push(status);
    res.writeHead(status, { 'content-type': 'text/plain' }).end(canary(`readyz-${status}`));
  });
  await new Promise<void>((r) => server.listen(port, '127.0.0.1', r));
  return Object.assign(server, { seen });
}

const close = (server: Server) => {
  server.closeAllConnections();
  return new Promise<void>((r) => server.close(() => r()));
};

describe('the postStart hook, the built dist/wait-ready.cjs', () => {
  it('waits while /readyz is refused, then 503, and exits 0 at its first 200, printing no body', async () => {
    const port = await freePort();
    // Nothing listens at first: the agent's Node is still starting when the kubelet runs the hook.
    const hook = runHook([`--url=http://127.0.0.1:${port}/readyz`, '--deadline=30s']);
    await new Promise((r) => setTimeout(r, 300));
    const server = await readyzServer(port, (n) => (n <= 5 ? 503 : 200));
    try {
      const run = await hook;
      assert.equal(run.code, 0, run.stderr);
      assert.deepEqual(server.seen, [503, 503, 503, 503, 503, 200], 'it stopped at the first 200');
      const requests = Number(/, (\d+) requests: the secrets are written/.exec(run.stdout)?.[1]);
      assert.ok(requests > server.seen.length, `${requests} requests: the refused ones count too`);
      assert.match(
        run.stdout,
        new RegExp(
          `^secret-agent postStart: GET http://127\\.0\\.0\\.1:${port}/readyz answered 200 after \\d+ ms`,
        ),
      );
      assert.equal(run.stderr, '');
    } finally {
      await close(server);
    }
  });

  it('while /readyz answers 503: exits 1 at its deadline, never before, saying what it waited for and how long', async () => {
    const port = await freePort();
    const server = await readyzServer(port, () => 503);
    try {
      const run = await runHook([`--url=http://127.0.0.1:${port}/readyz`, '--deadline=1500ms']);
      assert.equal(run.code, 1);
      assert.ok(run.ms >= 1500, `gave up after ${run.ms} ms, before its deadline`);
      assert.ok(server.seen.length > 1 && server.seen.every((s) => s === 503));
      assert.match(
        run.stderr,
        new RegExp(
          `^secret-agent postStart: the agent did not report its secrets written within --deadline=1500ms \\(GET http://127\\.0\\.0\\.1:${port}/readyz, (\\d+) ms, ${server.seen.length} requests; at the last, it answered 503: not every secret is written yet\\)\\. The kubelet now stops the agent container and starts it again\\. Which secrets are missing and why: the agent's log, kubectl logs POD -c secret-agent --previous\\n$`,
        ),
      );
      assert.ok(Number(/, (\d+) ms, /.exec(run.stderr)![1]) >= 1500);
      assert.equal(run.stdout, '');
    } finally {
      await close(server);
    }
  });

  it('when nothing ever listens: exits 1 at its deadline, saying the connection was refused', async () => {
    const run = await runHook([`--url=http://127.0.0.1:${await freePort()}/readyz`, '--deadline=1s']);
    assert.equal(run.code, 1);
    assert.ok(run.ms >= 1000);
    assert.match(
      run.stderr,
      /at the last, the connection was refused: the agent is not listening \(it did not start, or exited\)\)/,
    );
  });

  it('when the port accepts but never answers: each GET gives up after 1 s, and the hook at its deadline', async () => {
    const sockets = new Set<Socket>();
    const silent = createTcpServer((s) => sockets.add(s.on('error', () => undefined)));
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    try {
      const port = (silent.address() as { port: number }).port;
      const run = await runHook([`--url=http://127.0.0.1:${port}/readyz`, '--deadline=2500ms']);
      assert.equal(run.code, 1);
      assert.ok(run.ms >= 2500);
      assert.match(run.stderr, /, [23] requests; at the last, it did not answer within 1 s\)/);
    } finally {
      for (const s of sockets) s.destroy();
      silent.close();
    }
  });

  for (const [args, problem] of [
    [['--deadline=75s'], /--url is missing/],
    [['--url=http://127.0.0.1:8099/readyz'], /--deadline is missing/],
    [
      ['--url=https://127.0.0.1:8099/readyz', '--deadline=75s'],
      /--url "https:\/\/127\.0\.0\.1:8099\/readyz" is not an http:\/\/ URL/,
    ],
    [['--url=http://127.0.0.1:8099/readyz', '--deadline=75'], /--deadline "75" is not a positive duration/],
    [['--url=http://127.0.0.1:8099/readyz', '--deadline=0'], /--deadline "0" is not a positive duration/],
    [['--url=http://127.0.0.1:8099/readyz', '--deadline=75s', '--verbose'], /Unknown option '--verbose'/],
  ] as const)
    it(`refuses ${JSON.stringify(args.join(' '))} with exit 2, naming the argument and the fix`, async () => {
      const run = await runHook(args);
      assert.equal(run.code, 2);
      assert.match(run.stderr, problem);
      assert.match(
        run.stderr,
        /Fix: run it as the webhook renders it: --url=http:\/\/127\.0\.0\.1:PORT\/readyz --deadline=DURATION/,
      );
    });

  it('pauses 20 ms between requests at first, then a twentieth of the wait so far, at most 250 ms', () => {
    assert.deepEqual([0, 200, 400, 1000, 2000, 5000, 60_000].map(pollDelay), [20, 20, 20, 50, 100, 250, 250]);
  });

  it('loads nothing of the agent: its bundle is the hook, a duration parser and Node’s own modules', () => {
    const meta = JSON.parse(readFileSync(join(ROOT, 'dist/wait-ready.meta.json'), 'utf8')) as {
      inputs: Record<string, unknown>;
    };
    assert.deepEqual(Object.keys(meta.inputs).sort(), [
      'agent/contract/duration.ts',
      'agent/post-start/main.ts',
      'agent/post-start/wait-for-ready.ts',
      'lazy-builtin:http',
      'lazy-builtin:timers/promises',
      'lazy-builtin:util',
    ]);
  });
});

describe('the postStart hook beside the built agent (sidecar mode, moto behind a proxy that can go down)', () => {
  let moto: Moto;
  let proxy: FaultProxy;
  let sm: SecretsManagerClient;
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

  const agentEnv = (dir: string, port: number, name: string) => ({
    ...MOTO_ENV,
    AWS_ENDPOINT_URL_SECRETS_MANAGER: proxy.endpoint,
    AGENT_MODE: 'sidecar',
    SECRETS_DIR: dir,
    AGENT_HTTP_ADDR: `0.0.0.0:${port}`,
    SECRET_0_REF: `aws:${name}`,
    SECRET_0_FILENAME: 'db',
  });
  const readDb = (dir: string) => {
    try {
      return readFileSync(join(dir, 'db'), 'utf8');
    } catch {
      return undefined;
    }
  };

  it('started with the agent, as the kubelet starts them: returns only once the file is there to read', async () => {
    using dir = memoryDir();
    const value = canary('hook-first-start');
    await sm.send(new CreateSecretCommand({ Name: 'hook/first-start', SecretString: value }));
    const port = await freePort();
    const agent = startAgent(agentEnv(dir.path, port, 'hook/first-start'));
    try {
      const run = await runHook([`--url=http://127.0.0.1:${port}/readyz`, '--deadline=30s']);
      // What the app reads at its first instruction, right after the hook returned.
      const atReturn = readDb(dir.path);
      assert.equal(run.code, 0, run.stderr);
      assert.equal(atReturn, value);
    } finally {
      assert.equal((await agent.stop()).code, 0);
    }
  });

  it('a restart with the set in place returns once the agent listens, though the backend is down; the files stay', async () => {
    using dir = memoryDir();
    const value = canary('hook-restart');
    await sm.send(new CreateSecretCommand({ Name: 'hook/restart', SecretString: value }));
    const port = await freePort();
    const url = `--url=http://127.0.0.1:${port}/readyz`;
    const first = startAgent(agentEnv(dir.path, port, 'hook/restart'));
    try {
      assert.equal((await runHook([url, '--deadline=30s'])).code, 0);
    } finally {
      assert.equal((await first.stop()).code, 0);
    }

    proxy.setDown(true);
    try {
      const asked = proxy.requests.length;
      const again = startAgent(agentEnv(dir.path, port, 'hook/restart'));
      try {
        // A deadline the backend could never meet: the set the volume holds is what lets it return.
        const run = await runHook([url, '--deadline=30s']);
        assert.equal(run.code, 0, run.stderr);
        assert.equal(readDb(dir.path), value);
        await again.waitForLog((l) => l.msg === 'transient backend errors; retrying');
        assert.ok(proxy.requests.length > asked, 'the restarted agent asked the backend, which was down');
        assert.equal((await fetch(`http://127.0.0.1:${port}/readyz`)).status, 200);
        // The gauge says what /readyz says (issue 38); the outage shows in the age of the last success,
        // which starts at the time the set in place was written (the SecretAgentRefreshFailing alert).
        const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
        assert.match(metrics, /^secret_agent_ready 1$/m);
        assert.match(metrics, /^secret_agent_last_success_timestamp_seconds\{file="db"\} \d+/m);
      } finally {
        assert.equal((await again.stop()).code, 0);
      }
    } finally {
      proxy.setDown(false);
    }
  });
});
