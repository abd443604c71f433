import { SecretManagerServiceClient } from '@google-cloud/secret-manager';
import { PassThroughClient } from 'google-auth-library';
// In the bundle this bare `google-gax` is only what the client module reads from it (images/build.ts):
// the library itself is loaded per transport, below, so a REST agent never loads @grpc/grpc-js.
import { loggingUtils } from 'google-gax';
import { quote } from '../../contract/errors.ts';
import type { GcpReference } from '../../contract/reference.ts';
import { crc32c } from './crc32c.ts';
import { gcpTransport, type GcpTransport } from './transport.ts';
import {
  fetchEach,
  ProviderError,
  type FetchContext,
  type Provider,
  type ProviderFactory,
  type ProviderOptions,
  type SecretValue,
} from '../provider.ts';

type Gax = typeof import('google-gax');
type GaxFallback = typeof import('google-gax/fallback');

/**
 * google-gax for a transport, on first use: its main entry (gRPC) loads @grpc/grpc-js, its fallback
 * entry (REST: HTTP/1.1 and JSON through google-auth-library) does not. Separate chunks in the bundle.
 */
async function loadGax(transport: GcpTransport): Promise<Gax | GaxFallback> {
  // CommonJS modules: `default` is their module.exports, in Node and in the bundle alike.
  return transport === 'grpc'
    ? (await import('google-gax/build/src/index.js')).default
    : (await import('google-gax/fallback')).default;
}

/** At most this many AccessSecretVersion calls in flight: the API has no batch read. */
const CONCURRENCY = 8;
/** The deadline of a call made without an attempt budget (fetches always have one). */
const CALL_TIMEOUT_MS = 15_000;
/** The public endpoint, when GCP_SECRET_MANAGER_ENDPOINT does not override it. */
const DEFAULT_ENDPOINT = 'secretmanager.googleapis.com:443';
/** A regional secret's endpoint, when GCP_SECRET_MANAGER_REGIONAL_ENDPOINT does not override it. */
const DEFAULT_REGIONAL_ENDPOINT = 'secretmanager.{location}.rep.googleapis.com:443';
const GLOBAL_VARIABLE = 'GCP_SECRET_MANAGER_ENDPOINT';
const REGIONAL_VARIABLE = 'GCP_SECRET_MANAGER_REGIONAL_ENDPOINT';

/** google.rpc.Code: what both transports report (gax maps a REST error's status onto it). */
const Code = {
  OK: 0,
  CANCELLED: 1,
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  ALREADY_EXISTS: 6,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  FAILED_PRECONDITION: 9,
  ABORTED: 10,
  OUT_OF_RANGE: 11,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  DATA_LOSS: 15,
  UNAUTHENTICATED: 16,
} as const;
const CODE_NAMES: Readonly<Record<number, string>> = Object.fromEntries(
  Object.entries(Code).map(([name, code]) => [code, name]),
);

/** What GetSecretVersion says about a version, without reading its payload. */
export interface GcpVersionState {
  /** The full name as the API returns it: `projects/<number>/secrets/S/versions/<n>`. */
  readonly name: string;
  /** The version number `latest` (or an alias) resolves to. */
  readonly version: string;
  readonly state: 'ENABLED' | 'DISABLED' | 'DESTROYED' | 'STATE_UNSPECIFIED';
  readonly etag: string;
}

export interface GcpProvider extends Provider<GcpReference> {
  close(): Promise<void>;
  peekVersions(refs: readonly GcpReference[], ctx: FetchContext): Promise<(string | undefined)[]>;
  /**
   * GetSecretVersion: a metadata read (no payload, no access to the value) that tells which version
   * `latest` or an alias points at now, so the sidecar can skip an access when nothing changed.
   * Throws a ProviderError.
   */
  describeVersion(ref: GcpReference, ctx: FetchContext): Promise<GcpVersionState>;
}

