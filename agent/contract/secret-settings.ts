import { ConfigError, quote, valueShape } from './errors.ts';
import { parseFileMode } from './file-mode.ts';
import { validateRelativePath } from './path.ts';
import { parseReference } from './reference.ts';
import { duration, nonEmpty, oneOf, setting } from './settings.ts';

/**
 * The settings of each secret, read from `SECRET_<N>_<NAME>`, declared once as data like the agent's
 * own (agent-settings.ts): parsed by agent/config/parse-secret-specs.ts, rendered by the webhook
 * (render-secret-env.ts), documented from here.
 */

export const SECRET_FORMATS = [
  'raw',
  'split',
  'dotenv',
  'env',
  'json',
  'yaml',
  'properties',
  'template',
] as const;
export type SecretFormat = (typeof SECRET_FORMATS)[number];

/** A secret's name for templates; dots allowed, as the webhook's file names have them (tls.crt). */
export const SECRET_NAME = /^[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;

function secretName(text: string, field: string): string {
  if (!SECRET_NAME.test(text))
    throw new ConfigError(
      field,
      `${/^[\x21-\x7e]{1,64}$/.test(text) ? quote(text) : valueShape(text)} is not a secret name`,
      'use up to 63 letters, digits, ".", "_" and "-", starting and ending with a letter or digit',
    );
  return text;
}

/** Settings of secret number N, read from `SECRET_<N>_<NAME>`; N counts up from 0 without gaps. */
export const SECRET_SETTINGS = {
  REF: setting({
    default: undefined,
    doc: 'Required. The secret reference (see the reference forms).',
    parse: (text, field) => parseReference(text, field),
  }),
  FILENAME: setting({
    default: undefined,
    doc: 'Path of the file inside SECRETS_DIR (sub-directories allowed, never escaping it). Required except for `split`, where it is the directory the keys go into (default: the top level).',
    parse: (text, field) => (text === '' ? '' : validateRelativePath(text, field)),
  }),
  FORMAT: setting({
    default: 'raw',
    doc: "`raw`: the value as stored (with `#key`: that key’s value). `split`: each top-level JSON key as its own file. `dotenv`: the JSON object as KEY='value' lines. `env`: the same as `export KEY='value'` lines for `source` in a shell. `json`: the JSON value pretty-printed. `yaml`: the JSON value as YAML. `properties`: a Java .properties file (nested keys joined with `.`). `template`: SECRET_<N>_TEMPLATE rendered over the value, JSON or text (docs/templates.md). The others but `raw` need a JSON value; a binary secret only fits `raw`.",
    parse: oneOf(SECRET_FORMATS),
  }),
  TEMPLATE: setting({
    default: undefined,
    doc: 'With FORMAT=template: the file’s text, with `{{key}}` for this secret’s JSON keys and `{{secrets.NAME.key}}` for other secrets’ (docs/templates.md). Checked at start-up.',
    parse: nonEmpty,
  }),
  NAME: setting({
    default: undefined,
    doc: 'The name templates reach this secret by (`{{secrets.NAME.key}}`): letters, digits, `.`, `_`, `-`.',
    parse: secretName,
  }),
  MODE: setting({
    default: 'FILE_MODE',
    doc: 'File mode for this secret’s files, as FILE_MODE (octal with its leading 0, at most 0644).',
    parse: parseFileMode,
  }),
  REFRESH_INTERVAL: setting({
    default: 'REFRESH_INTERVAL',
    doc: 'Sidecar refresh period for this secret.',
    parse: duration(1000, 86_400_000),
  }),
} as const;

export type SecretSettingName = keyof typeof SECRET_SETTINGS;

/** `SECRET_<N>_<NAME>`, the per-secret env names. */
export const SECRET_VAR = /^SECRET_(\d+)_([A-Z0-9_]+)$/;

/** The env var name of setting `name` of secret `index`. */
export function secretVar(index: number, name: SecretSettingName): string {
  return `SECRET_${index}_${name}`;
}
