import fc from 'fast-check';
import { AGENT_SETTINGS } from '../../agent/contract/agent-settings.ts';
import type { SecretEnvInput } from '../../agent/contract/render-secret-env.ts';
import { SECRET_SETTINGS } from '../../agent/contract/secret-settings.ts';
import { validateRelativePath } from '../../agent/contract/path.ts';
import { PRODUCT_ANNOTATIONS } from '../../agent/contract/product-annotations.ts';
import { FILE_ANNOTATIONS } from '../../webhook/annotations/file-annotations.ts';
import { POD_ANNOTATIONS } from '../../webhook/annotations/pod-annotations.ts';
import { PREFIX } from '../../webhook/annotations/annotation.ts';
import { canary } from '../support/canary.ts';

/**
 * Generators for everything an attacker or a typo can hand the agent and the webhook: references,
 * durations, env maps, annotations, pods, file sets, secret values, config files. Valid forms are
 * mixed with near misses so both sides of every parser are reached.
 */

/** A fresh canary (a stand-in secret value) per generated value; its label keeps shrinking readable. */
export function canaryValue(label: string): fc.Arbitrary<string> {
  return fc.nat({ max: 999 }).map((n) => canary(`${label}${n}`));
}

/** Strings of any code point, control characters and lone surrogate halves excluded by fast-check. */
const anyText = (maxLength: number) =>
  fc.oneof(
    fc.string({ unit: 'binary', maxLength }),
    fc.string({ unit: 'grapheme', maxLength }),
    fc.string({ maxLength }),
  );

/** Joins a soup of tokens: near-valid strings that hit parser edges far more often than noise does. */
const tokenSoup = (tokens: readonly string[], maxLength = 8) =>
  fc
    .array(fc.oneof({ weight: 6, arbitrary: fc.constantFrom(...tokens) }, anyText(3)), { maxLength })
    .map((parts) => parts.join(''));

/** Small edits of a string: insert, delete, replace a character, truncate or duplicate a slice. */
function mutated(base: fc.Arbitrary<string>, alphabet: readonly string[]): fc.Arbitrary<string> {
  const edit = fc.tuple(
    fc.constantFrom('insert', 'delete', 'replace', 'truncate', 'duplicate'),
    fc.nat(),
    fc.constantFrom(...alphabet),
  );
  return fc.tuple(base, fc.array(edit, { minLength: 1, maxLength: 3 })).map(([text, edits]) => {
    let s = text;
    for (const [kind, at, ch] of edits) {
      const i = s.length === 0 ? 0 : at % (s.length + 1);
      if (kind === 'insert') s = s.slice(0, i) + ch + s.slice(i);
      else if (kind === 'delete') s = s.slice(0, i) + s.slice(i + 1);
      else if (kind === 'replace') s = s.slice(0, i) + ch + s.slice(i + 1);
      else if (kind === 'truncate') s = s.slice(0, i);
      else s = s.slice(0, i) + s.slice(i / 2, i) + s.slice(i);
    }
    return s;
  });
}

// ---------------------------------------------------------------- references

const awsName = fc.stringMatching(/^[A-Za-z0-9/_+=.@-]{1,40}$/);
const awsStage = fc.oneof(
  fc.constantFrom('AWSCURRENT', 'AWSPREVIOUS'),
  fc.stringMatching(/^[A-Za-z0-9_+=.@-]{1,20}$/),
);
const awsVersionId = fc.oneof(fc.uuid(), fc.stringMatching(/^[A-Za-z0-9-]{32,64}$/));
const awsOptions = fc.oneof(
  fc.constant(''),
  awsStage.map((s) => `?versionStage=${s}`),
  awsVersionId.map((id) => `?versionId=${id}`),
);
const awsRegion = fc.oneof(
  fc.constantFrom('eu-west-1', 'us-east-1', 'us-gov-west-1', 'ap-southeast-2', 'cn-north-1'),
  fc.stringMatching(/^[a-z]{2}(-[a-z]{1,9}){1,2}-\d{1,2}$/),
);
const awsArn = fc
  .tuple(
    fc.constantFrom('aws', 'aws-cn', 'aws-us-gov', 'aws-iso', 'aws-iso-b'),
    awsRegion,
    fc.stringMatching(/^\d{12}$/),
    awsName,
  )
  .map(
    ([partition, region, account, name]) =>
      `arn:${partition}:secretsmanager:${region}:${account}:secret:${name}`,
  );
const gcpProject = fc.oneof(
  fc.stringMatching(/^[a-z][a-z0-9-]{4,12}[a-z0-9]$/),
  fc.stringMatching(/^\d{1,20}$/),
);
const gcpSecret = fc.stringMatching(/^[A-Za-z0-9_-]{1,30}$/);
const gcpVersion = fc.oneof(
  fc.constant('latest'),
  fc.stringMatching(/^\d{1,19}$/),
  fc.stringMatching(/^[A-Za-z][A-Za-z0-9_-]{0,20}$/),
);
const vaultSegment = fc.stringMatching(/^[A-Za-z0-9_.@+=:-]{1,12}$/).filter((s) => s !== '.' && s !== '..');
const jsonKey = fc.stringMatching(/^[^\s\0]{1,16}$/);

