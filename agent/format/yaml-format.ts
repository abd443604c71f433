import { stringify, type Tags } from 'yaml';
import type { Json } from './structured-formats.ts';

/**
 * FORMAT=yaml: YAML text that YAML 1.2 and YAML 1.1 readers load back to the same JSON value (tested
 * with the yaml package in both modes and with PyYAML, the strictest 1.1 reader at hand).
 */
export function toYamlText(value: Json): string {
  return stringify(value, {
    // Strings a 1.1 reader would take for a boolean, number, date or merge key (yes, on, 0o17,
    // 1:20, 2001-12-14, <<) get quoted too, not only the ones the 1.2 core schema resolves.
    compat: 'yaml-1.1',
    customTags: saferTags,
    // No folding: a folded long line reads back the same only if every reader folds alike.
    lineWidth: 0,
    blockQuote: 'literal',
    aliasDuplicateObjects: false,
  });
}

const STR = 'tag:yaml.org,2002:str';
const NUMBER_TAGS = new Set(['tag:yaml.org,2002:int', 'tag:yaml.org,2002:float']);

// Characters the yaml package writes raw, even in double quotes, that a reader may reject or change:
// C0/C1 controls and DEL are not printable YAML, CR/NEL/LS/PS are line breaks in 1.1 (folded or
// normalised), a BOM is dropped at a document start, U+FFFE/U+FFFF are not printable, a lone
// surrogate has no UTF-8 form, and PyYAML fails on a tab inside a plain scalar. \p{Cs} only matches
// lone surrogates under the `u` flag.
// eslint-disable-next-line no-control-regex
const NEEDS_ESCAPE = /[\0-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff]|\p{Cs}/u;
const DOUBLE_QUOTED_ESCAPES = new RegExp(`["\\\\\\n]|${NEEDS_ESCAPE.source}`, 'gu');

function saferTags(tags: Tags): Tags {
  return [
    ...tags.map((tag) => {
      if (typeof tag === 'string' || tag.collection !== undefined || tag.stringify === undefined) return tag;
      const base = tag.stringify;
      if (tag.tag === STR)
        return {
          ...tag,
          stringify: (...args: Parameters<typeof base>) =>
            typeof args[0].value === 'string' && NEEDS_ESCAPE.test(args[0].value)
              ? escapedDoubleQuoted(args[0].value)
              : // A root block scalar at column 0 is valid YAML 1.2, but PyYAML rejects it.
                base(args[0], { ...args[1], forceBlockIndent: true }, args[2], args[3]),
        };
      if (NUMBER_TAGS.has(tag.tag))
        // PyYAML reads 1e+21 as a string: its floats need a ".", so write 1.0e+21.
        return {
          ...tag,
          stringify: (...args: Parameters<typeof base>) => base(...args).replace(/^(-?\d+)e/, '$1.0e'),
        };
      return tag;
    }),
    // PyYAML resolves a plain `=` to its !!value tag, which safe_load cannot construct. A tag with a
    // test and no identify only makes the writer quote strings that match it.
    { tag: 'tag:yaml.org,2002:value', default: true, test: /^=$/, resolve: (source: string) => source },
  ];
}

/** A one-line double-quoted scalar with every doubtful character as an escape. */
function escapedDoubleQuoted(text: string): string {
  return `"${text.replace(DOUBLE_QUOTED_ESCAPES, (ch) => {
    if (ch === '\n') return '\\n';
    if (ch === '\t') return '\\t';
    if (ch === '"' || ch === '\\') return `\\${ch}`;
    const code = ch.charCodeAt(0);
    return code <= 0xff ? `\\x${hex(code, 2)}` : `\\u${hex(code, 4)}`;
  })}"`;
}

function hex(code: number, digits: number): string {
  return code.toString(16).toUpperCase().padStart(digits, '0');
}
