import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { parse } from 'yaml';
import {
  ValueFormatError,
  toJsonText,
  toPropertiesText,
  toShellEnvText,
  type Json,
} from '../../agent/format/structured-formats.ts';
import { toYamlText } from '../../agent/format/yaml-format.ts';
import { assertNoCanary, canary } from '../support/canary.ts';

/**
 * Every format is checked against a real reader where one exists (sh, bash, the yaml package in 1.2
 * and 1.1 mode, PyYAML, java.util.Properties), so a wrong escape fails here rather than in a pod.
 * A reader missing from the machine fails its test with the install line (.ci/run installs them);
 * the yaml package and the properties reader below need nothing.
 */

// ~1 MiB each: one line that must not be folded, and many lines with quotes and backslashes.
const LONG_LINE = 'word: #x '.repeat(116_000);
const LONG_LINES = 'a "line" with \\ and \' and trailing space \n'.repeat(25_000);

/** Awkward string values, under names that are also valid shell variables. */
const AWKWARD: Record<string, string> = {
  NEWLINES: 'first\nsecond\n\nthird',
  TRAILING_NEWLINES: '-----END KEY-----\n\n',
  ONLY_NEWLINE: '\n',
  LEADING_NEWLINES: '\n\n #x',
  CRLF: 'a\r\nb\r',
  SINGLE_QUOTES: "it's 'quoted''",
  DOUBLE_QUOTES: 'say "hi" ""',
  EQUALS: 'a=b==',
  COLONS: 'jdbc:postgresql://db:5432/app?x=1',
  HASH: '#not a comment',
  BANG: '!not a comment',
  BACKSLASHES: 'C:\\dir\\ \\n \\u0041 \\',
  SPACES: '  leading and trailing  ',
  SPACED_LINES: 'line  \n  indented\n ',
  TABS: '\tx\ty\t',
  CONTROLS: '\x01\x1b[0m\x7f\x85\u2028\u2029\ufeff',
  UNICODE: 'é 日本 😀',
  EMPTY: '',
  ZERO_PADDED: '0123',
  EXPONENT: '1e3',
  OCTAL: '0o17',
  HEX: '0x1F',
  FRACTION: '.5',
  SEXAGESIMAL: '1:20',
  DATE: '2001-12-14',
  TRUE: 'true',
  YES: 'yes',
  ON: 'on',
  NO: 'N',
  NULL: 'null',
  TILDE: '~',
  MERGE: '<<',
  PYYAML_VALUE: '=',
  INDICATORS: '- & * [a] {b} | > ? @ `',
  SHELL: '$HOME `id` $(id) ${X:-y} \\$ !! ;exit 1',
  YAML_MARKERS: '---\n...\n%YAML 1.1\n- item\n? key\n: value',
};
const LONG = { LONG_LINE, LONG_LINES };

/** Keys that need escaping somewhere (properties, YAML). */
const AWKWARD_KEYS = [
  'a b',
  'k=v',
  'c:d',
  '#hash',
  '!bang',
  'tab\tkey',
  'new\nline',
  'é日本😀',
  '',
  ' lead',
  'back\\slash',
  'true',
  '0123',
  '<<',
  '=',
  '~',
  '- x',
];

const NON_STRINGS: { [key: string]: Json } = {
  port: 5432,
  ratio: -1.5,
  big: 1e21,
  tiny: 5e-324,
  enabled: true,
  disabled: false,
  nothing: null,
  list: ['a', 1, null, ['x'], { k: 'v' }],
  nested: { db: { host: 'h', port: 1 } },
  emptyObject: {},
  emptyList: [],
};

const keyed = (): { [key: string]: Json } =>
  Object.fromEntries(AWKWARD_KEYS.map((k, i) => [k, Object.values(AWKWARD)[i]!]));

/** Characters and tokens the formats treat specially. */
// prettier-ignore
const TOKENS = [
  '\n', '\r', '\t', ' ', "'", '"', '\\', '=', ':', '#', '!', '.', '-', '0', 'e', '$', '`', '~', '<<', 'true',
  'yes', 'null', '---', '%', '|', '>', '&', '*', '[', '{', 'é', '日本', '😀', '\x85', '\u2028', '\ufeff',
  '\x7f', '\x1b', '\0',
];
/** Strings made mostly of TOKENS, with any other code point mixed in. */
const awkwardText = fc.string({
  unit: fc.oneof(fc.constantFrom(...TOKENS), fc.string({ unit: 'binary', minLength: 1, maxLength: 1 })),
  maxLength: 12,
});
// fast-check types object members as optional; a generated value never holds undefined.
const awkwardJson = fc.jsonValue({ stringUnit: awkwardText, maxDepth: 3 }) as fc.Arbitrary<Json>;

