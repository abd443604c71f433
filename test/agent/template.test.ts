import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseAgentConfig } from '../../agent/config/parse-agent-config.ts';
import type { SecretSpec } from '../../agent/contract/agent-config.ts';
import { ConfigError, ConfigErrors } from '../../agent/contract/errors.ts';
import { loadFormats } from '../../agent/format/load-formats.ts';
import { renderFiles, SecretFormatError } from '../../agent/format/render-files.ts';
import type { Json } from '../../agent/format/structured-formats.ts';
import {
  checkSecretNames,
  compileTemplate,
  renderTemplate,
  templateValue,
  TemplateError,
  type TemplateValue,
} from '../../agent/format/template.ts';
import { assertNoCanary, canary } from '../support/canary.ts';

/**
 * FORMAT=template, from the parser to the files: the strict renderer (own JSON keys only, a name that
 * resolves to nothing is an error with its line and column), the start-up checks, and what
 * loadFormats adds (#key, other secrets by NAME). Every error is checked for the canary values the
 * secrets hold, since a template error is the one place a value sits right next to the message.
 */

const FIELD = 'SECRET_0_TEMPLATE';

function render(text: string, own: Json, secrets: Record<string, Json> = {}): string {
  return renderTemplate(compileTemplate(text, FIELD), { own, secrets: new Map(Object.entries(secrets)) });
}

/** The TemplateError `fn` throws: its message matches, and neither it nor the fix quotes a value. */
function templateError(fn: () => unknown, problem: RegExp): TemplateError {
  let caught: unknown;
  try {
    fn();
  } catch (e) {
    caught = e;
  }
  assert.ok(caught instanceof TemplateError, `expected a TemplateError, got ${String(caught)}`);
  assert.match(caught.problem, problem);
  assert.equal(caught.message, caught.problem);
  assert.ok(caught.fix.length > 0);
  assertNoCanary(`${caught.problem} ${caught.fix} ${caught.message} ${caught.stack}`, 'a TemplateError');
  return caught;
}

/** The ConfigError compileTemplate throws for `text`: named field, matching problem, a fix. */
function syntaxError(text: string, problem: RegExp): ConfigError {
  let caught: unknown;
  try {
    compileTemplate(text, FIELD);
  } catch (e) {
    caught = e;
  }
  assert.ok(
    caught instanceof ConfigError,
    `expected a ConfigError for ${JSON.stringify(text)}, got ${caught instanceof Error ? `${caught.name}: ${caught.message}` : String(caught)}`,
  );
  assert.equal(caught.field, FIELD);
  assert.match(caught.problem, problem);
  assert.ok(caught.fix.length > 0);
  assert.equal(caught.message, `${FIELD}: ${caught.problem}. Fix: ${caught.fix}`);
  return caught;
}

/** A missing-key error, the way a person reads it: field, line, column and the tag itself. */
const missingKey = (tag: string, line = 1, column = 1) =>
  new RegExp(
    `^${FIELD} line ${line}, column ${column}: ${escape(`{{${tag}}}`)} names no key of the secret${tag.startsWith('secrets.') ? ' it reads' : ''}$`,
  );
const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

