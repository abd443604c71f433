/**
 * A strict RFC 6902 applier (add, replace, remove, test) for tests: like the API server's, it
 * refuses a path whose parent does not exist, which is the classic injector bug.
 */

type Json = unknown;

function tokens(path: string): string[] {
  if (path === '') return [];
  if (!path.startsWith('/')) throw new Error(`bad pointer ${path}`);
  return path
    .slice(1)
    .split('/')
    .map((t) => t.replace(/~1/g, '/').replace(/~0/g, '~'));
}

function parentOf(doc: Json, path: string): { parent: Record<string, Json> | Json[]; key: string } {
  const t = tokens(path);
  if (t.length === 0) throw new Error('cannot patch the root');
  let node: Json = doc;
  for (const token of t.slice(0, -1)) {
    if (Array.isArray(node)) node = node[Number(token)];
    else if (typeof node === 'object' && node !== null) node = (node as Record<string, Json>)[token];
    else node = undefined;
    if (node === undefined) throw new Error(`doc is missing path: ${path}`);
  }
  if (typeof node !== 'object' || node === null) throw new Error(`doc is missing path: ${path}`);
  return { parent: node as Record<string, Json> | Json[], key: t[t.length - 1]! };
}

function arrayIndex(arr: Json[], key: string, forAdd: boolean): number {
  if (forAdd && key === '-') return arr.length;
  if (!/^(0|[1-9]\d*)$/.test(key)) throw new Error(`bad array index ${key}`);
  const i = Number(key);
  if (i > arr.length || (!forAdd && i === arr.length)) throw new Error(`index ${i} out of range`);
  return i;
}

export interface Operation {
  readonly op: string;
  readonly path: string;
  readonly value?: unknown;
}

export function applyPatch<T>(document: T, ops: readonly Operation[]): T {
  const doc = structuredClone(document) as Json;
  for (const op of ops) {
    const { parent, key } = parentOf(doc, op.path);
    const value = structuredClone(op.value);
    if (Array.isArray(parent)) {
      const i = arrayIndex(parent, key, op.op === 'add');
      if (op.op === 'add') parent.splice(i, 0, value);
      else if (op.op === 'replace') parent[i] = value;
      else if (op.op === 'remove') parent.splice(i, 1);
      else if (op.op === 'test') {
        if (JSON.stringify(parent[i]) !== JSON.stringify(value)) throw new Error(`test failed at ${op.path}`);
      } else throw new Error(`unsupported op ${op.op}`);
    } else {
      const has = Object.hasOwn(parent, key);
      if (op.op === 'add') parent[key] = value;
      else if (op.op === 'replace') {
        if (!has) throw new Error(`replace of missing ${op.path}`);
        parent[key] = value;
      } else if (op.op === 'remove') {
        if (!has) throw new Error(`remove of missing ${op.path}`);
        Reflect.deleteProperty(parent, key);
      } else if (op.op === 'test') {
        if (JSON.stringify(parent[key]) !== JSON.stringify(value))
          throw new Error(`test failed at ${op.path}`);
      } else throw new Error(`unsupported op ${op.op}`);
    }
  }
  return doc as T;
}