/** JSON has no -0 worth keeping (JSON.stringify writes 0), and PyYAML reads -0 as 0. */
const withoutNegativeZero = (value: Json): Json => JSON.parse(JSON.stringify(value)) as Json;

function assertProblem(fn: () => unknown, problem: RegExp): void {
  assert.throws(fn, (e: unknown) => {
    assert.ok(e instanceof ValueFormatError, `expected a ValueFormatError, got ${String(e)}`);
    assert.match(e.problem, problem);
    assert.equal(e.message, e.problem);
    assert.ok(e.fix.length > 0);
    assertNoCanary(`${e.problem} ${e.fix} ${e.stack}`, 'a format problem');
    return true;
  });
}

/** A reader the test needs: missing, it fails loudly with the install line instead of skipping. */
function requireReader(command: string, args: string[], install: string): void {
  const run = spawnSync(command, args, { stdio: 'ignore' });
  assert.ok(run.error === undefined && run.status === 0, `${command} is needed for this test: ${install}`);
}

function withTempDir<T>(use: (dir: string) => T): T {
  const dir = mkdtempSync(join(tmpdir(), 'structured-formats-'));
  try {
    return use(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe('toJsonText', () => {
  it('indents by 2 and ends with a newline', () => {
    assert.equal(toJsonText({ a: [1, 'x'] }), '{\n  "a": [\n    1,\n    "x"\n  ]\n}\n');
    assert.equal(toJsonText('top'), '"top"\n');
  });

  it('parses back to the same value, awkward strings and keys included', () => {
    for (const value of [AWKWARD, LONG, keyed(), NON_STRINGS, 'x\n', null, 0, [], {}, { lone: '\ud800' }]) {
      assert.deepEqual(JSON.parse(toJsonText(value)), value);
    }
  });
});

describe('toYamlText', () => {
  const loadBoth = (text: string) => [parse(text) as unknown, parse(text, { version: '1.1' }) as unknown];

  it('quotes strings a YAML 1.2 or 1.1 reader would take for another type', () => {
    assert.equal(
      toYamlText({
        a: 'yes',
        b: '0123',
        c: '=',
        d: '',
        e: '0o17',
        f: '1:20',
        g: '<<',
        h: 'plain',
        '1': 'true',
      }),
      '"1": "true"\na: "yes"\nb: "0123"\nc: "="\nd: ""\ne: "0o17"\nf: "1:20"\ng: "<<"\nh: plain\n',
    );
  });

  it('writes multi-line strings as literal blocks, indented at the top level too', () => {
    assert.equal(toYamlText({ pem: 'a\nb\n' }), 'pem: |\n  a\n  b\n');
    assert.equal(toYamlText('x\ny\n'), '|\n  x\n  y\n');
  });

  it('escapes control, line-break-like and lone surrogate characters in double quotes', () => {
    assert.equal(
      toYamlText({ k: 'a\tb\x7f\x85\u2028\ufeff\ud800"\\\n' }),
      'k: "a\\tb\\x7F\\x85\\u2028\\uFEFF\\uD800\\"\\\\\\n"\n',
    );
    assert.deepEqual(loadBoth(toYamlText({ k: '\ud800x\udc00' })), [
      { k: '\ud800x\udc00' },
      { k: '\ud800x\udc00' },
    ]);
  });

  it('reads back the same with the yaml package as YAML 1.2 and 1.1', () => {
    const values: Json[] = [
      AWKWARD,
      LONG,
      keyed(),
      NON_STRINGS,
      Object.values(AWKWARD),
      null,
      true,
      0,
      -1.5,
      1e21,
      [],
      {},
    ];
    for (const value of [...values, ...Object.values(AWKWARD), LONG_LINES]) {
      assert.deepEqual(loadBoth(toYamlText(value)), [value, value]);
    }
  });

  it('does not fold a 1 MiB line', () => {
    assert.equal(toYamlText({ LONG_LINE }).split('\n').length, 2);
  });

  it('writes a repeated subtree in full, without anchors or aliases', () => {
    const shared = { user: 'u' };
    const text = toYamlText({ a: shared, b: shared });
    assert.equal(text, 'a:\n  user: u\nb:\n  user: u\n');
  });

  it('round-trips generated JSON values', () => {
    fc.assert(
      fc.property(awkwardJson, (value) => {
        assert.deepEqual(loadBoth(toYamlText(value)), [value, value]);
      }),
      { numRuns: 300 },
    );
  });

  // PyYAML's own parser is pure Python and slow on long strings, so only libyaml's reads LONG.
  for (const loader of ['SafeLoader', 'CSafeLoader']) {
    it(`reads back the same with PyYAML's ${loader}`, () => {
      requireReader(
        'python3',
        ['-c', `import yaml; yaml.${loader}`],
        `PyYAML with libyaml (${loader}): apt-get install python3-yaml, or pip install pyyaml (moto brings it)`,
      );
      const values: Json[] = [
        AWKWARD,
        ...(loader === 'CSafeLoader' ? [LONG] : []),
        keyed(),
        NON_STRINGS,
        ...Object.values(AWKWARD),
        ...fc.sample(awkwardJson, { numRuns: 300, seed: 7 }).map(withoutNegativeZero),
      ];
      const script = [
        'import sys, json, yaml',
        'out = []',
        'for text in json.load(sys.stdin):',
        `    try: out.append({"value": yaml.load(text, Loader=yaml.${loader})})`,
        '    except Exception as e: out.append({"error": str(e)})',
        'json.dump(out, sys.stdout)',
      ].join('\n');
      const stdout = execFileSync('python3', ['-c', script], {
        input: JSON.stringify(values.map(toYamlText)),
        maxBuffer: 256 << 20,
      });
      const loaded = JSON.parse(stdout.toString('utf8')) as { value?: Json; error?: string }[];
      values.forEach((value, i) => assert.deepEqual(loaded[i], { value }, `value ${i}`));
    });
  }
});

/**
 * An independent reader following java.util.Properties.load(InputStream): ISO-8859-1 bytes, `#`/`!`
 * comment lines, key ended by an unescaped `=`, `:` or whitespace, whitespace and one separator
 * skipped before the value, and `\t \n \r \f \uXXXX \x` escapes. Line continuations are never
 * emitted, so a line ending in an odd number of backslashes is an error here.
 */
function loadProperties(text: string): Map<string, string> {
  const entries = new Map<string, string>();
  const latin1 = Buffer.from(text, 'utf8').toString('latin1');
  assert.ok(latin1.endsWith('\n') || latin1 === '', 'every line ends with \\n');
  for (const line of latin1.slice(0, -1).split('\n')) {
    assert.ok(!/(^|[^\\])(\\\\)*\\$/.test(line), 'no line continuations');
    const start = line.search(/[^ \t\f]/);
    if (start === -1 || line[start] === '#' || line[start] === '!') continue;
    let i = start;
    while (i < line.length && !/[=: \t\f]/.test(line[i]!)) i += line[i] === '\\' ? 2 : 1;
    const key = line.slice(start, i);
    let hasSeparator = false;
    while (i < line.length) {
      const c = line[i]!;
      if (c === '=' || c === ':') {
        if (hasSeparator) break;
        hasSeparator = true;
      } else if (c !== ' ' && c !== '\t' && c !== '\f') break;
      i++;
    }
    entries.set(unescapeProperties(key), unescapeProperties(line.slice(i)));
  }
  return entries;
}

function unescapeProperties(text: string): string {
  return text.replace(/\\(u[0-9a-fA-F]{4}|.)/g, (_, escape: string) => {
    if (escape.length === 5) return String.fromCharCode(parseInt(escape.slice(1), 16));
    return { t: '\t', n: '\n', r: '\r', f: '\f' }[escape] ?? escape;
  });
}

/** What the properties file should hold: nested keys dotted, non-strings as JSON; undefined on a clash. */
function flattened(object: { [key: string]: Json }, prefix = '', into = new Map<string, string>()) {
  for (const [name, value] of Object.entries(object)) {
    const key = prefix + name;
    if (typeof value === 'object' && value !== null && !Array.isArray(value)) {
      if (flattened(value, `${key}.`, into) === undefined) return undefined;
    } else if (into.has(key)) return undefined;
    else into.set(key, typeof value === 'string' ? value : JSON.stringify(value));
  }
  return into;
}

describe('toPropertiesText', () => {
  it('escapes keys and values as Properties.load reads them', () => {
    // `=` and `:` in a value need no escape: load only looks for the first separator in the key.
    assert.equal(toPropertiesText({ 'a b': 'x=y' }), 'a\\ b=x=y\n');
    assert.equal(toPropertiesText({ 'k=:#!\\ \t\n\r\f': 'v' }), 'k\\=\\:\\#\\!\\\\\\ \\t\\n\\r\\f=v\n');
    // Only the leading space of a value would be skipped; inner and trailing ones are kept.
    assert.equal(toPropertiesText({ k: ' a  =:#! \\ \t\n\r\f ' }), 'k=\\ a  =:#! \\\\ \\t\\n\\r\\f \n');
    assert.equal(toPropertiesText({ k: '#v', e: '' }), 'k=#v\ne=\n');
    // Load reads ISO-8859-1, so everything else is a UTF-16 escape: astral characters take two.
    assert.equal(
      toPropertiesText({ é: '日本😀\0\x7f\x1b' }),
      '\\u00E9=\\u65E5\\u672C\\uD83D\\uDE00\\u0000\\u007F\\u001B\n',
    );
  });

  it('flattens nested objects with "." and writes other values as JSON text', () => {
    assert.equal(
      toPropertiesText({ db: { host: 'x', port: 5432, opts: {} }, list: [1, 'a'], n: null, t: true }),
      'db.host=x\ndb.port=5432\nlist=[1,"a"]\nn=null\nt=true\n',
    );
    assert.equal(toPropertiesText({}), '');
  });

  it('reads back the same with an independent Properties.load reader', () => {
    for (const value of [AWKWARD, LONG, keyed(), NON_STRINGS, { lone: '\ud800', pair: '\udc00\ud800' }]) {
      assert.deepEqual(loadProperties(toPropertiesText(value)), flattened(value));
    }
    fc.assert(
      fc.property(fc.dictionary(awkwardText, awkwardJson, { maxKeys: 5 }), (value) => {
        const expected = flattened(value);
        if (expected === undefined) assert.throws(() => toPropertiesText(value), ValueFormatError);
        else assert.deepEqual(loadProperties(toPropertiesText(value)), expected);
      }),
      { numRuns: 300 },
    );
  });

  it('reads back the same with java.util.Properties', () => {
    requireReader('java', ['-version'], 'java: apt-get install openjdk-17-jre-headless');
    // Prints each entry as hex UTF-16 code units, so no encoding stands between Java and the test.
    const reader = `
      import java.io.*; import java.util.*;
      public class Load {
        static final char[] H = "0123456789abcdef".toCharArray();
        static void hex(StringBuilder b, String s) {
          for (char c : s.toCharArray()) b.append(H[c >> 12]).append(H[(c >> 8) & 15]).append(H[(c >> 4) & 15]).append(H[c & 15]);
        }
        public static void main(String[] args) throws IOException {
          StringBuilder out = new StringBuilder();
          for (String file : args) {
            Properties p = new Properties();
            try (InputStream in = new FileInputStream(file)) { p.load(in); }
            for (String k : p.stringPropertyNames()) { hex(out, k); out.append(' '); hex(out, p.getProperty(k)); out.append('\\n'); }
            out.append("--\\n");
          }
          System.out.print(out);
        }
      }`;
    const values = [AWKWARD, LONG, keyed(), NON_STRINGS, { lone: '\ud800', pair: '\udc00\ud800' }];
    const stdout = withTempDir((dir) => {
      writeFileSync(join(dir, 'Load.java'), reader);
      const files = values.map((value, i) => {
        const file = join(dir, `${i}.properties`);
        writeFileSync(file, toPropertiesText(value));
        return file;
      });
      return execFileSync('java', [join(dir, 'Load.java'), ...files], { maxBuffer: 256 << 20 }).toString();
    });
    const fromHex = (hex: string) => Buffer.from(hex, 'hex').swap16().toString('utf16le');
    const loaded = stdout
      .split('--\n')
      .slice(0, -1)
      .map(
        (block) =>
          new Map(
            block
              .split('\n')
              .slice(0, -1)
              .map((line) => line.split(' ').map(fromHex) as [string, string]),
          ),
      );
    assert.deepEqual(
      loaded,
      values.map((value) => flattened(value)),
    );
  });

  it('needs a JSON object at the top level', () => {
    for (const value of [canary(), [canary()], null, 1, true]) {
      assertProblem(() => toPropertiesText(value), /^FORMAT=properties needs a JSON object/);
    }
    assertProblem(() => toPropertiesText(canary()), /a string of \d+ characters/);
  });

  it('refuses keys that collide once flattened, describing them by length, never quoting them (a key may be a pasted secret)', () => {
    assertProblem(
      () => toPropertiesText({ 'a.b': canary(), a: { b: canary() } }),
      /two keys \(of 3 characters once joined\) are the same/,
    );
    const key = canary('key');
    assertProblem(
      () => toPropertiesText({ a: { [key]: canary() }, [`a.${key}`]: canary() }),
      new RegExp(`two keys \\(of ${key.length + 2} characters once joined\\) are the same`),
    );
  });
});

/** Sources `text` in `shell` and returns the named variables' bytes, NUL-separated by printf. */
function sourceInShell(shell: string, text: string, names: readonly string[]): Buffer[] {
  const stdout = withTempDir((dir) => {
    const file = join(dir, 'secrets.env');
    writeFileSync(file, text);
    const script = `. "$1" && printf '%s\\0' ${names.map((name) => `"$${name}"`).join(' ')}`;
    return execFileSync(shell, ['-c', script, 'sh', file], {
      env: { PATH: process.env.PATH, LC_ALL: 'C' },
      // A quoting bug runs the value as commands (`yes` among them): fail fast instead of hanging.
      timeout: 20_000,
      maxBuffer: 64 << 20,
    });
  });
  const values: Buffer[] = [];
  for (let start = 0; start < stdout.length;) {
    const end = stdout.indexOf(0, start);
    values.push(stdout.subarray(start, end));
    start = end + 1;
  }
  return values;
}

describe('toShellEnvText', () => {
  it('writes export lines with single-quoted values', () => {
    assert.equal(
      toShellEnvText({ A: "it's", B: 'x\ny', C: 5, D: { e: [null] } }),
      "export A='it'\\''s'\nexport B='x\ny'\nexport C='5'\nexport D='{\"e\":[null]}'\n",
    );
    assert.equal(toShellEnvText({}), '');
  });

  for (const shell of ['/bin/sh', 'bash']) {
    it(`reads back the same bytes when sourced by ${shell}`, () => {
      requireReader(shell, ['-c', 'true'], `${shell}: apt-get install bash dash`);
      const value = { ...AWKWARD, ...LONG, ...NON_STRINGS };
      const names = Object.keys(value);
      const expected = Object.values(value).map((v) =>
        Buffer.from(typeof v === 'string' ? v : JSON.stringify(v)),
      );
      assert.deepEqual(sourceInShell(shell, toShellEnvText(value), names), expected);

      const generated = fc
        .sample(awkwardText, { numRuns: 300, seed: 11 })
        .filter((text) => !text.includes('\0') && text.isWellFormed());
      const variables = Object.fromEntries(generated.map((text, i) => [`V${i}`, text]));
      assert.deepEqual(
        sourceInShell(shell, toShellEnvText(variables), Object.keys(variables)),
        generated.map((text) => Buffer.from(text)),
      );
    });
  }

  it('needs a JSON object at the top level', () => {
    for (const value of [canary(), [canary()], null, 1, false]) {
      assertProblem(() => toShellEnvText(value), /^FORMAT=env needs a JSON object/);
    }
  });

  it('refuses keys that are not shell variable names, describing the key by place and length, never quoting it', () => {
    for (const name of ['1A', 'A-B', 'A B', '', 'É', 'A=B', "A'", `${canary('key')} x`]) {
      assertProblem(
        () => toShellEnvText({ GOOD: canary(), [name]: canary() }),
        new RegExp(`^key 2 of 2 \\(of ${name.length} characters\\) is not a valid shell variable name`),
      );
    }
  });

  it('refuses a NUL and a lone surrogate without quoting the value', () => {
    assertProblem(
      () => toShellEnvText({ X: `${canary()}\0${canary()}` }),
      /^key "X" holds a NUL character, which a shell variable cannot carry$/,
    );
    assertProblem(() => toShellEnvText({ X: `${canary()}\ud800` }), /^key "X" holds a lone UTF-16 surrogate/);
  });
});
