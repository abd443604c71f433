import { X509Certificate } from 'node:crypto';
import { ConfigError, quote } from '../../agent/contract/errors.ts';
import { oneOf } from '../../agent/contract/settings.ts';
import { AWS_REGION, quantity } from '../annotations/values.ts';
import { DNS_LABEL } from '../kubernetes-names.ts';

/**
 * The parsers of the webhook's own settings' values, where no annotation has the type (those are in
 * annotations/values.ts): each checks the text and throws a ConfigError naming the setting and the fix.
 */

export function port(text: string, field: string): number {
  const n = /^\d{1,5}$/.test(text) ? Number(text) : NaN;
  if (!(n >= 0 && n <= 65535))
    throw new ConfigError(field, `${quote(text)} is not a port`, 'use 1 to 65535 (0: any free port)');
  return n;
}

export function dnsLabel(text: string, field: string): string {
  if (!DNS_LABEL.test(text))
    throw new ConfigError(
      field,
      `${quote(text)} is not a Kubernetes name`,
      'use lower-case letters, digits and -',
    );
  return text;
}

export function optionalQuantity(text: string, field: string): string | undefined {
  return text === '' ? undefined : quantity(text, field);
}

export function image(text: string, field: string): string {
  if (!/^[a-z0-9][a-zA-Z0-9._\-/:@]*$/.test(text))
    throw new ConfigError(
      field,
      `${quote(text)} is not an image reference`,
      'use e.g. ghcr.io/example/secret-agent:0.1.0',
    );
  return text;
}

/** PEM CA certificates, each of which must parse: what agents get as VAULT_CACERT_BYTES. */
export function pemCertificates(text: string, field: string): string {
  const blocks = text.match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g) ?? [];
  const fix =
    'set it to the PEM text of the CA that signed Vault’s certificate (YAML block scalar in WEBHOOK_CONFIG_FILE)';
  if (blocks.length === 0)
    throw new ConfigError(field, `holds no PEM certificate (${text.length} characters)`, fix);
  blocks.forEach((block, i) => {
    try {
      new X509Certificate(block);
    } catch {
      throw new ConfigError(field, `certificate ${i + 1} of ${blocks.length} does not parse`, fix);
    }
  });
  return blocks.join('\n');
}

export function httpsUrl(text: string, field: string): string {
  let url: URL | undefined;
  try {
    url = new URL(text);
  } catch {
    url = undefined;
  }
  if (!url || url.protocol !== 'https:' || url.username || url.password || url.search || url.hash)
    throw new ConfigError(
      field,
      `${quote(text)} is not an https URL`,
      'write it like https://sts.eu-west-1.amazonaws.com',
    );
  return text;
}

export function awsRegionOrAuto(text: string, field: string): string {
  if (text === 'auto' || AWS_REGION.test(text)) return text;
  throw new ConfigError(
    field,
    `${quote(text)} is not an AWS region or auto`,
    'write it like us-east-1, or auto',
  );
}

export function hostName(text: string, field: string): string {
  if (!/^[A-Za-z0-9]([A-Za-z0-9-.]{0,251}[A-Za-z0-9])?$/.test(text))
    throw new ConfigError(field, `${quote(text)} is not a host name`, 'write it like vault.internal');
  return text;
}

/** Bounded so a typo cannot hold the webhook's memory limit: at most 64 KiB per entry. */
const MAX_CACHE_ENTRIES = 65_536;

export function cacheEntries(text: string, field: string): number {
  const n = /^\d{1,6}$/.test(text) ? Number(text) : NaN;
  if (!(n <= MAX_CACHE_ENTRIES))
    throw new ConfigError(
      field,
      `${quote(text)} is not a number of entries`,
      `use 0 (off) to ${MAX_CACHE_ENTRIES}, e.g. 256`,
    );
  return n;
}

/** NATIVE_SIDECARS as configured; `auto` is resolved once at start (webhook/native-sidecars.ts). */
export type NativeSidecarsSetting = boolean | 'auto';

export function nativeSidecars(text: string, field: string): NativeSidecarsSetting {
  const v = oneOf(['auto', 'true', 'false'] as const)(text, field);
  return v === 'auto' ? v : v === 'true';
}

/** `true` or `false`, as the ALLOW_* switches take it. */
export function flag(text: string, field: string): boolean {
  return oneOf(['true', 'false'] as const)(text, field) === 'true';
}
