/**
 * Which source an image is built from, read from git: the commit (`-dirty` with uncommitted changes),
 * its time as SOURCE_DATE_EPOCH (https://reproducible-builds.org/specs/source-date-epoch/: every time a
 * build writes into an image or an archive), and the remote it came from, for the provenance.
 */
import { spawnSync } from 'node:child_process';

export interface SourceRevision {
  readonly revision: string;
  readonly sourceDateEpoch: number;
  readonly repository?: string;
}

/** git's stdout in `root`, or undefined where git or the repository is missing. */
export function git(root: string, ...args: string[]): string | undefined {
  const r = spawnSync('git', args, { cwd: root, encoding: 'utf8' });
  return r.status === 0 ? r.stdout : undefined;
}

export function sourceRevision(root: string, say: (line: string) => void): SourceRevision {
  const head = git(root, 'rev-parse', 'HEAD')?.trim();
  const dirty = git(root, 'status', '--porcelain', '--untracked-files=no')?.trim();
  const revision = head === undefined ? 'unknown' : head + (dirty === '' ? '' : '-dirty');
  const fromEnv = process.env.SOURCE_DATE_EPOCH;
  let sourceDateEpoch: number;
  if (fromEnv !== undefined) {
    if (!/^\d+$/.test(fromEnv))
      throw new Error(
        `SOURCE_DATE_EPOCH: "${fromEnv}" is not a count of seconds. Fix: unset it (the commit's time is used) or set e.g. 1767225600`,
      );
    sourceDateEpoch = Number(fromEnv);
  } else {
    const committed = head === undefined ? undefined : git(root, 'log', '-1', '--format=%ct', head)?.trim();
    if (committed === undefined) {
      sourceDateEpoch = Math.floor(Date.now() / 1000);
      say(
        'no git commit to take SOURCE_DATE_EPOCH from: the images carry the time of this build and cannot be rebuilt to the same digests',
      );
    } else sourceDateEpoch = Number(committed);
  }
  const remote = git(root, 'remote', 'get-url', 'origin')?.trim();
  return { revision, sourceDateEpoch, ...(remote ? { repository: remote } : {}) };
}
