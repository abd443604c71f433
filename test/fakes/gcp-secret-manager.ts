/**
 * A local GCP Secret Manager: the real `google.cloud.secretmanager.v1.SecretManagerService` gRPC
 * service, loaded from the .proto files the client library ships, on 127.0.0.1 (plaintext, or TLS
 * with a certificate the test makes).
 * It answers as the real API does where the agent can tell: names carry the project NUMBER even when
 * asked by project id, `latest` is the most recently created version whatever its state (so a
 * disabled newest version fails with FAILED_PRECONDITION, as users of the real API report), and
 * payloads carry data_crc32c. Faults can be queued per method; calls are counted per method.
 *
 * One fake is one endpoint. Without `location` it is the global one (secretmanager.googleapis.com):
 * it holds global secrets and refuses a regional name with the INVALID_ARGUMENT users of the real
 * API report. With `location` it is that region's endpoint (secretmanager.LOCATION.rep.googleapis.com):
 * it holds that region's secrets, named `projects/P/locations/LOCATION/secrets/S`, and refuses a
 * global name or another region's with INVALID_ARGUMENT (the real wording of that refusal is not
 * documented; the status is what the agent reads). Two fakes side by side tell which endpoint a
 * request really went to.
 */
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

export type FakeMethod = 'AccessSecretVersion' | 'GetSecretVersion' | 'ListSecretVersions';
export type VersionState = 'ENABLED' | 'DISABLED' | 'DESTROYED';

/** What the next call of a method gets instead of its normal answer. */
export type Fault =
  | {
      readonly code: grpc.status;
      readonly details?: string;
      /** Sent as google.rpc.RetryInfo in the grpc-status-details-bin trailer, as Google's APIs do. */
      readonly retryDelayMs?: number;
    }
  /** A normal answer whose data_crc32c does not match the data. */
  | { readonly corruptChecksum: true }
  /** A normal answer without data_crc32c (the field is optional in the API). */
  | { readonly noChecksum: true }
  /** No answer until the client cancels the call (or the fake stops). */
  | { readonly hang: true };

/** One call as the fake saw it: the resource name and the headers that identify the caller. */
export interface SeenCall {
  readonly method: FakeMethod;
  readonly name: string;
  readonly userAgent: string;
  readonly apiClient: string;
  /** The authorization header as sent ('' when none). */
  readonly authorization: string;
  /** The HTTP/2 :authority: the host name the client dialled (through a proxy too). */
  readonly authority: string;
}

export interface FakeOptions {
  /** Serve TLS with this certificate (PEM) instead of plaintext. */
  readonly tls?: { readonly certChain: Buffer; readonly privateKey: Buffer };
  /** Be the regional endpoint of this location (e.g. `europe-west4`) instead of the global one. */
  readonly location?: string;
}

export interface GcpSecretManagerFake {
  /** `127.0.0.1:PORT`, as GCP_SECRET_MANAGER_ENDPOINT takes it (prefix https:// when serving TLS). */
  readonly endpoint: string;
  /** The number the fake's names use for a project id. */
  projectNumber(projectId: string): string;
  /** The location this fake is the regional endpoint of; undefined for the global endpoint. */
  readonly location: string | undefined;
  /**
   * Adds a version (creating the secret if needed, in this fake's location); returns its number.
   */
  addVersion(project: string, secret: string, data: string | Uint8Array, state?: VersionState): string;
  setState(project: string, secret: string, version: string, state: VersionState): void;
  setAlias(project: string, secret: string, alias: string, version: string): void;
  /** Queues faults for the next calls of `method`, in order. */
  inject(method: FakeMethod, ...faults: Fault[]): void;
  calls(method: FakeMethod): number;
  readonly seen: readonly SeenCall[];
  stop(): Promise<void>;
}

interface StoredVersion {
  readonly number: number;
  readonly data: Buffer;
  readonly createTime: { seconds: string; nanos: number };
  state: VersionState;
}

interface StoredSecret {
  readonly versions: StoredVersion[];
  readonly aliases: Map<string, number>;
}

