import type { SecretSpec } from '../contract/agent-config.ts';
import { ConfigError, quote } from '../contract/errors.ts';
import { findPathConflict } from '../contract/path.ts';

/**
 * File names two secrets cannot both have. A split secret's name is a directory whose keys are
 * known only after the fetch (findFileClash checks those), so here it only clashes with a file at or
 * above it.
 */
export function findFileConflict(secrets: readonly SecretSpec[]): ConfigError | undefined {
  const files = secrets.filter((s) => s.format !== 'split');
  const clash = findFileClash(files.map((s) => ({ id: s.id, path: s.filename })));
  if (clash) return clash;
  for (const split of secrets.filter((s) => s.format === 'split' && s.filename !== '')) {
    const file = files.find(
      (f) => split.filename === f.filename || split.filename.startsWith(`${f.filename}/`),
    );
    if (file) {
      return new ConfigError(
        `${split.id}_FILENAME`,
        `the split directory ${quote(split.filename)} is where ${file.id} writes the file ${quote(file.filename)}`,
        'give every secret its own file name',
      );
    }
  }
  return undefined;
}

/**
 * The first pair of files, each written by a secret (`id`: SECRET_0, SECRET_ARN), that cannot both
 * exist, as an error naming both secrets: the same path twice, or a file where another needs a
 * directory. The agent runs it on the configured names before fetching, and again on the files a
 * fetch rendered, where a split secret's keys become known.
 */
export function findFileClash(
  files: readonly { readonly id: string; readonly path: string; readonly split?: boolean }[],
): ConfigError | undefined {
  const conflict = findPathConflict(files.map((f) => f.path));
  if (!conflict) return undefined;
  const [first, second] = conflict;
  const holder = files.find((f) => f.path === first)!;
  const other = files.find((f) => f.path === second && f !== holder)!;
  const splits = [...new Set([holder, other].filter((f) => f.split).map((f) => f.id))];
  const why = splits.length === 0 ? '' : ` (${splits.join(' and ')}: FORMAT=split writes each key as a file)`;
  return new ConfigError(
    `${other.id}_FILENAME`,
    first === second
      ? `${holder.id} and ${other.id} both write ${quote(first)}${why}`
      : `${other.id} writes ${quote(second)}, which needs ${quote(first)} as a directory, but ${holder.id} writes a file there${why}`,
    'give every secret (and every key of a split secret) its own file name',
  );
}
