import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { canary } from '../support/canary.ts';
import { memoryDir, runAgent } from '../support/run-agent.ts';

const AGENT_UID = 65532;
let sources: string;
const value = { password: '', apiKey: '' };

describe('init mode, through the built agent', () => {
  before(() => {
    sources = mkdtempSync(join(tmpdir(), 'secret-agent-sources-'));
    chmodSync(sources, 0o755);
    value.password = canary('pw');
    value.apiKey = canary('api');
    writeFileSync(join(sources, 'db.json'), JSON.stringify({ user: 'app', password: value.password }), {
      mode: 0o644,
    });
    writeFileSync(join(sources, 'api-key'), value.apiKey, { mode: 0o644 });
    writeFileSync(join(sources, 'not-json'), canary('raw'), { mode: 0o644 });
    writeFileSync(join(sources, 'huge'), Buffer.alloc(1024 * 1024 + 1, 'x'), { mode: 0o644 });
  });
  after(() => rmSync(sources, { recursive: true, force: true }));

  it('runs as the image does (uid 65532, env only) and writes files owned by the agent, readable by it alone', async () => {
    using dir = memoryDir(AGENT_UID);
    const run = await runAgent(
      {
        SECRETS_DIR: dir.path,
        SECRET_0_REF: `file:${sources}/db.json#password`,
        SECRET_0_FILENAME: 'db/password',
        SECRET_1_REF: `file:${sources}/api-key`,
        SECRET_1_FILENAME: 'api-key',
        POD_NAMESPACE: 'shop',
        POD_NAME: 'web-1',
        POD_UID: '0d1c5b3e-6a41-4f8e-9c1e-3f1f7f0e2a11',
      },
      { uid: AGENT_UID },
    );
    assert.equal(run.code, 0, run.stderr);
    assert.equal(readFileSync(join(dir.path, 'db/password'), 'utf8'), value.password);
    assert.equal(readFileSync(join(dir.path, 'api-key'), 'utf8'), value.apiKey);
    const info = statSync(join(dir.path, 'api-key'));
    assert.equal(info.uid, AGENT_UID);
    assert.equal(info.mode & 0o777, 0o400);
    const done = run.logs.find((l) => l.msg === 'secrets written')!;
    assert.deepEqual(
      [done.files, done.pod, done.namespace, done.podUid],
      [2, 'web-1', 'shop', '0d1c5b3e-6a41-4f8e-9c1e-3f1f7f0e2a11'],
    );
  });

  it('exits 2 on invalid configuration, listing every problem, before touching anything', async () => {
    using dir = memoryDir();
    const run = await runAgent({
      SECRETS_DIR: dir.path,
      SECRET_0_REF: 'ftp://x',
      SECRET_0_FILENAME: '../x',
      SECRET_2_REF: 'file:/x',
      SECRET_2_FILENAME: 'y',
    });
    assert.equal(run.code, 2);
    assert.match(run.stderr, /invalid configuration/);
    // A text that is no reference may be a pasted secret: it is described, never quoted.
    assert.match(run.stderr, /SECRET_0_REF: \(a value of 7 characters\) is not a reference.*Fix: use one of/);
    assert.match(run.stderr, /SECRET_0_FILENAME: ".*" contains a "\.\." segment/);
    assert.match(run.stderr, /SECRET_1_REF: secrets are numbered with a gap/);
    assert.deepEqual(readdirSync(dir.path), []);
  });

  it('refuses a directory that is not in memory, and one that does not exist', async () => {
    const onDisk = mkdtempSync(join(process.cwd(), '.tmp-disk-'));
    try {
      const run = await runAgent({
        SECRETS_DIR: onDisk,
        SECRET_0_REF: `file:${sources}/api-key`,
        SECRET_0_FILENAME: 'k',
      });
      assert.equal(run.code, 2);
      assert.match(
        run.stderr,
        /SECRETS_DIR: .* is not on a memory filesystem .*Fix: mount an emptyDir with medium: Memory/,
      );
      assert.deepEqual(readdirSync(onDisk), []);
      const local = await runAgent({
        SECRETS_DIR: onDisk,
        REQUIRE_MEMORY_FS: 'false',
        SECRET_0_REF: `file:${sources}/api-key`,
        SECRET_0_FILENAME: 'k',
      });
      assert.equal(local.code, 0, local.stderr);
    } finally {
      rmSync(onDisk, { recursive: true, force: true });
    }
    const missing = await runAgent({
      SECRETS_DIR: '/dev/shm/no-such-dir-secret-agent',
      SECRET_0_REF: `file:${sources}/api-key`,
      SECRET_0_FILENAME: 'k',
    });
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /not an existing directory.*the agent never creates it/);
  });

  it('writes nothing when one secret fails its format or size, and says which and why without the value', async () => {
    using dir = memoryDir();
    const run = await runAgent({
      SECRETS_DIR: dir.path,
      SECRET_0_REF: `file:${sources}/api-key`,
      SECRET_0_FILENAME: 'ok',
      SECRET_1_REF: `file:${sources}/not-json#key`,
      SECRET_1_FILENAME: 'bad',
      SECRET_2_REF: `file:${sources}/huge`,
      SECRET_2_FILENAME: 'huge',
    });
    assert.equal(run.code, 1);
    assert.deepEqual(readdirSync(dir.path), []);
    assert.match(run.stderr, /2 of 3 secrets could not be delivered/);
    assert.match(run.stderr, /SECRET_1 .*format: the value is not valid JSON/);
    assert.match(run.stderr, /SECRET_2 .*too-large: .*1048577 bytes/);
  });

  it('leaves the previous good set in place when a later run fails', async () => {
    using dir = memoryDir();
    const env = { SECRETS_DIR: dir.path, SECRET_0_REF: `file:${sources}/api-key`, SECRET_0_FILENAME: 'key' };
    assert.equal((await runAgent(env)).code, 0);
    const failed = await runAgent({ ...env, SECRET_0_REF: `file:${sources}/missing` });
    assert.equal(failed.code, 1);
    assert.equal(readFileSync(join(dir.path, 'key'), 'utf8'), value.apiKey);
  });

  it('refuses to replace a file it did not create', async () => {
    using dir = memoryDir();
    writeFileSync(join(dir.path, 'key'), 'placed by someone else');
    const run = await runAgent({
      SECRETS_DIR: dir.path,
      SECRET_0_REF: `file:${sources}/api-key`,
      SECRET_0_FILENAME: 'key',
    });
    assert.equal(run.code, 1);
    assert.match(run.stderr, /key: exists and was not created by this agent/);
    assert.equal(readFileSync(join(dir.path, 'key'), 'utf8'), 'placed by someone else');
  });
});