/** A reference the grammar accepts, in every form, with options and #key. */
export const validReference: fc.Arbitrary<string> = fc
  .tuple(
    fc.oneof(
      fc.tuple(awsArn, awsOptions).map(([a, o]) => a + o),
      fc.tuple(awsName, awsOptions).map(([n, o]) => `aws:${n}${o}`),
      fc
        .tuple(gcpProject, gcpSecret, fc.option(gcpVersion, { nil: undefined }))
        .map(([p, s, v]) => `projects/${p}/secrets/${s}${v === undefined ? '' : `/versions/${v}`}`),
      fc
        .tuple(gcpSecret, fc.option(gcpVersion, { nil: undefined }))
        .map(([s, v]) => `gcp:${s}${v === undefined ? '' : `/versions/${v}`}`),
      fc
        .tuple(
          fc.array(vaultSegment, { minLength: 1, maxLength: 4 }),
          fc.option(fc.integer({ min: 1, max: 9_999_999_999 }), { nil: undefined }),
        )
        .map(([segs, v]) => `vault:${segs.join('/')}${v === undefined ? '' : `?version=${v}`}`),
      fc.stringMatching(/^[^\s\0?#]{1,30}$/).map((p) => `file:${p}`),
      fc
        .tuple(
          fc.stringMatching(/^[A-Za-z0-9._-]{1,20}$/).filter((h) => h !== '.' && h !== '..'),
          fc.stringMatching(/^[^\s\0?#-][^\s\0?#]{0,29}$/),
        )
        .map(([helper, argument]) => `exec:${helper}/${argument}`),
    ),
    fc.option(jsonKey, { nil: undefined }),
  )
  .map(([ref, key]) => (key === undefined ? ref : `${ref}#${key}`));

const REFERENCE_TOKENS = [
  'arn:',
  'aws:',
  'aws',
  'aws-cn',
  'gcp:',
  'vault:',
  'file:',
  'exec:',
  'projects/',
  '/secrets/',
  '/versions/',
  'secretsmanager:',
  'secret:',
  ':',
  '?',
  '&',
  '=',
  '#',
  '/',
  '//',
  '.',
  '..',
  'versionStage',
  'versionId',
  'version',
  'latest',
  '0',
  '1',
  '123456789012',
  'eu-west-1',
  'my-project',
  'db',
  'secret/data/app',
  ' ',
  '\t',
  '\0',
  '\u00a0',
  '\u2028',
  'é',
  '😀',
  '%2F',
  'AWSCURRENT',
];
const REFERENCE_ALPHABET = ['a', '/', ':', '?', '#', '=', '&', '.', '-', ' ', '\0', 'é', '0', '\u200b'];

/** Valid, near-valid and hostile reference text. */
export const anyReference: fc.Arbitrary<string> = fc.oneof(
  { weight: 3, arbitrary: validReference },
  { weight: 4, arbitrary: mutated(validReference, REFERENCE_ALPHABET) },
  { weight: 3, arbitrary: tokenSoup(REFERENCE_TOKENS) },
  { weight: 1, arbitrary: anyText(40) },
  { weight: 1, arbitrary: fc.integer({ min: 2000, max: 2100 }).map((n) => `aws:${'a'.repeat(n)}`) },
);

// ---------------------------------------------------------------- durations

const DURATION_TOKENS = [
  '0',
  '1',
  '5',
  '12',
  '007',
  '1.5',
  '.5',
  '1.',
  '.',
  'ns',
  'us',
  'µs',
  'μs',
  'ms',
  's',
  'm',
  'h',
  'd',
  '+',
  '-',
  'e3',
  ' ',
  '9999999999',
  'S',
  'H',
  '٣',
];

/** Go-ish duration text: valid forms, token soups and noise. */
export const durationText: fc.Arbitrary<string> = fc.oneof(
  { weight: 5, arbitrary: tokenSoup(DURATION_TOKENS, 6) },
  {
    weight: 3,
    arbitrary: fc
      .array(
        fc.tuple(
          fc.oneof(fc.stringMatching(/^\d{1,6}$/), fc.stringMatching(/^\d{0,4}\.\d{1,4}$/)),
          fc.constantFrom('ns', 'us', 'µs', 'ms', 's', 'm', 'h'),
        ),
        { minLength: 1, maxLength: 4 },
      )
      .map((parts) => parts.map(([n, u]) => n + u).join('')),
  },
  { weight: 1, arbitrary: anyText(12) },
  { weight: 1, arbitrary: fc.integer({ min: 20, max: 40 }).map((n) => '1s'.repeat(n)) },
);

// ---------------------------------------------------------------- paths

const SEGMENTS = [
  'a',
  'b',
  'db',
  'password',
  'x y',
  '.hidden',
  'ü',
  'ß',
  '😀',
  'a:b',
  'link -> ..',
  '..',
  '.',
  '..data',
  '..x',
  '...',
  'a\u0000b',
  'a\u0001',
  'a\\b',
  'a\u007f',
  '\u202e',
  'con',
  '-',
  '~',
  '$HOME',
  'x'.repeat(255),
  'é'.repeat(128),
];

/** Relative, absolute, escaping, doubled-slash, control-char and over-long paths. */
export const anyRelativePath: fc.Arbitrary<string> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.array(fc.constantFrom(...SEGMENTS), { minLength: 1, maxLength: 4 }).map((s) => s.join('/')),
  },
  {
    weight: 2,
    arbitrary: fc
      .tuple(
        fc.constantFrom('/', '//', '../', './', '', 'a//', '/etc/'),
        fc.constantFrom(...SEGMENTS),
        fc.constantFrom('', '/', '/x'),
      )
      .map(([a, b, c]) => a + b + c),
  },
  { weight: 1, arbitrary: anyText(20) },
  { weight: 1, arbitrary: fc.integer({ min: 1000, max: 2100 }).map((n) => 'd/'.repeat(n) + 'f') },
);

/** A path segment validateRelativePath accepts. */
export const validSegment: fc.Arbitrary<string> = fc
  .oneof(
    fc.stringMatching(/^[A-Za-z0-9_][A-Za-z0-9_.-]{0,15}$/),
    fc.string({ unit: 'grapheme', minLength: 1, maxLength: 6 }),
  )
  .filter((s) => !s.includes('/') && isValidPath(s));

export function isValidPath(path: string): boolean {
  try {
    validateRelativePath(path, 'path');
    return true;
  } catch {
    return false;
  }
}

// ---------------------------------------------------------------- agent env

const SETTING_SAMPLES: Readonly<Record<string, readonly string[]>> = {
  AGENT_MODE: ['init', 'sidecar', 'Init', ''],
  SECRETS_DIR: ['/tmp', '/etc/secrets', 'relative', '/a\0b'],
  FILE_MODE: ['0400', '440', '0o644', '0777', '0200', '04000', '8'],
  INIT_DEADLINE: ['60s', '1s', '1h', '0.5s', '2h', '0'],
  REQUIRE_MEMORY_FS: ['true', 'false', 'TRUE', '1'],
  LOG_LEVEL: ['info', 'silent', 'verbose'],
  POD_NAMESPACE: ['apps', 'a b', 'x'.repeat(254)],
  POD_NAME: ['web-1', ''],
  POD_UID: ['6d1f0c5e-27a1-4a1e-9b55-0d6e8c0f2a11'],
  REFRESH_INTERVAL: ['5m', '1s', '24h', '25h', '999ms'],
  AGENT_HTTP_ADDR: ['0.0.0.0:8099', ':0', '[::1]:9000', '127.0.0.1:65536', 'host'],
  ROTATION_SIGNAL: ['SIGHUP', 'HUP', 'SIGKILL', 'USR1'],
  ROTATION_SIGNAL_PROCESS: ['nginx', ' '],
  ROTATION_SIGNAL_PIDFILE: ['/run/app.pid', 'app.pid'],
  ROTATION_HTTP_URL: [
    'POST http://127.0.0.1:8080/-/reload',
    'http://a',
    'GET https://x/y',
    'ftp://x',
    'PUT  http://a',
  ],
  ROTATION_COMMAND: ['/bin/reload', ''],
  RESTART_ON_CHANGE: ['true', 'false', 'yes'],
  RESTART_DELETE_BARE_POD: ['true', 'no'],
  AGENT_CONFIG_FILE: ['/etc/agent.yaml', 'agent.yaml'],
  EXIT_WITH_PROCESS: ['app', '\t'],
  SERVICE_ACCOUNT_DIR: ['/var/run/secrets/kubernetes.io/serviceaccount', 'sa'],
  SECRET_FILENAME: ['secret', '../x', 'a/b', ''],
};

const SECRET_SAMPLES: Readonly<Record<string, fc.Arbitrary<string>>> = {
  REF: anyReference,
  FILENAME: fc.oneof(anyRelativePath, fc.constant('')),
  FORMAT: fc.constantFrom('raw', 'split', 'dotenv', 'json', ''),
  MODE: fc.constantFrom('0400', '0440', '0200', '999', '0o600'),
  REFRESH_INTERVAL: durationText,
};

const indexText = fc.oneof(
  { weight: 8, arbitrary: fc.nat({ max: 4 }).map(String) },
  { weight: 1, arbitrary: fc.constantFrom('00', '01', '007', '10000', '9999', '99999999999999999999') },
);

const envEntry: fc.Arbitrary<[string, string | undefined]> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc
      .constantFrom(...Object.keys(AGENT_SETTINGS))
      .chain((name) =>
        fc.tuple(
          fc.constant(name),
          fc.oneof(
            { weight: 3, arbitrary: fc.constantFrom(...(SETTING_SAMPLES[name] ?? [''])) },
            anyText(12),
          ),
        ),
      ),
  },
  {
    weight: 8,
    arbitrary: fc
      .tuple(
        indexText,
        fc.oneof(
          { weight: 6, arbitrary: fc.constantFrom(...Object.keys(SECRET_SETTINGS)) },
          fc.stringMatching(/^[A-Z0-9_]{1,8}$/),
        ),
      )
      .chain(([n, suffix]) =>
        fc.tuple(fc.constant(`SECRET_${n}_${suffix}`), SECRET_SAMPLES[suffix] ?? anyText(10)),
      ),
  },
  { weight: 1, arbitrary: fc.tuple(fc.stringMatching(/^[A-Z_][A-Z0-9_]{0,12}$/), anyText(8)) },
  {
    weight: 1,
    arbitrary: fc.tuple(fc.constantFrom('SECRET_0_REF', 'SECRET_ARN', 'LOG_LEVEL'), fc.constant(undefined)),
  },
);

