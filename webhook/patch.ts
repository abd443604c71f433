/**
 * RFC 6902 JSON Patch operations, and helpers that know whether their target exists yet: adding to
 * an absent array must add the whole array (`/spec/initContainers` = [x]), never `/spec/initContainers/0`,
 * which the API server rejects ("doc is missing path").
 */

export type PatchOperation =
  | { readonly op: 'add'; readonly path: string; readonly value: unknown }
  | { readonly op: 'replace'; readonly path: string; readonly value: unknown }
  | { readonly op: 'remove'; readonly path: string };

/** One JSON Pointer reference token (RFC 6901): `~` → `~0`, `/` → `~1`. */
export function escapePointerToken(token: string): string {
  return token.replace(/~/g, '~0').replace(/\//g, '~1');
}

/** A JSON Pointer from raw tokens. */
export function pointer(...tokens: readonly (string | number)[]): string {
  return tokens.map((t) => `/${escapePointerToken(String(t))}`).join('');
}

/** Adds `item` to the array at `path`: the whole array if absent, else at the front or the end. */
export function addToArray(
  existing: readonly unknown[] | undefined,
  path: string,
  item: unknown,
  position: 'first' | 'last',
): PatchOperation {
  if (existing === undefined) return { op: 'add', path, value: [item] };
  return {
    op: 'add',
    path: `${path}/${position === 'first' || existing.length === 0 ? '0' : '-'}`,
    value: item,
  };
}

/** Sets `key` in the object at `path`: the whole object if absent. */
export function addToObject(
  existing: Readonly<Record<string, unknown>> | undefined,
  path: string,
  key: string,
  value: unknown,
): PatchOperation {
  if (existing === undefined) return { op: 'add', path, value: { [key]: value } };
  // `add` on an existing member replaces it (RFC 6902 §4.1), so one op covers both cases.
  return { op: 'add', path: `${path}/${escapePointerToken(key)}`, value };
}

/** Sets a scalar member, whether or not it exists. */
export function setMember(path: string, value: unknown): PatchOperation {
  return { op: 'add', path, value };
}
