/**
 * A local GCP Secret Manager: the real `google.cloud.secretmanager.v1.SecretManagerService` gRPC
 * service, loaded from the .proto files the client library ships, on 127.0.0.1 (plaintext, or TLS
 * with a certificate the test makes); and beside it, on a port of its own, the same service as the
 * REST API serves it (`GET /v1/{name}:access` and the rest, JSON with Google's error bodies), which
 * the client speaks with `fallback: true`. Both share one store, one fault queue and one call log.
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
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
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
  | { readonly hang: true }
  /**
   * REST only: this body, with this status and content type, instead of the API's answer: what
   * another server behind the endpoint, or a proxy, might say.
   */
  | { readonly rawBody: string; readonly status?: number; readonly contentType?: string };

/** One call as the fake saw it: the resource name and the headers that identify the caller. */
export interface SeenCall {
  readonly method: FakeMethod;
  /** Which of the fake's two servers answered. */
  readonly transport: 'grpc' | 'rest';
  readonly name: string;
  readonly userAgent: string;
  readonly apiClient: string;
  /** The authorization header as sent ('' when none). */
  readonly authorization: string;
  /** The :authority (gRPC) or Host (REST): the host name the client dialled (through a proxy too). */
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
  /** The REST API's `127.0.0.1:PORT` (the same store), for GCP_TRANSPORT=rest. */
  readonly restEndpoint: string;
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
/** What a call gets, before a transport puts it on its wire. */
type Served =
  | { readonly value: unknown }
  | { readonly error: { code: grpc.status; details: string; retryDelayMs?: number | undefined } }
  | { readonly hang: true }
  | { readonly raw: { readonly rawBody: string; readonly status?: number; readonly contentType?: string } };
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

/** The HTTP status Google's REST APIs answer each gRPC code with (google.rpc.Code's mapping). */
const HTTP_STATUS: Partial<Record<grpc.status, number>> = {
  [grpc.status.CANCELLED]: 499,
  [grpc.status.UNKNOWN]: 500,
  [grpc.status.INVALID_ARGUMENT]: 400,
  [grpc.status.DEADLINE_EXCEEDED]: 504,
  [grpc.status.NOT_FOUND]: 404,
  [grpc.status.ALREADY_EXISTS]: 409,
  [grpc.status.PERMISSION_DENIED]: 403,
  [grpc.status.RESOURCE_EXHAUSTED]: 429,
  [grpc.status.FAILED_PRECONDITION]: 400,
  [grpc.status.ABORTED]: 409,
  [grpc.status.OUT_OF_RANGE]: 400,
  [grpc.status.UNIMPLEMENTED]: 501,
  [grpc.status.INTERNAL]: 500,
  [grpc.status.UNAVAILABLE]: 503,
  [grpc.status.DATA_LOSS]: 500,
  [grpc.status.UNAUTHENTICATED]: 401,
};

const STATE_NUMBERS: Record<string, number> = { ENABLED: 1, DISABLED: 2, DESTROYED: 3 };

/**
 * An answer in proto3's JSON mapping: bytes as base64, a Timestamp as RFC 3339, an enum by name (or
 * number), and fields at their default value ('' here) left out, as Google's servers write it.
 */
function proto3Json(value: unknown, numericEnums: boolean): unknown {
  if (Buffer.isBuffer(value) || value instanceof Uint8Array) return Buffer.from(value).toString('base64');
  if (Array.isArray(value)) return value.map((v) => proto3Json(v, numericEnums));
  if (value === null || typeof value !== 'object') return value;
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(value)) {
    if (v === '' || v === undefined) continue;
    if (key === 'createTime') {
      const t = v as { seconds: string; nanos: number };
      out[key] = new Date(Number(t.seconds) * 1000 + t.nanos / 1e6).toISOString();
    } else if (key === 'state' && typeof v === 'string') {
      out[key] = numericEnums ? STATE_NUMBERS[v] : v;
    } else out[key] = proto3Json(v, numericEnums);
  }
  return out;
}

