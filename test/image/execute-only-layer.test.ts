/**
 * images/execute-only.ts's layer rewrite, on layers tar(1) writes in each format a base may come in
 * (GNU, as our offline bases; PAX, as Bazel's rules_pkg and BuildKit write; ustar with a prefix):
 * the one file's mode changes, and nothing else of the layer.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, chownSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { EXECUTE_ONLY_MODE, NODE_PATH, setModeInLayer } from '../../images/execute-only.ts';
import { layerEntries, layerFile } from './oci-archive.ts';

const work = mkdtempSync(join(tmpdir(), 'secret-agent-execute-only-'));
after(() => rmSync(work, { recursive: true, force: true }));

/** A root filesystem with Node (0755) among other files, tarred in `format` with `members`. */
function layer(format: string, members: string[], owner = 0): string {
  const root = mkdtempSync(join(work, 'root-'));
  mkdirSync(join(root, 'nodejs/bin'), { recursive: true });
  mkdirSync(join(root, 'etc'));
  writeFileSync(join(root, NODE_PATH), Buffer.alloc(70_000, 7));
  chmodSync(join(root, NODE_PATH), 0o755);
  chownSync(join(root, NODE_PATH), owner, owner);
  writeFileSync(join(root, 'etc/passwd'), 'root:x:0:0::/root:/sbin/nologin\n');
  // A name past ustar's 100 bytes: a GNU long-name entry, a PAX path record or a ustar prefix.
  const deep = join(root, 'usr/share/doc/'.padEnd(90, 'd'), 'nodejs');
  mkdirSync(deep, { recursive: true });
  writeFileSync(join(deep, 'node'), 'not the program\n');
  chmodSync(join(deep, 'node'), 0o755);
  const out = join(work, `${format}-${members.join('+').replace(/\W/g, '_')}.tar`);
  const r = spawnSync(
    'tar',
    [`--format=${format}`, '--sort=name', '--mtime=@1700000000', '-C', root, '-cf', out, ...members],
    {
      encoding: 'utf8',
    },
  );
  assert.equal(r.status, 0, r.stderr);
  return out;
}

const listing = (tar: string) => layerEntries(readFileSync(tar)).map((e) => `${e.mode} ${e.size} ${e.path}`);

describe('images/execute-only.ts: Node made execute-only in the base’s own layer, nothing else changed', () => {
  for (const [format, members] of [
    ['gnu', ['.']],
    ['pax', ['.']],
    ['ustar', ['nodejs', 'etc', 'usr']],
    ['gnu', ['etc', 'nodejs']],
  ] as const)
    it(`a ${format} layer (${members.join(', ')}): /nodejs/bin/node becomes 0511, every other entry and every byte of content stays`, () => {
      const tar = layer(format, [...members]);
      const before = listing(tar);
      const size = readFileSync(tar).length;
      assert.equal(setModeInLayer(tar, NODE_PATH, EXECUTE_ONLY_MODE), true);
      const afterwards = listing(tar);
      assert.equal(readFileSync(tar).length, size, 'not one byte more');
      const member = members[0] === '.' ? `./${NODE_PATH}` : NODE_PATH;
      assert.deepEqual(
        afterwards.filter((line, i) => line !== before[i]),
        [`-r-x--x--x 70000 /${member}`],
      );
      assert.ok(layerFile(readFileSync(tar), member).equals(Buffer.alloc(70_000, 7)), 'the same contents');
      // tar(1) checks every header's checksum while listing: the rewritten one is valid.
      const verify = spawnSync('tar', ['-tvf', tar], { encoding: 'utf8' });
      assert.equal(verify.status, 0, verify.stderr);
      assert.doesNotMatch(verify.stderr, /checksum|skipping/i);
      // Done once, it is done: a second pass changes nothing.
      const once = readFileSync(tar);
      assert.equal(setModeInLayer(tar, NODE_PATH, EXECUTE_ONLY_MODE), true);
      assert.ok(readFileSync(tar).equals(once));
    });

  it('a layer without Node is left alone and says so', () => {
    const tar = layer('gnu', ['etc']);
    const once = readFileSync(tar);
    assert.equal(setModeInLayer(tar, NODE_PATH, EXECUTE_ONLY_MODE), false);
    assert.ok(readFileSync(tar).equals(once));
  });

  it('a Node that is not root’s is refused: an execute-only program its user owns is readable after one chmod', () => {
    const tar = layer('gnu', ['.'], 65532);
    assert.throws(
      () => setModeInLayer(tar, NODE_PATH, EXECUTE_ONLY_MODE),
      /is 65532:65532's; an execute-only program must be root's/,
    );
  });
});
