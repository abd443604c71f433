import { createHash } from 'node:crypto';
import {
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { FOREIGN_NAMES } from './arbitraries.ts';

export type ForeignName = (typeof FOREIGN_NAMES)[number];

/**
 * A tmpfs playground for the writer: `root/outer/outside` holds sentinels, `root/outer/vol-N` is the
 * volume of one case, pre-populated with foreign files and symlinks that point outside. Everything
 * under root but the volumes is watched: a write outside the volume changes a snapshot.
 */
export interface Arena {
  readonly root: string;
  /** The sentinel directory the foreign symlinks point to (absolute). */
  readonly outside: string;
  newVolume(foreign: readonly ForeignName[]): string;
  removeVolume(volume: string): void;
  /** Every entry under root except the volumes, with contents and times. */
  snapshotOutside(): Map<string, string>;
  close(): void;
}

export function createArena(): Arena {
  const root = mkdtempSync('/dev/shm/secret-agent-fuzz-');
  const outer = join(root, 'outer');
  const outside = join(outer, 'outside');
  mkdirSync(join(outside, 'dir'), { recursive: true });
  writeFileSync(join(outside, 'sentinel.txt'), 'sentinel');
  writeFileSync(join(outside, 'dir', 'inner.txt'), 'inner');
  let next = 0;
  return {
    root,
    outside,
    newVolume(foreign) {
      const volume = join(outer, `vol-${next++}`);
      mkdirSync(volume);
      const make: Record<ForeignName, () => void> = {
        'foreign.txt': () => writeFileSync(join(volume, 'foreign.txt'), 'theirs', { mode: 0o644 }),
        'foreign-dir': () => {
          mkdirSync(join(volume, 'foreign-dir'));
          writeFileSync(join(volume, 'foreign-dir', 'inner.txt'), 'theirs');
        },
        escape: () => symlinkSync('../outside', join(volume, 'escape')),
        'escape-abs': () => symlinkSync(outside, join(volume, 'escape-abs')),
        'escape-file': () => symlinkSync('../outside/sentinel.txt', join(volume, 'escape-file')),
        dangling: () => symlinkSync('../outside/created-through-a-link', join(volume, 'dangling')),
      };
      for (const name of foreign) make[name]();
      return volume;
    },
    removeVolume(volume) {
      rmSync(volume, { recursive: true, force: true });
    },
    snapshotOutside() {
      const snap = snapshotTree(root, (rel) => /^outer\/vol-\d+(\/|$)/.test(rel));
      // outer's own times change whenever a volume comes or goes; its entries are what matter.
      snap.set('outer', 'dir');
      return snap;
    },
    close() {
      rmSync(root, { recursive: true, force: true });
    },
  };
}

/**
 * Every entry below `dir` (not following symlinks): type, mode, times, content digest or link
 * target. Two equal snapshots mean nothing was created, changed or removed.
 */
export function snapshotTree(
  dir: string,
  skip: (relative: string) => boolean = () => false,
): Map<string, string> {
  const out = new Map<string, string>();
  const walk = (relative: string) => {
    const path = relative === '' ? dir : join(dir, relative);
    const info = lstatSync(path);
    const times = `${info.mtimeMs}/${info.ctimeMs}`;
    const mode = (info.mode & 0o7777).toString(8);
    if (info.isSymbolicLink()) out.set(relative, `link ${readlinkSync(path)} ${times}`);
    else if (info.isFile())
      out.set(
        relative,
        `file ${mode} ${times} ${createHash('sha256').update(readFileSync(path)).digest('hex')}`,
      );
    else if (info.isDirectory()) {
      out.set(relative, `dir ${mode} ${times}`);
      for (const name of readdirSync(path).sort()) {
        const child = relative === '' ? name : `${relative}/${name}`;
        if (!skip(child)) walk(child);
      }
    } else out.set(relative, `other ${mode} ${times}`);
  };
  walk('');
  return out;
}

/** The entries of `before` that differ in or are missing from `after`, and the new ones. */
export function diffSnapshots(
  before: ReadonlyMap<string, string>,
  after: ReadonlyMap<string, string>,
): string[] {
  const changes: string[] = [];
  for (const [path, what] of before) {
    const now = after.get(path);
    if (now === undefined) changes.push(`removed ${JSON.stringify(path)}`);
    else if (now !== what) changes.push(`changed ${JSON.stringify(path)}: ${what} -> ${now}`);
  }
  for (const path of after.keys()) if (!before.has(path)) changes.push(`created ${JSON.stringify(path)}`);
  return changes;
}
