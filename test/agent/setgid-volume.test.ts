/**
 * The kubelet's fsGroup volume, as the agent meets it on a node: a setgid directory owned by root and
 * the pod's fsGroup (drwxrwsrwx 0:2000), the agent running as 65532:65532 with the fsGroup among its
 * supplementary groups (what the kubelet gives every container of such a pod), and an app of another
 * uid that reads through that group. setpriv (util-linux) sets exactly those ids, groups included,
 * which Node's spawn cannot.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  lstatSync,
  mkdtempSync,
  readdirSync,
  readlinkSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { assertNoCanary, canary } from '../support/canary.ts';
import { AGENT_JS, memoryDir } from '../support/run-agent.ts';

const FS_GROUP = 2000;
const AGENT = 65532;
const APP = 1000;
const S_ISGID = 0o2000;

/** Runs argv as uid:gid with exactly `groups`; the agent's output (not an app's reads) is canary-checked. */
function setpriv(
  uid: number,
  gid: number,
  groups: readonly number[],
  argv: readonly string[],
  env?: Record<string, string>,
) {
  const r = spawnSync(
    'setpriv',
    [
      `--reuid=${uid}`,
      `--regid=${gid}`,
      groups.length ? `--groups=${groups.join(',')}` : '--clear-groups',
      '--',
      ...argv,
    ],
    { env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...env }, encoding: 'utf8', timeout: 60_000 },
  );
  if (r.error)
    throw new Error(`setpriv could not run (${r.error.message}). Install: apt-get install -y util-linux`);
  if (env) {
    assertNoCanary(r.stdout, 'agent stdout');
    assertNoCanary(r.stderr, 'agent stderr');
  }
  return r;
}

describe('a setgid fsGroup volume (the kubelet’s): the agent keeps the volume’s group on everything it creates', () => {
  const values = { a: canary('setgid-a'), b: canary('setgid-b') };
  let sources: string;
  before(() => {
    sources = mkdtempSync('/dev/shm/secret-agent-sources-');
    chmodSync(sources, 0o755);
    for (const [name, value] of Object.entries(values)) {
      writeFileSync(join(sources, name), value, { mode: 0o444 });
    }
  });
  after(() => rmSync(sources, { recursive: true, force: true }));

  const runInit = (dir: string, a: string) =>
    setpriv(AGENT, AGENT, [FS_GROUP], [process.execPath, AGENT_JS], {
      AGENT_MODE: 'init',
      SECRETS_DIR: dir,
      FILE_MODE: '0440',
      SECRET_0_REF: `file:${join(sources, a)}`,
      SECRET_0_FILENAME: 'password',
      SECRET_1_REF: `file:${join(sources, 'b')}`,
      SECRET_1_FILENAME: 'tls/key.pem',
    });

  it('files 0440 in group fsGroup, directories 02550: the app of another uid reads, a stranger cannot', () => {
    using volume = memoryDir();
    chownSync(volume.path, 0, FS_GROUP);
    chmodSync(volume.path, 0o777 | S_ISGID);
    const run = runInit(volume.path, 'a');
    assert.equal(run.status, 0, run.stderr);

    const payload = join(volume.path, readlinkSync(join(volume.path, '..data')));
    for (const dir of [payload, join(payload, 'tls')]) {
      const info = statSync(dir);
      assert.equal(info.gid, FS_GROUP, `${dir}: group`);
      assert.equal(info.mode & 0o7777, 0o550 | S_ISGID, `${dir}: mode`);
    }
    for (const file of ['password', 'tls/key.pem']) {
      const info = statSync(join(volume.path, file));
      assert.equal(info.uid, AGENT, `${file}: owner`);
      assert.equal(info.gid, FS_GROUP, `${file}: group`);
      assert.equal(info.mode & 0o777, 0o440, `${file}: mode`);
    }

    // The app: uid 1000, primary group its own, fsGroup supplementary (the kubelet adds it).
    const app = setpriv(
      APP,
      APP,
      [FS_GROUP],
      ['cat', join(volume.path, 'password'), join(volume.path, 'tls/key.pem')],
    );
    assert.equal(app.status, 0, app.stderr);
    assert.equal(app.stdout, values.a + values.b, 'the app reads both files');
    // Any other user, without the group: refused.
    const stranger = setpriv(1001, 1001, [], ['cat', join(volume.path, 'password')]);
    assert.notEqual(stranger.status, 0);
    assert.match(stranger.stderr, /Permission denied/);
  });

  it('a second set replaces the first: the old read-only payload is removed, the group kept', () => {
    using volume = memoryDir();
    chownSync(volume.path, 0, FS_GROUP);
    chmodSync(volume.path, 0o777 | S_ISGID);
    assert.equal(runInit(volume.path, 'a').status, 0);
    const first = readlinkSync(join(volume.path, '..data'));
    const again = runInit(volume.path, 'b');
    assert.equal(again.status, 0, again.stderr);
    const second = readlinkSync(join(volume.path, '..data'));
    assert.notEqual(second, first);
    assert.deepEqual(
      readdirSync(volume.path).filter((e) => e.startsWith('..data_')),
      [second],
      'the first payload is gone',
    );
    const app = setpriv(APP, APP, [FS_GROUP], ['cat', join(volume.path, 'password')]);
    assert.equal(app.stdout, values.b);
    assert.equal(lstatSync(join(volume.path, 'password')).isSymbolicLink(), true);
    assert.equal(statSync(join(volume.path, 'password')).gid, FS_GROUP);
  });
});
