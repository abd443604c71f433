import { constants, type Stats } from 'node:fs';
import {
  access,
  lstat,
  mkdir,
  mkdtemp,
  open,
  readdir,
  readFile,
  readlink,
  realpath,
  rename,
  rm,
  statfs,
  symlink,
  unlink,
  chmod,
} from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { findPathConflict, validateRelativePath } from '../contract/path.ts';
import { ConfigError } from '../contract/errors.ts';
import type { FileEntry } from '../format/render-files.ts';

const TMPFS_MAGIC = 0x01021994;
const RAMFS_MAGIC = 0x858458f6;
const S_ISGID = 0o2000;

/** A write the directory refused: names the path and the fix. Nothing was changed when it is thrown. */
export class WriteError extends Error {
  readonly path: string;
  readonly fix: string;

  constructor(path: string, problem: string, fix: string) {
    super(`${path}: ${problem}`);
    this.name = 'WriteError';
    this.path = path;
    this.fix = fix;
  }
}

/**
 * A directory whose set of files changes atomically, after kubelet's AtomicWriter:
 *
 *   ..data_2026_11_22_10_00_00.000_Ab12Cd/   the payload, written in full before anyone can see it
 *   ..data -> ..data_2026_11_22_10_00_00.000_Ab12Cd
 *   db-password -> ..data/db-password       one user-visible symlink per top-level name
 *
 * A swap is one rename of the `..data` symlink, so a reader sees the whole old set or the whole new
 * one. Link targets are relative, so the volume works under any mount path. The writer only removes
 * what it made: symlinks pointing into its own `..data`, and its own timestamped directories.
 * `setName` lets several agents share a directory (each owns a distinct set).
 */
export class AtomicDir {
  readonly dir: string;
  /**
   * What open() removed: this set's payload directories that `..data` did not point to and a stale
   * `..data_tmp` link, left by a run that was killed mid-write. Names only, for a log line.
   */
  readonly leftoversRemoved: readonly string[];
  /**
   * The user-visible links open() made again: names of the live set that had none, left by a run killed
   * between its `..data` swap and its links (a restart that finds the set unchanged writes nothing).
   */
  readonly linksRestored: readonly string[];
  readonly #link: string;
  readonly #ownDir: RegExp;
  /** The volume is setgid (the kubelet's fsGroup volume): our directories must stay so. */
  readonly #setgid: number;
  #queue: Promise<unknown> = Promise.resolve();

  private constructor(
    dir: string,
    setName: string,
    recovered: { readonly removed: readonly string[]; readonly restored: readonly string[] },
    setgid: number,
  ) {
    this.dir = dir;
    this.leftoversRemoved = recovered.removed;
    this.linksRestored = recovered.restored;
    this.#link = `..${setName}`;
    this.#ownDir = ownPayloadPattern(setName);
    this.#setgid = setgid;
  }

