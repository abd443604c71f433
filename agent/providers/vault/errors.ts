import { ProviderError, toProviderError } from '../provider.ts';
import { VaultResponseError } from './http.ts';

/** Node's certificate verification failures: a configuration problem, not worth retrying. */
const TLS_CODE =
  /^(?:CERT_|ERR_TLS_CERT_|DEPTH_ZERO_SELF_SIGNED_CERT$|SELF_SIGNED_CERT_IN_CHAIN$|UNABLE_TO_)/;

/** OpenSSL's codes for the server's alerts about the client's certificate (none, or untrusted). */
const CLIENT_CERT_ALERT =
  /^ERR_SSL_(?:TLSV13_ALERT_CERTIFICATE_REQUIRED|SSLV3_ALERT_BAD_CERTIFICATE|TLSV1_ALERT_UNKNOWN_CA|SSLV3_ALERT_CERTIFICATE_UNKNOWN)$/;

/**
 * Maps a failed Vault call to a ProviderError. `what` names the call ("read secret/data/app",
 * "kubernetes login at auth/k8s/login as role \"app\""); `denied` is the fix for a 403. Details carry
 * Vault's own error messages, which never contain secret values, and never a token.
 */
export function vaultError(e: unknown, what: string, denied: string): ProviderError {
  if (e instanceof ProviderError) return e;
  const code = (e as { code?: unknown } | undefined)?.code;
  if (typeof code === 'string' && TLS_CODE.test(code)) {
    return new ProviderError(
      'invalid',
      `${what}: TLS: ${code}: ${(e as Error).message}`,
      'give the CA that signed Vault’s certificate with VAULT_CACERT, and VAULT_TLS_SERVER_NAME if the certificate names another host than VAULT_ADDR',
      { transient: false },
    );
  }
  // The server's alert about our certificate: a listener that requires one (mutual TLS).
  if (typeof code === 'string' && CLIENT_CERT_ALERT.test(code)) {
    return new ProviderError(
      'invalid',
      `${what}: TLS: ${code}: Vault refused the connection for want of a client certificate it trusts`,
      'set VAULT_CLIENT_CERT and VAULT_CLIENT_KEY to a certificate signed by the CA of Vault’s listener (tls_client_ca_file)',
      { transient: false },
    );
  }
  if (!(e instanceof VaultResponseError)) return toProviderError(e);
  const detail = `${what}: HTTP ${e.status}${e.errors.length > 0 ? `: ${e.errors.join('; ')}` : ''}`;
  const retry = e.retryAfterMs === undefined ? {} : { retryAfterMs: e.retryAfterMs };
  switch (true) {
    case e.status === 403:
      return new ProviderError('permission-denied', detail, denied);
    case e.status === 404:
      return new ProviderError(
        'not-found',
        detail,
        'check the path: `vault read <path>` (or `vault kv get`) with the same token must find it',
      );
    case e.status === 429:
      return new ProviderError(
        'throttled',
        detail,
        'Vault rate limit quota reached; retried with backoff',
        retry,
      );
    case e.status === 503:
      return new ProviderError(
        'unavailable',
        detail,
        'Vault is sealed, in standby without a reachable active node, or overloaded; retried with backoff',
        retry,
      );
    case e.status === 412:
      // A performance standby that has not caught up with the required index yet.
      return new ProviderError('unavailable', detail, 'retried with backoff', retry);
    case e.status >= 500:
      return new ProviderError('unavailable', detail, 'a Vault server fault; retried with backoff', retry);
    case e.status === 400:
      return new ProviderError(
        'invalid',
        detail,
        'Vault rejected the request: check the path and the ?version= option',
      );
    default:
      return new ProviderError('invalid', detail, 'check VAULT_ADDR and the reference', { transient: false });
  }
}

/** A login failure is an `auth` failure unless it is a transient server condition worth retrying. */
export function loginError(e: unknown, what: string, fix: string): ProviderError {
  const mapped = vaultError(e, what, fix);
  if (mapped.transient) return mapped;
  if (e instanceof ProviderError) return e;
  return new ProviderError('auth', mapped.message, fix, { transient: false });
}