describe('template rendering', () => {
  it('inserts values as they are: no HTML escaping, in every kind of tag', () => {
    const value = `<a href="x">'&amp;'</a> ${canary('html')}`;
    assert.equal(render('{{v}}|{{{v}}}|{{&v}}', { v: value }), `${value}|${value}|${value}`);
    assert.equal(render('{{v}}', { v: `<>&"'` }), `<>&"'`);
  });

  it('walks into objects with dots, and finds a key that holds dots first', () => {
    assert.equal(
      render('{{db.host}}:{{db.port}}', { db: { host: 'db.internal', port: 5432 } }),
      'db.internal:5432',
    );
    const tls = { 'tls.crt': 'whole key', tls: { crt: 'nested', key: 'nested key' } };
    assert.equal(render('{{tls.crt}} / {{tls.key}}', tls), 'whole key / nested key');
    assert.equal(render('{{a.b.c}}', { 'a.b': { c: 'split once' } }), 'split once');
    assert.equal(render('{{list.1}}', { list: ['zero', 'one'] }), 'one');
  });

  it('reads other secrets by NAME, the longest name winning when names hold dots', () => {
    const secrets = {
      tls: { crt: { key: 'from "tls"' }, ca: 'ca of "tls"' },
      'tls.crt': { key: 'from "tls.crt"' },
      db: { host: 'db.internal' },
    };
    assert.equal(
      render('{{secrets.tls.crt.key}} | {{secrets.tls.ca}} | {{secrets.db.host}}', {}, secrets),
      'from "tls.crt" | ca of "tls" | db.internal',
    );
    // The longest name decides, even when only a shorter one has the key: no silent fallback.
    templateError(() => render('{{secrets.tls.crt.ca}}', {}, secrets), missingKey('secrets.tls.crt.ca'));
    assert.equal(render('{{#secrets.db}}{{host}}{{/secrets.db}}', {}, secrets), 'db.internal');
    assert.equal(render('{{secrets.db}}', {}, secrets), '{"host":"db.internal"}');
    const template = compileTemplate('{{secrets.tls.crt.key}}\n  {{#secrets.api}}{{/secrets.api}}', FIELD);
    assert.deepEqual(
      checkSecretNames(template, ['tls.crt', 'api'], () => 'x'),
      [],
    );
    assert.deepEqual(
      checkSecretNames(template, ['tls', 'api'], () => 'x'),
      [],
    );
    const [error, ...rest] = checkSecretNames(template, ['tls'], (path) => `name a secret for ${path}`);
    assert.equal(rest.length, 0);
    assert.ok(error instanceof ConfigError);
    assert.equal(error.field, FIELD);
    assert.equal(
      error.problem,
      'line 2, column 3: {{secrets.api}} names no secret the agent fetches (names: "tls")',
    );
    assert.equal(error.fix, 'name a secret for secrets.api');
    assert.match(checkSecretNames(template, [], () => 'x')[0]!.problem, /\(no secret has a name\)$/);
    assert.match(
      checkSecretNames(compileTemplate('{{secrets}}', FIELD), ['tls'], () => 'x')[0]!.problem,
      /^line 1, column 1: \{\{secrets\}\} names no secret$/,
    );
  });

  it('renders {{.}} of a value that is not JSON as its text: a PEM, a password', () => {
    const pem = `-----BEGIN CERTIFICATE-----\nMIIB${canary('pem')}\n-----END CERTIFICATE-----\n`;
    assert.equal(render('cert: |\n{{.}}', templateValue(Buffer.from(pem), 'the value')), `cert: |\n${pem}`);
    // Text that only looks like JSON at first is text, not an error.
    const braces = `{not json ${canary('braces')}`;
    assert.equal(render('{{.}}', templateValue(Buffer.from(braces), 'the value')), braces);
    assert.equal(render('[{{.}}]', templateValue(Buffer.from('5432'), 'the value')), '[5432]');
    assert.deepEqual(templateValue(Buffer.from(' \n{"a":[1]}'), 'the value'), { a: [1] });
  });

  it('repeats a section for each item of an array, with the item as the context', () => {
    assert.equal(render('{{#hosts}}{{.}},{{/hosts}}', { hosts: ['a', 'b', 'c'] }), 'a,b,c,');
    assert.equal(
      render('{{#users}}{{name}}={{pw}} {{suffix}}\n{{/users}}', {
        users: [
          { name: 'u1', pw: 'p1' },
          { name: 'u2', pw: 'p2', suffix: 'own' },
        ],
        suffix: 'outer',
      }),
      'u1=p1 outer\nu2=p2 own\n',
    );
    assert.equal(render('{{#a}}{{b}}{{/a}}', { a: { b: 'object as context' } }), 'object as context');
    assert.equal(render('[{{#none}}x{{/none}}]', { none: [] }), '[]');
  });

  it('writes numbers and booleans as JSON text, objects and arrays as compact JSON', () => {
    assert.equal(
      render('{{i}} {{f}} {{z}} {{t}} {{n}} {{big}}', {
        i: 5432,
        f: 1.5,
        z: 0,
        t: true,
        n: false,
        big: 1e21,
      }),
      '5432 1.5 0 true false 1e+21',
    );
    assert.equal(
      render('{{o}} {{l}}', { o: { a: [1, { b: 'c' }], d: null }, l: [1, 'two', null] }),
      '{"a":[1,{"b":"c"}],"d":null} [1,"two",null]',
    );
    // A JSON value of a whole secret, when it is one.
    assert.equal(render('{{.}}', templateValue(Buffer.from('[1, 2]'), 'the value')), '[1,2]');
  });

  it('refuses null and a missing key, naming the field, the tag, its line and column', () => {
    const value = { password: canary('pw'), nothing: null, db: { host: canary('host') } };
    templateError(
      () => render('{{nothing}}', value),
      /^SECRET_0_TEMPLATE line 1, column 1: \{\{nothing\}\} is null$/,
    );
    const text = 'user=app\npassword={{password}}\n\n  host = {{db.hots}}\n';
    const e = templateError(() => render(text, value), missingKey('db.hots', 4, 10));
    assert.match(e.fix, /\{\{\^db\.hots\}\}default\{\{\/db\.hots\}\}/);
    // Inside a section, where the tag is, not where the section starts.
    templateError(() => render('{{#db}}\n\t{{port}}{{/db}}', value), missingKey('port', 2, 2));
    // Columns count characters (UTF-16 units), so a line with non-ASCII text still points right.
    templateError(() => render('äöü {{x}}', value), missingKey('x', 1, 5));
  });

  it('renders an inverted section as the fallback for a missing, null, false, empty or [] value only', () => {
    const text = 'port={{#port}}{{port}}{{/port}}{{^port}}5432{{/port}}';
    for (const own of [{}, { port: null }, { port: false }, { port: '' }, { port: [] }] as Json[])
      assert.equal(render(text, own), 'port=5432', JSON.stringify(own));
    for (const [port, shown] of [
      [6432, '6432'],
      [0, '0'],
      ['6543', '6543'],
      [true, 'true'],
    ] as const)
      assert.equal(render(text, { port }), `port=${shown}`, JSON.stringify(port));
    assert.equal(render('{{^secrets.db.port}}5432{{/secrets.db.port}}', {}, { db: {} }), '5432');
    // A section over a missing key renders nothing: the inverted section is the fallback.
    assert.equal(render('[{{#missing}}{{missing}}{{/missing}}]', {}), '[]');
  });

  it('never reaches JavaScript internals: prototype names are missing keys', () => {
    const value = { a: {}, password: canary('pw'), list: ['x'] };
    for (const name of [
      'constructor',
      '__proto__',
      'toString',
      'hasOwnProperty',
      'valueOf',
      'a.constructor.name',
      'a.__proto__',
      'password.length',
      'password.constructor',
      'list.length',
      'list.map',
    ])
      templateError(() => render(`{{${name}}}`, value), missingKey(name));
    templateError(() => render('{{length}}', 'a string'), missingKey('length'));
    templateError(() => render('{{#list}}{{length}}{{/list}}', value), missingKey('length', 1, 10));
    // A section over a prototype name is a miss too: the fallback renders, not Object's code.
    assert.equal(render('{{#constructor}}x{{/constructor}}{{^constructor}}none{{/constructor}}', {}), 'none');
    // An own "__proto__" key in the JSON is data like any other.
    const own = JSON.parse('{"__proto__": {"x": "proto data"}, "constructor": "ctor data"}') as Json;
    assert.equal(render('{{__proto__.x}} {{constructor}}', own), 'proto data ctor data');
    assert.equal(({} as { x?: unknown }).x, undefined, 'Object.prototype untouched');
  });
});

