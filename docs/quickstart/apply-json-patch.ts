/**
 * Applies an RFC 6902 JSON Patch the way the API server does after admission, strictly: a path
 * whose parent does not exist is an error, never silently created. The webhook emits add and
 * replace only, so those are all the quick start needs.
 */

export interface JsonPatchOperation {
  readonly op: string;
  readonly path: string;
  readonly value?: unknown;
}

function tokens(path: string): string[] {
  if (!path.startsWith('/')) throw new Error(`JSON Patch path ${JSON.stringify(path)} is not a pointer`);
  return path
    .slice(1)
    .split('/')
    .map((t) => t.replace(/~1/g, '/').replace(/~0/g, '~'));
}

export function applyJsonPatch<T>(document: T, ops: readonly JsonPatchOperation[]): T {
  const doc = structuredClone(document) as unknown;
  for (const op of ops) {
    if (op.op !== 'add' && op.op !== 'replace') throw new Error(`unsupported JSON Patch op ${op.op}`);
    const path = tokens(op.path);
    let parent = doc;
    for (const token of path.slice(0, -1)) {
      parent =
        typeof parent === 'object' && parent !== null
          ? (parent as Record<string, unknown>)[token]
          : undefined;
      if (parent === undefined) throw new Error(`the document has no parent for ${op.path}`);
    }
    const key = path.at(-1)!;
    const value = structuredClone(op.value);
    if (Array.isArray(parent)) {
      const index = key === '-' ? parent.length : Number(key);
      if (!/^(?:-|0|[1-9]\d*)$/.test(key) || index > parent.length)
        throw new Error(`${op.path} is outside the array`);
      if (op.op === 'add') parent.splice(index, 0, value);
      else if (index < parent.length) parent[index] = value;
      else throw new Error(`replace of a missing element at ${op.path}`);
    } else if (typeof parent === 'object' && parent !== null) {
      if (op.op === 'replace' && !Object.hasOwn(parent, key))
        throw new Error(`replace of missing ${op.path}`);
      (parent as Record<string, unknown>)[key] = value;
    } else {
      throw new Error(`the document has no object at the parent of ${op.path}`);
    }
  }
  return doc as T;
}
