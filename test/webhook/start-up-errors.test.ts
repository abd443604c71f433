import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { createServer } from 'node:net';
import { writeFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { ConfigErrors } from '../../agent/contract/errors.ts';
import { createLogger } from '../../agent/log.ts';
import { parseWebhookConfig } from '../../webhook/config/parse-webhook-config.ts';
import { startWebhook } from '../../webhook/start.ts';
import { assertNoCanary, canary } from '../support/canary.ts';
import { ROOT } from '../support/run-agent.ts';
import { olderSystemNode, SYSTEM_PATH } from '../support/system-node.ts';
import { AGENT_IMAGE } from './fixtures.ts';
import { certDir, makeServingPair } from './tls-certs.ts';

function start(cert: string, key: string, env: Record<string, string> = {}) {
  const config = parseWebhookConfig({
    AGENT_IMAGE,
    WEBHOOK_PORT: '0',
    WEBHOOK_HOST: '127.0.0.1',
    TLS_CERT_FILE: cert,
    TLS_KEY_FILE: key,
    ...env,
  });
  return startWebhook(config, { log: createLogger('silent') });
}

/** What startWebhook rejects with: ConfigErrors (main.ts exits 2 on them), one per setting, each with a fix. */
async function refusal(started: Promise<unknown>): Promise<ConfigErrors> {
  const error = await started.then(
    () => assert.fail('the webhook started'),
    (e: unknown) => e,
  );
  assert.ok(error instanceof ConfigErrors, `not ConfigErrors: ${String(error)}`);
  for (const e of error.errors) assert.match(e.message, /\. Fix: /);
  return error;
}

describe('start-up failures name the setting and the fix (ConfigErrors: exit 2, no stack)', () => {
  it('a missing certificate or key file', async () => {
    using dir = certDir();
    dir.write(await makeServingPair());
    const noCert = await refusal(start(`${dir.dir}/nope.crt`, dir.key));
    assert.deepEqual(
      noCert.errors.map((e) => e.field),
      ['TLS_CERT_FILE'],
    );
    assert.match(noCert.message, /TLS_CERT_FILE: .*nope\.crt.* does not exist/);
    const both = await refusal(start(`${dir.dir}/nope.crt`, `${dir.dir}/nope.key`));
    assert.deepEqual(
      both.errors.map((e) => e.field),
      ['TLS_CERT_FILE', 'TLS_KEY_FILE'],
    );
  });

  it('a key that does not match the certificate', async () => {
    using dir = certDir();
    const first = await makeServingPair();
    const second = await makeServingPair();
    dir.write({ ...first, key: second.key });
    const error = await refusal(start(dir.cert, dir.key));
    assert.deepEqual(
      error.errors.map((e) => e.field),
      ['TLS_KEY_FILE'],
    );
    assert.match(error.message, /does not match the certificate in TLS_CERT_FILE/);
  });

  it('files that are not PEM, without echoing what they hold', async () => {
    using dir = certDir();
    const pair = await makeServingPair();
    dir.write(pair);
    writeFileSync(dir.key, `-----BEGIN PRIVATE KEY-----\n${canary('key')}\n-----END PRIVATE KEY-----\n`);
    const badKey = await refusal(start(dir.cert, dir.key));
    assert.deepEqual(
      badKey.errors.map((e) => e.field),
      ['TLS_KEY_FILE'],
    );
    assertNoCanary(badKey.message, 'the error');
    writeFileSync(dir.cert, canary('cert'));
    const badCert = await refusal(start(dir.cert, dir.key));
    assert.deepEqual(
      badCert.errors.map((e) => e.field),
      ['TLS_CERT_FILE', 'TLS_KEY_FILE'],
    );
    assertNoCanary(badCert.message, 'the error');
  });

  it('a port that is taken', async () => {
    using dir = certDir();
    dir.write(await makeServingPair());
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    try {
      const port = (taken.address() as { port: number }).port;
      const error = await refusal(start(dir.cert, dir.key, { WEBHOOK_PORT: String(port) }));
      assert.deepEqual(
        error.errors.map((e) => e.field),
        ['WEBHOOK_PORT'],
      );
      assert.match(error.message, /in use/);
    } finally {
      taken.close();
    }
  });
});

describe('the built webhook (dist/webhook.js) at start-up', () => {
  const WEBHOOK_JS = join(ROOT, 'dist/webhook.js');

  it('exits 2 on a missing certificate: the setting and the fix on stderr, one JSON line each on stdout, no stack', () => {
    using dir = certDir();
    const run = spawnSync(process.execPath, [WEBHOOK_JS], {
      encoding: 'utf8',
      timeout: 30_000,
      env: {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        AGENT_IMAGE,
        NATIVE_SIDECARS: 'true',
        WEBHOOK_PORT: '0',
        TLS_CERT_FILE: `${dir.dir}/nope.crt`,
        TLS_KEY_FILE: `${dir.dir}/nope.key`,
      },
    });
    assert.equal(run.status, 2, run.stderr);
    assert.match(run.stderr, /^secret-agent-webhook: invalid configuration\n {2}TLS_CERT_FILE: .*Fix: /);
    assert.match(run.stderr, /\n {2}TLS_KEY_FILE: .*Fix: /);
    assert.doesNotMatch(run.stderr, /\n\s+at /, 'no stack trace');
    const lines = run.stdout
      .split('\n')
      .filter((l) => l.trim() !== '')
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((l) => l.msg === 'invalid configuration');
    assert.deepEqual(
      lines.map((l) => [l.level, l.field]),
      [
        ['error', 'TLS_CERT_FILE'],
        ['error', 'TLS_KEY_FILE'],
      ],
    );
  });

  const oldNode = olderSystemNode();
  it(
    'stops at once on a Node older than the images’ (the node on PATH)',
    { skip: oldNode ? false : 'the `node` on PATH is not older than the required version' },
    () => {
      const run = spawnSync('node', [WEBHOOK_JS, '--version'], {
        encoding: 'utf8',
        env: { PATH: SYSTEM_PATH },
      });
      assert.equal(run.status, 2);
      assert.match(run.stderr, new RegExp(`^secret-agent: Node\\.js ${oldNode} is too old`));
    },
  );
});