/**
 * GCP Secret Manager, over REST (HTTP/1.1 and JSON, the library's `fallback`) or gRPC, as
 * GCP_TRANSPORT says. Credentials come from Application Default Credentials (GKE Workload Identity
 * through the metadata server, or GOOGLE_APPLICATION_CREDENTIALS). A global secret is read from
 * secretmanager.googleapis.com (GCP_SECRET_MANAGER_ENDPOINT overrides it), a regional one from its
 * region's endpoint, secretmanager.LOCATION.rep.googleapis.com (GCP_SECRET_MANAGER_REGIONAL_ENDPOINT
 * overrides it, `{location}` standing for the region): the global endpoint refuses regional names, and
 * only the regional one keeps the request in the region. One client for the global endpoint and one
 * per region read from, each made on first use.
 * An override is plaintext and without credentials on loopback (local fakes), TLS and ADC elsewhere.
 * The library's own retries are off: the agent retries with its deadline and backoff.
 */
export const createGcpProvider = ((options: ProviderOptions): GcpProvider => {
  const transport = gcpTransport(process.env, options.mode);
  const globalEndpoint = parseEndpoint(process.env[GLOBAL_VARIABLE], GLOBAL_VARIABLE);
  const regionalTemplate = process.env[REGIONAL_VARIABLE] || undefined;
  const defaultProject = process.env.GCP_PROJECT || process.env.GOOGLE_CLOUD_PROJECT || undefined;
  /** Keyed by location; '' is the global endpoint. Each resolves once the client has its stub. */
  const clients = new Map<string, Promise<SecretManagerServiceClient>>();
  let gax: Promise<Gax | GaxFallback> | undefined;
  // GOOGLE_SDK_NODE_LOGGING makes the client log every response, payload bytes included. Off for good.
  loggingUtils.setBackend(null);

  /** Where a secret in `location` (none: global) is read; undefined is the library's default. */
  const endpointFor = (location: string | undefined): Endpoint | undefined =>
    location === undefined
      ? globalEndpoint
      : parseEndpoint(regionalTemplate ?? DEFAULT_REGIONAL_ENDPOINT, REGIONAL_VARIABLE, location);

  const makeClient = async (location: string | undefined): Promise<SecretManagerServiceClient> => {
    const endpoint = endpointFor(location);
    const library = await (gax ??= loadGax(transport));
    const common = {
      libName: 'secret-agent',
      libVersion: options.agentVersion,
      enableTelemetryLogging: false,
      ...(endpoint ? { apiEndpoint: endpoint.servicePath, port: endpoint.port } : {}),
      // A fixed universe keeps gax from asking ADC for one, so a loopback run never looks for credentials.
      ...(endpoint?.plaintext ? { universeDomain: 'googleapis.com' } : {}),
    };
    if (transport === 'rest') {
      return new SecretManagerServiceClient(
        {
          ...common,
          fallback: true,
          // Loopback plaintext: http://, and an auth client that adds no credentials.
          ...(endpoint?.plaintext ? { protocol: 'http', authClient: new PassThroughClient() } : {}),
        },
        library,
      );
    }
    return new SecretManagerServiceClient(
      {
        ...common,
        fallback: false,
        'grpc.primary_user_agent': userAgent(options),
        ...(endpoint?.plaintext ? { sslCreds: (library as Gax).grpc.credentials.createInsecure() } : {}),
      },
      library,
    );
  };

  /**
   * The client builds its stub (and finds credentials) once, on first use, and caches the promise. A
   * method called after that failed rejects a second, unhandled time inside the library, which would
   * crash the agent; so every call waits for the stub here first, and a failed client is replaced.
   * Concurrent first calls share one client.
   */
  const ready = (location: string | undefined): Promise<SecretManagerServiceClient> => {
    const key = location ?? '';
    let client = clients.get(key);
    if (!client) {
      const made = (async () => {
        const c = await makeClient(location);
        await c.initialize();
        return c;
      })();
      made.catch(() => {
        if (clients.get(key) === made) clients.delete(key);
      });
      clients.set(key, made);
      client = made;
    }
    return client;
  };

  const versionName = (ref: GcpReference): string => {
    const project = ref.project ?? defaultProject;
    if (!project) {
      throw new ProviderError(
        'invalid',
        `no GCP project for ${quote(ref.text)}`,
        'set GCP_PROJECT (or GOOGLE_CLOUD_PROJECT) on the agent, or write the reference as projects/PROJECT/secrets/SECRET',
        { transient: false },
      );
    }
    const location = ref.location === undefined ? '' : `/locations/${ref.location}`;
    return `projects/${project}${location}/secrets/${ref.secret}/versions/${ref.version}`;
  };

  // The deadline is the attempt's budget (gRPC tells the server too), so a hung call ends in time to
  // retry. Over REST the pod's identity rides in the User-Agent header (gRPC sets it per channel).
  const restHeaders = { headers: { 'User-Agent': userAgent(options) } };
  const callOptions = (ctx: FetchContext) => ({
    retry: null,
    timeout: Math.max(1, Math.round(ctx.timeoutMs ?? CALL_TIMEOUT_MS)),
    signal: ctx.signal,
    ...(transport === 'rest' ? { otherArgs: restHeaders } : {}),
  });

  const access = async (ref: GcpReference, ctx: FetchContext): Promise<SecretValue> => {
    const name = versionName(ref);
    try {
      const [response] = await (await ready(ref.location)).accessSecretVersion({ name }, callOptions(ctx));
      return toValue(response, name);
    } catch (e) {
      throw gcpError(e, name, ctx);
    }
  };

  const provider: GcpProvider = {
    fetch: (refs, ctx) => fetchEach(refs, CONCURRENCY, (ref) => access(ref, ctx)),
    // A sidecar refresh asks which version `latest` is (no access operation, no payload) and reads the
    // value only when it moved. A disabled or unreadable version is fetched, to report its error.
    peekVersions: (refs, ctx) =>
      Promise.all(
        refs.map((ref) =>
          provider.describeVersion(ref, ctx).then(
            (v) => (v.state === 'ENABLED' ? v.version : undefined),
            () => undefined,
          ),
        ),
      ),
    async describeVersion(ref, ctx) {
      const name = versionName(ref);
      try {
        const [v] = await (await ready(ref.location)).getSecretVersion({ name }, callOptions(ctx));
        const returned = v.name ?? name;
        const state = String(v.state ?? 'STATE_UNSPECIFIED');
        return {
          name: returned,
          version: versionOf(returned) ?? ref.version,
          state: (['ENABLED', 'DISABLED', 'DESTROYED'].includes(state)
            ? state
            : 'STATE_UNSPECIFIED') as GcpVersionState['state'],
          etag: v.etag ?? '',
        };
      } catch (e) {
        throw gcpError(e, name, ctx);
      }
    },
    endpoint(ref) {
      try {
        const endpoint = endpointFor(ref.location);
        return endpoint ? `${endpoint.servicePath}:${endpoint.port}` : DEFAULT_ENDPOINT;
      } catch {
        return undefined; // A malformed override: the fetch reports it.
      }
    },
    async close() {
      // Awaited: an open gRPC channel keeps the process alive and its sockets open.
      const closing = [...clients.values()];
      clients.clear();
      await Promise.all(closing.map((made) => made.then((c) => c.close()).catch(() => undefined)));
    },
  };
  return provider;
}) satisfies ProviderFactory<GcpReference>;

