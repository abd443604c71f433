import type { SecretSpec } from '../contract/agent-config.ts';
import { AGENT_SETTINGS } from '../contract/agent-settings.ts';
import { closestName } from '../contract/env-names.ts';
import { ConfigError, quote } from '../contract/errors.ts';
import {
  SECRET_SETTINGS,
  SECRET_VAR,
  secretVar,
  type SecretSettingName,
} from '../contract/secret-settings.ts';
import { settingsReader, type Env, type Setting } from '../contract/settings.ts';
import { findFileConflict } from './file-clash.ts';

/** The agent-wide settings a secret falls back to; undefined where their own parse failed. */
export interface SecretDefaults {
  readonly fileMode: number | undefined;
  readonly refreshIntervalMs: number | undefined;
}

/**
 * The secrets to deliver, read from SECRET_<N>_* (numbered 0, 1, 2, … without gaps) or from the
 * legacy single-secret form (SECRET_ARN, SECRET_FILENAME); each problem found is pushed to `errors`.
 * `setName` names the file set the agent owns in the volume.
 */
export function parseSecretSpecs(
  env: Env,
  errors: ConfigError[],
  { fileMode, refreshIntervalMs }: SecretDefaults,
): { secrets: SecretSpec[]; setName: string } {
  const read = settingsReader([env], errors);
  const g = AGENT_SETTINGS;
  const secrets: SecretSpec[] = [];
  let setName = 'data';
  const indexed = readIndexed(env, errors);

  if (env.SECRET_ARN !== undefined) {
    if (indexed.size > 0) {
      errors.push(
        new ConfigError(
          'SECRET_ARN',
          'the legacy SECRET_ARN form is set together with SECRET_<N>_* variables',
          'use one form: move SECRET_ARN to SECRET_<N>_REF',
        ),
      );
    }
    const ref = read('SECRET_ARN', g.SECRET_ARN);
    const filename = read('SECRET_FILENAME', g.SECRET_FILENAME);
    if (ref && filename !== undefined && fileMode !== undefined) {
      secrets.push({
        id: 'SECRET_ARN',
        ref,
        filename,
        format: 'raw',
        mode: fileMode,
        refreshIntervalMs: refreshIntervalMs ?? 0,
      });
      // One set per file name, so sequential init containers (one per secret) can share the volume.
      setName = `data-${filename.replace(/[^A-Za-z0-9]/g, '-')}`;
    }
  } else if (env.SECRET_FILENAME !== undefined) {
    errors.push(
      new ConfigError(
        'SECRET_FILENAME',
        'is set without SECRET_ARN',
        'set SECRET_ARN too, or use SECRET_<N>_REF / SECRET_<N>_FILENAME',
      ),
    );
  }

  const indices = [...indexed.keys()].sort((a, b) => a - b);
  indices.forEach((index, position) => {
    if (index !== position) {
      errors.push(
        new ConfigError(
          `SECRET_${position}_REF`,
          `secrets are numbered with a gap: SECRET_${index}_* is set but SECRET_${position}_REF is not`,
          'number secrets 0, 1, 2, … without gaps',
        ),
      );
    }
  });
  for (const index of indices) {
    const vars = indexed.get(index)!;
    const get = <T>(name: SecretSettingName, s: Setting<T>): T | undefined => {
      const field = secretVar(index, name);
      const raw = vars.get(name);
      if (raw === undefined) return undefined;
      return read(field, s, raw);
    };
    const id = `SECRET_${index}`;
    if (!vars.has('REF')) {
      errors.push(
        new ConfigError(
          secretVar(index, 'REF'),
          `${id}_* settings are given but no reference`,
          `set ${id}_REF to the secret to fetch`,
        ),
      );
      continue;
    }
    const ref = get('REF', SECRET_SETTINGS.REF);
    const format = get('FORMAT', SECRET_SETTINGS.FORMAT) ?? 'raw';
    const mode = get('MODE', SECRET_SETTINGS.MODE) ?? fileMode;
    const refresh = get('REFRESH_INTERVAL', SECRET_SETTINGS.REFRESH_INTERVAL) ?? refreshIntervalMs ?? 0;
    const name = get('NAME', SECRET_SETTINGS.NAME);
    const template = get('TEMPLATE', SECRET_SETTINGS.TEMPLATE);
    if (format === 'template' && !vars.has('TEMPLATE')) {
      errors.push(
        new ConfigError(
          secretVar(index, 'TEMPLATE'),
          'is not set, and FORMAT=template renders it',
          `set ${id}_TEMPLATE to the file's text, e.g. postgres://{{username}}:{{password}}@db:5432/app`,
        ),
      );
      continue;
    }
    if (format !== 'template' && vars.has('TEMPLATE')) {
      errors.push(
        new ConfigError(
          secretVar(index, 'TEMPLATE'),
          `is set, but ${id}_FORMAT is ${quote(format)}, so it would be ignored`,
          `set ${id}_FORMAT=template, or remove ${id}_TEMPLATE`,
        ),
      );
      continue;
    }
    let filename: string | undefined; // undefined after a parse error, already recorded
    if (vars.has('FILENAME')) filename = get('FILENAME', SECRET_SETTINGS.FILENAME);
    else if (format === 'split') filename = '';
    else {
      errors.push(
        new ConfigError(
          secretVar(index, 'FILENAME'),
          'is not set',
          'name the file to write, e.g. db-password (only FORMAT=split may leave it empty)',
        ),
      );
      continue;
    }
    if (filename === '' && format !== 'split') {
      errors.push(
        new ConfigError(secretVar(index, 'FILENAME'), 'is empty', 'name the file to write, e.g. db-password'),
      );
      continue;
    }
    if (ref && filename !== undefined && mode !== undefined)
      secrets.push({
        id,
        ref,
        filename,
        format,
        mode,
        refreshIntervalMs: refresh,
        ...(name !== undefined ? { name } : {}),
        ...(template !== undefined ? { template } : {}),
      });
  }
  const named = new Map<string, string>();
  for (const s of secrets) {
    if (s.name === undefined) continue;
    const other = named.get(s.name);
    if (other)
      errors.push(
        new ConfigError(
          `${s.id}_NAME`,
          `${other} is already named ${quote(s.name)}`,
          'give every secret its own name',
        ),
      );
    else named.set(s.name, s.id);
  }

  const conflict = findFileConflict(secrets);
  if (conflict) errors.push(conflict);
  return { secrets, setName };
}

