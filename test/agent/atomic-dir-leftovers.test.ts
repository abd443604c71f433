import assert from 'node:assert/strict';
import {
  chmodSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { AtomicDir } from '../../agent/write/atomic-dir.ts';
import { canary } from '../support/canary.ts';
import { memoryDir, runAgent, startAgent } from '../support/run-agent.ts';

/**
 * Issue 10, R3: what a run killed mid-write leaves (its payload directories that `..data` does not
 * point to, a `..data_tmp` link) is removed when the next agent opens the volume, not only after
 * its next write, which never comes while the backend is down. Only this set's own leftovers go:
 * the live payload, other sets' payloads and anything the agent did not create stay.
 */

const LIVE = '..data_2026_01_01_00_00_00.000_Live00';
const PARTIAL = '..data_2026_01_01_00_00_05.000_Part01';
const ORPHAN = '..data_2026_01_01_00_00_09.000_Orph02';
const OTHER_SET = '..other_2026_01_01_00_00_05.000_Keep03';

/**
 * A volume as a crash leaves it: a live set (`..data` → LIVE, user links), the interrupted run's
 * partial payload, an older orphan, a `..data_tmp` link to the partial one, another set's payload,
 * and names the agent never made. Returns the live value.
 */
function crashedVolume(dir: string): string {
  const live = canary('live');
  mkdirSync(join(dir, LIVE));
  writeFileSync(join(dir, LIVE, 'key'), live, { mode: 0o400 });
  symlinkSync(LIVE, join(dir, '..data'));
  symlinkSync('..data/key', join(dir, 'key'));
  for (const name of [PARTIAL, ORPHAN]) {
    mkdirSync(join(dir, name, 'sub'), { recursive: true });
    writeFileSync(join(dir, name, 'sub', 'half'), canary('partial'));
  }
  symlinkSync(PARTIAL, join(dir, '..data_tmp'));
  mkdirSync(join(dir, OTHER_SET));
  mkdirSync(join(dir, '..data_not-a-payload'));
  writeFileSync(join(dir, 'foreign'), 'not ours');
  return live;
}

/** What must be left of crashedVolume() once its leftovers are gone. */
const AFTER_CLEANUP = ['..data', '..data_not-a-payload', LIVE, OTHER_SET, 'foreign', 'key'].sort();

const listing = (dir: string) => readdirSync(dir).sort();

describe('R3: AtomicDir removes a crashed run’s leftovers when it opens the volume', () => {
  it('open() removes the set’s own leftover payloads and ..data_tmp, and nothing else', async () => {
    using tmp = memoryDir();
    const live = crashedVolume(tmp.path);
    const dir = await AtomicDir.open(tmp.path, { requireMemoryFs: true });
    assert.deepEqual(listing(tmp.path), AFTER_CLEANUP);
    assert.deepEqual([...dir.leftoversRemoved].sort(), ['..data_tmp', ORPHAN, PARTIAL].sort());
    assert.equal(readlinkSync(join(tmp.path, '..data')), LIVE, 'the live set is untouched');
    assert.equal(readFileSync(join(tmp.path, 'key'), 'utf8'), live);
    const held = await dir.current();
    assert.deepEqual(
      held?.map((f) => f.path),
      ['key'],
    );
  });

  it('without a ..data link every own payload is a leftover; a ..data_tmp that is not a symlink is not ours', async () => {
    using tmp = memoryDir();
    mkdirSync(join(tmp.path, PARTIAL));
    writeFileSync(join(tmp.path, '..data_tmp'), 'someone else’s file');
    const dir = await AtomicDir.open(tmp.path, { requireMemoryFs: true });
    assert.deepEqual(dir.leftoversRemoved, [PARTIAL]);
    assert.deepEqual(listing(tmp.path), ['..data_tmp']);
  });

  it('a symlink named like a leftover payload goes as a link: its target keeps its mode and contents', async () => {
    using tmp = memoryDir();
    using elsewhere = memoryDir();
    const target = join(elsewhere.path, 'readers');
    mkdirSync(target);
    writeFileSync(join(target, 'file'), 'kept');
    chmodSync(target, 0o550);
    symlinkSync(target, join(tmp.path, ORPHAN));
    const dir = await AtomicDir.open(tmp.path, { requireMemoryFs: true });
    assert.deepEqual(dir.leftoversRemoved, [ORPHAN]);
    assert.deepEqual(listing(tmp.path), []);
    assert.equal(statSync(target).mode & 0o777, 0o550, 'chmod did not follow the link');
    assert.equal(readFileSync(join(target, 'file'), 'utf8'), 'kept');
    chmodSync(target, 0o700);
  });

  it('another set name removes only its own leftovers', async () => {
    using tmp = memoryDir();
    crashedVolume(tmp.path);
    const other = await AtomicDir.open(tmp.path, { requireMemoryFs: true, setName: 'other' });
    assert.deepEqual(other.leftoversRemoved, [OTHER_SET], 'no ..other link: its payload is a leftover');
    assert.ok(
      listing(tmp.path).includes(PARTIAL),
      'the data set’s leftovers are not the other set’s to remove',
    );
  });

  it('init through the built agent: leftovers are gone although the fetch fails, and the live set stays', async () => {
    using tmp = memoryDir();
    const live = crashedVolume(tmp.path);
    const run = await runAgent({
      SECRETS_DIR: tmp.path,
      SECRET_0_REF: `file:${join(tmp.path, 'no-such-source')}`,
      SECRET_0_FILENAME: 'key',
    });
    assert.equal(run.code, 1, run.stderr);
    assert.match(run.stderr, /SECRET_0 .*not-found/);
    assert.deepEqual(listing(tmp.path), AFTER_CLEANUP);
    assert.equal(readFileSync(join(tmp.path, 'key'), 'utf8'), live, 'nothing good is deleted');
    const removed = run.logs.find((l) => l.msg === 'removed what an interrupted run left in the volume');
    assert.deepEqual(
      [...((removed?.removed as string[]) ?? [])].sort(),
      ['..data_tmp', ORPHAN, PARTIAL].sort(),
    );
  });

  it('sidecar through the built agent: leftovers are gone at start, while the first fill still fails', async () => {
    using tmp = memoryDir();
    const live = crashedVolume(tmp.path);
    const agent = startAgent({
      AGENT_MODE: 'sidecar',
      AGENT_HTTP_ADDR: '127.0.0.1:0',
      INIT_DEADLINE: '1s',
      SECRETS_DIR: tmp.path,
      SECRET_0_REF: `file:${join(tmp.path, 'no-such-source')}`,
      SECRET_0_FILENAME: 'key',
    });
    try {
      await agent.waitForLog((l) => l.msg === 'not every secret could be delivered yet; retrying');
      assert.deepEqual(listing(tmp.path), AFTER_CLEANUP);
      assert.equal(readFileSync(join(tmp.path, 'key'), 'utf8'), live);
    } finally {
      assert.equal((await agent.stop()).code, 0);
    }
  });
});
