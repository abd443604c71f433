import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { describePinnedShare } from './pinned-share.ts';
import { createArena, diffSnapshots, snapshotTree } from './volume-arena.ts';

describe('the writer arena detects what the property forbids', () => {
  it('a write through a foreign symlink shows outside the volume, a changed foreign file inside', () => {
    const arena = createArena();
    try {
      const outside = arena.snapshotOutside();
      const volume = arena.newVolume(['escape', 'dangling', 'foreign.txt']);
      const inside = snapshotTree(volume);
      assert.deepEqual(diffSnapshots(outside, arena.snapshotOutside()), [], 'a new volume is not outside');
      writeFileSync(join(volume, 'dangling'), 'x');
      writeFileSync(join(volume, 'foreign.txt'), 'changed');
      assert.equal(diffSnapshots(outside, arena.snapshotOutside()).length, 2, 'new file + outside dir mtime');
      assert.deepEqual(
        diffSnapshots(inside, snapshotTree(volume)).map((c) => c.split(':')[0]),
        ['changed "foreign.txt"'],
      );
      writeFileSync(join(arena.root, 'outer', 'escaped'), 'x');
      assert.ok(diffSnapshots(outside, arena.snapshotOutside()).includes('created "outer/escaped"'));
    } finally {
      arena.close();
    }
  });
});

describePinnedShare('writer', 'fuzz (seed-pinned share): AtomicDir in a hostile volume');
