import { quote } from '../../contract/errors.ts';
import { isLoopbackHost } from '../loopback.ts';
import { ProviderError } from '../provider.ts';

/**
 * Where Secret Manager is reached: the public endpoints, or the overrides GCP_SECRET_MANAGER_ENDPOINT
 * (global secrets) and GCP_SECRET_MANAGER_REGIONAL_ENDPOINT (regional ones) name.
 */

/** The public endpoint, when GCP_SECRET_MANAGER_ENDPOINT does not override it. */
export const DEFAULT_ENDPOINT = 'secretmanager.googleapis.com:443';
/** A regional secret's endpoint, when GCP_SECRET_MANAGER_REGIONAL_ENDPOINT does not override it. */
export const DEFAULT_REGIONAL_ENDPOINT = 'secretmanager.{location}.rep.googleapis.com:443';
export const GLOBAL_VARIABLE = 'GCP_SECRET_MANAGER_ENDPOINT';
export const REGIONAL_VARIABLE = 'GCP_SECRET_MANAGER_REGIONAL_ENDPOINT';

export interface Endpoint {
  /** As gRPC takes it: IPv6 literals keep their brackets. */
  readonly servicePath: string;
  readonly port: number;
  readonly plaintext: boolean;
}

/**
 * An endpoint override (`variable` names it in errors): `host:port`, plaintext on loopback and TLS
 * elsewhere; `https://host:port` forces TLS, `http://host:port` asks for plaintext, which only
 * loopback may have (credentials or values must never cross a network in the clear). With a
 * `location`, each `{location}` in the text is that region first.
 */
export function parseEndpoint(
  text: string | undefined,
  variable: string = GLOBAL_VARIABLE,
  location?: string,
): Endpoint | undefined {
  if (text === undefined || text === '') return undefined;
  const filled = location === undefined ? text : text.replaceAll('{location}', location);
  const m = /^(?:(https?):\/\/)?(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(?::(\d{1,5}))?\/?$/.exec(filled);
  const port = m?.[3] === undefined ? 443 : Number(m[3]);
  if (!m || port < 1 || port > 65_535) {
    throw new ProviderError(
      'invalid',
      `${variable} ${quote(text)} is not host:port`,
      variable === REGIONAL_VARIABLE
        ? 'set it to host:port, with {location} where the region goes, e.g. secretmanager.{location}.rep.example.internal:443, or unset it for secretmanager.{location}.rep.googleapis.com'
        : 'set it to host:port, e.g. 127.0.0.1:8085 for a local emulator, or unset it for secretmanager.googleapis.com; a {location} placeholder belongs in GCP_SECRET_MANAGER_REGIONAL_ENDPOINT',
      { transient: false },
    );
  }
  const [, scheme, host] = m as unknown as [string, string | undefined, string];
  const loopback = isLoopbackHost(host);
  const plaintext = scheme === 'http' || (scheme === undefined && loopback);
  if (plaintext && !loopback) {
    throw new ProviderError(
      'invalid',
      `${variable} ${quote(text)} asks for plaintext to a host that is not loopback`,
      'use TLS (drop http://, or write https://); plaintext is only for 127.0.0.1, ::1 or localhost',
      { transient: false },
    );
  }
  return { servicePath: host, port, plaintext };
}
