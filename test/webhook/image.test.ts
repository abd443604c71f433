import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { request } from 'node:https';
import { join } from 'node:path';
import { it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { assertNoCanary, canary } from '../support/canary.ts';
import { freePort } from '../support/moto.ts';
import { ROOT } from '../support/run-agent.ts';
import { AGENT_IMAGE, basicPod, decodePatch, review } from './fixtures.ts';
import { certDir, makeServingPair, SERVER_NAME } from './tls-certs.ts';

const WEBHOOK_JS = join(ROOT, 'dist/webhook.js');
const IMAGE_UID = 65532;

function call(
  port: number,
  ca: string,
  path: string,
  body?: string,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path,
        method: body === undefined ? 'GET' : 'POST',
        ca,
        servername: SERVER_NAME,
        agent: false,
        headers: body === undefined ? {} : { 'content-type': 'application/json' },
      },
      (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode!, body: text }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

it('the built dist/webhook.js runs as the image runs it: uid 65532, env only, unprivileged port', async (t) => {
  assert.ok(existsSync(WEBHOOK_JS), 'dist/webhook.js is missing: run `npm run build` first');
  if (process.getuid?.() !== 0) {
    t.skip('switching to uid 65532 needs root');
    return;
  }
  const pair = await makeServingPair();
  using dir = certDir();
  dir.write(pair);
  const port = await freePort();
  assert.ok(port > 1024);
  const child = spawn(process.execPath, [WEBHOOK_JS], {
    // Nothing from this machine's env but PATH, like a container's.
    env: {
      PATH: '/usr/bin:/bin',
      AGENT_IMAGE,
      WEBHOOK_PORT: String(port),
      WEBHOOK_HOST: '127.0.0.1',
      TLS_CERT_FILE: dir.cert,
      TLS_KEY_FILE: dir.key,
      LOG_LEVEL: 'debug',
    },
    uid: IMAGE_UID,
    gid: IMAGE_UID,
    // A read-only root filesystem has no writable cwd: start where nothing can be written.
    cwd: '/',
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  try {
    let health: { status: number } | undefined;
    for (let i = 0; i < 200 && !health; i++) {
      if (child.exitCode !== null) assert.fail(`the webhook exited with ${child.exitCode}: ${stderr}`);
      health = await call(port, pair.ca, '/healthz').catch(() => undefined);
      if (!health) await sleep(50);
    }
    assert.equal(health?.status, 200);
    const pod = basicPod(
      { 'secret-agent.io/secret-db': 'aws:prod/db' },
      { containers: [{ name: 'app', image: 'a', env: [{ name: 'PASSWORD', value: canary() }] }] },
    );
    const reply = await call(port, pair.ca, '/mutate', JSON.stringify(review(pod)));
    assert.equal(reply.status, 200);
    assertNoCanary(reply.body, 'the /mutate response');
    const answer = JSON.parse(reply.body) as { response: { allowed: boolean; patch?: string } };
    assert.equal(answer.response.allowed, true);
    assert.ok(decodePatch(answer.response).length > 0);
  } finally {
    child.kill('SIGTERM');
  }
  assert.equal(await exited, 0, `stderr: ${stderr}`);
  assertNoCanary(stdout, 'webhook stdout');
  assertNoCanary(stderr, 'webhook stderr');
  const logs = stdout
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { msg: string });
  assert.ok(logs.some((l) => l.msg === 'webhook listening'));
});