type Reply<T> = (error: Partial<grpc.StatusObject> | null, value?: T) => void;
type Call = grpc.ServerUnaryCall<Record<string, unknown>, unknown>;

class RpcError {
  readonly code: grpc.status;
  readonly details: string;
  constructor(code: grpc.status, details: string) {
    this.code = code;
    this.details = details;
  }
}

const require = createRequire(import.meta.url);
// Both packages' main is build/src/index.js; their .proto files sit in build/protos.
const PROTO_DIRS = ['@google-cloud/secret-manager', 'google-gax'].map((pkg) =>
  join(dirname(require.resolve(pkg)), '../protos'),
);

// protobufjs is what @grpc/proto-loader and google-gax build on; here it encodes the error details.
const protobuf = require('protobufjs') as typeof import('protobufjs');
const rpcTypes = protobuf.loadSync(
  ['google/rpc/status.proto', 'google/rpc/error_details.proto'].map((f) => join(PROTO_DIRS[1]!, f)),
);

/** A google.rpc.Status carrying a RetryInfo, encoded as the grpc-status-details-bin trailer holds it. */
function statusDetails(code: grpc.status, message: string, retryDelayMs: number): Buffer {
  const RetryInfo = rpcTypes.lookupType('google.rpc.RetryInfo');
  const Status = rpcTypes.lookupType('google.rpc.Status');
  const retryInfo = RetryInfo.encode(
    RetryInfo.create({
      retryDelay: { seconds: Math.floor(retryDelayMs / 1000), nanos: (retryDelayMs % 1000) * 1e6 },
    }),
  ).finish();
  const status = Status.create({
    code,
    message,
    details: [{ type_url: 'type.googleapis.com/google.rpc.RetryInfo', value: retryInfo }],
  });
  return Buffer.from(Status.encode(status).finish());
}

/** A bit-at-a-time CRC32C, written apart from the agent's table-driven one so each checks the other. */
function referenceCrc32c(bytes: Uint8Array): number {
  let crc = 0xffffffff;
  for (const byte of bytes) {
    crc ^= byte;
    for (let k = 0; k < 8; k++) crc = (crc >>> 1) ^ (0x82f63b78 & -(crc & 1));
  }
  return (crc ^ 0xffffffff) >>> 0;
}

