import { SecretManagerServiceClient } from '@google-cloud/secret-manager';
import { PassThroughClient } from 'google-auth-library';
// In the bundle this bare `google-gax` is only what the client module reads from it (images/build.ts):
// the library itself is loaded per transport, below, so a REST agent never loads @grpc/grpc-js.
import { loggingUtils } from 'google-gax';
import { quote } from '../../contract/errors.ts';
import type { GcpReference } from '../../contract/reference.ts';
import { crc32c } from './crc32c.ts';
import {
  DEFAULT_ENDPOINT,
  DEFAULT_REGIONAL_ENDPOINT,
  GLOBAL_VARIABLE,
  parseEndpoint,
  REGIONAL_VARIABLE,
  type Endpoint,
} from './endpoint.ts';
import { gcpError } from './errors.ts';
import { gcpTransport, type GcpTransport } from './transport.ts';
import {
  contentVersion,
  namedVersion,
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
  const version = versionOf(response.name);
  return { bytes, ...(version ? namedVersion(version) : contentVersion(bytes)) };
}
