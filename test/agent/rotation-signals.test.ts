import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { canary } from '../support/canary.ts';
import { eventually, memoryDir, runAgent, startAgent } from '../support/run-agent.ts';

/**
 * The ways a rotation is told beyond the notifiers, through the built agent: the sentinel file a
 * liveness probe checks.
 */

describe('rotation signals: the sentinel file, through the built agent', () => {
  let work: string;
  before(() => {
    work = mkdtempSync(join(tmpdir(), 'rotation-signals-'));
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  it('sidecar: the sentinel file appears after a rotation, names the changed files, and goes after its hold', async () => {
    using dir = memoryDir();
    const source = join(work, 'sidecar.json');
    writeFileSync(source, JSON.stringify({ password: canary('v1') }));
    const agent = startAgent({
      AGENT_MODE: 'sidecar',
      SECRETS_DIR: dir.path,
      REFRESH_INTERVAL: '1s',
      AGENT_HTTP_ADDR: '127.0.0.1:0',
      ROTATION_SENTINEL_FILE: '.secret-agent/rotated',
      ROTATION_SENTINEL_HOLD: '3s',
      SECRET_0_REF: `file:${source}#password`,
      SECRET_0_FILENAME: 'db-password',
    });
    try {
      await agent.waitForLog((l) => l.msg === 'secrets written');
      const sentinel = join(dir.path, '.secret-agent/rotated');
      assert.equal(existsSync(sentinel), false, 'no sentinel before any rotation');
      writeFileSync(source, JSON.stringify({ password: canary('v2') }));
      const text = await eventually(
        () => (existsSync(sentinel) ? readFileSync(sentinel, 'utf8') : undefined),
        'the sentinel file',
      );
      assert.match(text, /^rotated \d{4}-\d\d-\d\dT[\d:.]+Z\ndb-password\n$/);
      // Gone once the hold is over, so the restarted app's probe passes.
      await eventually(() => (existsSync(sentinel) ? undefined : true), 'the sentinel file removed', 10_000);
    } finally {
      assert.equal((await agent.stop()).code, 0);
    }
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