/** One secret the round-trip property renders: all valid, file names that cannot collide. */
const secretInput = (top: string): fc.Arbitrary<SecretEnvInput> =>
  fc.record(
    {
      ref: validReference,
      filename: fc.oneof(
        fc.constant(top),
        validSegment.map((s) => `${top}/${s}`),
      ),
      format: fc.constantFrom('raw', 'split', 'dotenv'),
      mode: fc.constantFrom('0400', '0440', '0644', '0o600', '0444'),
      refreshInterval: fc.integer({ min: 1000, max: 86_400_000 }).map(formatAsGo),
    },
    { requiredKeys: ['ref', 'filename'] },
  );

/** Go duration text for a whole number of ms (a form other than formatDuration's, e.g. 90s or 1500ms). */
function formatAsGo(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000}s` : `${ms}ms`;
}

/** Valid secrets for renderSecretEnv → parseAgentConfig; a split may also go to the top level (''). */
export const validSecretInputs: fc.Arbitrary<SecretEnvInput[]> = fc
  .uniqueArray(validSegment, { minLength: 1, maxLength: 6 })
  .chain((tops) => fc.tuple(...tops.map(secretInput)))
  .chain((secrets) =>
    fc.tuple(fc.constant(secrets), fc.array(fc.nat({ max: secrets.length - 1 }), { maxLength: 1 })),
  )
  .map(([secrets, topSplits]) =>
    secrets.map((s, i) => (topSplits.includes(i) ? { ...s, format: 'split' as const, filename: '' } : s)),
  );

/** Env maps: a valid rendered config with random damage, or random settings altogether. */
export const anyAgentEnv: fc.Arbitrary<Record<string, string | undefined>> = fc.oneof(
  fc.array(envEntry, { maxLength: 14 }).map((entries) => Object.fromEntries(entries)),
  fc
    .tuple(validSecretInputs, fc.array(envEntry, { maxLength: 2 }), fc.array(fc.nat(), { maxLength: 1 }))
    .map(([secrets, extra, drops]) => {
      const env: Record<string, string | undefined> = {};
      secrets.forEach((s, i) => {
        env[`SECRET_${i}_REF`] = s.ref;
        env[`SECRET_${i}_FILENAME`] = s.filename;
        if (s.format) env[`SECRET_${i}_FORMAT`] = s.format;
      });
      const keys = Object.keys(env);
      for (const d of drops) Reflect.deleteProperty(env, keys[d % keys.length]!);
      for (const [k, v] of extra) env[k] = v;
      return env;
    }),
  fc
    .tuple(anyReference, fc.option(anyRelativePath, { nil: undefined }), fc.array(envEntry, { maxLength: 3 }))
    .map(([ref, filename, extra]) => ({
      SECRET_ARN: ref,
      ...(filename === undefined ? {} : { SECRET_FILENAME: filename }),
      ...Object.fromEntries(extra),
    })),
);

// ---------------------------------------------------------------- secret values (renderFiles)

/** JSON with canary strings as values (never as keys: keys are names, and errors may name them). */
export const secretJson: fc.Arbitrary<unknown> = fc.letrec<{
  value: unknown;
  object: Record<string, unknown>;
}>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    canaryValue('json'),
    fc.constantFrom(null, true, false, 0, -1.5, 1e21, ''),
    fc.array(tie('value'), { maxLength: 3 }),
    tie('object'),
  ),
  object: fc.dictionary(
    fc.oneof(
      { weight: 6, arbitrary: fc.stringMatching(/^[A-Za-z_][A-Za-z0-9_]{0,8}$/) },
      fc.constantFrom(
        'user',
        'password',
        'A_B',
        '9x',
        'a/b',
        '..',
        '.',
        '',
        '__proto__',
        'constructor',
        'x y',
        'ü',
        '..data',
      ),
      fc.string({ maxLength: 6 }),
    ),
    tie('value'),
    { maxKeys: 5 },
  ),
})).value;

/** Bytes as a backend may return them: JSON, broken JSON, invalid UTF-8, near 1 MiB. */
export const secretBytes: fc.Arbitrary<Uint8Array> = fc.oneof(
  { weight: 6, arbitrary: secretJson.map((v) => Buffer.from(JSON.stringify(v) ?? 'null')) },
  { weight: 2, arbitrary: secretJson.map((v) => Buffer.from((JSON.stringify(v) ?? 'null').slice(0, -1))) },
  {
    weight: 1,
    arbitrary: canaryValue('raw').map((c) =>
      Buffer.concat([Buffer.from(c), Buffer.from([0xff, 0xfe, 0x80])]),
    ),
  },
  { weight: 1, arbitrary: canaryValue('raw').map((c) => Buffer.from(c)) },
  {
    weight: 1,
    arbitrary: fc
      .tuple(canaryValue('big'), fc.integer({ min: 1024 * 1024 - 64, max: 1024 * 1024 + 64 }))
      .map(([c, n]) => Buffer.from(JSON.stringify({ big: c.padEnd(n, 'x') }))),
  },
);

// ---------------------------------------------------------------- templates (FORMAT=template)

/** Names a template may use: the generated values' keys, prototype names, and dotted paths into both. */
const TEMPLATE_NAMES = [
  'user',
  'password',
  'db',
  'db.host',
  'db.password',
  'host',
  'list',
  'list.0',
  'tls.crt',
  'tls',
  'crt',
  'constructor',
  '__proto__',
  '__proto__.x',
  'prototype',
  'toString',
  'length',
  'password.length',
  'list.length',
  'db.constructor.name',
  'x',
  '.',
  'secrets',
  'secrets.db',
  'secrets.db.password',
  'secrets.db.host',
  'secrets.tls.crt',
  'secrets.tls.crt.key',
  'secrets.api',
  'secrets.nobody.x',
  'secrets.constructor',
] as const;

/** Keys of generated template values: the names above, so lookups hit as often as they miss. */
const TEMPLATE_KEYS = [
  'user',
  'password',
  'db',
  'host',
  'list',
  'tls',
  'tls.crt',
  'crt',
  'key',
  'x',
  '__proto__',
  'constructor',
  'length',
  'secrets',
  '',
] as const;

/** A name for a well-formed tag: more often one the typical value below has. */
const templateName = fc.oneof(
  fc.constantFrom(
    'user',
    'password',
    'host',
    'db.host',
    'db.password',
    'list',
    'tls.crt',
    'tls.crt.key',
    '.',
  ),
  fc.constantFrom(...TEMPLATE_NAMES),
);

/** Tags and sections that compile, joined: so rendering is reached often. */
const wellFormedTemplate: fc.Arbitrary<string> = fc
  .array(
    fc.oneof(
      templateName.map((n) => `{{${n}}}`),
      templateName.map((n) => `{{{${n}}}}`),
      fc
        .tuple(
          fc.constantFrom('#', '^'),
          templateName,
          fc.constantFrom('{{.}}', 'x', '{{user}}', '{{password}}', '{{host}}', '\n'),
        )
        .map(([kind, n, inner]) => `{{${kind}${n}}}${inner}{{/${n}}}`),
      // A value with its fallback: renders whether the key is there or not.
      templateName.map((n) => `{{#${n}}}{{${n}}}{{/${n}}}{{^${n}}}none{{/${n}}}`),
      fc.constantFrom(
        '{{! comment }}',
        '{{=<% %>=}}',
        '<% user %>',
        '<%={{ }}=%>',
        'text ',
        '\n',
        'line\n',
        ' ü 😀 ',
      ),
    ),
    { maxLength: 8 },
  )
  .map((parts) => parts.join(''));