interface Endpoint {
  /** As gRPC takes it: IPv6 literals keep their brackets. */
  readonly servicePath: string;
  readonly port: number;
  readonly plaintext: boolean;
}

const LOOPBACK = /^(?:localhost|127(?:\.\d{1,3}){3}|\[::1\])$/i;

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
  const loopback = LOOPBACK.test(host);
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

/** The pod's identity rides in the user agent, so Cloud Audit Logs show which pod read which secret. */
function userAgent(options: ProviderOptions): string {
  const token = (s: string): string => s.replace(/[^A-Za-z0-9._-]/g, '_');
  const parts = [`secret-agent/${token(options.agentVersion)}`];
  if (options.pod.namespace && options.pod.name)
    parts.push(`k8s-pod/${token(options.pod.namespace)}.${token(options.pod.name)}`);
  return parts.join(' ');
}

function versionOf(name: string | null | undefined): string | undefined {
  return name ? /\/versions\/([^/]+)$/.exec(name)?.[1] : undefined;
}

interface AccessResponse {
  name?: string | null;
  payload?: {
    data?: Uint8Array | string | null;
    dataCrc32c?: number | string | { toString(): string } | null;
  } | null;
}

/**
 * The payload and the version number it came from (the API answers `latest` with the resolved
 * name). A checksum mismatch is transient: corruption on the way is the likely cause, and a retry
 * reads it afresh; a value stored corrupt keeps failing until the deadline names it.
 */
