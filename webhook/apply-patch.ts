import { applyPatch, type Operation } from 'rfc6902';

/**
 * Applies an RFC 6902 JSON Patch the way the API server does after admission: strictly, every
 * operation or none. rfc6902 refuses what the API server refuses ("doc is missing path": a parent
 * that does not exist, an index past the end or with a leading zero, a replace of a missing member).
 * Used by `render` (webhook/cli) and by the tests and quick start that check the server's patches.
 */

export interface JsonPatchOperation {
  readonly op: string;
  readonly path: string;
  readonly value?: unknown;
  readonly from?: string;
}

/** A patch that does not apply; names the operation and its path (paths hold keys, never values). */
export class JsonPatchError extends Error {
  readonly index: number;
  readonly path: string;
  constructor(index: number, op: JsonPatchOperation, why: string) {
    super(`JSON Patch operation ${index} (${op.op} ${op.path}) does not apply: ${why}`);
    this.name = 'JsonPatchError';
    this.index = index;
    this.path = op.path;
  }
}

/** Returns the patched copy of `document`; `document` itself is left as it was. */
export function applyJsonPatch<T>(document: T, ops: readonly JsonPatchOperation[]): T {
  const doc = structuredClone(document);
  // One operation at a time: rfc6902 goes on after a failed operation, the API server does not.
  ops.forEach((op, index) => {
    const [error] = applyPatch(doc, [op as Operation]);
    if (error) throw new JsonPatchError(index, op, `${error.name}: ${error.message}`);
  });
  return doc;
}