describe('template syntax, checked at compile time', () => {
  it('refuses an unclosed tag, with line and column', () => {
    syntaxError('a\nb {{password', /^line 2, column \d+: a tag is not closed with \}\}$/);
    syntaxError('{{{raw}}', /^line 1, column \d+: a tag is not closed with \}\}$/);
    syntaxError('{{=<% %>=}}\n<% a', /^line 2, column \d+: a tag is not closed with \}\}$/);
  });

  it('refuses unclosed, unopened and crossed sections, with line and column', () => {
    syntaxError('x\n  {{#a}}\ny', /^line \d+, column \d+: unclosed section "a"$/);
    syntaxError('x\n  {{^a}}', /^line \d+, column \d+: unclosed section "a"$/);
    syntaxError('ok\n\n   {{/a}}', /^line 3, column 4: unopened section "a"$/);
    // Closed in the wrong order: where the wrong closing tag is.
    // Where the fix goes: the section left open, not the closing tag that crossed it.
    syntaxError('{{#a}}\n{{#b}}{{/a}}{{/b}}', /^line 2, column 1: unclosed section "b"$/);
    syntaxError('{{#a}}{{/a}}\n{{/a}}', /^line 2, column 1: unopened section "a"$/);
  });

  // Found by this test: mustache's message then holds a newline and the line/column regex does not
  // match it, so compileTemplate crashes with a TypeError (the agent would exit 70, not 2).
  it('refuses a section whose name holds a newline as a syntax error, not a crash', () => {
    syntaxError('{{#a\nb}}', /^line \d+, column \d+: unclosed section "a\nb"$/);
    syntaxError('{{/a\nb}}', /^line 1, column 1: unopened section "a\nb"$/);
  });

  it('refuses delimiters that are not two words', () => {
    const e = syntaxError('line one\n{{=<%=}}', /a \{\{=…=\}\} tag sets delimiters that are not two words$/);
    // The parser's own message quotes the tag; ours describes it.
    assert.ok(!e.message.includes('Invalid tags'));
    syntaxError('{{= x =}}', /delimiters that are not two words/);
  });

  // Found by this test: mustache's "Invalid tags" error carries no offset, so this syntax error alone
  // says "the template" instead of where the bad {{=…=}} tag is.
  it('says on which line and column the bad delimiter tag is', () => {
    syntaxError('line one\n  {{=<%=}}', /^line 2, column 3: /);
  });

  it('accepts new delimiters, comments and standalone tags', () => {
    assert.equal(
      render('{{! a comment }}{{=<% %>=}}<% a %> {{a}}<%={{ }}=%> {{a}}', { a: 'v' }),
      'v {{a}} v',
    );
  });

  it('refuses partials, also inside sections, and tags that name nothing', () => {
    syntaxError(
      '{{> header}}',
      /^line 1, column 1: \{\{> header\}\} includes a partial, and templates have none$/,
    );
    syntaxError('{{#a}}\n {{>p}}{{/a}}', /^line 2, column 2: \{\{> p\}\} includes a partial/);
    syntaxError('x {{}}', /^line 1, column 3: a tag names nothing$/);
    syntaxError('{{#a}}{{ & }}{{/a}}', /^line 1, column 7: a tag names nothing$/);
  });

  it('collects the secrets.NAME paths of every tag, sections included, with where they are', () => {
    const c = compileTemplate(
      '{{secrets.a.x}}\n{{#items}}{{^secrets.b}}{{/secrets.b}}{{/items}}{{other}}',
      FIELD,
    );
    assert.deepEqual(c.secretPaths, [
      { path: 'secrets.a.x', at: 0 },
      { path: 'secrets.b', at: 26 },
    ]);
  });
});