/** What Google's front end answers for a path no API serves (an endpoint that is not Secret Manager's). */
function googleFrontEnd404(path: string): string {
  return [
    '<!DOCTYPE html>',
    '<html lang=en>',
    '  <meta charset=utf-8>',
    '  <title>Error 404 (Not Found)!!1</title>',
    `  <p><b>404.</b> <ins>That’s an error.</ins>`,
    `  <p>The requested URL <code>${path.replace(/[<>&]/g, '')}</code> was not found on this server.  <ins>That’s all we know.</ins>`,
    '',
  ].join('\n');
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

  /**
   * Counts the call, records who made it, and answers with the next queued fault if there is one:
   * what both transports answer, before each puts it on its wire.
   */
  const serve = (
    method: FakeMethod,
    request: Record<string, unknown>,
    caller: Omit<SeenCall, 'method' | 'name'>,
  ): Served => {
    counts.set(method, (counts.get(method) ?? 0) + 1);
    seen.push({ method, name: String(request.name ?? request.parent ?? ''), ...caller });
    const fault = faults.get(method)?.shift();
    if (fault && 'code' in fault) {
      const details = fault.details ?? `injected ${grpc.status[fault.code]}`;
      return { error: { code: fault.code, details, retryDelayMs: fault.retryDelayMs } };
    }
    if (fault && 'hang' in fault) return { hang: true };
    if (fault && 'rawBody' in fault) return { raw: fault };
    try {
      return { value: ANSWERS[method](request, fault) };
    } catch (e) {
      if (!(e instanceof RpcError)) throw e;
      return { error: { code: e.code, details: e.details } };
    }
  };

  const handle =
    (method: FakeMethod) =>
    (call: Call, reply: Reply<unknown>): void => {
      const header = (key: string): string => call.metadata.get(key).map(String).join(' ');
      const served = serve(method, call.request, {
        transport: 'grpc',
        userAgent: header('user-agent'),
        apiClient: header('x-goog-api-client'),
        authorization: header('authorization'),
        authority: call.getHost(),
      });
      if ('hang' in served) {
        const release = (): void => {
          hanging.delete(release);
          reply({ code: grpc.status.CANCELLED, details: 'released' });
        };
        hanging.add(release);
        call.on('cancelled', release);
        return;
      }
      if ('raw' in served) throw new Error('a rawBody fault is for the REST API only');
      if ('error' in served) {
        const { code, details, retryDelayMs } = served.error;
        const metadata = new grpc.Metadata();
        if (retryDelayMs !== undefined)
          metadata.set('grpc-status-details-bin', statusDetails(code, details, retryDelayMs));
        reply({ code, details, metadata });
        return;
      }
      reply(null, served.value);
    };

  const ANSWERS: Record<FakeMethod, (request: Record<string, unknown>, fault: Fault | undefined) => unknown> =
    {
      AccessSecretVersion: (request, fault) => {
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
      },
      GetSecretVersion: (request) => {
        const { version, name } = resolveVersion(String(request.name), 'secretmanager.versions.get');
        return versionResource(version, name);
      },
      ListSecretVersions: (request) => {
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
      },
    };
  const implementation: grpc.UntypedServiceImplementation = {
    AccessSecretVersion: handle('AccessSecretVersion'),
    GetSecretVersion: handle('GetSecretVersion'),
    ListSecretVersions: handle('ListSecretVersions'),
  };

  /**
   * The REST API: the HTTP rules of service.proto (`GET /v1/{name=projects/*[/locations/*]/secrets/*
   * /versions/*}:access`, …), proto3 JSON out (bytes in base64, int64 as strings, timestamps in RFC
   * 3339, enums by name or, when the client asks with `$alt=json;enum-encoding=int`, by number), and
   * errors as Google's JSON error body with the HTTP status of the gRPC code. A path no method has
   * gets Google's front end's HTML 404.
   */
  const onRest = (req: IncomingMessage, res: ServerResponse): void => {
    const url = new URL(req.url ?? '/', 'http://fake');
    const path = decodeURIComponent(url.pathname);
    const secret = 'projects/[^/]+(?:/locations/[^/]+)?/secrets/[^/]+';
    const route: [FakeMethod, Record<string, unknown>] | undefined =
      req.method !== 'GET'
        ? undefined
        : ((): [FakeMethod, Record<string, unknown>] | undefined => {
            let m = new RegExp(`^/v1/(${secret}/versions/[^/:]+):access$`).exec(path);
            if (m) return ['AccessSecretVersion', { name: m[1] }];
            m = new RegExp(`^/v1/(${secret}/versions/[^/:]+)$`).exec(path);
            if (m) return ['GetSecretVersion', { name: m[1] }];
            m = new RegExp(`^/v1/(${secret})/versions$`).exec(path);
            if (m)
              return [
                'ListSecretVersions',
                {
                  parent: m[1],
                  pageSize: Number(url.searchParams.get('pageSize') ?? 0),
                  pageToken: url.searchParams.get('pageToken') ?? '',
                  filter: url.searchParams.get('filter') ?? '',
                },
              ];
            return undefined;
          })();
    if (!route) {
      res.writeHead(404, { 'content-type': 'text/html; charset=UTF-8' });
      res.end(googleFrontEnd404(url.pathname));
      return;
    }
    const header = (key: string): string => String(req.headers[key] ?? '');
    const served = serve(route[0], route[1], {
      transport: 'rest',
      userAgent: header('user-agent'),
      apiClient: header('x-goog-api-client'),
      authorization: header('authorization'),
      authority: header('host'),
    });
    if ('hang' in served) {
      const release = (): void => {
        hanging.delete(release);
        res.destroy();
      };
      hanging.add(release);
      res.on('close', release);
      return;
    }
    if ('raw' in served) {
      res.writeHead(served.raw.status ?? 200, {
        'content-type': served.raw.contentType ?? 'application/json; charset=UTF-8',
      });
      res.end(served.raw.rawBody);
      return;
    }
    const send = (status: number, body: unknown): void => {
      res.writeHead(status, { 'content-type': 'application/json; charset=UTF-8' });
      res.end(JSON.stringify(body, null, 2));
    };
    if ('error' in served) {
      const { code, details, retryDelayMs } = served.error;
      const status = HTTP_STATUS[code] ?? 500;
      send(status, {
        error: {
          code: status,
          message: details,
          status: grpc.status[code],
          ...(retryDelayMs === undefined
            ? {}
            : {
                details: [
                  {
                    '@type': 'type.googleapis.com/google.rpc.RetryInfo',
                    retryDelay: `${(retryDelayMs / 1000).toFixed(3)}s`,
                  },
                ],
              }),
        },
      });
      return;
    }
    const numericEnums = (url.searchParams.get('$alt') ?? '').includes('enum-encoding=int');
    send(200, proto3Json(served.value, numericEnums));
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
  const rest = options.tls
    ? createHttpsServer({ cert: options.tls.certChain, key: options.tls.privateKey }, onRest)
    : createHttpServer(onRest);
  await new Promise<void>((resolve) => rest.listen(0, '127.0.0.1', resolve));

  return {
    endpoint: `127.0.0.1:${port}`,
    restEndpoint: `127.0.0.1:${(rest.address() as AddressInfo).port}`,
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
      Promise.all([
        new Promise<void>((resolve) => {
          for (const release of [...hanging]) release();
          server.tryShutdown(() => resolve());
        }),
        new Promise<void>((resolve) => {
          rest.closeAllConnections();
          rest.close(() => resolve());
        }),
      ]).then(() => undefined),
  };
}
