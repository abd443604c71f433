/**
 * The error catalogue: every place agent/ and webhook/ construct an error a user reads
 * (`new ConfigError(field, problem, fix)`, `new ProviderError(reason, detail, fix)`, …) and every warn/error
 * log line, read from the source with the TypeScript compiler API. docs/tables.ts renders it into
 * docs/troubleshooting.md, so the guide lists exactly what the code can say.
 *
 * Messages are templates: literal text is kept, every `${expr}` becomes a placeholder such as `‹dir›`
 * named after the expression, and nothing is ever evaluated at run time, so no value can reach the docs.
 * Constants (`PREFIX`, `MAX_REFERENCE`, `MODES.join(', ')`) are folded in when they are literal in code.
 * A message or fix passed in by a caller (`fail(problem, fix)`, `vaultError(e, what, denied)`) is
 * followed to every call of that function, so the table shows the callers' texts, not `‹problem›`.
 */
import { globSync, readFileSync } from 'node:fs';
import { relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

/** Which constructor parameter holds what, by index. */
interface ClassRoles {
  /** The field, annotation, reason, path or status the error names. */
  readonly where?: number;
  /** The message; absent: the class builds it in `super(...)`, rendered from the call's arguments. */
  readonly message?: number;
  /** The fix; absent: the text after ". Fix: " in the message, if any. */
  readonly fix?: number;
  /** Options object whose `transient` says whether the failure is retried (ProviderError). */
  readonly options?: number;
}

/**
 * Constructor parameter names, by role: the error classes share this vocabulary
 * (`ConfigError(field, problem, fix)`, `ProviderError(reason, detail, fix, opts)`, `WriteError(path, …)`),
 * so a new class in the same style is read without touching this file. A class whose message is
 * none of these is rendered from its `super(...)` call.
 */
const ROLE_PARAMETERS = {
  where: ['field', 'reason', 'path', 'file', 'secretId', 'status'],
  message: ['problem', 'detail', 'message'],
  fix: ['fix'],
  options: ['opts'],
} as const satisfies Record<keyof ClassRoles, readonly string[]>;

/** A named error class: `ConfigError`, never `Error` itself (that one is matched separately). */
const NAMED_ERROR = /^[A-Z][A-Za-z]*Error$/;
/** Where a bare `new Error(` is user-facing: the webhook's start-up and TLS failures. */
const PLAIN_ERROR_FILES = /^webhook\//;

export interface ErrorRow {
  readonly errorClass: string;
  /** Repository-relative path of the file that constructs it. */
  readonly file: string;
  readonly where: string;
  readonly message: string;
  readonly fix: string;
  /** ProviderError only: `transient` as written at the site, or undefined for the class default. */
  readonly transient?: boolean;
}

/** One `new XError(...)` in the source, with the rows it can produce (several when callers pass the text). */
export interface ErrorSite {
  readonly errorClass: string;
  readonly file: string;
  /** The class's constructor takes a fix (or writes one after ". Fix: "): every row must carry one. */
  readonly takesFix: boolean;
  readonly rows: readonly ErrorRow[];
}

export interface LogRow {
  readonly file: string;
  readonly level: 'warn' | 'error';
  readonly message: string;
  /** Keys of the structured fields logged with it (`reason`, `fix`, …). */
  readonly fields: readonly string[];
}

export interface ErrorCatalogue {
  readonly sites: readonly ErrorSite[];
  readonly logs: readonly LogRow[];
  /** The members of `FailureReason` in agent/providers/provider.ts, in declaration order. */
  readonly failureReasons: readonly string[];
}

/** The files scanned: all of agent/ and webhook/, as repository-relative paths. */
export function catalogueFiles(root: string): string[] {
  return globSync(['agent/**/*.ts', 'webhook/**/*.ts'], { cwd: root })
    .filter((f) => !f.endsWith('.d.ts'))
    .map((f) => f.split('\\').join('/'))
    .sort();
}

/** `new XError(` sites counted by a plain regular expression: the check that the compiler scan missed none. */
export function countErrorSitesByText(root: string): Map<string, number> {
  const counts = new Map<string, number>();
  for (const file of catalogueFiles(root)) {
    const text = readFileSync(`${root}/${file}`, 'utf8');
    for (const m of text.matchAll(/\bnew ((?:[A-Z][A-Za-z]*)?Error)\(/g)) {
      if (m[1] === 'Error' && !PLAIN_ERROR_FILES.test(file)) continue;
      counts.set(m[1]!, (counts.get(m[1]!) ?? 0) + 1);
    }
  }
  return counts;
}

const ROOT = fileURLToPath(new URL('..', import.meta.url)).replace(/\/$/, '');
let cached: ErrorCatalogue | undefined;

/** The catalogue of this repository, scanned once per process (every generated block shares it). */
export function errorCatalogue(): ErrorCatalogue {
  cached ??= scanErrorCatalogue(ROOT);
  return cached;
}

export function scanErrorCatalogue(root: string): ErrorCatalogue {
  const files = catalogueFiles(root).map((f) => `${root}/${f}`);
  // Our own files and the ES lib (for `for (const x of list)` types), without node_modules typings:
  // symbols and imports between our files are all the scan needs, and the SDKs' typings would slow it.
  const program = ts.createProgram(files, {
    lib: ['lib.es2024.d.ts'],
    types: [],
    noResolve: true,
    noEmit: true,
    allowImportingTsExtensions: true,
    resolveJsonModule: true,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2024,
  });
  const sources = files.map((f) => program.getSourceFile(f)!);
  return new Scanner(program.getTypeChecker(), sources, root).scan();
}

/** A value known from the source alone: a literal, a constant, a list of them, an object's keys. */
type Static = string | number | boolean | readonly Static[] | { readonly keys: readonly string[] };
/** Parameters bound to the arguments of one call, while following a message to its callers. */
type Bindings = ReadonlyMap<ts.Symbol, ts.Expression>;

const MAX_DEPTH = 6;
/** More variants than this from one template and its conditionals are shown as a placeholder instead. */
const MAX_VARIANTS = 4;
/** Calls that only format a value: the placeholder is named after the value, not the method. */
const FORMATTING = new Set(['join', 'toString', 'slice', 'trim', 'toFixed', 'toISOString', 'replace', 'map']);
/** Conversions named after what they convert: `String(clash.mountPath)` → `‹mountPath›`. */
const CONVERSIONS = new Set(['String', 'Number', 'Boolean']);

class Scanner {
  readonly #checker: ts.TypeChecker;
  readonly #sources: readonly ts.SourceFile[];
  readonly #root: string;
  /**
   * Calls by the name they call (`fail`, `vaultError`, `x.deniedFix`), and identifiers passed as an
   * argument by name. Symbols are resolved only for the few names a message is followed to: resolving
   * every callee up front would type-check most of the program.
   */
  readonly #callsByName = new Map<string, ts.CallExpression[]>();
  readonly #argumentsByName = new Map<string, { call: ts.CallExpression; index: number }[]>();
  readonly #classes = new Map<string, ts.ClassDeclaration>();

  constructor(checker: ts.TypeChecker, sources: readonly ts.SourceFile[], root: string) {
    this.#checker = checker;
    this.#sources = sources;
    this.#root = root;
  }

  scan(): ErrorCatalogue {
    const news: ts.NewExpression[] = [];
    const logCalls: ts.CallExpression[] = [];
    let failureReasons: string[] = [];
    for (const source of this.#sources) {
      const visit = (node: ts.Node): void => {
        if (ts.isNewExpression(node) && ts.isIdentifier(node.expression)) {
          const name = node.expression.text;
          if (NAMED_ERROR.test(name) || (name === 'Error' && PLAIN_ERROR_FILES.test(this.#file(node))))
            news.push(node);
        } else if (ts.isCallExpression(node)) {
          this.#indexCall(node);
          if (isLogCall(node)) logCalls.push(node);
        } else if (ts.isClassDeclaration(node) && node.name && NAMED_ERROR.test(node.name.text)) {
          this.#classes.set(node.name.text, node);
        } else if (ts.isTypeAliasDeclaration(node) && node.name.text === 'FailureReason') {
          failureReasons = unionMembers(node.type);
        }
        ts.forEachChild(node, visit);
      };
      visit(source);
    }
    return {
      sites: news.map((n) => this.#site(n)),
      logs: logCalls.flatMap((c) => this.#logRows(c)),
      failureReasons,
    };
  }

  #file(node: ts.Node): string {
    return relative(this.#root, node.getSourceFile().fileName).split('\\').join('/');
  }

  #symbol(node: ts.Node): ts.Symbol | undefined {
    const at = ts.isPropertyAccessExpression(node) ? node.name : node;
    const symbol = this.#checker.getSymbolAtLocation(at);
    if (symbol && symbol.flags & ts.SymbolFlags.Alias) return this.#checker.getAliasedSymbol(symbol);
    return symbol;
  }

  #indexCall(call: ts.CallExpression): void {
    const name = calleeName(call.expression);
    if (name) this.#callsByName.set(name, [...(this.#callsByName.get(name) ?? []), call]);
    call.arguments.forEach((arg, index) => {
      if (ts.isIdentifier(arg))
        this.#argumentsByName.set(arg.text, [
          ...(this.#argumentsByName.get(arg.text) ?? []),
          { call, index },
        ]);
    });
  }

  /** Calls whose callee is `symbol`, and calls made through a parameter that `symbol` was passed to. */
  #callsOf(symbol: ts.Symbol, depth: number): ts.CallExpression[] {
    if (depth > MAX_DEPTH) return [];
    const direct = (this.#callsByName.get(symbol.name) ?? []).filter(
      (c) => this.#symbol(c.expression) === symbol,
    );
    const through = (this.#argumentsByName.get(symbol.name) ?? []).flatMap(({ call, index }) => {
      if (this.#symbol(call.arguments[index]!) !== symbol) return [];
      const callee = this.#symbol(call.expression);
      const param = callee && functionOf(callee)?.parameters[index];
      const received = param && this.#checker.getSymbolAtLocation(param.name);
      return received ? this.#callsOf(received, depth + 1) : [];
    });
    return [...direct, ...through];
  }

  /** Every call of the function `fn`, including calls through a parameter it was passed to. */
  #callsTo(fn: ts.SignatureDeclaration): ts.CallExpression[] {
    const symbol = functionSymbol(fn, this.#checker);
    return symbol ? this.#callsOf(symbol, 0) : [];
  }

  #site(node: ts.NewExpression): ErrorSite {
    const errorClass = (node.expression as ts.Identifier).text;
    const file = this.#file(node);
    const roles = this.#roles(errorClass);
    const argOf = (i: number | undefined) => (i === undefined ? undefined : node.arguments?.[i]);
    const followed = [argOf(roles.message), argOf(roles.fix)].filter((a) => a !== undefined);
    const options = argOf(roles.options);
    const transient =
      options && ts.isObjectLiteralExpression(options) ? literalFlag(options, 'transient') : undefined;
    const rows = this.#follow(followed, new Map(), 0).flatMap((bindings) => {
      const where = [...new Set(this.#render(argOf(roles.where), bindings))].join(' / ');
      const messages =
        roles.message === undefined
          ? this.#render(this.#superMessage(errorClass), this.#bindArguments(errorClass, node, bindings))
          : this.#render(argOf(roles.message), bindings);
      const fixes = roles.fix === undefined ? [undefined] : this.#render(argOf(roles.fix), bindings, 0, true);
      return messages.flatMap((text) =>
        fixes.map((fixText): ErrorRow => {
          const [message, fix] = fixText === undefined ? splitFix(text) : [text, fixText];
          return { errorClass, file, where, message, fix, ...(transient === undefined ? {} : { transient }) };
        }),
      );
    });
    const takesFix =
      roles.fix !== undefined ||
      (roles.message === undefined && /\. Fix: /.test(this.#superMessage(errorClass)?.getText() ?? ''));
    // A caller that passes an empty fix never lets that error reach anyone (kv.ts keeps only transient
    // failures of a mount lookup): it adds no row when other callers document the case.
    const withFix = rows.filter((r) => r.fix !== '');
    return { errorClass, file, takesFix, rows: dedupe(takesFix && withFix.length > 0 ? withFix : rows) };
  }

  /**
   * Which argument is what, from the constructor's parameter names (`message` for the built-in Error).
   * A class with a fix keeps message and fix apart; one without shows the message its `super(...)`
   * builds (KubernetesApiError: method, path, status and the API server's message), unless that is just
   * one of its parameters.
   */
  #roles(errorClass: string): ClassRoles {
    const names =
      errorClass === 'Error' ? ['message'] : this.#ctorOf(errorClass).parameters.map((p) => p.name.getText());
    const find = (role: keyof ClassRoles) => {
      const i = names.findIndex((n) => (ROLE_PARAMETERS[role] as readonly string[]).includes(n));
      return i < 0 ? undefined : i;
    };
    const fix = find('fix');
    const superMessage = errorClass === 'Error' ? undefined : this.#superMessage(errorClass);
    const passedOn =
      superMessage === undefined || (ts.isIdentifier(superMessage) && names.includes(superMessage.text));
    return {
      where: find('where'),
      message: fix !== undefined || passedOn ? find('message') : undefined,
      fix,
      options: find('options'),
    };
  }

  #ctorOf(errorClass: string): ts.ConstructorDeclaration {
    const declaration = this.#classes.get(errorClass);
    const ctor = declaration?.members.find(ts.isConstructorDeclaration);
    if (!ctor) throw new Error(`no class ${errorClass} with a constructor in agent/ or webhook/`);
    return ctor;
  }

  /** The message a class builds itself: the first argument of its `super(...)`. */
  #superMessage(errorClass: string): ts.Expression | undefined {
    let message: ts.Expression | undefined;
    const find = (n: ts.Node): void => {
      if (ts.isCallExpression(n) && n.expression.kind === ts.SyntaxKind.SuperKeyword)
        message = n.arguments[0];
      else ts.forEachChild(n, find);
    };
    const body = this.#ctorOf(errorClass).body;
    if (body) find(body);
    return message;
  }

  /** The constructor's parameters bound to the arguments of `new X(...)`, to render its `super(...)`. */
  #bindArguments(errorClass: string, node: ts.NewExpression, bindings: Bindings): Bindings {
    const bound = new Map(bindings);
    this.#ctorOf(errorClass).parameters.forEach((p, i) => {
      const symbol = this.#checker.getSymbolAtLocation(p.name);
      const arg = node.arguments?.[i];
      if (symbol && arg) bound.set(symbol, arg);
    });
    return bound;
  }

  /**
   * The bindings under which to render a site: one per call of the function whose parameter holds the
   * message or the fix, recursively (a caller may pass its own parameter on). A parameter used whole is
   * always followed; one used inside a template only when every call passes a constant for it (an
   * example, a list of allowed values), because otherwise the callers' variables would only rename it.
   */
  #follow(args: readonly ts.Expression[], bindings: Bindings, depth: number): Bindings[] {
    if (depth > MAX_DEPTH) return [bindings];
    for (const arg of args) {
      const whole = this.#resolve(arg, bindings);
      const candidates = ts.isIdentifier(whole) ? [whole] : identifiersIn(whole);
      for (const id of candidates) {
        const symbol = this.#symbol(id);
        if (!symbol || bindings.has(symbol)) continue;
        const param = symbol.valueDeclaration;
        if (!param || !ts.isParameter(param) || !ts.isIdentifier(param.name)) continue;
        const fn = param.parent;
        const index = fn.parameters.indexOf(param);
        const calls = this.#callsTo(fn);
        if (calls.length === 0) continue;
        if (
          id !== whole &&
          !calls.every((c) => {
            const given = c.arguments[index] ?? param.initializer;
            return given !== undefined && this.#evaluate(given, bindings, 0) !== undefined;
          })
        )
          continue;
        return calls.flatMap((call) => {
          const next = new Map(bindings);
          fn.parameters.forEach((p, i) => {
            const s = this.#checker.getSymbolAtLocation(p.name);
            const given = call.arguments[i] ?? p.initializer;
            if (s && given) next.set(s, given);
          });
          return this.#follow(args, next, depth + 1);
        });
      }
    }
    return [bindings];
  }

  /** An expression with bound parameters replaced by what the caller passed, and wrappers removed. */
  #resolve(node: ts.Expression, bindings: Bindings): ts.Expression {
    const inner = unwrap(node);
    if (ts.isIdentifier(inner)) {
      const symbol = this.#symbol(inner);
      const bound = symbol && bindings.get(symbol);
      if (bound) return this.#resolve(bound, bindings);
    }
    return inner;
  }

  /** A constant value, when the source alone determines it; undefined otherwise. */
  #evaluate(node: ts.Expression, bindings: Bindings, depth: number): Static | undefined {
    if (depth > MAX_DEPTH) return undefined;
    const n = this.#resolve(node, bindings);
    const ev = (e: ts.Expression) => this.#evaluate(e, bindings, depth + 1);
    if (ts.isStringLiteral(n) || ts.isNoSubstitutionTemplateLiteral(n)) return n.text;
    if (ts.isNumericLiteral(n)) return Number(n.text);
    if (n.kind === ts.SyntaxKind.TrueKeyword) return true;
    if (n.kind === ts.SyntaxKind.FalseKeyword) return false;
    if (ts.isTemplateExpression(n)) {
      let text = n.head.text;
      for (const span of n.templateSpans) {
        const v = ev(span.expression);
        if (typeof v !== 'string' && typeof v !== 'number') return undefined;
        text += String(v) + span.literal.text;
      }
      return text;
    }
    if (ts.isArrayLiteralExpression(n)) {
      const items = n.elements.map((e) => (ts.isSpreadElement(e) ? undefined : ev(e)));
      return items.every((i) => i !== undefined) ? (items as Static[]) : undefined;
    }
    if (ts.isObjectLiteralExpression(n)) {
      const keys = n.properties.map((p) =>
        !ts.isSpreadAssignment(p) && p.name && (ts.isIdentifier(p.name) || ts.isStringLiteral(p.name))
          ? p.name.text
          : undefined,
      );
      return keys.every((k) => k !== undefined) ? { keys: keys as string[] } : undefined;
    }
    if (ts.isPropertyAccessExpression(n) && n.name.text === 'length') {
      const target = ev(n.expression);
      return typeof target === 'string' || Array.isArray(target) ? target.length : undefined;
    }
    if (ts.isConditionalExpression(n)) {
      const condition = ev(n.condition);
      return condition === undefined ? undefined : ev(truthy(condition) ? n.whenTrue : n.whenFalse);
    }
    if (ts.isBinaryExpression(n)) {
      const [a, b] = [ev(n.left), ev(n.right)];
      if (a === undefined || b === undefined) return undefined;
      switch (n.operatorToken.kind) {
        case ts.SyntaxKind.EqualsEqualsEqualsToken:
          return a === b;
        case ts.SyntaxKind.ExclamationEqualsEqualsToken:
          return a !== b;
        case ts.SyntaxKind.GreaterThanToken:
          return typeof a === 'number' && typeof b === 'number' ? a > b : undefined;
        case ts.SyntaxKind.LessThanToken:
          return typeof a === 'number' && typeof b === 'number' ? a < b : undefined;
      }
      if (typeof a === 'number' && typeof b === 'number') {
        switch (n.operatorToken.kind) {
          case ts.SyntaxKind.AsteriskToken:
            return a * b;
          case ts.SyntaxKind.SlashToken:
            return a / b;
          case ts.SyntaxKind.PlusToken:
            return a + b;
          case ts.SyntaxKind.MinusToken:
            return a - b;
        }
      }
      if (n.operatorToken.kind === ts.SyntaxKind.PlusToken && typeof a === 'string' && typeof b === 'string')
        return a + b;
      return undefined;
    }
    if (ts.isCallExpression(n) && ts.isPropertyAccessExpression(n.expression)) {
      const method = n.expression.name.text;
      const target = n.expression.expression;
      if (method === 'join') {
        const list = ev(target);
        const separator = n.arguments[0] ? ev(n.arguments[0]) : ',';
        if (Array.isArray(list) && typeof separator === 'string') return list.map(String).join(separator);
      }
      if (method === 'keys' && ts.isIdentifier(target) && target.text === 'Object' && n.arguments[0]) {
        const object = ev(n.arguments[0]);
        if (object && typeof object === 'object' && !Array.isArray(object))
          return (object as { keys: string[] }).keys;
      }
      return undefined;
    }
    if (ts.isIdentifier(n)) {
      const initializer = this.#constInitializer(n);
      if (initializer) return ev(initializer);
    }
    return undefined;
  }

  /** What a `const` identifier was initialised with, or undefined for anything else. */
  #constInitializer(n: ts.Identifier): ts.Expression | undefined {
    const declaration = this.#symbol(n)?.valueDeclaration;
    return declaration &&
      ts.isVariableDeclaration(declaration) &&
      ts.getCombinedNodeFlags(declaration) & ts.NodeFlags.Const
      ? declaration.initializer
      : undefined;
  }

  /**
   * Text variants of an expression: constants folded, conditionals split, anything else a placeholder.
   * `locals`: a local constant is shown as what it holds (a fix kept in `const loginFix = …`), not as
   * `‹loginFix›`; messages keep theirs as placeholders (`‹detail›` is the backend's text).
   */
  #render(node: ts.Expression | undefined, bindings: Bindings, depth = 0, locals = false): string[] {
    if (node === undefined) return [''];
    const value = this.#evaluate(node, bindings, 0);
    if (typeof value === 'string' || typeof value === 'number') return [String(value)];
    const n = this.#resolve(node, bindings);
    if (depth > MAX_DEPTH) return [placeholder(n)];
    const again = (e: ts.Expression) => this.#render(e, bindings, depth + 1, locals);
    if (ts.isConditionalExpression(n)) {
      const condition = this.#evaluate(n.condition, bindings, 0);
      if (condition !== undefined) return again(truthy(condition) ? n.whenTrue : n.whenFalse);
      return [...again(n.whenTrue), ...again(n.whenFalse)];
    }
    if (ts.isTemplateExpression(n)) {
      let variants = [n.head.text];
      for (const span of n.templateSpans) {
        let parts = again(span.expression);
        if (variants.length * parts.length > MAX_VARIANTS)
          parts = [placeholder(this.#resolve(span.expression, bindings))];
        variants = variants.flatMap((v) => parts.map((p) => v + p + span.literal.text));
      }
      return variants;
    }
    if (ts.isCallExpression(n)) {
      const callee = n.expression;
      // quote() and JSON.stringify() put the user's text in double quotes: show the quotes.
      const quoting =
        (ts.isIdentifier(callee) && callee.text === 'quote') ||
        (ts.isPropertyAccessExpression(callee) && callee.getText() === 'JSON.stringify');
      if (quoting && n.arguments[0]) return again(n.arguments[0]).map((t) => `"${t}"`);
      const inlined = this.#inline(n, bindings, depth, locals);
      if (inlined) return inlined;
    }
    if (locals && ts.isIdentifier(n)) {
      const initializer = this.#constInitializer(n);
      if (initializer) return again(initializer);
    }
    return [placeholder(n)];
  }

  /**
   * A call of a one-expression function (`secretVar(index, 'REF')`), rendered as its body. A call of an
   * interface method (`auth.deniedFix(path)`) is rendered once per object literal that implements it.
   */
  #inline(call: ts.CallExpression, bindings: Bindings, depth: number, locals: boolean): string[] | undefined {
    const symbol = this.#symbol(call.expression);
    if (!symbol) return undefined;
    const own = functionOf(symbol);
    const fns = own ? [own] : this.#implementations(symbol);
    const variants = fns.flatMap((fn) => {
      const returned = returnedExpression(fn);
      if (!returned) return [];
      const next = new Map(bindings);
      fn.parameters.forEach((p, i) => {
        const s = this.#checker.getSymbolAtLocation(p.name);
        const given = call.arguments[i] ?? p.initializer;
        if (s && given) next.set(s, given);
      });
      return this.#render(returned, next, depth + 1, locals);
    });
    return variants.length > 0 ? variants : undefined;
  }

  /** Arrow functions in object literals that implement the interface member `symbol`. */
  #implementations(symbol: ts.Symbol): ts.SignatureDeclaration[] {
    const member = symbol.valueDeclaration ?? symbol.declarations?.[0];
    if (!member || !(ts.isMethodSignature(member) || ts.isPropertySignature(member))) return [];
    const found: ts.SignatureDeclaration[] = [];
    for (const source of this.#sources) {
      const visit = (n: ts.Node): void => {
        if (
          ts.isPropertyAssignment(n) &&
          ts.isIdentifier(n.name) &&
          n.name.text === symbol.name &&
          ts.isObjectLiteralExpression(n.parent)
        ) {
          const init = unwrap(n.initializer);
          const contextual = this.#checker.getContextualType(n.parent)?.getProperty(symbol.name);
          if ((ts.isArrowFunction(init) || ts.isFunctionExpression(init)) && contextual === symbol)
            found.push(init);
        }
        ts.forEachChild(n, visit);
      };
      visit(source);
    }
    return found;
  }

  #logRows(call: ts.CallExpression): LogRow[] {
    const level = (call.expression as ts.PropertyAccessExpression).name.text as LogRow['level'];
    const last = call.arguments.at(-1);
    if (!last) return [];
    const first = call.arguments[0];
    let fields: string[] = [];
    if (call.arguments.length > 1 && first && ts.isObjectLiteralExpression(first))
      fields = first.properties.flatMap((p) => (p.name && ts.isIdentifier(p.name) ? [p.name.text] : []));
    // A record logged whole (`log.error(failure, …)`): its fields are its type's properties.
    else if (call.arguments.length > 1 && first && ts.isIdentifier(first))
      fields = this.#checker
        .getTypeAtLocation(first)
        .getProperties()
        .map((p) => p.name);
    return this.#render(last, new Map()).map((message) => ({
      file: this.#file(call),
      level,
      message,
      fields,
    }));
  }
}