describe('template values', () => {
  it('refuses bytes that are not UTF-8 without showing any of them', () => {
    const bytes = Buffer.concat([Buffer.from(canary('bin')), Buffer.from([0xff, 0xfe, 0x80])]);
    const e = templateError(
      () => templateValue(bytes, 'the value'),
      new RegExp(
        `^the value is not UTF-8 text \\(${bytes.byteLength} bytes\\), so a template cannot hold it$`,
      ),
    );
    assert.match(e.fix, /FORMAT=raw/);
    assert.ok(!/\b(?:ff|fe|80|255|254|128)\b/i.test(`${e.problem} ${e.fix}`), 'no byte values');
  });

  it('never puts a value into an error, whatever the template does with it', () => {
    const secret = canary('pw');
    const own: TemplateValue = { password: secret, nested: { pw: secret }, list: [secret], nothing: null };
    for (const text of [
      '{{missing}}',
      '{{password.x}}',
      '{{nested.pw.length}}',
      '{{#list}}{{x}}{{/list}}',
      '{{nothing}}',
      `{{#password}}{{nope}}{{/password}}`,
      '{{secrets.other.password}}',
    ])
      templateError(() => render(text, own, { other: { x: secret } }), /names no key|is null/);
  });
});

/** Specs as the agent builds them from env, so FORMAT, TEMPLATE, NAME and #key go the real way. */
function specsOf(env: Record<string, string>): readonly SecretSpec[] {
  return parseAgentConfig({ SECRETS_DIR: '/tmp', ...env }).secrets;
}