export async function startGcpSecretManagerFake(options: FakeOptions = {}): Promise<GcpSecretManagerFake> {
  const definition = protoLoader.loadSync('google/cloud/secretmanager/v1/service.proto', {
    includeDirs: PROTO_DIRS,
    keepCase: false,
    longs: String,
    enums: String,
    defaults: true,
    oneofs: true,
  });
  const loaded = grpc.loadPackageDefinition(definition) as unknown as {
    google: {
      cloud: { secretmanager: { v1: { SecretManagerService: { service: grpc.ServiceDefinition } } } };
    };
  };
  const service = loaded.google.cloud.secretmanager.v1.SecretManagerService.service;

  const projects = new Map<string, string>();
  const secrets = new Map<string, StoredSecret>(); // key: `${projectNumber}/${secret}`
  const faults = new Map<FakeMethod, Fault[]>();
  const counts = new Map<FakeMethod, number>();
  const seen: SeenCall[] = [];
  const hanging = new Set<() => void>();

  const projectNumber = (id: string): string => {
    if (/^\d+$/.test(id)) return id;
    let n = projects.get(id);
    if (!n) {
      n = String(100_000_000_000 + projects.size * 1_111);
      projects.set(id, n);
    }
    return n;
  };
  /** A project named in a request: by id or by number, as the real API accepts both. */
  const knownProject = (segment: string): string | undefined =>
    /^\d+$/.test(segment)
      ? [...projects.values()].includes(segment)
        ? segment
        : undefined
      : projects.get(segment);

  const secretFor = (project: string, secret: string, create: boolean): StoredSecret | undefined => {
    const key = `${projectNumber(project)}/${secret}`;
    let s = secrets.get(key);
    if (!s && create) {
      s = { versions: [], aliases: new Map() };
      secrets.set(key, s);
    }
    return s;
  };

  /** `projects/P[/locations/L]/secrets/S[/versions/V]`, as this endpoint accepts it. */
  const location = options.location;
  const scope = location === undefined ? '' : `/locations/${location}`;
  const parse = (name: string, permission: string, withVersion: boolean) => {
    const m = withVersion
      ? /^projects\/([^/]+)(?:\/locations\/([^/]+))?\/secrets\/([^/]+)\/versions\/([^/]+)$/.exec(name)
      : /^projects\/([^/]+)(?:\/locations\/([^/]+))?\/secrets\/([^/]+)$/.exec(name);
    if (!m) throw new RpcError(grpc.status.INVALID_ARGUMENT, `Invalid resource name [${name}].`);
    if (m[2] !== location) {
      const expected = `projects/*${location === undefined ? '' : '/locations/*'}/secrets/*${withVersion ? '/versions/*' : ''}`;
      throw new RpcError(
        grpc.status.INVALID_ARGUMENT,
        location === undefined || m[2] === undefined
          ? `The provided Secret ID [${name}] does not match the expected format [${expected}]`
          : `The location [${m[2]}] of [${name}] is not the location of this regional endpoint [${location}].`,
      );
    }
    const number = knownProject(m[1]!);
    // The real API does not say whether a project exists to a caller without access to it.
    if (!number)
      throw new RpcError(
        grpc.status.PERMISSION_DENIED,
        `Permission '${permission}' denied for resource '${name}' (or it may not exist).`,
      );
    const secretName = `projects/${number}${scope}/secrets/${m[3]!}`;
    return { number, secretName, secret: secrets.get(`${number}/${m[3]!}`), version: m[4] };
  };

  const resolveVersion = (name: string, permission: string): { version: StoredVersion; name: string } => {
    const { secretName, secret, version } = parse(name, permission, true);
    const missingSecret = new RpcError(
      grpc.status.NOT_FOUND,
      `Secret [${secretName}] not found or has no versions.`,
    );
    if (!secret || secret.versions.length === 0) throw missingSecret;
    let found: StoredVersion | undefined;
    if (version === 'latest') found = secret.versions.at(-1);
    else if (/^\d+$/.test(version!)) found = secret.versions.find((v) => String(v.number) === version);
    else {
      const aliased = secret.aliases.get(version!);
      found = secret.versions.find((v) => v.number === aliased);
    }
    if (!found)
      throw new RpcError(
        grpc.status.NOT_FOUND,
        `Secret Version [${secretName}/versions/${version!}] not found.`,
      );
    return { version: found, name: `${secretName}/versions/${found.number}` };
  };

  const versionResource = (v: StoredVersion, name: string) => ({
    name,
    createTime: v.createTime,
    state: v.state,
    etag: `"${v.number}-${v.state.toLowerCase()}"`,
    clientSpecifiedPayloadChecksum: true,
  });

  /** Counts the call, records who made it, and answers with the next queued fault if there is one. */
  const handle =
    <T>(method: FakeMethod, answer: (request: Record<string, unknown>, fault: Fault | undefined) => T) =>
    (call: Call, reply: Reply<T>): void => {
      counts.set(method, (counts.get(method) ?? 0) + 1);
      const header = (key: string): string => call.metadata.get(key).map(String).join(' ');
      const name = String(call.request.name ?? call.request.parent ?? '');
      seen.push({
        method,
        name,
        userAgent: header('user-agent'),
        apiClient: header('x-goog-api-client'),
        authorization: header('authorization'),
        authority: call.getHost(),
      });
      const fault = faults.get(method)?.shift();
      if (fault && 'code' in fault) {
        const details = fault.details ?? `injected ${grpc.status[fault.code]}`;
        const metadata = new grpc.Metadata();
        if (fault.retryDelayMs !== undefined)
          metadata.set('grpc-status-details-bin', statusDetails(fault.code, details, fault.retryDelayMs));
        reply({ code: fault.code, details, metadata });
        return;
      }
      if (fault && 'hang' in fault) {
        const release = (): void => {
          hanging.delete(release);
          reply({ code: grpc.status.CANCELLED, details: 'released' });
        };
        hanging.add(release);
        call.on('cancelled', release);
        return;
      }
      try {
        reply(null, answer(call.request, fault));
      } catch (e) {
        if (!(e instanceof RpcError)) throw e;
        reply({ code: e.code, details: e.details });
      }
    };

  const implementation: grpc.UntypedServiceImplementation = {
    AccessSecretVersion: handle('AccessSecretVersion', (request, fault) => {
      const { version, name } = resolveVersion(String(request.name), 'secretmanager.versions.access');
      if (version.state !== 'ENABLED')
        throw new RpcError(
          grpc.status.FAILED_PRECONDITION,
          `Secret Version [${name}] is in ${version.state} state.`,
        );
      if (fault && 'noChecksum' in fault) return { name, payload: { data: version.data } };
      const crc = referenceCrc32c(version.data);
      const corrupt = fault !== undefined && 'corruptChecksum' in fault;
      return { name, payload: { data: version.data, dataCrc32c: String(corrupt ? (crc ^ 1) >>> 0 : crc) } };
    }),
    GetSecretVersion: handle('GetSecretVersion', (request) => {
      const { version, name } = resolveVersion(String(request.name), 'secretmanager.versions.get');
      return versionResource(version, name);
    }),
    ListSecretVersions: handle('ListSecretVersions', (request) => {
      const parent = String(request.parent);
      const { secretName, secret } = parse(parent, 'secretmanager.versions.list', false);
      if (!secret) throw new RpcError(grpc.status.NOT_FOUND, `Secret [${secretName}] not found.`);
      const filter = String(request.filter ?? '');
      const state = /^state:(ENABLED|DISABLED|DESTROYED)$/.exec(filter)?.[1];
      if (filter !== '' && !state)
        throw new RpcError(grpc.status.INVALID_ARGUMENT, `Invalid filter [${filter}].`);
      // Newest first, as the real API lists them.
      const all = [...secret.versions].reverse().filter((v) => !state || v.state === state);
      const start = Number(request.pageToken || 0);
      const size = Math.min(Number(request.pageSize) || 25_000, 25_000);
      const page = all.slice(start, start + size);
      return {
        versions: page.map((v) => versionResource(v, `${secretName}/versions/${v.number}`)),
        nextPageToken: start + size < all.length ? String(start + size) : '',
        totalSize: all.length,
      };
    }),
  };

  const serverCredentials = options.tls
    ? grpc.ServerCredentials.createSsl(null, [
        { cert_chain: options.tls.certChain, private_key: options.tls.privateKey },
      ])
    : grpc.ServerCredentials.createInsecure();
  const server = new grpc.Server();
  server.addService(service, implementation);
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', serverCredentials, (err, p) => (err ? reject(err) : resolve(p))),
  );

  return {
    endpoint: `127.0.0.1:${port}`,
    projectNumber,
    location,
    addVersion(project, secret, data, state = 'ENABLED') {
      const s = secretFor(project, secret, true)!;
      const number = s.versions.length + 1;
      const now = Date.now();
      s.versions.push({
        number,
        data: Buffer.from(data),
        createTime: { seconds: String(Math.floor(now / 1000)), nanos: (now % 1000) * 1e6 },
        state,
      });
      return String(number);
    },
    setState(project, secret, version, state) {
      const v = secretFor(project, secret, false)?.versions.find((x) => String(x.number) === version);
      if (!v) throw new Error(`the fake has no version ${version} of ${project}/${secret}`);
      v.state = state;
    },
    setAlias(project, secret, alias, version) {
      secretFor(project, secret, true)!.aliases.set(alias, Number(version));
    },
    inject(method, ...queued) {
      faults.set(method, [...(faults.get(method) ?? []), ...queued]);
    },
    calls: (method) => counts.get(method) ?? 0,
    seen,
    stop: () =>
      new Promise<void>((resolve) => {
        for (const release of [...hanging]) release();
        server.tryShutdown(() => resolve());
      }),
  };
}