/**
 * Template text: Mustache's tag characters in every order (so tags open, close, nest and cross),
 * the names templates use, delimiter changes, partials, comments, newlines and other Unicode, and
 * well-formed templates with a few characters changed. It never holds a canary: template text is
 * configuration, and errors may quote it.
 */
export const templateText: fc.Arbitrary<string> = fc.oneof(
  {
    weight: 3,
    arbitrary: tokenSoup(
      [
        '{{',
        '}}',
        '{{{',
        '}}}',
        '{{#',
        '{{^',
        '{{/',
        '{{>',
        '{{=',
        '=}}',
        '{{!',
        '{{&',
        '#',
        '^',
        '/',
        '>',
        '=',
        '!',
        '.',
        ' ',
        '\n',
        '\r\n',
        '\t',
        'ü',
        '😀',
        '<%',
        '%>',
        '<% %>',
        ...TEMPLATE_NAMES,
      ],
      16,
    ),
  },
  { weight: 3, arbitrary: wellFormedTemplate },
  {
    weight: 2,
    arbitrary: mutated(wellFormedTemplate, [
      '{',
      '}',
      '#',
      '^',
      '/',
      '>',
      '=',
      '!',
      '&',
      '.',
      ' ',
      '\n',
      '\t',
    ]),
  },
  { weight: 1, arbitrary: anyText(20) },
);

/** Any JSON, with canaries as strings (values, never keys) and keys that templates name. */
export const templateJson: fc.Arbitrary<unknown> = fc.letrec<{
  value: unknown;
  object: Record<string, unknown>;
}>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    canaryValue('tpl'),
    fc.constantFrom(null, true, false, 0, -1.5, 1e21, '', 'plain'),
    fc.array(tie('value'), { maxLength: 3 }),
    tie('object'),
  ),
  object: fc.dictionary(fc.constantFrom(...TEMPLATE_KEYS), tie('value'), { maxKeys: 5 }),
})).value;

/** The shape templates are written for: the keys the well-formed templates name, canaries as values. */
const typicalTemplateValue = fc.record(
  {
    user: fc.constantFrom('app', ''),
    password: canaryValue('pw'),
    host: fc.oneof(canaryValue('host'), fc.constant(null)),
    db: fc.record({ host: canaryValue('dbhost'), password: canaryValue('dbpw') }, { requiredKeys: ['host'] }),
    list: fc.array(fc.oneof(canaryValue('item'), fc.constantFrom(1, true, null)), { maxLength: 3 }),
    'tls.crt': canaryValue('crt'),
    tls: fc.record({ crt: fc.record({ key: canaryValue('key') }) }),
  },
  { requiredKeys: [] },
);

/** The bytes a template's secret arrives as: JSON, text, text that starts like JSON, or not UTF-8. */
export const templateSecretBytes: fc.Arbitrary<Uint8Array> = fc.oneof(
  { weight: 4, arbitrary: typicalTemplateValue.map((v) => Buffer.from(JSON.stringify(v))) },
  { weight: 6, arbitrary: templateJson.map((v) => Buffer.from(JSON.stringify(v))) },
  { weight: 1, arbitrary: canaryValue('text').map((c) => Buffer.from(c)) },
  { weight: 1, arbitrary: canaryValue('text').map((c) => Buffer.from(`{${c}`)) },
  {
    weight: 1,
    arbitrary: canaryValue('bin').map((c) => Buffer.concat([Buffer.from(c), Buffer.from([0xc3, 0x28])])),
  },
);

/** Other secrets by NAME, dotted names included, so the longest-name rule is reached. */
export const templateNamedSecrets: fc.Arbitrary<[string, Uint8Array][]> = fc.uniqueArray(
  fc.tuple(fc.constantFrom('db', 'tls', 'tls.crt', 'api', 'a.b'), templateSecretBytes),
  { maxLength: 4, selector: ([name]) => name },
);

// ---------------------------------------------------------------- config files