/** Groups SECRET_<N>_<NAME> variables by N; reports unknown names and non-canonical numbers. */
function readIndexed(env: Env, errors: ConfigError[]): Map<number, Map<SecretSettingName, string>> {
  const byIndex = new Map<number, Map<SecretSettingName, string>>();
  for (const [name, value] of Object.entries(env)) {
    if (value === undefined) continue;
    const m = SECRET_VAR.exec(name);
    if (!m) continue;
    const [, digits, setting] = m;
    if (String(Number(digits)) !== digits || Number(digits) > 9999) {
      errors.push(
        new ConfigError(
          name,
          `${quote(digits!)} is not a secret number`,
          'number secrets 0, 1, 2, … without leading zeros',
        ),
      );
      continue;
    }
    if (!Object.hasOwn(SECRET_SETTINGS, setting!)) {
      const meant = closestName(setting!, Object.keys(SECRET_SETTINGS));
      errors.push(
        new ConfigError(
          name,
          `${quote(setting!)} is not a secret setting, so its value would be ignored`,
          meant
            ? `did you mean SECRET_${digits}_${meant}? Rename it, or remove it`
            : `use one of ${Object.keys(SECRET_SETTINGS).join(', ')}`,
        ),
      );
      continue;
    }
    const index = Number(digits);
    let vars = byIndex.get(index);
    if (!vars) byIndex.set(index, (vars = new Map()));
    vars.set(setting as SecretSettingName, value);
  }
  return byIndex;
}
