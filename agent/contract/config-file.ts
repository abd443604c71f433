import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { ConfigError, ConfigErrors, quote } from './errors.ts';
import type { Env } from './settings.ts';

/**
 * Reads a settings file (AGENT_CONFIG_FILE, WEBHOOK_CONFIG_FILE): a YAML mapping (JSON is YAML too)
 * whose keys are the env names of the reference tables (docs/reference/), so one vocabulary serves env, files and docs.
 * Scalars become the strings env would hold. Throws ConfigErrors naming `field` and each bad key;
 * parser messages are never passed on, because they quote the file's text.
 */
export function readConfigFile(path: string, field: string, isSetting: (key: string) => boolean): Env {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code ?? 'error';
    throw new ConfigErrors([
      new ConfigError(
        field,
        `cannot read ${quote(path)} (${code})`,
        'mount the file there, readable by this process',
      ),
    ]);
  }
  let doc: unknown;
  try {
    // logLevel 'error': warnings (unknown tags, complex keys) would go to process.emitWarning, which
    // prints the offending line, value included, on stderr.
    doc = parseYaml(text, { logLevel: 'error' });
  } catch {
    throw new ConfigErrors([
      new ConfigError(field, `${quote(path)} is not valid YAML or JSON`, 'fix the syntax'),
    ]);
  }
  if (doc === null || doc === undefined) return {};
  if (typeof doc !== 'object' || Array.isArray(doc)) {
    throw new ConfigErrors([
      new ConfigError(
        field,
        `${quote(path)} is not a mapping of settings`,
        'write NAME: value lines with the setting names of docs/reference/',
      ),
    ]);
  }
  const env: Record<string, string> = {};
  const errors: ConfigError[] = [];
  for (const [key, value] of Object.entries(doc as Record<string, unknown>)) {
    if (!isSetting(key))
      errors.push(
        new ConfigError(
          `${field} ${quote(key)}`,
          'is not a setting this file can hold',
          'use the setting names of docs/reference/',
        ),
      );
    else if (typeof value === 'string') env[key] = value;
    else if (typeof value === 'number' || typeof value === 'boolean') env[key] = String(value);
    else
      errors.push(
        new ConfigError(
          `${field} ${quote(key)}`,
          'is not a string, number or boolean',
          'write a plain value',
        ),
      );
  }
  if (errors.length > 0) throw new ConfigErrors(errors);
  return env;
}