const YAML_LINES = [
  'REFRESH_INTERVAL: 1m',
  'SECRET_0_REF: aws:db',
  'SECRET_0_FILENAME: db',
  'LOG_LEVEL: debug',
  'lower: x',
  'NESTED:\n  A: 1',
  'LIST:\n  - a',
  'NUM: 1e400',
  'BOOL: yes',
  'NULL: ~',
  'DATE: 2026-01-01',
  'BIN: !!binary aGk=',
  'TS: !!timestamp 2001-12-14t21:59:43.10-05:00',
  '? [a, b]\n: c',
  '&a A: 1',
  'B: *a',
  'C: *missing',
  '<<: {X: 1}',
  '---',
  '...',
  '%YAML 1.1',
  '%YAML 1.1\n---',
  'K: !custom v',
  'K: "unterminated',
  "K: 'x'",
  'K: |\n  multi\n  line',
  '__proto__: x',
  'K: {',
  '- list item',
  '"quoted key": 1',
  'K: 0x1F',
  'K: .inf',
  'K: 123456789012345678901234567890',
  'X: &x [*x]',
  '\t',
  '\uFEFF',
  '#comment',
  'K:\u0000v',
];

const GOOD_LINES = [
  'REFRESH_INTERVAL: 1m',
  'SECRET_0_REF: aws:db',
  'SECRET_0_FILENAME: db',
  'LOG_LEVEL: debug',
  'SECRET_1_REF: gcp:x',
  'SECRET_1_FILENAME: x',
  'RESTART_ON_CHANGE: true',
  'INIT_DEADLINE: 60',
  'FILE_MODE: 0440',
  "SECRET_0_FORMAT: 'raw'",
];

/** YAML and JSON text, valid and broken, with canaries as values. */
export const configFileText: fc.Arbitrary<{ text: string; json: boolean }> = fc.oneof(
  fc
    .tuple(
      fc.subarray(GOOD_LINES),
      fc.array(
        fc
          .tuple(
            fc.constantFrom('ROTATION_COMMAND', 'SECRET_2_REF', 'POD_NAME'),
            fc.oneof(
              { weight: 4, arbitrary: fc.constant('') },
              fc.constantFrom('!custom ', '!!binary ', '!!str '),
            ),
            canaryValue('setting'),
          )
          .map(([k, tag, v]) => `${k}: ${tag}${v}`),
        { maxLength: 2 },
      ),
      fc.boolean(),
    )
    .map(([good, canaries, json]) => {
      const lines = [...good, ...canaries];
      const text = json
        ? JSON.stringify(Object.fromEntries(lines.map((l) => [l.split(': ')[0], l.split(': ').pop()])))
        : lines.join('\n');
      return { text, json };
    }),
  fc
    .array(
      fc.oneof(
        { weight: 4, arbitrary: fc.constantFrom(...YAML_LINES) },
        canaryValue('yaml').map((c) => `VALUE: ${c}`),
        anyText(10),
      ),
      {
        maxLength: 8,
      },
    )
    .map((lines) => ({ text: lines.join('\n'), json: false })),
  fc
    .tuple(fc.jsonValue({ maxDepth: 3 }), fc.boolean())
    .map(([v, json]) => ({ text: JSON.stringify(v), json })),
  fc
    .dictionary(
      fc.oneof(fc.stringMatching(/^[A-Z][A-Z0-9_]{0,10}$/), fc.string({ maxLength: 4 })),
      fc.oneof(canaryValue('file'), fc.jsonValue({ maxDepth: 1 })),
      {
        maxKeys: 6,
      },
    )
    .chain((doc) => fc.tuple(fc.constant(JSON.stringify(doc)), fc.boolean(), fc.nat()))
    .map(([text, json, cut]) => ({
      text: cut % 5 === 0 ? text.slice(0, cut % (text.length + 1)) : text,
      json,
    })),
  fc.constant({
    text: `A: &a [${'x,'.repeat(50)}]\n${Array.from({ length: 10 }, (_, i) => `L${i}: [${'*a,'.repeat(20)}]`).join('\n')}`,
    json: false,
  }),
);

// ---------------------------------------------------------------- pods and AdmissionReviews

const podAnnotationSamples: Readonly<Record<string, readonly string[]>> = {
  inject: ['true'],
  mode: ['init', 'sidecar', 'init+sidecar', 'both'],
  'mount-path': [
    '/etc/secrets',
    '/var/run/secret-agent',
    '/etc/secrets/',
    '/',
    '/data',
    '/etc',
    'etc',
    '/a/../b',
    '/a:b',
  ],
  containers: ['app', 'app,worker', 'worker', 'nope', ' app , app ', ',', 'App'],
  'file-mode': ['0400', '0440', '644', '0000'],
  'refresh-interval': ['1m', '30s', '1s', '24h', '25h', '0'],
  'init-deadline': ['60s', '1s', '1h', '2h', '5m'],
  'log-level': ['info', 'debug', 'loud'],
  'rotation-signal': ['SIGHUP', 'HUP', 'SIGKILL'],
  'rotation-signal-process': ['nginx', ' '],
  'rotation-signal-pidfile': ['/run/app.pid', 'app.pid'],
  'rotation-http-url': ['POST http://127.0.0.1:8080/-/reload', 'http://localhost/x', 'ftp://x'],
  'rotation-command': ['/bin/reload', ''],
  'restart-on-change': ['true', 'false', 'yes'],
  'restart-delete-bare-pod': ['true', 'false'],
  'agent-http-addr': [
    '0.0.0.0:8099',
    '0.0.0.0:8199',
    ':8080',
    '[::]:9000',
    '127.0.0.1:8099',
    '0.0.0.0:99999',
  ],
  'agent-cpu-request': ['50m', '1', 'lots'],
  'agent-cpu-limit': ['500m', '1.5'],
  'agent-memory-request': ['64Mi', '1Gi'],
  'agent-memory-limit': ['128Mi', '-1'],
  'agent-run-as-user': ['1000', '0', '65532', '2147483648'],
  'volume-size-limit': ['8Mi', '1Gi', 'big'],
  'aws-region': ['eu-west-1', 'EU'],
  'gcp-project': ['my-project', '123'],
  'vault-role': ['my-app', 'a b'],
};

/**
 * Annotations whose valid values the webhook copies into the agent's env as free text: a canary
 * there is a legitimate pass-through, so those get no canaries.
 */
const FREE_TEXT_ANNOTATIONS = new Set(['rotation-signal-process', 'rotation-command', 'path']);

/**
 * Where a rejected value may be echoed: annotations declared `echo: 'quote'` (names, enums, durations,
 * paths…) show a bad value so the refusal is readable, so a canary goes only where the declaration
 * hides it (references, URLs, free text) and into unknown keys.
 */
const hidesValue = (a: { readonly echo: string }): boolean => a.echo !== 'quote';

