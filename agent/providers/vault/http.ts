import { readdirSync, readFileSync, statSync } from 'node:fs';
import { Agent as HttpAgent, request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { join } from 'node:path';
import createNodeVault from 'node-vault';
import { ProviderError } from '../provider.ts';
import type { VaultSettings } from './config.ts';

/**
 * The Vault API as the provider uses it: node-vault builds the requests (paths under /v1, its
 * command table for token and lease calls, the per-call X-Vault-Token and X-Vault-Namespace), and
 * sends them through the transport below, plugged in with node-vault's `request-promise` option.
 * The transport exists because node-vault's own (axios) drops response headers (Retry-After), takes
 * no abort signal, and reads VAULT_SKIP_VERIFY itself (any non-empty value, even "false", turns
 * verification off).
 */

/** The envelope of every Vault response. */
export interface VaultEnvelope {
  readonly request_id?: string;
  readonly lease_id?: string;
  readonly renewable?: boolean;
  readonly lease_duration?: number;
  readonly data?: Record<string, unknown> | null;
  readonly warnings?: readonly string[] | null;
  readonly auth?: VaultAuth | null;
}

export interface VaultAuth {
  readonly client_token: string;
  readonly lease_duration: number;
  readonly renewable: boolean;
  readonly policies?: readonly string[];
}

/** A non-2xx answer. `errors` are Vault's messages (they never carry secret values); the body stays out of the message. */
export class VaultResponseError extends Error {
  readonly status: number;
  readonly errors: readonly string[];
  readonly retryAfterMs: number | undefined;
  /** The parsed body, for callers that need more than the messages (a deleted KV v2 version). */
  readonly body: unknown;

  constructor(status: number, errors: readonly string[], retryAfterMs: number | undefined, body: unknown) {
    super(errors.length > 0 ? errors.join('; ') : `HTTP ${status}`);
    this.name = 'VaultResponseError';
    this.status = status;
    this.errors = errors;
    this.retryAfterMs = retryAfterMs;
    this.body = body;
  }
}

/**
 * Who asks, and where: each call names the token it sends (X-Vault-Token) and the namespace it goes
 * to (X-Vault-Namespace). A token of `undefined` sends none, as a login must: an expired token on a
 * login request can make Vault refuse the login. A namespace of `''` (the root namespace) sends none.
 */
export interface VaultCall {
  readonly token: string | undefined;
  readonly namespace: string;
  readonly signal: AbortSignal;
}

export interface VaultApi {
  read(path: string, call: VaultCall): Promise<VaultEnvelope>;
  write(path: string, body: Record<string, unknown>, call: VaultCall): Promise<VaultEnvelope>;
  lookupSelf(call: VaultCall): Promise<VaultEnvelope>;
  renewSelf(incrementSec: number, call: VaultCall): Promise<VaultEnvelope>;
  renewLease(leaseId: string, incrementSec: number, call: VaultCall): Promise<VaultEnvelope>;
  /** `POST auth/token/revoke-self`: the token, its children and every lease it created. */
  revokeSelf(call: VaultCall): Promise<VaultEnvelope>;
  /** `PUT sys/leases/revoke`. */
  revokeLease(leaseId: string, call: VaultCall): Promise<VaultEnvelope>;
  close(): void;
}

interface TransportRequest {
  readonly method: string;
  readonly uri: string;
  readonly headers?: Record<string, string>;
  readonly json?: unknown;
  readonly signal?: AbortSignal;
}

interface TransportResponse {
  readonly statusCode: number;
  readonly headers: IncomingHttpHeaders;
  readonly body: unknown;
  readonly request: { readonly path: string };
}

/** Vault answers are small; a bigger body is a fault, not a secret. */
const MAX_BODY = 4 * 1024 * 1024;
const REQUEST_TIMEOUT_MS = 15_000;

export function createVaultApi(settings: VaultSettings, userAgent: string): VaultApi {
  const https = settings.addr.protocol === 'https:';
  const agent = https
    ? new HttpsAgent({
        keepAlive: true,
        ...trustedCas(settings),
        ...(settings.clientCert
          ? {
              cert: readTlsFile(settings.clientCert.certFile, 'VAULT_CLIENT_CERT', 'client certificate'),
              key: readTlsFile(settings.clientCert.keyFile, 'VAULT_CLIENT_KEY', 'client key'),
            }
          : {}),
        ...(settings.tlsServerName ? { servername: settings.tlsServerName } : {}),
        rejectUnauthorized: !settings.skipVerify,
      })
    : new HttpAgent({ keepAlive: true });

  const transport = (options: TransportRequest): Promise<TransportResponse> =>
    new Promise((resolve, reject) => {
      const url = new URL(options.uri);
      const body =
        options.json !== undefined && typeof options.json === 'object'
          ? JSON.stringify(options.json)
          : undefined;
      const signal = options.signal
        ? AbortSignal.any([options.signal, AbortSignal.timeout(REQUEST_TIMEOUT_MS)])
        : AbortSignal.timeout(REQUEST_TIMEOUT_MS);
      const req = (https ? httpsRequest : httpRequest)(
        url,
        {
          method: options.method,
          agent,
          signal,
          headers: {
            ...options.headers,
            'user-agent': userAgent,
            accept: 'application/json',
            ...(body !== undefined
              ? { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) }
              : {}),
          },
          ...(https && settings.tlsServerName ? { servername: settings.tlsServerName } : {}),
        },
        (res) => {
          const chunks: Buffer[] = [];
          let size = 0;
          res.on('data', (chunk: Buffer) => {
            size += chunk.length;
            if (size > MAX_BODY) {
              req.destroy(
                new ProviderError(
                  'invalid',
                  `the Vault response is larger than ${MAX_BODY} bytes`,
                  'check VAULT_ADDR points at Vault',
                ),
              );
              return;
            }
            chunks.push(chunk);
          });
          res.on('error', reject);
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            let parsed: unknown;
            if (text.trim() !== '') {
              try {
                parsed = JSON.parse(text);
              } catch {
                // Never echo the text: a proxy's page is harmless, but a parser message could quote anything.
                parsed = undefined;
                if ((res.statusCode ?? 0) < 300) {
                  reject(
                    new ProviderError(
                      'invalid',
                      `the answer to ${options.method} ${url.pathname} is not JSON (${text.length} characters, HTTP ${res.statusCode})`,
                      'check that VAULT_ADDR points at Vault, not a proxy or a UI',
                      { transient: false },
                    ),
                  );
                  return;
                }
              }
            }
            resolve({
              statusCode: res.statusCode ?? 0,
              headers: res.headers,
              body: parsed,
              request: { path: url.pathname },
            });
          });
        },
      );
      req.on('error', reject);
      req.end(body);
    });

  const nodeVault = createNodeVault({
    endpoint: settings.addr.origin,
    // node-vault's debug output prints request bodies (JWTs, secret ids): never enable it.
    debug: () => undefined,
    'request-promise': { defaults: () => transport },
  });
  // node-vault falls back to VAULT_TOKEN, VAULT_NAMESPACE and VAULT_PREFIX from the environment, and
  // its client-wide namespace would overwrite a call's own header: each call names both instead.
  nodeVault.token = undefined as unknown as string;
  (nodeVault as unknown as { namespace: string | undefined }).namespace = undefined;
  (nodeVault as unknown as { pathPrefix: string }).pathPrefix = '';
  nodeVault.handleVaultResponse = (response?: {
    statusCode: number;
    body: unknown;
    headers?: IncomingHttpHeaders;
  }) => {
    if (!response) return Promise.reject(new VaultResponseError(0, ['no response'], undefined, undefined));
    if (response.statusCode >= 200 && response.statusCode < 300) return Promise.resolve(response.body ?? {});
    return Promise.reject(
      new VaultResponseError(
        response.statusCode,
        errorMessages(response.body),
        retryAfter(response.headers?.['retry-after']),
        response.body,
      ),
    );
  };

  // node-vault stores the token of a renew-self answer on the client; clear it so it rides on nothing.
  const call = (p: Promise<unknown>): Promise<VaultEnvelope> =>
    (p as Promise<VaultEnvelope>).finally(() => {
      nodeVault.token = undefined as unknown as string;
    });
  const options = ({ token, namespace, signal }: VaultCall) => ({
    signal,
    headers: {
      ...(token === undefined ? {} : { 'X-Vault-Token': token }),
      ...(namespace === '' ? {} : { 'X-Vault-Namespace': namespace }),
    },
  });
  return {
    read: (path, c) => call(nodeVault.read(path, options(c))),
    write: (path, body, c) => call(nodeVault.write(path, body, options(c))),
    lookupSelf: (c) => call(nodeVault.tokenLookupSelf({ requestOptions: options(c) })),
    renewSelf: (increment, c) => call(nodeVault.tokenRenewSelf({ increment, requestOptions: options(c) })),
    renewLease: (leaseId, increment, c) =>
      call(nodeVault.renew({ lease_id: leaseId, increment, requestOptions: options(c) })),
    // Not node-vault's tokenRevokeSelf: a command without a schema posts all its arguments as the
    // body, request options (the token header) included.
    revokeSelf: (c) => call(nodeVault.write('auth/token/revoke-self', {}, options(c))),
    revokeLease: (leaseId, c) => call(nodeVault.revoke({ lease_id: leaseId, requestOptions: options(c) })),
    close() {
      agent.destroy();
    },
  };
}

