import Mustache from 'mustache';
import { ConfigError, quote } from '../contract/errors.ts';
import { MAX_SECRET_BYTES } from '../providers/provider.ts';
import type { Json } from './structured-formats.ts';

/**
 * FORMAT=template: Mustache syntax (logic-less: values, sections, inverted sections, comments),
 * parsed by the `mustache` package and rendered here. Only the parser is borrowed: mustache's own
 * renderer walks prototypes (`{{constructor}}` finds Object), calls functions it finds and
 * HTML-escapes, none of which a config file wants. Rendering here reads own JSON properties only,
 * and a name that resolves to nothing is an error, never an empty string.
 *
 * Names: `{{key}}` is a key of this secret's JSON object (`{{db.host}}` walks into objects; a key
 * that itself holds dots, like `tls.crt`, is found first); `{{.}}` is the value itself (a secret
 * that is not a JSON object or array is text); `{{secrets.NAME.key}}` reads another secret the
 * agent fetches, by its NAME. A fallback is an inverted section: `{{^port}}5432{{/port}}`.
 */

/** A parsed template; `names` are the secret NAMEs it reads through `secrets.`. */
export interface CompiledTemplate {
  readonly field: string;
  readonly text: string;
  readonly tokens: readonly Token[];
  /** Every `secrets.…` path with where it is, to check (and resolve) against the secrets' names. */
  readonly secretPaths: readonly { readonly path: string; readonly at: number }[];
}

/** A value that does not fit the template: names the tag and where it is; never quotes a value. */
export class TemplateError extends Error {
  readonly problem: string;
  readonly fix: string;
  constructor(problem: string, fix: string) {
    super(problem);
    this.name = 'TemplateError';
    this.problem = problem;
    this.fix = fix;
  }
}

type Token = readonly [type: string, value: string, start: number, end: number, children?: Token[]];

/** The name `secrets` and what follows it belong to the other secrets. */
const SECRETS = 'secrets';
/** Deeper nesting is no config file, and would cost stack in the recursive check and render. */
const MAX_DEPTH = 64;
/** A tag name with a space, a newline or a brace swallowed text: a `}}` is missing. */
const SWALLOWED = /[\s{}]/;

// A writer of our own, without mustache's global cache: a template is parsed once, at start-up.
const parser = new Mustache.Writer();
(parser as { templateCache?: unknown }).templateCache = undefined;

/** Parses `text` or throws a ConfigError naming `field`, the line and the column. */
export function compileTemplate(text: string, field: string): CompiledTemplate {
  let tokens: Token[];
  try {
    tokens = parser.parse(text) as Token[];
  } catch (e) {
    throw syntaxError(text, field, e instanceof Error ? e.message : '');
  }
  const secretPaths: { path: string; at: number }[] = [];
  const check = (list: readonly Token[], depth: number): void => {
    for (const [type, value, start, , children] of list) {
      if (type === '>')
        throw new ConfigError(
          field,
          `${where(text, start)}: {{> ${value}}} includes a partial, and templates have none`,
          'write the text in place',
        );
      if (!['name', '&', '#', '^'].includes(type)) continue;
      if (value === '')
        throw new ConfigError(
          field,
          `${where(text, start)}: a tag names nothing`,
          'write a key, e.g. {{password}}',
        );
      if (SWALLOWED.test(value))
        throw new ConfigError(
          field,
          `${where(text, start)}: a tag's name holds a space, a line break or a brace, so a }} is missing before it`,
          'close every tag with }}: {{password}}',
        );
      if (value === SECRETS || value.startsWith(`${SECRETS}.`)) secretPaths.push({ path: value, at: start });
      if (children) {
        if (depth >= MAX_DEPTH)
          throw new ConfigError(
            field,
            `${where(text, start)}: sections nest deeper than ${MAX_DEPTH}`,
            'nest fewer sections',
          );
        check(children, depth + 1);
      }
    }
  };
  check(tokens, 1);
  return { field, text, tokens, secretPaths };
}

/**
 * Problems with the template's `secrets.NAME` paths, given the names secrets have: each must start
 * with a known name. Run at start-up (agent) and at admission (webhook), before any fetch.
 */