/** A bad value for an annotation that shows it: no canary, since the refusal quotes it. */
const rejectedShownValue = fc.constantFrom(' x', 'not a value', 'yes', '-1');

/** A canary every parser rejects: leading white space, which no annotation accepts... except free text. */
const rejectedCanary = fc.oneof(
  canaryValue('annotation'),
  canaryValue('annotation').map((c) => ` ${c}`),
  canaryValue('annotation').map((c) => `arn:aws:${c}`),
  fc.tuple(canaryValue('huge'), fc.integer({ min: 100, max: 3000 })).map(([c, n]) => ` ${c.repeat(n)}`),
);

const hugeText = fc.integer({ min: 5000, max: 150_000 }).map((n) => 'a'.repeat(n));

const FILE_NAMES = ['db', 'api', 'token', 'a.b', 'x_1', 'db-password'];
const BAD_FILE_NAMES = ['a/b', '-bad', 'ü', '..', 'x..y', 'a'.repeat(64), 'A', '.a', 'a.', 'a b'];

const fileAnnotationValue = (setting: string): fc.Arbitrary<string> => {
  const noise = fc.oneof(anyText(12), hugeText);
  switch (setting) {
    case 'secret':
      return fc.oneof(
        { weight: 8, arbitrary: validReference },
        { weight: 2, arbitrary: anyReference },
        rejectedCanary,
        noise,
      );
    case 'path':
      return fc.oneof(
        {
          weight: 4,
          arbitrary: fc.array(validSegment, { minLength: 1, maxLength: 3 }).map((s) => s.join('/')),
        },
        { weight: 2, arbitrary: anyRelativePath },
        fc.constantFrom('.', 'db', 'db/password'),
      );
    case 'format':
      return fc.oneof(
        { weight: 4, arbitrary: fc.constantFrom('raw', 'split', 'dotenv') },
        fc.constantFrom('json', 'RAW'),
        hidesValue(FILE_ANNOTATIONS.format) ? rejectedCanary : rejectedShownValue,
      );
    case 'file-mode':
      return fc.oneof(
        { weight: 4, arbitrary: fc.constantFrom('0400', '0440', '644') },
        fc.constantFrom('0200', '999'),
        hidesValue(FILE_ANNOTATIONS['file-mode']) ? rejectedCanary : rejectedShownValue,
      );
    default:
      return fc.oneof(
        { weight: 4, arbitrary: fc.constantFrom('1m', '30s', '24h') },
        durationText,
        hidesValue(FILE_ANNOTATIONS['refresh-interval']) ? rejectedCanary : rejectedShownValue,
      );
  }
};

/** `secret-agent.io/...` annotations: pod-wide and per-file, valid and not, typos, canaries, huge. */
const ourAnnotation: fc.Arbitrary<[string, string]> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc
      .constantFrom(...Object.keys(POD_ANNOTATIONS).filter((n) => n !== 'inject'))
      .chain((name) =>
        fc.tuple(
          fc.constant(`${PREFIX}${name}`),
          fc.oneof(
            { weight: 6, arbitrary: fc.constantFrom(...(podAnnotationSamples[name] ?? [''])) },
            FREE_TEXT_ANNOTATIONS.has(name)
              ? fc.constant('')
              : hidesValue(POD_ANNOTATIONS[name as keyof typeof POD_ANNOTATIONS])
                ? rejectedCanary
                : rejectedShownValue,
            { weight: 2, arbitrary: anyText(10) },
            hugeText,
          ),
        ),
      ),
  },
  {
    weight: 8,
    arbitrary: fc
      .tuple(
        fc.constantFrom(...Object.keys(FILE_ANNOTATIONS)),
        fc.oneof(
          { weight: 8, arbitrary: fc.constantFrom(...FILE_NAMES) },
          fc.constantFrom(...BAD_FILE_NAMES),
        ),
      )
      .chain(([setting, file]) =>
        fc.tuple(fc.constant(`${PREFIX}${setting}-${file}`), fileAnnotationValue(setting)),
      ),
  },
  {
    // What the agent and the webhook write: admitted whatever the value, never echoed.
    weight: 1,
    arbitrary: fc.tuple(
      fc.constantFrom(...PRODUCT_ANNOTATIONS.map((a) => a.key)),
      fc.oneof(fc.constantFrom('injected', 'pending', '5f0c3a9e1b2d4c6f', ''), rejectedCanary, hugeText),
    ),
  },
  {
    weight: 1,
    arbitrary: fc
      .tuple(
        fc.constantFrom('moed', 'mount_path', 'secrets-db', 'secret-', 'fle-mode', 'Inject', '', 'x/y'),
        fc.oneof(rejectedCanary, fc.constant('x')),
      )
      .map(([name, value]): [string, string] => [`${PREFIX}${name}`, value]),
  },
);

/** Annotations outside our prefix: their values are the pod's business and must never be echoed. */
const foreignAnnotation: fc.Arbitrary<[string, string]> = fc.tuple(
  fc.constantFrom(
    'example.com/config',
    'app',
    'kubectl.kubernetes.io/last-applied-configuration',
    'secret-agent.iox/a',
    'secret-agent.io',
  ),
  canaryValue('foreign'),
);

/** Hostile annotation lists: any mix of valid, invalid, unknown, huge and canary values. */
const hostileAnnotations: fc.Arbitrary<[string, string][]> = fc
  .tuple(
    fc.oneof(
      { weight: 12, arbitrary: fc.constant('true') },
      fc.constantFrom('false', 'True', ''),
      hidesValue(POD_ANNOTATIONS.inject) ? rejectedCanary : rejectedShownValue,
    ),
    fc.array(ourAnnotation, { maxLength: 8 }),
    fc.array(foreignAnnotation, { maxLength: 2 }),
    fc.boolean(),
  )
  .map(([inject, ours, foreign, injectFirst]) => {
    const opt: [string, string] = [`${PREFIX}inject`, inject];
    return injectFirst ? [opt, ...ours, ...foreign] : [...ours, ...foreign, opt];
  });

/** Pod-wide settings a user would really write, each valid on its own. */
const VALID_POD_SETTINGS: readonly (readonly [string, string][])[] = [
  [['mode', 'init']],
  [['mode', 'sidecar']],
  [['mode', 'init+sidecar']],
  [['mount-path', '/var/run/secret-agent']],
  [['file-mode', '0440']],
  [['refresh-interval', '30s']],
  [['init-deadline', '5m']],
  [['log-level', 'debug']],
  [['restart-on-change', 'true']],
  [['agent-http-addr', '0.0.0.0:8199']],
  [['agent-cpu-request', '50m']],
  [['agent-memory-limit', '128Mi']],
  [['agent-run-as-user', '1000']],
  [['aws-region', 'eu-west-1']],
  [['gcp-project', 'my-project']],
  [['vault-role', 'my-app']],
  [['rotation-http-url', 'POST http://127.0.0.1:8080/-/reload']],
  [['rotation-command', '/bin/reload']],
  [
    ['rotation-signal', 'SIGHUP'],
    ['rotation-signal-process', 'nginx'],
  ],
  [['containers', 'app']],
  [['volume-size-limit', '1Mi']],
];

