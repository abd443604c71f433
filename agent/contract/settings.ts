import { parseDuration } from './duration.ts';
import { ConfigError, quote } from './errors.ts';

/**
 * How settings are declared and read, shared by the agent's env contract and the webhook's config:
 * each setting is data (default, one-line doc, parser), so parsing, errors and the reference tables
 * all come from one declaration.
 */

export type Env = Readonly<Record<string, string | undefined>>;

export interface Setting<T> {
  /** The default as a user would write it; undefined means optional with no default. */
  readonly default: string | undefined;
  readonly doc: string;
  /** Parses the text or throws a ConfigError naming `field`. */
  readonly parse: (text: string, field: string) => T;
}

export function setting<T>(s: Setting<T>): Setting<T> {
  return s;
}

/**
 * Reads settings from `sources` (the first that has a name wins), collecting ConfigErrors in
 * `errors` instead of stopping at the first, so a user fixes everything in one pass.
 */
export function settingsReader(sources: readonly Env[], errors: ConfigError[]) {
  return <T>(name: string, s: Setting<T>, fallback?: string): T | undefined => {
    const raw = sources.map((env) => env[name]).find((v) => v !== undefined) ?? fallback ?? s.default;
    if (raw === undefined) return undefined;
    try {
      return s.parse(raw, name);
    } catch (e) {
      if (!(e instanceof ConfigError)) throw e;
      errors.push(e);
      return undefined;
    }
  };
}

export function oneOf<const T extends string>(values: readonly T[]): (text: string, field: string) => T {
  return (text, field) => {
    if ((values as readonly string[]).includes(text)) return text as T;
    throw new ConfigError(
      field,
      `${quote(text)} is not one of ${values.join(', ')}`,
      `set it to one of ${values.join(', ')}`,
    );
  };
}

export function boolean(text: string, field: string): boolean {
  if (text === 'true') return true;
  if (text === 'false') return false;
  throw new ConfigError(field, `${quote(text)} is not a boolean`, 'set it to true or false');
}

/** A Go-style duration in [minMs, maxMs], in milliseconds. */
export function duration(minMs: number, maxMs = Infinity, example = '30s, 1m30s or 2m') {
  return (text: string, field: string): number => {
    const ms = parseDuration(text);
    if (ms === undefined)
      throw new ConfigError(field, `${quote(text)} is not a duration`, `write it like ${example}`);
    if (ms < minMs || ms > maxMs) {
      const range =
        maxMs === Infinity ? `at least ${minMs / 1000}s` : `between ${minMs / 1000}s and ${maxMs / 1000}s`;
      throw new ConfigError(field, `${quote(text)} is out of range`, `use ${range}`);
    }
    return ms;
  };
}

/** A whole number in [min, max]. */
export function count(min: number, max: number) {
  return (text: string, field: string): number => {
    const n = /^\d{1,9}$/.test(text) ? Number(text) : NaN;
    if (!(n >= min && n <= max))
      throw new ConfigError(
        field,
        `${quote(text)} is not a whole number from ${min} to ${max}`,
        `write a number such as ${min + 2}`,
      );
    return n;
  };
}

export function nonEmpty(text: string, field: string): string {
  if (text.trim() === '') throw new ConfigError(field, 'is empty', 'set a value or remove the setting');
  return text;
}

export function absolutePath(text: string, field: string): string {
  if (!text.startsWith('/') || text.includes('\0')) {
    throw new ConfigError(
      field,
      `${quote(text)} is not an absolute path`,
      'use an absolute path such as /var/run/secrets/app',
    );
  }
  return text;
}