function toValue(response: AccessResponse, name: string): SecretValue {
  const data = response.payload?.data;
  if (data === undefined || data === null) {
    throw new ProviderError('internal', `${name}: the response has no payload`, 'report this; retried', {
      transient: true,
    });
  }
  const bytes = typeof data === 'string' ? Buffer.from(data, 'base64') : data;
  const expected = response.payload?.dataCrc32c;
  if (expected !== undefined && expected !== null && BigInt(expected.toString()) !== BigInt(crc32c(bytes))) {
    // Neither checksum goes into the message: a CRC of a short secret helps guess it.
    throw new ProviderError(
      'internal',
      `${response.name ?? name}: the payload failed its CRC32C check (corrupted in transit or at rest)`,
      'retried; if it persists, add a new version of the secret',
      { transient: true },
    );
  }
  return { bytes, version: versionOf(response.name) ?? 'unknown' };
}

/**
 * The server's google.rpc.RetryInfo, as google-gax decodes it from the grpc-status-details-bin
 * trailer into `statusDetails`: how long to wait before the next attempt, honoured as the AWS path
 * honours throttling. Nothing when the server sent none.
 */
function retryInfo(e: unknown): { retryAfterMs?: number } {
  const details = (e as { statusDetails?: unknown } | undefined)?.statusDetails;
  if (!Array.isArray(details)) return {};
  for (const detail of details) {
    const delay = (detail as { retryDelay?: { seconds?: unknown; nanos?: unknown } } | null)?.retryDelay;
    if (!delay) continue;
    // seconds is an int64: a Long object, a string or a number, depending on the decoder's options.
    const ms = Number(String(delay.seconds ?? 0)) * 1000 + Number(delay.nanos ?? 0) / 1e6;
    if (Number.isFinite(ms) && ms >= 0) return { retryAfterMs: Math.round(ms) };
  }
  return {};
}

/** Where google-gax keeps the body of a REST error answer (googleError.js). */
const RAW_HTTP_RESPONSE_PAYLOAD = Symbol.for('google-gax.rawHttpResponsePayload');

/**
 * REST only: an answer that is not Secret Manager's JSON (another server behind the endpoint, a proxy's
 * page, a body cut short). The library's message for it quotes the body, which could be anything, a
 * value included, so it is never shown. An error status is trusted when its body was a Google error
 * (`{"error": {"message": …}}`); an error without one, when it is a transport failure (its cause has
 * a system error code: ECONNREFUSED…) or a cancelled or timed-out call. What is left failed while
 * reading an answer. gRPC errors carry neither an HTTP status nor a cause.
 */
function unreadableAnswer(e: unknown, code: number | undefined): boolean {
  const err = e as
    | { message?: unknown; cause?: unknown; httpStatusCode?: unknown; [RAW_HTTP_RESPONSE_PAYLOAD]?: unknown }
    | undefined;
  if (typeof err?.message === 'string' && / could not be decoded: /.test(err.message)) return true;
  if (typeof err?.httpStatusCode === 'number') {
    let body = err[RAW_HTTP_RESPONSE_PAYLOAD];
    if (body === undefined) return false; // the library's own words ("Request failed with status code 403")
    if (typeof body === 'string') {
      try {
        body = JSON.parse(body) as unknown;
      } catch {
        return true;
      }
    }
    return typeof (body as { error?: { message?: unknown } } | null)?.error?.message !== 'string';
  }
  const cause = err?.cause as { code?: unknown } | undefined;
  return (
    cause instanceof Error &&
    typeof cause.code !== 'string' &&
    code !== Code.CANCELLED &&
    code !== Code.DEADLINE_EXCEEDED
  );
}

/**
 * Maps status codes (gRPC's, or REST's mapped onto them by gax) to reasons and fixes; the message is
 * the API's own, which never carries a value.
 */
