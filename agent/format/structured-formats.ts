import { quote } from '../contract/errors.ts';

/** A parsed secret value, or a `#key` subtree of one. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** A value that cannot be written in a format: describes its shape, never quotes a value. */
export class ValueFormatError extends Error {
  readonly problem: string;
  readonly fix: string;

  constructor(problem: string, fix: string) {
    super(problem);
    this.name = 'ValueFormatError';
    this.problem = problem;
    this.fix = fix;
  }
}

/** FORMAT=json: any JSON value, indented for people reading the mounted file. */
export function toJsonText(value: Json): string {
  return `${JSON.stringify(value, null, 2)}\n`;
}

/**
 * FORMAT=properties, as java.util.Properties.load reads it. Nested objects become dotted keys (the
 * Spring convention); other non-strings are written as JSON text.
 */
export function toPropertiesText(value: Json): string {
  const lines: string[] = [];
  const written = new Set<string>();
  const walk = (object: { [key: string]: Json }, prefix: string): void => {
    for (const [name, child] of Object.entries(object)) {
      const key = prefix + name;
      if (isObject(child)) {
        walk(child, `${key}.`);
        continue;
      }
      if (written.has(key))
        throw new ValueFormatError(
          `two keys (of ${key.length} characters once joined) are the same once nested objects are flattened with "."`,
          'rename one of the keys, or use FORMAT=json or FORMAT=yaml',
        );
      written.add(key);
      const escapedKey = key.replace(PROPERTIES_KEY_ESCAPES, escapeProperties);
      lines.push(`${escapedKey}=${leafText(child).replace(PROPERTIES_VALUE_ESCAPES, escapeProperties)}\n`);
    }
  };
  walk(needObject(value, 'properties'), '');
  return lines.join('');
}

// Load ends a key at an unescaped space, `=` or `:`, and skips a line starting with `#` or `!`. In a
// value only a leading space would be dropped: `=`, `:`, `#` stay plain so URLs and base64 read well.
// Everything outside printable ASCII is \uXXXX because load(InputStream) decodes ISO-8859-1.
const PROPERTIES_KEY_ESCAPES = /[\\ =:#!]|[^\x20-\x7e]/g;
const PROPERTIES_VALUE_ESCAPES = /\\|^ |[^\x20-\x7e]/g;
const NAMED_ESCAPES = new Map([
  ['\t', '\\t'],
  ['\n', '\\n'],
  ['\r', '\\r'],
  ['\f', '\\f'],
]);

// Runs per UTF-16 code unit (no `u` flag), so astral characters become surrogate pairs as Java expects.
function escapeProperties(ch: string): string {
  const code = ch.charCodeAt(0);
  if (code >= 0x20 && code <= 0x7e) return `\\${ch}`;
  return NAMED_ESCAPES.get(ch) ?? `\\u${code.toString(16).toUpperCase().padStart(4, '0')}`;
}

/** A key of a value, as an error shows it: by its place and length, never its characters. */
export function keyShape(index: number, keys: number, name: string): string {
  return `key ${index + 1} of ${keys} (of ${name.length} characters)`;
}

const SHELL_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** What env and dotenv write: the top-level keys as variable names, their values as text. */
function shellVariables(value: Json, format: 'env' | 'dotenv'): [name: string, text: string][] {
  const object = needObject(value, format);
  const keys = Object.keys(object).length;
  return Object.entries(object).map(([name, child], i) => {
    // A key that is no variable name may be anything, a pasted secret too: described, never quoted.
    if (!SHELL_NAME.test(name))
      throw new ValueFormatError(
        `${keyShape(i, keys, name)} is not a valid ${format === 'env' ? 'shell ' : ''}variable name`,
        'use keys of letters, digits and _ not starting with a digit',
      );
    return [name, leafText(child)];
  });
}

/**
 * FORMAT=dotenv: `NAME='value'` lines. Single quotes are literal in POSIX sh and in the common
 * dotenv parsers; a value holding one is double-quoted with sh's escapes instead.
 */
export function toDotenvText(value: Json): string {
  return shellVariables(value, 'dotenv')
    .map(([name, text]) => {
      const quoted = text.includes("'") ? `"${text.replace(/[\\"$`]/g, (c) => `\\${c}`)}"` : `'${text}'`;
      return `${name}=${quoted}\n`;
    })
    .join('');
}

/** FORMAT=env: `export NAME='value'` lines for `. file` in a POSIX shell. Non-strings as JSON text. */
export function toShellEnvText(value: Json): string {
  return shellVariables(value, 'env')
    .map(([name, text]) => {
      // Shell strings are C strings: the value would end at the NUL without any error.
      if (text.includes('\0'))
        throw new ValueFormatError(
          `key ${quote(name)} holds a NUL character, which a shell variable cannot carry`,
          'use FORMAT=json, yaml or properties, or FORMAT=raw with #key',
        );
      // The file is UTF-8, which has no bytes for half a surrogate pair: it would turn into U+FFFD.
      if (!text.isWellFormed())
        throw new ValueFormatError(
          `key ${quote(name)} holds a lone UTF-16 surrogate, which a UTF-8 file cannot carry`,
          'use FORMAT=json, yaml or properties, or fix the value',
        );
      // Nothing is special inside single quotes except the quote itself: close, escape it, reopen.
      return `export ${name}='${text.replaceAll("'", "'\\''")}'\n`;
    })
    .join('');
}

function leafText(value: Json): string {
  return typeof value === 'string' ? value : JSON.stringify(value);
}

export function isObject(value: Json): value is { [key: string]: Json } {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function needObject(value: Json, format: string): { [key: string]: Json } {
  if (isObject(value)) return value;
  throw new ValueFormatError(
    `FORMAT=${format} needs a JSON object, and the value is ${shape(value)}`,
    'store the secret as a JSON object, or use FORMAT=raw',
  );
}

/** What a value is, in words that never include the value itself. */
function shape(value: Json): string {
  if (value === null) return 'null';
  if (typeof value === 'string') return `a string of ${value.length} characters`;
  if (Array.isArray(value)) return `an array of ${value.length} items`;
  return `a ${typeof value}`;
}
