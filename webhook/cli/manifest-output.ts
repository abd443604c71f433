import { isDeepStrictEqual } from 'node:util';
import { Document, isMap, isNode, isScalar, isSeq, type Node, type Pair } from 'yaml';
import { YAML_OPTIONS, type ManifestFormat } from './manifest-input.ts';
import { isJsonObject } from './pod-templates.ts';

/**
 * Prints rendered manifests in the input's format. YAML documents are updated in place, node by
 * node, rather than printed afresh from the new values: what did not change keeps its comments,
 * anchors and quoting, and only what the injection added is new.
 */

export interface OutputDocument {
  readonly value: unknown;
  /** The parsed YAML document it came from, if any; updated in place. */
  readonly yaml?: Document;
  /** Whether render changed the value (an unchanged YAML document is printed as parsed). */
  readonly changed: boolean;
  readonly indentSeq: boolean;
}

/**
 * YAML when any input is YAML (a JSON object is valid YAML, not the reverse); JSON objects one after
 * another otherwise, a stream `kubectl apply -f -` reads.
 */
export function formatManifests(documents: readonly OutputDocument[], format: ManifestFormat): string {
  if (format === 'json') return documents.map((d) => `${JSON.stringify(d.value, null, 2)}\n`).join('');
  return documents.map((d) => yamlText(d)).join('---\n');
}

function yamlText(d: OutputDocument): string {
  const options = { lineWidth: 0, indentSeq: d.indentSeq, flowCollectionPadding: false };
  if (!d.yaml) return new Document(d.value, YAML_OPTIONS).toString(options);
  const doc = d.yaml;
  if (d.changed) doc.contents = reconcile(doc, doc.contents, d.value);
  // Documents are joined with `---` here; one of their own would double it.
  if (doc.directives) doc.directives.docStart = null;
  return doc.toString(options);
}

/** `node` made to hold `value`, reusing every sub-node whose value did not change. */
function reconcile(doc: Document, node: unknown, value: unknown): Node {
  if (isNode(node) && isDeepStrictEqual(node.toJS(doc), value)) return node;
  if (isMap(node) && isJsonObject(value)) {
    const pairs = node.items as Pair<unknown, unknown>[];
    const kept = pairs.filter((p) => Object.hasOwn(value, keyOf(p)));
    for (const [key, v] of Object.entries(value)) {
      const pair = kept.find((p) => keyOf(p) === key);
      if (pair) pair.value = reconcile(doc, pair.value, v);
      else kept.push(doc.createPair(key, v));
    }
    node.items = kept;
    // A changed collection is printed as a block: `{ name: app }` grown by mounts and env would be one long line.
    node.flow = false;
    return node;
  }
  if (isSeq(node) && Array.isArray(value)) {
    const old = node.items;
    const used = new Set<number>();
    const find = (test: (n: unknown) => boolean) => old.findIndex((n, i) => !used.has(i) && test(n));
    node.items = value.map((v) => {
      // An item kept as it was, else one with the same name (a container gaining a mount), else new.
      let i = find((n) => isNode(n) && isDeepStrictEqual(n.toJS(doc), v));
      if (i < 0 && isJsonObject(v) && typeof v.name === 'string')
        i = find((n) => isMap(n) && n.get('name') === v.name);
      if (i < 0) return doc.createNode(v);
      used.add(i);
      return reconcile(doc, old[i], v);
    });
    node.flow = false;
    return node;
  }
  return doc.createNode(value);
}

function keyOf(pair: Pair<unknown, unknown>): string {
  return isScalar(pair.key) ? String(pair.key.value) : String(pair.key);
}