function gcpError(e: unknown, name: string, ctx: FetchContext): ProviderError {
  if (e instanceof ProviderError) return e;
  const regional = name.includes('/locations/');
  const variable = regional ? REGIONAL_VARIABLE : GLOBAL_VARIABLE;
  const err = (e ?? {}) as { code?: unknown; details?: unknown; message?: unknown };
  const code = typeof err.code === 'number' ? err.code : undefined;
  const text = typeof err.details === 'string' && err.details !== '' ? err.details : String(err.message ?? e);
  const detail = `${code === undefined ? 'Error' : (CODE_NAMES[code] ?? code)}: ${text}`;

  if (unreadableAnswer(e, code)) {
    const status = (e as { httpStatusCode?: unknown }).httpStatusCode;
    return new ProviderError(
      'invalid',
      `${name}: the answer${typeof status === 'number' ? ` (HTTP ${status})` : ''} is not Secret Manager's JSON`,
      `${variable} does not reach Secret Manager's REST API: check it (GCP_TRANSPORT=grpc speaks gRPC instead)`,
      { transient: false },
    );
  }

  if (
    ctx.signal.aborted &&
    (code === undefined || code === Code.CANCELLED || code === Code.DEADLINE_EXCEEDED)
  ) {
    return new ProviderError(
      'timeout',
      `${name}: the request was cancelled at the attempt deadline`,
      'retried until INIT_DEADLINE; check network reach to Secret Manager',
    );
  }
  switch (code) {
    case Code.NOT_FOUND:
      return new ProviderError(
        'not-found',
        detail,
        `check the project, secret id and version of ${name}, and that the secret has versions (gcloud secrets versions list)`,
      );
    case Code.PERMISSION_DENIED:
      return new ProviderError(
        'permission-denied',
        detail,
        'grant roles/secretmanager.secretAccessor on the secret (or its project) to the pod’s identity: the Workload Identity principal of its Kubernetes service account, or the Google service account it impersonates',
      );
    case Code.UNAUTHENTICATED:
      return new ProviderError(
        'auth',
        detail,
        'give the pod Google credentials: GKE Workload Identity on the node pool and service account, or GOOGLE_APPLICATION_CREDENTIALS',
      );
    case Code.FAILED_PRECONDITION:
      if (/DESTROYED/.test(text)) {
        return new ProviderError(
          'deleted',
          detail,
          'the version is destroyed for good: reference another version, or add a new version (`latest` names the newest, whatever its state)',
        );
      }
      return new ProviderError(
        'disabled',
        detail,
        'enable the version (gcloud secrets versions enable VERSION --secret SECRET) or reference an enabled one; `latest` names the newest version, whatever its state',
      );
    case Code.RESOURCE_EXHAUSTED:
      return new ProviderError(
        'throttled',
        detail,
        'retried with backoff; spread start-ups or raise the Secret Manager quota',
        retryInfo(e),
      );
    case Code.DEADLINE_EXCEEDED:
      return new ProviderError(
        'timeout',
        detail,
        'retried until INIT_DEADLINE; check network reach to Secret Manager',
      );
    case Code.UNAVAILABLE:
      if (/metadata from plugin/i.test(text)) {
        // A token could not be had: on GKE the metadata server can lag a starting pod, so retry.
        return new ProviderError(
          'auth',
          detail,
          'check GKE Workload Identity (the metadata server must answer for the pod) or GOOGLE_APPLICATION_CREDENTIALS; retried until the deadline',
          { transient: true },
        );
      }
      return new ProviderError(
        'unavailable',
        detail,
        'a Secret Manager or network fault; retried with backoff',
        retryInfo(e),
      );
    case Code.INTERNAL:
    case Code.UNKNOWN:
    case Code.ABORTED:
    case Code.CANCELLED:
      return new ProviderError('unavailable', detail, 'a Secret Manager fault; retried with backoff');
    case Code.INVALID_ARGUMENT:
    case Code.OUT_OF_RANGE:
      // The global endpoint refuses a regional name, and a region's endpoint another region's.
      return new ProviderError(
        'invalid',
        detail,
        regional
          ? `check the reference (projects/PROJECT/locations/LOCATION/secrets/SECRET[/versions/VERSION]) and, if ${REGIONAL_VARIABLE} is set, that it reaches the endpoint of that location`
          : 'check the reference: projects/PROJECT/secrets/SECRET[/versions/VERSION]',
      );
    case Code.UNIMPLEMENTED:
      return new ProviderError('invalid', detail, `${variable} does not serve Secret Manager v1: check it`, {
        transient: false,
      });
    case undefined:
      // Before any call: the client found no usable credentials (ADC found nothing, a bad key file).
      return new ProviderError(
        'auth',
        detail,
        'give the pod Google credentials: GKE Workload Identity (the metadata server), or GOOGLE_APPLICATION_CREDENTIALS naming a readable credentials file',
        { transient: false },
      );
  }
  return new ProviderError('internal', detail, 'see the message; report it if it persists', {
    transient: false,
  });
}