/** VAULT_CACERT, VAULT_CACERT_BYTES and every PEM certificate in VAULT_CAPATH; none set: the system CAs. */
function trustedCas(settings: VaultSettings): { ca?: Buffer[] } {
  const cas: Buffer[] = [];
  if (settings.caCertFile) cas.push(readTlsFile(settings.caCertFile, 'VAULT_CACERT', 'CA bundle'));
  if (settings.caCertBytes) cas.push(Buffer.from(settings.caCertBytes, 'utf8'));
  if (settings.caPath) {
    let names: string[];
    try {
      names = readdirSync(settings.caPath).sort();
    } catch (e) {
      throw unreadable('VAULT_CAPATH', settings.caPath, 'CA directory', e);
    }
    // OpenSSL's c_rehash layout holds hash-named links next to the files: a CA read twice is harmless.
    const before = cas.length;
    for (const name of names) {
      const file = join(settings.caPath, name);
      const text = statSync(file, { throwIfNoEntry: false })?.isFile() ? readFileSync(file) : undefined;
      if (text?.includes('-----BEGIN CERTIFICATE-----')) cas.push(text);
    }
    if (cas.length === before)
      throw new ProviderError(
        'invalid',
        `VAULT_CAPATH: ${settings.caPath} holds no PEM certificate`,
        'put the CA certificates (PEM) in that directory, or use VAULT_CACERT',
        { transient: false },
      );
  }
  return cas.length > 0 ? { ca: cas } : {};
}

function readTlsFile(file: string, field: string, what: string): Buffer {
  try {
    return readFileSync(file);
  } catch (e) {
    throw unreadable(field, file, what, e);
  }
}

function unreadable(field: string, path: string, what: string, e: unknown): ProviderError {
  return new ProviderError(
    'invalid',
    `${field}: cannot read ${path} (${(e as NodeJS.ErrnoException).code ?? 'error'})`,
    `mount the ${what} (PEM) into the pod and point ${field} at it`,
    { transient: false },
  );
}

function errorMessages(body: unknown): string[] {
  const errors = (body as { errors?: unknown } | undefined)?.errors;
  return Array.isArray(errors)
    ? errors.filter((e): e is string => typeof e === 'string').map((e) => e.trim())
    : [];
}

/** Retry-After as seconds or an HTTP date. */
export function retryAfter(header: string | string[] | undefined, now = Date.now()): number | undefined {
  const text = Array.isArray(header) ? header[0] : header;
  if (!text) return undefined;
  if (/^\d+$/.test(text.trim())) return Number(text.trim()) * 1000;
  const at = Date.parse(text);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}
