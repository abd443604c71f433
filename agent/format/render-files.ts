import type { SecretSpec } from '../contract/agent-config.ts';
import { ConfigError, quote } from '../contract/errors.ts';
import { validateRelativePath } from '../contract/path.ts';
import { sourceKey } from '../contract/reference.ts';
import { MAX_SECRET_BYTES } from '../providers/provider.ts';
import {
  ValueFormatError,
  keyShape,
  isObject,
  toDotenvText,
  toJsonText,
  toPropertiesText,
  toShellEnvText,
  type Json,
} from './structured-formats.ts';

/** One file to write, relative to the secrets directory. */
export interface FileEntry {
  readonly path: string;
  readonly bytes: Uint8Array;
  readonly mode: number;
}

/**
 * A fetched value that does not fit the requested format. The message describes the value's shape
 * (not JSON, not an object, N keys) and never quotes it: JSON.parse messages echo the input, so they
 * are dropped.
 */
export class SecretFormatError extends Error {
  readonly secretId: string;
  readonly fix: string;

  constructor(secretId: string, problem: string, fix: string) {
    super(problem);
    this.name = 'SecretFormatError';
    this.secretId = secretId;
    this.fix = fix;
  }
}

/**
 * The formats whose code loads only when a secret uses them (agent/format/load-formats.ts): the
 * template engine and the YAML writer. Both throw ValueFormatError for a value that does not fit.
 */
export interface FormatKit {
  readonly yaml?: (value: Json) => string;
  /** Renders `spec`'s template over its value and, by name, the other secrets' (`valueOf`). */
  readonly template?: (
    spec: SecretSpec,
    bytes: Uint8Array,
    valueOf: (name: string) => Uint8Array | undefined,
  ) => string;
}

/**
 * renderFiles' `valueOf` over a caller's store of fetched values by source (init's outcomes, the
 * sidecar's last values): a named secret's value, for templates that read it.
 */
export function valuesByName(
  secrets: readonly SecretSpec[],
  valueOfSource: (source: string) => Uint8Array | undefined,
): (name: string) => Uint8Array | undefined {
  const sources = new Map(
    secrets.flatMap((s) => (s.name === undefined ? [] : [[s.name, sourceKey(s.ref)] as const])),
  );
  return (name) => {
    const source = sources.get(name);
    return source === undefined ? undefined : valueOfSource(source);
  };
}

const NO_KIT: FormatKit = {};
const NO_VALUES = (): undefined => undefined;

/**
 * Turns one fetched value into the files its spec asks for. `valueOf` gives a named secret's fetched
 * value, for templates that read other secrets.
 */
export function renderFiles(
  spec: SecretSpec,
  bytes: Uint8Array,
  kit: FormatKit = NO_KIT,
  valueOf: (name: string) => Uint8Array | undefined = NO_VALUES,
): FileEntry[] {
  try {
    return renderSecret(spec, bytes, kit, valueOf);
  } catch (e) {
    if (e instanceof ValueFormatError) throw new SecretFormatError(spec.id, e.problem, e.fix);
    throw e;
  }
}

function renderSecret(
  spec: SecretSpec,
  bytes: Uint8Array,
  kit: FormatKit,
  valueOf: (name: string) => Uint8Array | undefined,
): FileEntry[] {
  const fail = (problem: string, fix: string): never => {
    throw new SecretFormatError(spec.id, problem, fix);
  };
  const key = spec.ref.key;
  if (spec.format === 'raw' && key === undefined) return [entry(spec, spec.filename, bytes)];
  const text = (content: string) => [entry(spec, spec.filename, Buffer.from(content, 'utf8'))];
  if (spec.format === 'template') {
    if (!kit.template) throw new Error(`${spec.id}: FORMAT=template without a loaded template engine`);
    return text(kit.template(spec, bytes, valueOf));
  }

  const document = parseJson(spec, bytes);
  let value: Json = document;
  if (key !== undefined) {
    if (!isObject(document))
      return fail(
        'the value is not a JSON object, so #key cannot pick from it',
        'store the secret as a JSON object, or drop #key',
      );
    if (!Object.hasOwn(document, key)) {
      return fail(
        `the JSON object has no key ${JSON.stringify(key)} (it has ${Object.keys(document).length} keys)`,
        'check the #key spelling against the secret’s keys',
      );
    }
    value = document[key]!;
  }

  switch (spec.format) {
    case 'raw':
      return [
        entry(
          spec,
          spec.filename,
          Buffer.from(typeof value === 'string' ? value : JSON.stringify(value), 'utf8'),
        ),
      ];
    case 'split': {
      if (!isObject(value))
        return fail(
          'FORMAT=split needs a JSON object',
          'store the secret as a JSON object, or use FORMAT=raw',
        );
      const keys = Object.keys(value).length;
      return Object.entries(value).map(([name, v], i) => {
        // A key that is no file name may be anything, a pasted secret too: described, never quoted.
        const described = keyShape(i, keys, name);
        if (name.includes('/'))
          fail(`${described} contains "/"`, 'use keys that are plain file names, or FORMAT=raw');
        try {
          validateRelativePath(name, `${spec.id} ${described}`);
        } catch (e) {
          if (e instanceof ConfigError)
            fail(
              `${described}: ${e.problem.split(quote(name)).join('the key')}`,
              'use keys that are plain file names, or FORMAT=raw',
            );
          throw e;
        }
        const path = spec.filename === '' ? name : `${spec.filename}/${name}`;
        return entry(spec, path, Buffer.from(typeof v === 'string' ? v : JSON.stringify(v), 'utf8'));
      });
    }
    case 'dotenv':
      return text(toDotenvText(value));
    case 'env':
      return text(toShellEnvText(value));
    case 'json':
      return text(toJsonText(value));
    case 'properties':
      return text(toPropertiesText(value));
    case 'yaml':
      if (!kit.yaml) throw new Error(`${spec.id}: FORMAT=yaml without a loaded YAML writer`);
      return text(kit.yaml(value));
  }
}

function entry(spec: SecretSpec, path: string, bytes: Uint8Array): FileEntry {
  if (bytes.byteLength > MAX_SECRET_BYTES) {
    throw new SecretFormatError(
      spec.id,
      `file ${JSON.stringify(path)} would be ${bytes.byteLength} bytes`,
      'keep each file at most 1 MiB',
    );
  }
  return { path, bytes, mode: spec.mode };
}

function parseJson(spec: SecretSpec, bytes: Uint8Array): Json {
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    throw new SecretFormatError(
      spec.id,
      `the value is not UTF-8 text (${bytes.byteLength} bytes)`,
      'binary secrets can only be written with FORMAT=raw and no #key',
    );
  }
  try {
    return JSON.parse(text) as Json;
  } catch {
    // The parser's own message quotes the input; never pass it on.
    throw new SecretFormatError(
      spec.id,
      `the value is not valid JSON (${bytes.byteLength} bytes)`,
      'store the secret as a JSON object, or use FORMAT=raw without #key',
    );
  }
}
