import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import type { Env } from './env.ts';
import { ConfigError, quote } from './errors.ts';

/**
 * Reads AGENT_CONFIG_FILE: a JSON or YAML mapping whose keys are the env names of the tables
 * (`REFRESH_INTERVAL: 1m`, `SECRET_0_REF: aws:db`), so one vocabulary serves env, files and docs.
 * Scalars become the strings env would hold; anything nested is an error.
 */
export function readConfigFile(path: string): Env {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    throw new ConfigError(
      'AGENT_CONFIG_FILE',
      `cannot read ${quote(path)} (${(e as NodeJS.ErrnoException).code ?? 'error'})`,
      'mount the file there, readable by the agent',
    );
  }
  let doc: unknown;
  try {
    doc = path.endsWith('.json') ? JSON.parse(text) : parseYaml(text);
  } catch {
    // Parser messages may quote the file, which can hold references but should never be echoed whole.
    throw new ConfigError(
      'AGENT_CONFIG_FILE',
      `${quote(path)} is not valid ${path.endsWith('.json') ? 'JSON' : 'YAML'}`,
      'fix the syntax',
    );
  }
  if (doc === null || doc === undefined) return {};
  if (typeof doc !== 'object' || Array.isArray(doc)) {
    throw new ConfigError(
      'AGENT_CONFIG_FILE',
      `${quote(path)} is not a mapping of settings`,
      'write NAME: value lines with the env names of the README tables',
    );
  }
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(doc as Record<string, unknown>)) {
    if (!/^[A-Z][A-Z0-9_]*$/.test(key))
      throw new ConfigError(
        `AGENT_CONFIG_FILE ${quote(key)}`,
        'is not a setting name',
        'use the env names of the README tables, e.g. REFRESH_INTERVAL',
      );
    if (typeof value === 'string') env[key] = value;
    else if (typeof value === 'number' || typeof value === 'boolean') env[key] = String(value);
    else
      throw new ConfigError(
        `AGENT_CONFIG_FILE ${key}`,
        'is not a string, number or boolean',
        'write a plain value',
      );
  }
  return env;
}