/** The name a call calls: `fail` in `fail(…)`, `deniedFix` in `auth.deniedFix(…)`. */
function calleeName(callee: ts.Expression): string | undefined {
  if (ts.isIdentifier(callee)) return callee.text;
  if (ts.isPropertyAccessExpression(callee)) return callee.name.text;
  return undefined;
}

/** `x.warn(…)` / `x.error(…)` on a logger: `log`, `this.#log`, `signalLog`, `options.log`. */
function isLogCall(call: ts.CallExpression): boolean {
  const callee = call.expression;
  if (!ts.isPropertyAccessExpression(callee)) return false;
  if (callee.name.text !== 'warn' && callee.name.text !== 'error') return false;
  const target = callee.expression;
  const name = ts.isPropertyAccessExpression(target) ? target.name.text : target.getText();
  return /log$/i.test(name);
}

function unwrap(node: ts.Expression): ts.Expression {
  let n = node;
  while (
    ts.isParenthesizedExpression(n) ||
    ts.isAsExpression(n) ||
    ts.isNonNullExpression(n) ||
    ts.isSatisfiesExpression(n) ||
    ts.isTypeAssertionExpression(n)
  )
    n = n.expression;
  return n;
}

/** Identifiers an expression reads, in source order (property names after a dot are not reads). */
function identifiersIn(node: ts.Node): ts.Identifier[] {
  const found: ts.Identifier[] = [];
  const visit = (n: ts.Node): void => {
    if (ts.isIdentifier(n)) found.push(n);
    else if (ts.isPropertyAccessExpression(n)) visit(n.expression);
    else ts.forEachChild(n, visit);
  };
  visit(node);
  return found;
}