/** Annotation lists a careful user writes: distinct files, valid references and settings. */
const cleanAnnotations: fc.Arbitrary<[string, string][]> = fc
  .tuple(
    fc.uniqueArray(fc.constantFrom(...FILE_NAMES), { minLength: 1, maxLength: 4 }).chain((files) =>
      fc.tuple(
        ...files.map((file) =>
          fc.record({
            file: fc.constant(file),
            ref: validReference,
            format: fc.option(fc.constantFrom('raw', 'split', 'dotenv'), { nil: undefined }),
            path: fc.option(fc.constantFrom(`${file}/value`, `dir-${file}`, `nested/${file}`), {
              nil: undefined,
            }),
            mode: fc.option(fc.constantFrom('0400', '0440'), { nil: undefined }),
          }),
        ),
      ),
    ),
    fc.subarray([...VALID_POD_SETTINGS], { maxLength: 3 }),
    fc.array(foreignAnnotation, { maxLength: 2 }),
  )
  .map(([files, settings, foreign]) => {
    const out: [string, string][] = [[`${PREFIX}inject`, 'true']];
    for (const f of files) {
      out.push([`${PREFIX}secret-${f.file}`, f.ref]);
      if (f.format !== undefined) out.push([`${PREFIX}format-${f.file}`, f.format]);
      if (f.path !== undefined) out.push([`${PREFIX}path-${f.file}`, f.path]);
      if (f.mode !== undefined) out.push([`${PREFIX}file-mode-${f.file}`, f.mode]);
    }
    for (const pairs of settings) for (const [name, value] of pairs) out.push([`${PREFIX}${name}`, value]);
    return [...out, ...foreign];
  });

/** The annotation list, in order and with possible duplicate keys (JSON allows them; the last wins). */
export const podAnnotations: fc.Arbitrary<[string, string][]> = fc.oneof(
  cleanAnnotations,
  hostileAnnotations,
);

const containerName = fc.oneof(
  { weight: 30, arbitrary: fc.constantFrom('app', 'worker', 'sidecar') },
  fc.constantFrom('secret-agent', 'secret-agent-init', 'proxy'),
);

const container = fc.record(
  {
    name: containerName,
    image: fc.constant('registry.example/app:1.0'),
    env: fc.array(
      fc.record({ name: fc.constantFrom('PASSWORD', 'SECRETS_DIR', 'TOKEN'), value: canaryValue('env') }),
      { maxLength: 2 },
    ),
    args: fc.array(canaryValue('arg'), { maxLength: 1 }),
    volumeMounts: fc.array(
      fc.record({
        name: fc.constant('data'),
        mountPath: fc.oneof(
          { weight: 12, arbitrary: fc.constantFrom('/data', '/var/lib/app', '/etc/secretsx') },
          fc.constantFrom('/etc/secrets', '/etc/secrets/x', '/etc', '/', '/var/run/secret-agent'),
        ),
      }),
      { maxLength: 2 },
    ),
    ports: fc.array(
      fc.record({
        containerPort: fc.oneof(
          { weight: 8, arbitrary: fc.constantFrom(8080, 9000) },
          fc.constantFrom(8099, 8199),
        ),
      }),
      { maxLength: 2 },
    ),
  },
  { requiredKeys: ['name', 'image'] },
);

/** A pod the API server could send: valid per the Pod schema, in many shapes. */
export const podObject = fc
  .record(
    {
      named: fc.boolean(),
      namespace: fc.option(fc.constantFrom('apps', 'secret-agent'), { nil: undefined }),
      labels: canaryValue('label').map((c) => ({ app: 'web', 'secret-agent.io/inject': 'true', note: c })),
      containers: fc.array(container, { minLength: 1, maxLength: 3 }),
      initContainers: fc.option(fc.array(container, { maxLength: 2 }), { nil: undefined }),
      volumes: fc.option(
        fc.array(
          fc.record({
            name: fc.constantFrom('data', 'secret-agent-secrets', 'secret-agent-secrets-1'),
            emptyDir: fc.constant({}),
          }),
          { maxLength: 3 },
        ),
        { nil: undefined },
      ),
      securityContext: fc.option(
        fc.record(
          {
            runAsUser: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 2_147_483_647 })),
            runAsGroup: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 70000 })),
            fsGroup: fc.integer({ min: 1, max: 70000 }),
          },
          { requiredKeys: [] },
        ),
        { nil: undefined },
      ),
      shareProcessNamespace: fc.option(fc.boolean(), { nil: undefined }),
    },
    { requiredKeys: ['named', 'namespace', 'labels', 'containers'] },
  )
  .map((p) => ({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      ...(p.named ? { name: 'web-7d4b9c-xk2p9' } : { generateName: 'web-7d4b9c-' }),
      ...(p.namespace === undefined ? {} : { namespace: p.namespace }),
      labels: p.labels,
      annotations: {} as Record<string, string>,
    },
    spec: {
      containers: p.containers,
      ...(p.initContainers === undefined ? {} : { initContainers: p.initContainers }),
      ...(p.volumes === undefined ? {} : { volumes: p.volumes }),
      ...(p.securityContext === undefined ? {} : { securityContext: p.securityContext }),
      ...(p.shareProcessNamespace === undefined ? {} : { shareProcessNamespace: p.shareProcessNamespace }),
    },
  }));

export interface GeneratedReview {
  /** The request body as sent (annotations may repeat a key). */
  readonly body: string;
  readonly uid: string;
  readonly apiVersion: string;
  /** Whether the request is a Pod CREATE the webhook must act on. */
  readonly podCreate: boolean;
  /** Which of the two servers: native sidecars or classic containers. */
  readonly native: boolean;
}