export function checkSecretNames(
  template: CompiledTemplate,
  names: readonly string[],
  fix: (path: string) => string,
): ConfigError[] {
  return template.secretPaths
    .filter(({ path }) => secretNameOf(path, names) === undefined)
    .map(
      ({ path, at }) =>
        new ConfigError(
          template.field,
          path === SECRETS
            ? `${where(template.text, at)}: {{${SECRETS}}} names no secret`
            : `${where(template.text, at)}: {{${path}}} names no secret the agent fetches (${names.length === 0 ? 'no secret has a name' : `names: ${names.map(quote).join(', ')}`})`,
          fix(path),
        ),
    );
}

/** The secret name a `secrets.…` path starts with: the longest, as names may hold dots. */
export function secretNameOf(path: string, names: readonly string[]): string | undefined {
  const rest = path.slice(SECRETS.length + 1);
  return names.filter((n) => rest === n || rest.startsWith(`${n}.`)).sort((a, b) => b.length - a.length)[0];
}

/** What a template reads: this secret's value and, by name, the others'. */
export interface TemplateScope {
  readonly own: TemplateValue;
  readonly secrets: ReadonlyMap<string, TemplateValue>;
}

/** A secret's value as templates see it: parsed when it is a JSON object or array, else its text. */
export type TemplateValue = Json;

/** Decodes a fetched value for a template, or throws a TemplateError for bytes that are not text. */
export function templateValue(bytes: Uint8Array, whose: string): TemplateValue {
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    throw new TemplateError(
      `${whose} is not UTF-8 text (${bytes.byteLength} bytes), so a template cannot hold it`,
      'write binary secrets with FORMAT=raw',
    );
  }
  const first = text.trimStart()[0];
  if (first === '{' || first === '[') {
    try {
      return JSON.parse(text) as Json;
    } catch {
      // Text that starts like JSON but is not: used as text, as a PEM or a password would be.
    }
  }
  return text;
}

interface Frame {
  readonly view: Json | SecretsView;
}

/** The root frame: `secrets…` reads the other secrets, anything else this secret's value. */
class SecretsView {
  readonly own: Json;
  readonly secrets: ReadonlyMap<string, Json>;
  constructor(scope: TemplateScope) {
    this.own = scope.own;
    this.secrets = scope.secrets;
  }
}

type Resolved = { readonly hit: true; readonly value: Json } | { readonly hit: false };
const MISS: Resolved = { hit: false };

/** Renders the template over `scope`; throws TemplateError for a name that resolves to nothing. */
export function renderTemplate(template: CompiledTemplate, scope: TemplateScope): string {
  return renderTokens(template, template.tokens, [{ view: new SecretsView(scope) }]);
}

function renderTokens(template: CompiledTemplate, tokens: readonly Token[], stack: readonly Frame[]): string {
  let out = '';
  for (const [type, value, start, , children] of tokens) {
    // Sections over lists multiply: stop at the file size limit rather than at the heap's.
    if (out.length > MAX_SECRET_BYTES)
      throw new TemplateError(
        `${template.field}: the rendered file is over ${MAX_SECRET_BYTES} bytes`,
        'keep each file at most 1 MiB: loop over fewer or smaller values',
      );
    switch (type) {
      case 'text':
        out += value;
        break;
      case 'name':
      case '&': {
        const found = lookup(value, stack);
        if (!found.hit || found.value === null) throw missing(template, value, start, found.hit);
        out += typeof found.value === 'string' ? found.value : JSON.stringify(found.value);
        break;
      }
      case '#': {
        const found = lookup(value, stack);
        if (!found.hit || isFalsy(found.value)) break;
        const items = Array.isArray(found.value) ? found.value : [found.value];
        for (const item of items) out += renderTokens(template, children ?? [], [...stack, { view: item }]);
        break;
      }
      case '^': {
        const found = lookup(value, stack);
        if (!found.hit || isFalsy(found.value)) out += renderTokens(template, children ?? [], stack);
        break;
      }
      // '!' comments and '=' delimiter changes render nothing; partials were refused at compile.
    }
  }
  return out;
}

function isFalsy(value: Json): boolean {
  return value === null || value === false || value === '' || (Array.isArray(value) && value.length === 0);
}