/**
 * `‹name›` for an expression shown as a placeholder: named after its last identifier (`e.status` →
 * `‹status›`), a call after its function (`errorDetail(e)` → `‹errorDetail›`) unless the call only
 * formats a value (`MODES.join(', ')` → `‹MODES›`), an operation after its left side.
 */
function placeholder(node: ts.Expression): string {
  return `‹${placeholderName(node)}›`;
}

function placeholderName(node: ts.Node): string {
  if (ts.isIdentifier(node) || ts.isPrivateIdentifier(node)) return node.text.replace(/^#/, '');
  if (ts.isPropertyAccessExpression(node)) return placeholderName(node.name);
  if (ts.isElementAccessExpression(node)) return placeholderName(node.expression);
  if (ts.isCallExpression(node)) {
    const callee = node.expression;
    if (ts.isPropertyAccessExpression(callee) && FORMATTING.has(callee.name.text))
      return placeholderName(callee.expression);
    if (ts.isIdentifier(callee) && CONVERSIONS.has(callee.text) && node.arguments[0])
      return placeholderName(node.arguments[0]);
    return placeholderName(callee);
  }
  if (ts.isBinaryExpression(node)) return placeholderName(node.left);
  if (
    ts.isParenthesizedExpression(node) ||
    ts.isAsExpression(node) ||
    ts.isNonNullExpression(node) ||
    ts.isAwaitExpression(node) ||
    ts.isTypeOfExpression(node)
  )
    return placeholderName(node.expression);
  let last = 'value';
  node.forEachChild((child) => {
    last = placeholderName(child);
  });
  return last;
}

/** The function a symbol names: a declaration, a method, or a const holding an arrow or function expression. */
function functionOf(symbol: ts.Symbol): ts.SignatureDeclaration | undefined {
  const d = symbol.valueDeclaration;
  if (!d) return undefined;
  if (ts.isFunctionDeclaration(d) || ts.isMethodDeclaration(d)) return d;
  if (ts.isVariableDeclaration(d) && d.initializer) {
    const init = unwrap(d.initializer);
    if (ts.isArrowFunction(init) || ts.isFunctionExpression(init)) return init;
  }
  return undefined;
}

/** The symbol calls use for `fn`: its own name, or the name of the const it is assigned to. */
function functionSymbol(fn: ts.SignatureDeclaration, checker: ts.TypeChecker): ts.Symbol | undefined {
  if ((ts.isFunctionDeclaration(fn) || ts.isMethodDeclaration(fn)) && fn.name)
    return checker.getSymbolAtLocation(fn.name);
  const parent = fn.parent;
  if (parent && ts.isVariableDeclaration(parent)) return checker.getSymbolAtLocation(parent.name);
  return undefined;
}

/** The one expression a function returns: an arrow's expression body or a lone `return`. */
function returnedExpression(fn: ts.SignatureDeclaration): ts.Expression | undefined {
  const body = 'body' in fn ? (fn.body as ts.Node | undefined) : undefined;
  if (!body) return undefined;
  if (!ts.isBlock(body)) return ts.isExpression(body) ? body : undefined;
  const only = body.statements.length === 1 ? body.statements[0] : undefined;
  return only && ts.isReturnStatement(only) ? only.expression : undefined;
}

/** JavaScript truthiness of a constant. */
function truthy(value: Static): boolean {
  return typeof value === 'object' ? true : Boolean(value);
}

function literalFlag(object: ts.ObjectLiteralExpression, name: string): boolean | undefined {
  for (const p of object.properties) {
    if (!ts.isPropertyAssignment(p) || !ts.isIdentifier(p.name) || p.name.text !== name) continue;
    if (p.initializer.kind === ts.SyntaxKind.TrueKeyword) return true;
    if (p.initializer.kind === ts.SyntaxKind.FalseKeyword) return false;
  }
  return undefined;
}

function unionMembers(type: ts.TypeNode): string[] {
  const members = ts.isUnionTypeNode(type) ? type.types : [type];
  return members.flatMap((t) =>
    ts.isLiteralTypeNode(t) && ts.isStringLiteral(t.literal) ? [t.literal.text] : [],
  );
}

/** A class that writes `problem. Fix: fix` into its message (ServiceAccountError): the two parts. */
function splitFix(text: string): [string, string] {
  const at = text.indexOf('. Fix: ');
  return at < 0 ? [text, ''] : [text.slice(0, at), text.slice(at + '. Fix: '.length)];
}

function dedupe<T>(rows: readonly T[]): T[] {
  const seen = new Set<string>();
  return rows.filter((r) => {
    const key = JSON.stringify(r);
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

/** The sections of docs/troubleshooting.md, by what the user sees. */
export type Symptom =
  | 'admission'
  | 'references'
  | 'agent-config'
  | 'delivery'
  | 'refresh'
  | 'notify'
  | 'webhook'
  /** `secret-agent-webhook render`: its arguments, input, and a patch that would not apply (a bug). */
  | 'render'
  /** Never shown as such: VaultResponseError is always reported as a ProviderError (vault/errors.ts). */
  | 'internal';

/**
 * Where an error shows up, from the class and the file that raises it. An error this cannot place
 * stops `npm run docs`: a new kind of error needs a decision about which symptom it belongs to.
 */
export function errorSymptom(row: Pick<ErrorRow, 'errorClass' | 'file'>): Symptom {
  const { errorClass, file } = row;
  if (errorClass === 'VaultResponseError') return 'internal';
  // TemplateError and ValueFormatError reach the user as the SecretFormatError they are turned into.
  if (
    ['ProviderError', 'SecretFormatError', 'WriteError', 'TemplateError', 'ValueFormatError'].includes(
      errorClass,
    )
  )
    return 'delivery';
  if (errorClass === 'ServiceAccountError') return 'notify';
  if (/^webhook\/(cli\/(?!serve\.ts$)|apply-patch\.ts$)/.test(file)) return 'render';
  if (file.startsWith('webhook/')) {
    // Annotation checks deny the pod; the annotations' value parsers also check a few webhook settings.
    if (errorClass === 'ConfigError' && /^webhook\/(admission|annotations|parse)\//.test(file))
      return 'admission';
    return 'webhook';
  }
  if (errorClass === 'ConfigError') {
    // References and file names are checked by the agent and, for annotations, by the webhook.
    if (/^agent\/contract\/(reference|path)\.ts$/.test(file)) return 'references';
    return 'agent-config';
  }
  throw new Error(`${file}: decide where a ${errorClass} shows up (errorSymptom in docs/error-catalogue.ts)`);
}

/** Where a warn/error log line is read: the sidecar's refresh loop, its notifiers, or the webhook. */
export function logSymptom(row: Pick<LogRow, 'file'>): Symptom {
  const { file } = row;
  if (/^agent\/(modes\/init|main)\.ts$/.test(file)) return 'delivery';
  if (/^agent\/(modes\/sidecar\/|fetch\/)/.test(file)) return 'refresh';
  if (/^agent\/(notify|proc)\//.test(file)) return 'notify';
  if (file.startsWith('webhook/')) return 'webhook';
  throw new Error(
    `${file}: decide where its warn/error log lines show up (logSymptom in docs/error-catalogue.ts)`,
  );
}

/** The provider an error comes from, as the `provider` label of the agent's metrics; `any` for shared code. */
export function errorProvider(file: string): string {
  const m = /^agent\/providers\/([a-z0-9-]+)(?:\.ts$|\/)/.exec(file);
  return m && m[1] !== 'provider' ? m[1]! : 'any';
}