  /** Checks the directory exists, is writable and (unless told otherwise) lives in memory. */
  static async open(
    dir: string,
    options: { setName?: string; requireMemoryFs: boolean },
  ): Promise<AtomicDir> {
    const setName = options.setName ?? 'data';
    if (!/^[A-Za-z0-9-]+$/.test(setName)) throw new Error(`invalid set name ${JSON.stringify(setName)}`);
    let resolved: string;
    let info: Stats;
    try {
      resolved = await realpath(dir);
      info = await lstat(resolved);
      if (!info.isDirectory()) throw Object.assign(new Error('not a directory'), { code: 'ENOTDIR' });
      await access(resolved, constants.W_OK | constants.X_OK);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code === 'ENOENT' || code === 'ENOTDIR') {
        throw new ConfigError(
          'SECRETS_DIR',
          `${JSON.stringify(dir)} is not an existing directory`,
          'mount the secrets volume there (the agent never creates it)',
        );
      }
      if (code === 'EACCES' || code === 'EPERM' || code === 'EROFS') {
        throw new ConfigError(
          'SECRETS_DIR',
          `${JSON.stringify(dir)} is not writable by the agent (${code})`,
          'mount a writable emptyDir there, writable by the agent’s user',
        );
      }
      throw e;
    }
    if (options.requireMemoryFs) {
      const { type } = await statfs(resolved);
      if (type !== TMPFS_MAGIC && type !== RAMFS_MAGIC) {
        throw new ConfigError(
          'SECRETS_DIR',
          `${JSON.stringify(dir)} is not on a memory filesystem (statfs type 0x${type.toString(16)}), so secrets would reach a disk`,
          'mount an emptyDir with medium: Memory there; for local runs only, set REQUIRE_MEMORY_FS=false',
        );
      }
    }
    const live = await readlink(join(resolved, `..${setName}`)).catch(() => undefined);
    const removed = await removeLeftovers(resolved, setName, live);
    const restored = await restoreLinks(resolved, setName, live);
    return new AtomicDir(resolved, setName, { removed, restored }, info.mode & S_ISGID);
  }

  /** The path readers should resolve once to read a consistent set. */
  get dataLink(): string {
    return join(this.dir, this.#link);
  }

  /** Resolves once no write is in flight: a shutdown waits for it, so a swap is never cut short. */
  idle(): Promise<void> {
    return this.#queue.then(() => undefined);
  }

  /**
   * The set this directory holds now (written by an earlier agent: the init container, or this
   * sidecar before a restart), or undefined when there is none. Read through one resolution of
   * `..data`, so it is one consistent set even if a swap happens meanwhile.
   */
  async current(): Promise<FileEntry[] | undefined> {
    const target = await readlink(this.dataLink).catch(() => undefined);
    if (!target || !this.#ownDir.test(target)) return undefined;
    const root = join(this.dir, target);
    const files: FileEntry[] = [];
    const walk = async (rel: string): Promise<void> => {
      for (const entry of await readdir(join(root, rel), { withFileTypes: true })) {
        const path = rel ? `${rel}/${entry.name}` : entry.name;
        if (entry.isDirectory()) await walk(path);
        else if (entry.isFile()) {
          const full = join(root, path);
          files.push({ path, bytes: await readFile(full), mode: (await lstat(full)).mode & 0o7777 });
        }
      }
    };
    try {
      await walk('');
    } catch (e) {
      // The payload went away under us (another writer's swap): treat it as no set.
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw e;
    }
    return files;
  }

  /** When the set this directory holds was swapped in (ms since the epoch), or undefined without one. */
  async writtenAt(): Promise<number | undefined> {
    return (await lstat(this.dataLink).catch(() => undefined))?.mtimeMs;
  }

  /** Replaces this set's files with `files`, atomically. Calls are serialised. */
  write(files: readonly FileEntry[]): Promise<void> {
    const run = this.#queue.then(() => this.#write(files));
    this.#queue = run.catch(() => undefined);
    return run;
  }

  async #write(files: readonly FileEntry[]): Promise<void> {
    for (const f of files) validateRelativePath(f.path, `file ${JSON.stringify(f.path)}`);
    const conflict = findPathConflict(files.map((f) => f.path));
    if (conflict) {
      throw new WriteError(
        conflict[1],
        conflict[0] === conflict[1]
          ? 'two secrets write the same file'
          : `needs ${JSON.stringify(conflict[0])} as a directory, but another secret writes a file there`,
        'give every secret (and every split key) its own file name',
      );
    }
    const topNames = new Set(files.map((f) => f.path.split('/')[0]!));
    // Refuse before writing anything if a name we need belongs to someone else.
    for (const name of topNames) {
      if ((await this.#owner(name)) === 'other') {
        throw new WriteError(
          join(this.dir, name),
          'exists and was not created by this agent',
          'remove it from the volume, or choose another file name',
        );
      }
    }

    const previous = await readlink(this.dataLink).catch(() => undefined);
    // 0700 while it is written; in a setgid volume it inherits the bit and the group, and so does
    // everything created in it: the files get the volume's group (the pod's fsGroup).
    const payload = await mkdtemp(join(this.dir, `${this.#link}_${timestamp()}_`));
    const dirs = new Set<string>([payload]);
    let current = '';
    try {
      for (const f of files) {
        current = f.path;
        const path = join(payload, f.path);
        if (f.path.includes('/')) {
          await mkdir(dirname(path), { recursive: true, mode: 0o700 });
          const parts = f.path.split('/').slice(0, -1);
          parts.forEach((_, i) => dirs.add(join(payload, ...parts.slice(0, i + 1))));
        }
        // O_EXCL|O_NOFOLLOW: the directory is brand new, so anything already there is an attack.
        const handle = await open(
          path,
          constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW,
          f.mode,
        );
        try {
          await handle.writeFile(f.bytes);
          await handle.chmod(f.mode); // the umask may have masked bits off at create
        } finally {
          await handle.close();
        }
      }
      // Final modes before anyone can reach the payload: read and search for whoever may read a file,
      // and the setgid bit kept (a chmod without it would clear it, and new files would lose the group).
      const dirMode = directoryMode(files) | this.#setgid;
      for (const dir of [...dirs].reverse()) await chmod(dir, dirMode);
      const tmpLink = `${this.dataLink}_tmp`;
      await rm(tmpLink, { force: true });
      await symlink(payload.slice(this.dir.length + 1), tmpLink);
      await rename(tmpLink, this.dataLink);
    } catch (e) {
      await removePayload(payload);
      if ((e as NodeJS.ErrnoException).code === 'ENAMETOOLONG') {
        throw new WriteError(
          current,
          `the path is too long to write under ${JSON.stringify(this.dir)}`,
          'shorten the file name or its directories',
        );
      }
      throw e;
    }

    for (const name of topNames) {
      await symlink(`${this.#link}/${name}`, join(this.dir, name)).catch((e: NodeJS.ErrnoException) => {
        if (e.code !== 'EEXIST') throw e;
      });
    }
    await this.#removeStale(topNames, previous);
  }

  /** 'ours' for a symlink into our `..data`, 'absent', or 'other' for anything else. */
  async #owner(name: string): Promise<'ours' | 'absent' | 'other'> {
    const path = join(this.dir, name);
    const info = await lstat(path).catch((e: NodeJS.ErrnoException) => {
      if (e.code === 'ENOENT') return undefined;
      throw e;
    });
    if (!info) return 'absent';
    if (!info.isSymbolicLink()) return 'other';
    return (await readlink(path)) === `${this.#link}/${name}` ? 'ours' : 'other';
  }

  /** Drops our symlinks for names no longer in the set, the previous payload and any crash leftovers. */
  async #removeStale(current: ReadonlySet<string>, previous: string | undefined): Promise<void> {
    const live = await readlink(this.dataLink);
    for (const entry of await readdir(this.dir)) {
      if (entry.startsWith('..')) {
        if (entry !== live && (entry === previous || this.#ownDir.test(entry)))
          await removePayload(join(this.dir, entry));
      } else if (!current.has(entry) && (await this.#owner(entry)) === 'ours') {
        await unlink(join(this.dir, entry));
      }
    }
  }
}

/** This set's timestamped payload directories, `..<set>_2026_11_22_10_00_00.000_Ab12Cd`, and nothing else. */
function ownPayloadPattern(setName: string): RegExp {
  return new RegExp(
    `^\\.\\.${setName.replace(/[^A-Za-z0-9]/g, '\\$&')}_\\d{4}(_\\d\\d){5}\\.\\d{3}_[A-Za-z0-9]{6}$`,
  );
}

/**
 * At start: what a run of this set killed mid-write left behind, its payload directories that
 * `..<set>` does not point to (none is live: one writer per set, and readers only ever follow the
 * link) and a `..<set>_tmp` symlink. Removed now rather than after the next write, which may never
 * come if the backend is down. The live payload and anything this set did not create stay.
 */
async function removeLeftovers(dir: string, setName: string, live: string | undefined): Promise<string[]> {
  const own = ownPayloadPattern(setName);
  const link = `..${setName}`;
  // Best effort throughout: what cannot go now is retried after the next write (#removeStale).
  const done = (p: Promise<unknown>) =>
    p.then(
      () => true,
      () => false,
    );
  const removed: string[] = [];
  for (const entry of await readdir(dir).catch(() => [])) {
    const path = join(dir, entry);
    if (entry === `${link}_tmp`) {
      // Only our own kind of thing: a symlink; a file or directory of that name is someone else's.
      const info = await lstat(path).catch(() => undefined);
      if (info?.isSymbolicLink() && (await done(unlink(path)))) removed.push(entry);
    } else if (entry !== live && own.test(entry)) {
      if (await done(removePayload(path))) removed.push(entry);
    }
  }
  return removed;
}

/**
 * At start: the live set's user-visible links, made where a run killed after its `..data` swap left
 * none. Only an absent name is linked: whatever else holds a name (another set's, the user's) stays.
 */
async function restoreLinks(dir: string, setName: string, live: string | undefined): Promise<string[]> {
  const link = `..${setName}`;
  if (!live || !ownPayloadPattern(setName).test(live)) return [];
  const restored: string[] = [];
  for (const name of await readdir(join(dir, live)).catch(() => [])) {
    const made = await symlink(`${link}/${name}`, join(dir, name)).then(
      () => true,
      () => false, // EEXIST: it has its link, or the name is someone else's
    );
    if (made) restored.push(name);
  }
  return restored;
}

/** Read and search for each class (owner, group, others) that may read some file of the set. */
function directoryMode(files: readonly FileEntry[]): number {
  let mode = 0o500;
  for (const f of files) {
    if (f.mode & 0o040) mode |= 0o050;
    if (f.mode & 0o004) mode |= 0o005;
  }
  return mode;
}

/**
 * rm -r of one of our payloads, whose directories are read-only once written (0500, 0550): each is made
 * writable first, which its owner, the agent, may always do. Symlinks are never followed: a link with
 * a payload's name is removed as a link, its target left as it was (chmod would follow it).
 */
async function removePayload(path: string): Promise<void> {
  const unlock = async (dir: string): Promise<void> => {
    await chmod(dir, 0o700);
    for (const entry of await readdir(dir, { withFileTypes: true }))
      if (entry.isDirectory()) await unlock(join(dir, entry.name));
  };
  // What cannot be unlocked (gone already, or not ours) is left for rm to report.
  if ((await lstat(path).catch(() => undefined))?.isDirectory()) await unlock(path).catch(() => undefined);
  await rm(path, { recursive: true, force: true });
}

function timestamp(): string {
  return new Date().toISOString().replace(/[-T:]/g, '_').replace('Z', '').slice(0, 23);
}