/** Mustache's context stack: the innermost frame that resolves the whole name wins. */
function lookup(name: string, stack: readonly Frame[]): Resolved {
  if (name === '.') {
    const top = stack[stack.length - 1]!.view;
    return { hit: true, value: top instanceof SecretsView ? top.own : top };
  }
  for (let i = stack.length - 1; i >= 0; i--) {
    const view = stack[i]!.view;
    const found =
      view instanceof SecretsView
        ? name === SECRETS || name.startsWith(`${SECRETS}.`)
          ? resolveSecret(view, name)
          : resolve(view.own, name)
        : resolve(view, name);
    if (found.hit) return found;
  }
  return MISS;
}

function resolveSecret(view: SecretsView, path: string): Resolved {
  const name = secretNameOf(path, [...view.secrets.keys()]);
  if (name === undefined) return MISS;
  const value = view.secrets.get(name)!;
  const rest = path.slice(SECRETS.length + 1 + name.length + 1);
  return rest === '' ? { hit: true, value } : resolve(value, rest);
}

/**
 * Own properties only, so nothing reaches JavaScript's prototypes. A key holding dots is tried
 * whole first, then split at the last dot that leaves a key that exists.
 */
function resolve(view: Json, path: string): Resolved {
  if (typeof view !== 'object' || view === null) return MISS;
  const has = (key: string) =>
    (Array.isArray(view) ? /^(?:0|[1-9]\d*)$/.test(key) : true) && Object.hasOwn(view, key);
  const get = (key: string) => (view as Record<string, Json>)[key]!;
  if (has(path)) return { hit: true, value: get(path) };
  for (let dot = path.lastIndexOf('.'); dot > 0; dot = path.lastIndexOf('.', dot - 1)) {
    const head = path.slice(0, dot);
    if (!has(head)) continue;
    const found = resolve(get(head), path.slice(dot + 1));
    if (found.hit) return found;
  }
  return MISS;
}

function missing(template: CompiledTemplate, name: string, at: number, isNull: boolean): TemplateError {
  const tag = `{{${name}}}`;
  const whose = name.startsWith(`${SECRETS}.`) ? 'the secret it reads' : 'the secret';
  return new TemplateError(
    `${template.field} ${where(template.text, at)}: ${tag} ${isNull ? 'is null' : `names no key of ${whose}`}`,
    `check the key against the secret's keys, or give a fallback: {{#${name}}}${tag}{{/${name}}}{{^${name}}}default{{/${name}}}`,
  );
}

/** `line L, column C` (1-based) of offset `at` in `text`. */
export function where(text: string, at: number): string {
  const before = text.slice(0, at);
  const line = before.split('\n').length;
  return `line ${line}, column ${at - before.lastIndexOf('\n')}`;
}

/** mustache's parse errors end with " at OFFSET": they become line and column. */
function syntaxError(text: string, field: string, message: string): ConfigError {
  const m = /^(.*?)(?: at (\d+))?$/s.exec(message)!;
  let at = m[2] === undefined ? undefined : Number(m[2]);
  // For a tag or a section left open mustache gives where it gave up (the end); with the default
  // delimiters the opening that was never closed is found instead: that is where the fix goes.
  const defaults = !text.includes('{{=');
  const section = /^Unclosed section "(.*)"$/s.exec(m[1]!);
  if (defaults && at !== undefined && section) {
    const opened = [`{{#${section[1]}}}`, `{{^${section[1]}}}`].map((open) => text.lastIndexOf(open, at));
    if (Math.max(...opened) >= 0) at = Math.max(...opened);
  } else if (at === undefined && m[1]!.startsWith('Invalid tags')) {
    // No offset given: the last delimiter change is the one mustache could not read.
    const change = text.lastIndexOf('{{=');
    if (change >= 0) at = change;
  } else if (defaults && at !== undefined && m[1] === 'Unclosed tag') {
    const open = text.lastIndexOf('{{', at);
    if (open >= 0) at = open;
  }
  const what = m[1]!
    .replace(/^Unclosed tag$/, 'a tag is not closed with }}')
    .replace(/^Invalid tags: .*/s, 'a {{=…=}} tag sets delimiters that are not two words');
  return new ConfigError(
    field,
    `${at === undefined ? 'the template' : where(text, Math.min(at, text.length))}: ${what.charAt(0).toLowerCase()}${what.slice(1)}`,
    'close every {{tag}} and every {{#section}} with {{/section}} in order (docs/templates.md)',
  );
}
