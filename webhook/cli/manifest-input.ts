import { readFileSync } from 'node:fs';
import {
  parseAllDocuments,
  type Document,
  type DocumentOptions,
  type ParseOptions,
  type SchemaOptions,
} from 'yaml';
import { isJsonObject } from './pod-templates.ts';

/**
 * Reads manifests as kubectl does: YAML streams (`---`) or a JSON object, one file or stdin each.
 * Errors name the file and the document and give a line, never the parser's message: that quotes
 * the file's text, and manifest streams carry Secrets.
 */

export type ManifestFormat = 'yaml' | 'json';

export interface ManifestDocument {
  /** 1-based within its source, as errors count. */
  readonly index: number;
  /** The document as plain JSON values. */
  readonly value: unknown;
  /** YAML input: the parsed document, written back so its comments stay. */
  readonly yaml?: Document.Parsed;
}

export interface ManifestSource {
  /** As the user named it; `-` is shown as <stdin>. */
  readonly name: string;
  readonly format: ManifestFormat;
  readonly documents: readonly ManifestDocument[];
  /** YAML input: whether sequences are indented under their key (kubectl and kustomize write them flush). */
  readonly indentSeq: boolean;
}

/** Input that cannot be read as manifests; `render` exits 2 on it. */
export class InputError extends Error {
  /** The file as the user named it (<stdin> for -). */
  readonly file: string;
  readonly document: number | undefined;
  constructor(file: string, document: number | undefined, problem: string, fix: string) {
    super(`${file}: ${document === undefined ? '' : `document ${document}: `}${problem}. Fix: ${fix}`);
    this.name = 'InputError';
    this.file = file;
    this.document = document;
  }
}

/**
 * YAML as Kubernetes reads it (sigs.k8s.io/yaml on go-yaml v2), which is YAML 1.1: `0644` is an octal
 * number and `yes` a boolean. go-yaml v2 has no base-60 numbers, keeps timestamps as strings and reads
 * a lone `.` as a string (yaml's 1.1 schema: NaN), so `22:22`, `2024-01-01` and `.` stay strings here,
 * as the API server would see them, and print back unquoted.
 */
export const YAML_OPTIONS: ParseOptions & DocumentOptions & SchemaOptions = {
  version: '1.1',
  uniqueKeys: true,
  customTags: (tags) =>
    tags.flatMap((t): typeof tags => {
      if (typeof t !== 'object') return [t];
      if (t.format === 'TIME' || t.tag === 'tag:yaml.org,2002:timestamp') return [];
      if ('test' in t && t.test?.test('.'))
        return [{ ...t, test: /^[-+]?(?:[0-9][0-9_]*\.[0-9_]*|\.[0-9][0-9_]*)$/ }];
      return [t];
    }),
};

export const STDIN = '-';

export function sourceName(path: string): string {
  return path === STDIN ? '<stdin>' : path;
}

/** Reads every file (or stdin, once) before anything is rendered: a bad input prints no manifests. */
export async function readManifests(
  paths: readonly string[],
  readStdin: () => Promise<string>,
): Promise<ManifestSource[]> {
  const sources: ManifestSource[] = [];
  for (const path of paths) {
    const name = sourceName(path);
    let text: string;
    if (path === STDIN) text = await readStdin();
    else {
      try {
        text = readFileSync(path, 'utf8');
      } catch (e) {
        const code = (e as NodeJS.ErrnoException).code ?? 'error';
        throw new InputError(
          name,
          undefined,
          `cannot be read (${code})`,
          code === 'EISDIR'
            ? 'name a file; for a directory use e.g. kubectl kustomize DIR | ... -f -'
            : 'check the path',
        );
      }
    }
    sources.push(parseManifests(name, text));
  }
  return sources;
}

/** A file's manifests: JSON when it starts with `{` or `[`, else a YAML stream. */
export function parseManifests(name: string, text: string): ManifestSource {
  const body = text.replace(/^\uFEFF/, '');
  return /^\s*[{[]/.test(body) ? parseJson(name, body) : parseYaml(name, body);
}

function parseJson(name: string, text: string): ManifestSource {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    // V8 names the place as "(line 3 column 1)" where it can; the rest of its message quotes the text.
    const at = /\(line \d+ column \d+\)/.exec((e as Error).message)?.[0];
    throw new InputError(name, 1, `is not valid JSON${at ? ` ${at}` : ''}`, 'fix the syntax');
  }
  if (!isJsonObject(value))
    throw new InputError(
      name,
      1,
      'is not a Kubernetes object (a JSON object with apiVersion and kind)',
      'write one object, or several in a kind: List',
    );
  return { name, format: 'json', documents: [{ index: 1, value }], indentSeq: true };
}

function parseYaml(name: string, text: string): ManifestSource {
  const parsed = parseAllDocuments(text, YAML_OPTIONS);
  // An empty stream (nothing, or only comments) parses to an EmptyStream, not an array.
  const docs = Array.isArray(parsed) ? parsed : [];
  const documents: ManifestDocument[] = [];
  docs.forEach((doc, i) => {
    const error = doc.errors[0];
    if (error) {
      const at = error.linePos?.[0];
      throw new InputError(
        name,
        i + 1,
        `is not valid YAML (${error.code}${at ? ` at line ${at.line}, column ${at.col}` : ''})`,
        'fix the syntax',
      );
    }
    let value: unknown;
    try {
      // toJS caps alias expansion (a "billion laughs" stream throws here).
      value = doc.toJS();
    } catch {
      throw new InputError(
        name,
        i + 1,
        'has aliases that cannot be resolved, or too many',
        'write the values out',
      );
    }
    // Empty documents (`---` twice, or at the end) are skipped, as kubectl does.
    if (value === null || value === undefined) return;
    if (!isJsonObject(value))
      throw new InputError(
        name,
        i + 1,
        'is not a Kubernetes object (a mapping with apiVersion and kind)',
        'remove it, or write the object as a mapping',
      );
    documents.push({ index: i + 1, value, yaml: doc });
  });
  return { name, format: 'yaml', documents, indentSeq: !flushSequences(text) };
}

/** Whether the first block sequence under a key starts at the key's own column (`containers:\n- name`). */
function flushSequences(text: string): boolean {
  const m = /^( *)[^\s#-][^\n]*:[ \t]*\n(?:[ \t]*(?:#[^\n]*)?\n)*( *)- /m.exec(text);
  return m !== null && m[1] === m[2];
}
