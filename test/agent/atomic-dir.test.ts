import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import {
  lstatSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  readlinkSync,
  statSync,
  symlinkSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { ConfigError } from '../../agent/contract/errors.ts';
import type { FileEntry } from '../../agent/format/render-files.ts';
import { AtomicDir, WriteError } from '../../agent/write/atomic-dir.ts';
import { memoryDir } from '../support/run-agent.ts';

const file = (path: string, content: string, mode = 0o400): FileEntry => ({
  path,
  bytes: Buffer.from(content),
  mode,
});
const read = (dir: string, path: string) => readFileSync(join(dir, path), 'utf8');

describe('AtomicDir', () => {
  it('lays out ..data, a timestamped payload and one symlink per top-level name', async () => {
    using tmp = memoryDir();
    const dir = await AtomicDir.open(tmp.path, { requireMemoryFs: true });
    await dir.write([file('a', 'A1', 0o440), file('sub/b', 'B1')]);
    assert.equal(read(tmp.path, 'a'), 'A1');
    assert.equal(read(tmp.path, 'sub/b'), 'B1');
    assert.equal(readlinkSync(join(tmp.path, 'a')), '..data/a');
    assert.equal(readlinkSync(join(tmp.path, 'sub')), '..data/sub');
    assert.match(
      readlinkSync(join(tmp.path, '..data')),
      /^\.\.data_\d{4}_\d\d_\d\d_\d\d_\d\d_\d\d\.\d{3}_[A-Za-z0-9]{6}$/,
    );
    assert.equal(statSync(join(tmp.path, 'a')).mode & 0o777, 0o440);
    assert.equal(statSync(join(tmp.path, 'sub/b')).mode & 0o777, 0o400);
  });

  it('directories let through exactly the classes that may read a file: 0500, 0550, 0555', async () => {
    for (const [modes, expected] of [
      [[0o400, 0o400], 0o500],
      [[0o440, 0o400], 0o550],
      [[0o400, 0o444], 0o555],
      [[0o600, 0o640], 0o550],
    ] as const) {
      using tmp = memoryDir();
      const dir = await AtomicDir.open(tmp.path, { requireMemoryFs: true });
      await dir.write([file('a', 'A', modes[0]), file('sub/deeper/b', 'B', modes[1])]);
      const payload = join(tmp.path, readlinkSync(join(tmp.path, '..data')));
      for (const d of [payload, join(payload, 'sub'), join(payload, 'sub/deeper')])
        assert.equal(
          statSync(d).mode & 0o7777,
          expected,
          `${modes.map((m) => m.toString(8)).join(',')}: ${d}`,
        );
      // Read-only directories are still replaced whole by the next set.
      await dir.write([file('a', 'A2', modes[0])]);
      assert.equal(read(tmp.path, 'a'), 'A2');
      assert.deepEqual(readdirSync(tmp.path).filter((e) => e.startsWith('..data_')).length, 1);
    }
  });

  it('a run killed between its swap and its links: the next open makes the missing links, and only those', async () => {
    using tmp = memoryDir();
    const first = await AtomicDir.open(tmp.path, { requireMemoryFs: true });
    await first.write([file('a', 'A1'), file('sub/b', 'B1')]);
    assert.deepEqual(first.linksRestored, []);
    // What a kill right after the rename of ..data leaves: the new set, without its links.
    unlinkSync(join(tmp.path, 'a'));
    unlinkSync(join(tmp.path, 'sub'));
    // A name of the set that someone else holds stays theirs.
    writeFileSync(join(tmp.path, 'sub'), 'not ours');
    const again = await AtomicDir.open(tmp.path, { requireMemoryFs: true });
    assert.deepEqual(again.linksRestored, ['a']);
    assert.equal(read(tmp.path, 'a'), 'A1');
    assert.equal(read(tmp.path, 'sub'), 'not ours');
    assert.deepEqual((await AtomicDir.open(tmp.path, { requireMemoryFs: true })).linksRestored, []);
  });

  it('swaps the whole set, drops names it no longer writes and the old payload', async () => {
    using tmp = memoryDir();
    const dir = await AtomicDir.open(tmp.path, { requireMemoryFs: true });
    await dir.write([file('a', 'A1'), file('b', 'B1')]);
    const first = readlinkSync(join(tmp.path, '..data'));
    await dir.write([file('a', 'A2'), file('c', 'C2')]);
    assert.equal(read(tmp.path, 'a'), 'A2');
    assert.equal(read(tmp.path, 'c'), 'C2');
    assert.throws(() => lstatSync(join(tmp.path, 'b')), /ENOENT/);
    assert.ok(!readdirSync(tmp.path).includes(first), 'the old payload is removed');
    assert.deepEqual(
      readdirSync(tmp.path).sort(),
      ['..data', readlinkSync(join(tmp.path, '..data')), 'a', 'c'].sort(),
    );
  });

  it('never touches files it did not create, and refuses before writing anything', async () => {
    using tmp = memoryDir();
    writeFileSync(join(tmp.path, 'foreign'), 'theirs');
    symlinkSync('/etc/passwd', join(tmp.path, 'evil'));
    mkdirSync(join(tmp.path, 'adir'));
    const dir = await AtomicDir.open(tmp.path, { requireMemoryFs: true });
    await dir.write([file('mine', '1')]);
    for (const name of ['foreign', 'evil', 'adir']) {
      await assert.rejects(
        dir.write([file('mine', '2'), file(`${name}${name === 'adir' ? '/x' : ''}`, 'x')]),
        (e: unknown) => {
          assert.ok(e instanceof WriteError);
          assert.match(e.message, /was not created by this agent/);
          return true;
        },
      );
    }
    assert.equal(read(tmp.path, 'foreign'), 'theirs');
    assert.equal(readlinkSync(join(tmp.path, 'evil')), '/etc/passwd');
    assert.equal(read(tmp.path, 'mine'), '1', 'the refused write changed nothing');
    await dir.write([file('other', '3')]);
    assert.equal(read(tmp.path, 'foreign'), 'theirs', 'stale-name cleanup leaves foreign files alone');
  });

  it('rejects escaping paths and collisions', async () => {
    using tmp = memoryDir();
    const dir = await AtomicDir.open(tmp.path, { requireMemoryFs: true });
    await assert.rejects(dir.write([file('../x', '1')]), ConfigError);
    await assert.rejects(dir.write([file('/etc/x', '1')]), ConfigError);
    await assert.rejects(dir.write([file('a', '1'), file('a', '2')]), /same file/);
    await assert.rejects(dir.write([file('a', '1'), file('a/b', '2')]), /as a directory/);
    assert.deepEqual(readdirSync(tmp.path), []);
  });

  it('reports a path the filesystem cannot hold as a WriteError, changing nothing', async () => {
    using tmp = memoryDir();
    // A deep volume path plus a long (but valid) file name exceed Linux's PATH_MAX of 4096.
    const deep = join(tmp.path, ...Array.from({ length: 5 }, (_, i) => `${i}`.padEnd(250, 'd')));
    mkdirSync(deep, { recursive: true });
    const dir = await AtomicDir.open(deep, { requireMemoryFs: true });
    await dir.write([file('kept', 'old')]);
    const long = Array.from({ length: 12 }, (_, i) => `${i}`.padEnd(250, 's')).join('/');
    await assert.rejects(dir.write([file(long, 'x')]), (e: unknown) => {
      assert.ok(e instanceof WriteError);
      assert.match(e.message, /the path is too long/);
      return true;
    });
    assert.equal(read(deep, 'kept'), 'old');
    assert.deepEqual(
      readdirSync(deep).filter((n) => n.startsWith('..data_')).length,
      1,
      'the partial payload is removed',
    );
  });

  it('reads back the set it holds, only its own, as a later agent on the same volume sees it', async () => {
    using tmp = memoryDir();
    const first = await AtomicDir.open(tmp.path, { requireMemoryFs: true });
    assert.equal(await first.current(), undefined, 'an empty volume holds no set');
    writeFileSync(join(tmp.path, 'stranger'), 'not ours');
    await first.write([file('a', 'A1', 0o440), file('sub/b', 'B1')]);
    await first.write([file('a', 'A2', 0o440), file('sub/deep/c', 'C2', 0o400)]);
    const later = await AtomicDir.open(tmp.path, { requireMemoryFs: true });
    const held = (await later.current())!.map((f) => ({ ...f, bytes: Buffer.from(f.bytes).toString() }));
    assert.deepEqual(
      held.sort((x, y) => x.path.localeCompare(y.path)),
      [
        { path: 'a', bytes: 'A2', mode: 0o440 },
        { path: 'sub/deep/c', bytes: 'C2', mode: 0o400 },
      ],
    );
    const other = await AtomicDir.open(tmp.path, { requireMemoryFs: true, setName: 'other' });
    assert.equal(await other.current(), undefined, 'another set name sees nothing');
  });

  it('lets agents with distinct sets share a directory', async () => {
    using tmp = memoryDir();
    const one = await AtomicDir.open(tmp.path, { setName: 'data-one', requireMemoryFs: true });
    const two = await AtomicDir.open(tmp.path, { setName: 'data-two', requireMemoryFs: true });
    await one.write([file('one', '1')]);
    await two.write([file('two', '2')]);
    await one.write([file('one', '1b')]);
    assert.equal(read(tmp.path, 'one'), '1b');
    assert.equal(read(tmp.path, 'two'), '2');
    await assert.rejects(two.write([file('one', 'x')]), WriteError);
  });

  it('checks the directory before anything is fetched', async () => {
    await assert.rejects(
      AtomicDir.open('/nonexistent/secret-agent', { requireMemoryFs: false }),
      /SECRETS_DIR: .*not an existing directory/,
    );
    await assert.rejects(
      AtomicDir.open(process.cwd(), { requireMemoryFs: true }),
      /not on a memory filesystem.*Fix|REQUIRE_MEMORY_FS=false/,
    );
  });

  it('a concurrent reader in another process never sees a torn or mixed set during thousands of swaps', async () => {
    using tmp = memoryDir();
    const dir = await AtomicDir.open(tmp.path, { requireMemoryFs: true });
    // Each version writes three files that must agree; the big one would tear if written in place.
    const set = (v: number): FileEntry[] => [
      file('a', `${v}`),
      file('nested/b', `${v}`),
      file('big', `${v}:`.padEnd(256 * 1024, String(v % 10))),
    ];
    await dir.write(set(0));
    const reader = spawn(process.execPath, ['--input-type=module', '-e', READER, tmp.path], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    reader.stdout.on('data', (d: Buffer) => (out += d.toString()));
    const SWAPS = 2000;
    for (let v = 1; v <= SWAPS; v++) await dir.write(set(v));
    reader.kill('SIGTERM');
    await new Promise((r) => reader.once('close', r));
    const result = JSON.parse(out.trim().split('\n').pop()!) as {
      consistent: number;
      retried: number;
      bad: string[];
      versions: number;
    };
    assert.deepEqual(result.bad, [], 'torn or mixed reads');
    assert.ok(result.consistent > 100, `the reader made ${result.consistent} consistent reads`);
    assert.ok(
      result.versions > 10,
      `the reader saw ${result.versions} distinct versions, so it really ran during the swaps`,
    );
  });
});

/**
 * The documented way to read a consistent set: resolve ..data once, read everything below it. A
 * payload removed under the reader shows as ENOENT and the reader retries; it must never see a
 * partial file or files from two versions.
 */
const READER = `
import { readFileSync, readlinkSync } from 'node:fs';
const dir = process.argv[1];
let consistent = 0, retried = 0; const bad = []; const seen = new Set();
process.on('SIGTERM', () => { process.stdout.write(JSON.stringify({ consistent, retried, bad: bad.slice(0, 5), versions: seen.size }) + '\\n'); process.exit(0); });
for (;;) {
  try {
    const base = dir + '/' + readlinkSync(dir + '/..data');
    const a = readFileSync(base + '/a', 'utf8'), b = readFileSync(base + '/nested/b', 'utf8'), big = readFileSync(base + '/big', 'utf8');
    const v = a;
    const ok = b === v && big.length === 256 * 1024 && big.startsWith(v + ':') && big.endsWith(String(Number(v) % 10));
    if (ok) { consistent++; seen.add(v); } else bad.push(JSON.stringify({ a, b, big: big.slice(0, 12), len: big.length }));
  } catch (e) { if (e.code === 'ENOENT') retried++; else { bad.push(String(e)); } }
  if (consistent % 50 === 0) await new Promise((r) => setImmediate(r));
}
`;
