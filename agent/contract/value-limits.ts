import { ConfigError, ConfigErrors } from './errors.ts';
import type { Env } from './settings.ts';

/**
 * How long a setting's text may be, checked before it is parsed: by the agent on its env, and by the
 * webhook on the annotations it renders into that env, so both refuse the same text with the same words.
 *
 * Every byte of a value is paid for more than once: the webhook parses it, renders it into the pod
 * spec and its answer; the container's env must fit Linux's limit on one env string (128 KiB) for the
 * agent to start at all; and a template's parser makes a token per character of its text.
 */

/** A template (SECRET_<N>_TEMPLATE, secret-agent.io/template-<file>): a config file's text, half of Linux's 128 KiB. */
export const MAX_TEMPLATE_BYTES = 64 * 1024;

/**
 * Any other setting: names, references (at most 2,048 characters), URLs, commands, durations. Twice the
 * longest of them (an ARN, a URL) that anyone writes.
 */
export const MAX_SETTING_BYTES = 4 * 1024;

const TEMPLATE_ENV = /^SECRET_\d+_TEMPLATE$/;

/** The cap of the agent setting `name` (SECRET_0_TEMPLATE, ROTATION_COMMAND, …). */
function settingLimit(name: string): number {
  return TEMPLATE_ENV.test(name) ? MAX_TEMPLATE_BYTES : MAX_SETTING_BYTES;
}

/** `65536` as `64 KiB`. */
export function kib(bytes: number): string {
  return `${Math.floor(bytes / 1024)} KiB`;
}

/**
 * An error for `text` when it is longer than `limit` bytes (UTF-8, as Kubernetes counts them):
 * its size, never its content, and the fix for a setting of that limit.
 */
export function oversize(text: string, field: string, limit: number): ConfigError | undefined {
  // Most text is shorter in characters than any limit: no need to count its bytes.
  if (text.length * 3 <= limit) return undefined;
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes <= limit) return undefined;
  return new ConfigError(
    field,
    `is ${bytes} bytes long, over its limit of ${kib(limit)}`,
    oversizeFix(limit),
  );
}

/** What to do about a setting that is too long. */
function oversizeFix(limit: number): string {
  return limit === MAX_TEMPLATE_BYTES
    ? `keep a template under ${kib(MAX_TEMPLATE_BYTES)}: template only the lines that hold secrets, and keep the rest in the app's own config`
    : `keep it under ${kib(limit)}`;
}

/**
 * Throws ConfigErrors naming every setting of `env` (those `isSetting` accepts) over its cap, before
 * any of them is parsed.
 */
export function checkSettingSizes(env: Env, isSetting: (name: string) => boolean): void {
  const errors: ConfigError[] = [];
  for (const [name, value] of Object.entries(env)) {
    if (value === undefined || !isSetting(name)) continue;
    const error = oversize(value, name, settingLimit(name));
    if (error) errors.push(error);
  }
  if (errors.length > 0) throw new ConfigErrors(errors);
}
