import { ConfigError, quote } from './errors.ts';

// Linux's PATH_MAX is 4096 for the whole path; leave room for SECRETS_DIR and the writer's payload dir.
const MAX_PATH_BYTES = 3072;
const MAX_SEGMENT_BYTES = 255;

/**
 * Checks a file path the user wants inside the secrets directory and returns it unchanged.
 * Relative, no `.`/`..`/empty segments, no control characters, nothing starting with `..`
 * (the writer keeps its own `..data` entries there). Lexical checks suffice because the writer
 * only ever creates paths inside a directory it has just made itself.
 */
export function validateRelativePath(path: string, field: string): string {
  const fail = (problem: string, fix: string): never => {
    throw new ConfigError(field, problem, fix);
  };
  if (path === '') fail('the file name is empty', 'give a file name such as db-password');
  if (path.startsWith('/'))
    fail(
      `${quote(path)} is an absolute path`,
      'use a path relative to the secrets directory, e.g. db/password',
    );
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f\\]/.test(path))
    fail(
      `${quote(path)} contains control characters or a backslash`,
      'use plain characters and / as separator',
    );
  if (Buffer.byteLength(path) > MAX_PATH_BYTES)
    fail(`the path is ${Buffer.byteLength(path)} bytes long`, `keep it under ${MAX_PATH_BYTES} bytes`);
  for (const segment of path.split('/')) {
    if (segment === '')
      fail(`${quote(path)} has an empty path segment`, 'remove doubled, leading or trailing slashes');
    if (segment === '.' || segment === '..')
      fail(
        `${quote(path)} contains a ${quote(segment)} segment that could escape the secrets directory`,
        'name the file directly, without . or ..',
      );
    if (segment.startsWith('..'))
      fail(
        `${quote(path)} has a segment starting with "..", reserved for the writer's own entries`,
        'rename it',
      );
    if (Buffer.byteLength(segment) > MAX_SEGMENT_BYTES)
      fail(`a segment of ${quote(path)} is over ${MAX_SEGMENT_BYTES} bytes`, 'shorten it');
  }
  return path;
}

/**
 * Finds the first pair of paths that cannot both exist: the same path twice, or a file that another
 * path needs as a directory (`db` and `db/password`). Returns undefined when all can coexist.
 */
export function findPathConflict(paths: readonly string[]): readonly [string, string] | undefined {
  const seen = new Map<string, string>();
  for (const path of paths) {
    if (seen.has(path)) return [path, path];
    seen.set(path, path);
  }
  for (const path of paths) {
    const segments = path.split('/');
    for (let i = 1; i < segments.length; i++) {
      const parent = segments.slice(0, i).join('/');
      if (seen.has(parent)) return [parent, path];
    }
  }
  return undefined;
}