describe('loadFormats with templates', () => {
  it('compiles every template at start-up and reports all problems at once', async () => {
    const specs = specsOf({
      SECRET_0_REF: 'file:/a',
      SECRET_0_FILENAME: 'a',
      SECRET_0_FORMAT: 'template',
      SECRET_0_TEMPLATE: 'x\n{{#a}}',
      SECRET_1_REF: 'file:/b',
      SECRET_1_FILENAME: 'b',
      SECRET_1_FORMAT: 'template',
      SECRET_1_TEMPLATE: '{{secrets.nobody.key}}',
      SECRET_1_NAME: 'b',
      SECRET_2_REF: 'file:/c',
      SECRET_2_FILENAME: 'c',
      SECRET_2_FORMAT: 'template',
      SECRET_2_TEMPLATE: '{{> partial}}',
    });
    await assert.rejects(loadFormats(specs), (e: unknown) => {
      assert.ok(e instanceof ConfigErrors);
      assert.deepEqual(
        e.errors.map((x) => x.field),
        ['SECRET_0_TEMPLATE', 'SECRET_1_TEMPLATE', 'SECRET_2_TEMPLATE'],
      );
      assert.match(e.errors[0]!.problem, /^line 2, column \d+: unclosed section "a"$/);
      assert.equal(
        e.errors[1]!.problem,
        'line 1, column 1: {{secrets.nobody.key}} names no secret the agent fetches (names: "b")',
      );
      assert.match(e.errors[1]!.fix, /SECRET_<N>_NAME/);
      assert.match(e.errors[2]!.problem, /includes a partial/);
      return true;
    });
  });

  it('loads no template code for a set without templates', async () => {
    const kit = await loadFormats(specsOf({ SECRET_0_REF: 'file:/a', SECRET_0_FILENAME: 'a' }));
    assert.equal(kit.template, undefined);
  });

  it('renders through renderFiles: #key picks the template’s own subtree and a named secret’s', async () => {
    const password = canary('pw');
    const specs = specsOf({
      SECRET_0_REF: 'file:/app.json#db',
      SECRET_0_FILENAME: 'db.conf',
      SECRET_0_FORMAT: 'template',
      SECRET_0_MODE: '0440',
      SECRET_0_TEMPLATE: 'host={{host}}\npassword={{password}}\napi={{secrets.api.token}}\n',
      SECRET_1_REF: 'file:/api.json#current',
      SECRET_1_FILENAME: 'api',
      SECRET_1_NAME: 'api',
    });
    const kit = await loadFormats(specs);
    const app = Buffer.from(JSON.stringify({ db: { host: 'db.internal', password }, host: 'not this one' }));
    const api = Buffer.from(JSON.stringify({ current: { token: 't-1' }, token: 'not this one' }));
    const [file, ...more] = renderFiles(specs[0]!, app, kit, (name) => (name === 'api' ? api : undefined));
    assert.equal(more.length, 0);
    assert.equal(file!.path, 'db.conf');
    assert.equal(file!.mode, 0o440);
    assert.equal(Buffer.from(file!.bytes).toString(), `host=db.internal\npassword=${password}\napi=t-1\n`);
  });

  it('turns a value that does not fit into a SecretFormatError that quotes no value', async () => {
    const specs = specsOf({
      SECRET_0_REF: 'file:/app.json#db',
      SECRET_0_FILENAME: 'db.conf',
      SECRET_0_FORMAT: 'template',
      SECRET_0_TEMPLATE: '{{password}} {{secrets.api.token}}',
      SECRET_1_REF: 'file:/api.json',
      SECRET_1_FILENAME: 'api',
      SECRET_1_NAME: 'api',
    });
    const kit = await loadFormats(specs);
    const api = Buffer.from(JSON.stringify({ token: canary('token') }));
    const fail = (own: Uint8Array, other: Uint8Array | undefined, problem: RegExp) =>
      assert.throws(
        () => renderFiles(specs[0]!, own, kit, () => other),
        (e: unknown) => {
          assert.ok(e instanceof SecretFormatError);
          assert.equal(e.secretId, 'SECRET_0');
          assert.match(e.message, problem);
          assertNoCanary(`${e.message} ${e.fix} ${e.stack}`, 'a SecretFormatError');
          return true;
        },
      );
    const pw = canary('pw');
    fail(
      Buffer.from(JSON.stringify({ other: { password: pw } })),
      api,
      /^the value has no JSON key "db" for its #key$/,
    );
    fail(Buffer.from(`not json ${pw}`), api, /^the value has no JSON key "db" for its #key$/);
    fail(Buffer.from(JSON.stringify({ db: { pass: pw } })), api, missingKey('password'));
    fail(
      Buffer.from(JSON.stringify({ db: { password: pw } })),
      Buffer.from(JSON.stringify({ t: pw })),
      missingKey('secrets.api.token', 1, 14),
    );
    fail(
      Buffer.from(JSON.stringify({ db: { password: pw } })),
      undefined,
      /^the template reads the secret named "api" \(SECRET_1\), which was not delivered$/,
    );
    fail(
      Buffer.from(JSON.stringify({ db: { password: pw } })),
      Buffer.concat([Buffer.from(pw), Buffer.from([0xc3])]),
      /^the secret named "api" \(SECRET_1\) is not UTF-8 text \(\d+ bytes\)/,
    );
    fail(Buffer.concat([Buffer.from(pw), Buffer.from([0xff])]), api, /^the value is not UTF-8 text/);
  });
});