/** A structurally valid AdmissionReview carrying a generated pod and annotations. */
export const admissionReview: fc.Arbitrary<GeneratedReview> = fc
  .record({
    pod: podObject,
    annotations: podAnnotations,
    uid: fc.uuid(),
    apiVersion: fc.oneof(
      { weight: 9, arbitrary: fc.constant('admission.k8s.io/v1') },
      fc.constant('admission.k8s.io/v1beta1'),
    ),
    namespace: fc.oneof({ weight: 9, arbitrary: fc.constant('apps') }, fc.constantFrom('secret-agent', '')),
    operation: fc.oneof(
      { weight: 9, arbitrary: fc.constant('CREATE') },
      fc.constantFrom('UPDATE', 'CONNECT'),
    ),
    kind: fc.oneof({ weight: 9, arbitrary: fc.constant('Pod') }, fc.constant('Deployment')),
    native: fc.boolean(),
  })
  .map((r) => {
    const review = {
      apiVersion: r.apiVersion,
      kind: 'AdmissionReview',
      request: {
        uid: r.uid,
        kind: { group: '', version: 'v1', kind: r.kind },
        resource: { group: '', version: 'v1', resource: 'pods' },
        namespace: r.namespace,
        operation: r.operation,
        userInfo: { username: 'system:serviceaccount:kube-system:replicaset-controller' },
        object: { ...r.pod, metadata: { ...r.pod.metadata, annotations: 'SLOT' } },
        oldObject: null,
        dryRun: false,
      },
    };
    const annotations = `{${r.annotations.map(([k, v]) => `${JSON.stringify(k)}:${JSON.stringify(v)}`).join(',')}}`;
    // A function, so `$&` and friends in generated values are not replacement patterns.
    const body = JSON.stringify(review).replace('"SLOT"', () => annotations);
    return {
      body,
      uid: r.uid,
      apiVersion: r.apiVersion,
      podCreate: r.kind === 'Pod' && r.operation === 'CREATE',
      native: r.native,
    };
  });

/** Every JSON pointer-ish path into a document, for mutation. */
function nodePaths(
  doc: unknown,
  at: (string | number)[] = [],
  out: (string | number)[][] = [],
): (string | number)[][] {
  out.push(at);
  if (Array.isArray(doc)) doc.forEach((v, i) => nodePaths(v, [...at, i], out));
  else if (typeof doc === 'object' && doc !== null)
    for (const [k, v] of Object.entries(doc)) nodePaths(v, [...at, k], out);
  return out;
}

const weirdJson = fc.oneof(
  fc.jsonValue({ maxDepth: 2 }),
  fc.constantFrom(null, [], {}, '', 0, -1, 1.5, true, 'CREATE', 'Pod', [{}], [null], [{ name: 1 }], {
    name: 'x',
  }),
);

/** A valid review with a few nodes replaced or removed: the shapes a shape-checker must survive. */
const mutatedReview: fc.Arbitrary<string> = fc
  .tuple(
    admissionReview,
    fc.array(fc.tuple(fc.nat(), fc.option(weirdJson, { nil: undefined })), { minLength: 1, maxLength: 3 }),
  )
  .map(([r, edits]) => {
    const doc = JSON.parse(r.body) as unknown;
    for (const [pick, value] of edits) {
      const paths = nodePaths(doc).filter((p) => p.length > 0);
      const path = paths[pick % paths.length]!;
      let parent = doc as Record<string | number, unknown>;
      for (const t of path.slice(0, -1)) parent = parent[t] as Record<string | number, unknown>;
      const key = path[path.length - 1]!;
      if (value === undefined && !Array.isArray(parent)) Reflect.deleteProperty(parent, key);
      // A copy: generated constants are shared between cases and must never become part of a cycle.
      else parent[key] = structuredClone(value);
    }
    return JSON.stringify(doc);
  });

export interface GeneratedBody {
  readonly body: string | Uint8Array;
  readonly contentType: string;
  readonly native: boolean;
}

/** Anything at all as a request body, with mostly the right content type. */
export const anyBody: fc.Arbitrary<GeneratedBody> = fc.record({
  body: fc.oneof(
    { weight: 4, arbitrary: mutatedReview },
    {
      weight: 1,
      arbitrary: admissionReview.chain((r) => fc.nat({ max: r.body.length }).map((n) => r.body.slice(0, n))),
    },
    { weight: 1, arbitrary: anyText(200) },
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 300 }) },
    { weight: 1, arbitrary: fc.json({ maxDepth: 3 }) },
    {
      weight: 1,
      arbitrary: fc
        .jsonValue({ maxDepth: 3 })
        .map((v) =>
          JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', request: v }),
        ),
    },
  ),
  contentType: fc.oneof(
    { weight: 10, arbitrary: fc.constant('application/json') },
    fc.constantFrom(
      'application/json; charset=utf-8',
      'APPLICATION/JSON',
      'text/plain',
      '',
      'application/json5',
    ),
  ),
  native: fc.boolean(),
});

// ---------------------------------------------------------------- file sets for the writer

/** Names already in the volume before the agent writes (see volume-arena.ts), to collide with. */
export const FOREIGN_NAMES = [
  'foreign.txt',
  'foreign-dir',
  'escape',
  'escape-abs',
  'escape-file',
  'dangling',
] as const;

export interface GeneratedFile {
  readonly path: string;
  readonly content: string;
  readonly mode: number;
}

/** Paths aimed at the volume's edges: foreign names, escapes, the arena outside, deep nesting. */
const writerPath = (outside: string): fc.Arbitrary<string> =>
  fc.oneof(
    {
      weight: 6,
      arbitrary: fc
        .array(fc.constantFrom('a', 'b', 'c', 'sub'), { minLength: 1, maxLength: 3 })
        .map((s) => s.join('/')),
    },
    {
      weight: 3,
      arbitrary: fc
        .tuple(fc.constantFrom(...FOREIGN_NAMES), fc.constantFrom('', '/x', '/sentinel.txt', '/new/deep'))
        .map(([a, b]) => a + b),
    },
    {
      weight: 2,
      arbitrary: fc.constantFrom(
        '../outside/sentinel.txt',
        '../outside/new',
        '../../x',
        `${outside}/abs`,
        `${outside}/sentinel.txt`,
        '..data/x',
        '..data',
        '..data_tmp',
        '.',
        './a',
        'a/./b',
        'a/../b',
        'a//b',
        'a/',
        '/a',
        '',
        'a\u0000b',
        'a\\b',
        '.hidden',
        'x y/ü',
        'link -> ..',
      ),
    },
    { weight: 1, arbitrary: anyRelativePath },
    { weight: 1, arbitrary: fc.integer({ min: 1, max: 200 }).map((n) => `${'d/'.repeat(n)}f`) },
    // Near the 4096-byte limit validateRelativePath allows, in few directories.
    { weight: 1, arbitrary: fc.integer({ min: 3800, max: 4096 }).map((n) => longPath(n)) },
  );

/** A valid relative path of exactly `bytes` bytes made of 250-byte segments. */
function longPath(bytes: number): string {
  const segments: string[] = [];
  let left = bytes;
  while (left > 251) {
    segments.push('s'.repeat(250));
    left -= 251;
  }
  segments.push('f'.repeat(Math.max(1, left)));
  return segments.join('/');
}

export const writerFiles = (outside: string): fc.Arbitrary<GeneratedFile[]> =>
  fc.array(
    fc.record({
      path: writerPath(outside),
      content: canaryValue('file'),
      mode: fc.constantFrom(0o400, 0o440, 0o444, 0o600, 0o640, 0o644, 0o755),
    }),
    { maxLength: 5 },
  );
