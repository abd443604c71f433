/**
 * A local HashiCorp Vault speaking its HTTP API (/v1/…) on 127.0.0.1, for the parts the agent uses:
 *   - KV v2 (`<mount>/data/<key>[?version=N]`: data.data + data.metadata; a deleted or destroyed
 *     version answers 404 with its metadata and data.data null, as the real plugin does) and KV v1;
 *   - `sys/internal/ui/mounts/<path>` (mount path, type and options.version);
 *   - a database engine (`<mount>/creds/<role>`) issuing leases, `sys/leases/renew` and
 *     `sys/leases/lookup`, renewals capped at the role's max TTL, 400 "lease not found" for unknown,
 *     expired or revoked leases (a lease dies with the token that created it);
 *   - logins at `auth/<mount>/login` for kubernetes (role + jwt), jwt (role optional), approle and
 *     cert (the TLS client certificate of the connection, checked against each certificate role's
 *     CA; `name` picks one role): 400 "client certificate must be supplied" without one, 400
 *     "invalid certificate or no client certificate supplied" when no role trusts it; and aws (iam
 *     type), done as Vault's backend does it: the base64 fields decoded and checked, X-Amz-* headers
 *     outside Vault's allowed list refused, the X-Vault-AWS-IAM-Server-ID header required and
 *     signed when configured, then the signed request sent to the configured STS endpoint (a real
 *     moto server, which checks the SigV4 signature) with the Host it was signed for, and the ARN
 *     of its answer matched against the role's bound_iam_principal_arn; and gcp (iam type), as the
 *     vault-plugin-auth-gcp backend: the JWT's key fetched from the configured API endpoint by the
 *     header's kid and the unverified sub, the RS256 signature checked, exp (at most 15 minutes
 *     ahead, the role's max_jwt_exp), sub and aud (`…vault/<role>`) validated, the account matched
 *     against bound_service_accounts, all with the plugin's messages;
 *   - `auth/token/lookup-self` and `auth/token/renew-self`, capped at the token's max TTL;
 *     `auth/token/revoke-self` (204; the token's leases go with it) and `sys/leases/revoke` (204,
 *     also for a lease Vault no longer knows), both recorded in `revocations`;
 *   - ACL policies (path globs with `*` and `+`, plus Vault's default policy); 403
 *     {"errors":["permission denied"]} for a missing, unknown or expired token or a denied path;
 *     404 {"errors":[]} for nothing at a path;
 *   - namespaces (Vault Enterprise, HCP): the X-Vault-Namespace header decides where a request goes;
 *     mounts, auth methods, policies, tokens and leases belong to one namespace. A token is valid in
 *     its own namespace and the ones below it, where its policies name paths with the child's name in
 *     front (`team-a/secret/data/app` in a root policy); anywhere else it gets 403 permission denied.
 *     A login at a mount the namespace does not have is 403 permission denied, as the real server
 *     answers an unauthenticated request to a path no mount serves. A lease is known only in the
 *     namespace it was issued in (400 lease not found elsewhere);
 *   - injectable faults (429 with Retry-After, 503 sealed, 500, or no answer at all), and counters
 *     of requests per path.
 * Expiry follows an injectable ManualClock that tests advance instead of waiting. Every answer uses
 * Vault's envelope: {request_id, lease_id, renewable, lease_duration, data, wrap_info, warnings, auth, mount_type}.
 */
import { randomBytes, randomUUID, verify, X509Certificate } from 'node:crypto';
import {
  createServer as createHttpServer,
  request as httpRequest,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { TLSSocket } from 'node:tls';
import type { Clock } from '../../agent/providers/vault/clock.ts';

/** A clock that moves only when told to; timers run, in order, as `advance` passes them. */
export class ManualClock implements Clock {
  #now: number;
  #timers: { at: number; seq: number; fn: () => void }[] = [];
  #seq = 0;

  constructor(start = Date.parse('2030-01-01T00:00:00Z')) {
    this.#now = start;
  }

  now(): number {
    return this.#now;
  }

  setTimer(fn: () => void, ms: number): { cancel(): void } {
    const timer = { at: this.#now + Math.max(0, ms), seq: this.#seq++, fn };
    this.#timers.push(timer);
    return { cancel: () => (this.#timers = this.#timers.filter((t) => t !== timer)) };
  }

  /** Moves time forward by `ms`, running each timer that comes due at its own time. */
  advance(ms: number): void {
    const end = this.#now + ms;
    for (;;) {
      const next = this.#timers.filter((t) => t.at <= end).sort((a, b) => a.at - b.at || a.seq - b.seq)[0];
      if (!next) break;
      this.#timers = this.#timers.filter((t) => t !== next);
      this.#now = Math.max(this.#now, next.at);
      next.fn();
    }
    this.#now = end;
  }

  get pendingTimers(): number {
    return this.#timers.length;
  }
}

type Capability = 'read' | 'update' | 'create' | 'list' | 'delete';

interface Token {
  readonly token: string;
  readonly accessor: string;
  readonly namespace: string;
  readonly policies: readonly string[];
  readonly path: string;
  readonly issuedAt: number;
  readonly creationTtlSec: number;
  readonly renewable: boolean;
  /** Undefined: never expires (ttl 0, like a root token). */
  expiresAt: number | undefined;
  readonly maxExpiresAt: number | undefined;
}

interface Lease {
  readonly id: string;
  readonly namespace: string;
  readonly owner: string;
  readonly issuedAt: number;
  readonly durationSec: number;
  readonly renewable: boolean;
  readonly maxExpiresAt: number;
  expiresAt: number;
  lastRenewal: number | undefined;
}

interface KvVersion {
  readonly data: Record<string, unknown>;
  readonly createdAt: number;
  deletedAt: number | undefined;
  destroyed: boolean;
}

type Mount =
  | { readonly type: 'kv'; readonly version: 1; readonly entries: Map<string, Record<string, unknown>> }
  | { readonly type: 'kv'; readonly version: 2; readonly entries: Map<string, KvVersion[]> }
  | { readonly type: 'database'; readonly roles: Map<string, DatabaseRole> };

export interface DatabaseRole {
  readonly ttlSec: number;
  readonly maxTtlSec: number;
  readonly renewable?: boolean;
  /** Called per issue: the credentials to hand out. */
  readonly credentials: () => Record<string, string>;
}

export interface LoginRole {
  readonly policies: readonly string[];
  readonly ttlSec: number;
  /** 0: no cap. */
  readonly maxTtlSec?: number;
  readonly renewable?: boolean;
}

type AuthMount =
  | { readonly type: 'kubernetes'; readonly roles: Map<string, LoginRole & { readonly jwt: string }> }
  | {
      readonly type: 'jwt';
      readonly roles: Map<string, LoginRole & { readonly jwt: string }>;
      defaultRole: string | undefined;
    }
  | {
      readonly type: 'approle';
      readonly roles: Map<string, LoginRole & { readonly roleId: string; readonly secretId?: string }>;
    }
  | { readonly type: 'cert'; readonly roles: Map<string, LoginRole & { readonly certificate: string }> }
  | {
      readonly type: 'aws';
      readonly roles: Map<string, LoginRole & { readonly boundIamPrincipalArn: readonly string[] }>;
      config: AwsAuthConfig;
    }
  | { readonly type: 'gcp'; readonly roles: Map<string, GcpRole>; config: GcpAuthConfig };

/** auth/gcp/config: custom_endpoint.api, where the service accounts' public keys are fetched. */
export interface GcpAuthConfig {
  readonly apiEndpoint: string;
}

/** An iam role (`vault write auth/gcp/role/<role> type=iam bound_service_accounts=…`). */
export interface GcpRole extends LoginRole {
  readonly boundServiceAccounts: readonly string[];
  /** max_jwt_exp, default 900. */
  readonly maxJwtExpSec?: number;
}

/** auth/aws/config/client: where Vault sends the signed request, and the server id it demands. */
export interface AwsAuthConfig {
  /** sts_endpoint: e.g. a moto server's URL, standing in for https://sts.amazonaws.com. */
  readonly stsEndpoint: string;
  readonly iamServerId?: string;
}

/** What STS said about an aws login the fake accepted. */
export interface AwsLogin {
  readonly arn: string;
  readonly role: string;
  /** The STS URL the request was signed for (iam_request_url). */
  readonly url: string;
}

export interface SeenRequest {
  readonly method: string;
  /** The path after /v1/, without the query. */
  readonly path: string;
  readonly query: string;
  /** The X-Vault-Namespace header ('' when none). */
  readonly namespace: string;
  readonly hasToken: boolean;
  readonly userAgent: string;
  readonly status: number;
}

interface Fault {
  readonly status: number;
  remaining: number;
  readonly path?: string;
  readonly retryAfterSec?: number;
  readonly errors?: readonly string[];
  /** Never answer (a Vault that hangs): the request stays open until the client gives up. */
  readonly hang?: boolean;
}

/** A revocation Vault carried out. */
export interface Revocation {
  readonly kind: 'token' | 'lease';
  /** The lease id, or the revoked token's accessor (tokens themselves are not kept in records). */
  readonly id: string;
  readonly namespace: string;
}

class VaultHttpError extends Error {
  readonly status: number;
  readonly errors: readonly string[];
  constructor(status: number, errors: readonly string[]) {
    super(errors.join('; '));
    this.status = status;
    this.errors = errors;
  }
}

const denied = (): VaultHttpError => new VaultHttpError(403, ['permission denied']);
const notFound = (): VaultHttpError => new VaultHttpError(404, []);

/** Vault's default policy: every token may look itself up, renew itself and renew its leases. */
const DEFAULT_POLICY: Record<string, Capability[]> = {
  'auth/token/lookup-self': ['read'],
  'auth/token/renew-self': ['update'],
  'auth/token/revoke-self': ['update'],
  'sys/leases/renew': ['update'],
  'sys/leases/lookup': ['update'],
};

const KV1_TTL_SEC = 2_764_800; // 768h: what KV v1 reports as lease_duration by default

export class FakeVault {
  readonly clock: ManualClock;
  readonly requests: SeenRequest[] = [];
  readonly revocations: Revocation[] = [];
  /** Accepted aws logins, in order: who STS said signed. */
  readonly awsLogins: AwsLogin[] = [];
  readonly #server: Server;
  readonly #mounts = new Map<string, Mount>();
  readonly #authMounts = new Map<string, AuthMount>();
  readonly #policies = new Map<string, Record<string, Capability[]>>();
  readonly #tokens = new Map<string, Token>();
  readonly #leases = new Map<string, Lease>();
  #faults: Fault[] = [];
  #addr = '';

  private constructor(server: Server, clock: ManualClock) {
    this.#server = server;
    this.clock = clock;
  }

  /**
   * Starts on 127.0.0.1 on a free port; TLS when given a certificate. With `clientCa`, a client
   * must present a certificate that CA signed, or the handshake fails, as on a Vault listener with
   * tls_require_and_verify_client_cert. Without it the listener asks for a client certificate but
   * lets a client in without one (Vault's default, tls_disable_client_certs=false): the cert auth
   * method judges it.
   */
  static async start(
    options: { clock?: ManualClock; tls?: { cert: string; key: string; clientCa?: string } } = {},
  ): Promise<FakeVault> {
    const holder: { fake?: FakeVault } = {};
    const handler = (req: IncomingMessage, res: ServerResponse): void => {
      void holder.fake!.#handle(req, res);
    };
    const server = options.tls
      ? createHttpsServer(
          {
            cert: options.tls.cert,
            key: options.tls.key,
            ...(options.tls.clientCa
              ? { ca: options.tls.clientCa, requestCert: true, rejectUnauthorized: true }
              : { requestCert: true, rejectUnauthorized: false }),
          },
          handler,
        )
      : createHttpServer(handler);
    const fake = new FakeVault(server, options.clock ?? new ManualClock());
    holder.fake = fake;
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    fake.#addr = `${options.tls ? 'https' : 'http'}://127.0.0.1:${port}`;
    return fake;
  }

  /** The VAULT_ADDR to use. */
  get addr(): string {
    return this.#addr;
  }

  async stop(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  // ---- setup -------------------------------------------------------------------------------

  /**
   * A policy: path globs (`*` at the end, `+` for one segment) to capabilities. Policies live in a
   * namespace (default: root); a token's policies are those of its own namespace.
   */
  policy(name: string, rules: Record<string, Capability[]>, namespace = ''): void {
    this.#policies.set(join(namespace, name), rules);
  }

  /** Mounts a KV engine at `path` (with a namespace: `ns/path`). */
  mountKv(path: string, version: 1 | 2): void {
    this.#mounts.set(
      slash(path),
      version === 1
        ? { type: 'kv', version, entries: new Map() }
        : { type: 'kv', version, entries: new Map() },
    );
  }

  /** Writes `data` at mount + key (`secret/app`); returns the KV v2 version (1 for KV v1). */
  putKv(path: string, data: Record<string, unknown>): number {
    const [, mount, key] = this.#kvMount(path);
    if (mount.version === 1) {
      mount.entries.set(key, structuredClone(data));
      return 1;
    }
    const versions = mount.entries.get(key) ?? [];
    versions.push({
      data: structuredClone(data),
      createdAt: this.clock.now(),
      deletedAt: undefined,
      destroyed: false,
    });
    mount.entries.set(key, versions);
    return versions.length;
  }

  /** Soft-deletes a KV v2 version, as `vault kv delete -versions=N`. */
  deleteKvVersion(path: string, version: number): void {
    const [, mount, key] = this.#kvMount(path);
    if (mount.version !== 2) throw new Error('not a KV v2 mount');
    mount.entries.get(key)![version - 1]!.deletedAt = this.clock.now();
  }

  destroyKvVersion(path: string, version: number): void {
    const [, mount, key] = this.#kvMount(path);
    if (mount.version !== 2) throw new Error('not a KV v2 mount');
    mount.entries.get(key)![version - 1]!.destroyed = true;
  }

  mountDatabase(path = 'database'): void {
    this.#mounts.set(slash(path), { type: 'database', roles: new Map() });
  }

  databaseRole(mountPath: string, role: string, spec: DatabaseRole): void {
    const mount = this.#mounts.get(slash(mountPath));
    if (mount?.type !== 'database') throw new Error(`no database mount at ${mountPath}`);
    mount.roles.set(role, spec);
  }

  /** Enables Kubernetes auth at `auth/<mount>` with a role that accepts exactly `jwt`. */
  kubernetesRole(mount: string, role: string, spec: LoginRole & { jwt: string }): void {
    const m = this.#auth(mount, 'kubernetes');
    if (m.type === 'kubernetes') m.roles.set(role, spec);
  }

  jwtRole(mount: string, role: string, spec: LoginRole & { jwt: string }, isDefault = false): void {
    const m = this.#auth(mount, 'jwt');
    if (m.type !== 'jwt') return;
    m.roles.set(role, spec);
    if (isDefault) m.defaultRole = role;
  }

  appRole(mount: string, role: string, spec: LoginRole & { roleId: string; secretId?: string }): void {
    const m = this.#auth(mount, 'approle');
    if (m.type === 'approle') m.roles.set(role, spec);
  }

  /** Enables AWS auth at `auth/<mount>` with its client config (sts_endpoint, iam_server_id_header_value). */
  awsAuth(mount: string, config: AwsAuthConfig): void {
    const m = this.#auth(mount, 'aws');
    if (m.type === 'aws') m.config = config;
  }

  /** An iam role (`vault write auth/aws/role/<role> auth_type=iam bound_iam_principal_arn=…`). */
  awsRole(mount: string, role: string, spec: LoginRole & { boundIamPrincipalArn: readonly string[] }): void {
    const m = this.#auth(mount, 'aws');
    if (m.type === 'aws') m.roles.set(role, spec);
  }

  /** Enables GCP auth at `auth/<mount>` with its custom API endpoint (a FakeGoogleIam). */
  gcpAuth(mount: string, config: GcpAuthConfig): void {
    const m = this.#auth(mount, 'gcp');
    if (m.type === 'gcp') m.config = config;
  }

  gcpRole(mount: string, role: string, spec: GcpRole): void {
    const m = this.#auth(mount, 'gcp');
    if (m.type === 'gcp') m.roles.set(role, spec);
  }

  /** A cert auth role (`vault write auth/cert/certs/<role> certificate=@ca.pem`): trusts what `certificate` signed. */
  certRole(mount: string, role: string, spec: LoginRole & { certificate: string }): void {
    const m = this.#auth(mount, 'cert');
    if (m.type === 'cert') m.roles.set(role, spec);
  }

  /** A token as `vault token create` makes it; ttl 0 never expires. */
  createToken(spec: {
    policies: readonly string[];
    ttlSec?: number;
    maxTtlSec?: number;
    renewable?: boolean;
    namespace?: string;
  }): string {
    return this.#issue(spec.namespace ?? '', 'auth/token/create', {
      policies: spec.policies,
      ttlSec: spec.ttlSec ?? 0,
      maxTtlSec: spec.maxTtlSec ?? 0,
      renewable: spec.renewable ?? true,
    }).token;
  }

  revokeToken(token: string): void {
    this.#tokens.delete(token);
  }

  /** Revokes every token issued by a login at `auth/<mount>/login` (as `vault token revoke -mode=path`). */
  revokeLogins(mount: string): void {
    for (const [text, token] of this.#tokens)
      if (token.path === `auth/${mount}/login`) this.#tokens.delete(text);
  }

  revokeLease(leaseId: string): void {
    this.#leases.delete(leaseId);
  }

  /** The next `times` requests (to paths starting with `path`, if given) get `status` instead. */
  fail(fault: {
    status: number;
    times?: number;
    path?: string;
    retryAfterSec?: number;
    errors?: readonly string[];
    hang?: boolean;
  }): void {
    this.#faults.push({ ...fault, remaining: fault.times ?? 1 });
  }

  /** Requests seen for `method path` (path after /v1/, without the query). */
  count(method: string, path: string): number {
    return this.requests.filter((r) => r.method === method && r.path === path).length;
  }

  reset(): void {
    this.requests.length = 0;
    this.revocations.length = 0;
    this.#faults = [];
  }

  /** The accessor of a token, to match `revocations`; undefined for a token Vault does not know. */
  accessorOf(token: string): string | undefined {
    return this.#tokens.get(token)?.accessor;
  }

  /** Whether Vault would accept the token now (known, not expired). */
  tokenValid(token: string): boolean {
    const t = this.#tokens.get(token);
    return t !== undefined && this.#tokenAlive(t);
  }

  /** Remaining seconds of a lease as Vault sees it; undefined when Vault no longer knows it. */
  leaseTtl(leaseId: string): number | undefined {
    const lease = this.#liveLease(leaseId);
    return lease ? Math.floor((lease.expiresAt - this.clock.now()) / 1000) : undefined;
  }

  // ---- HTTP --------------------------------------------------------------------------------

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://vault');
    const path = url.pathname.startsWith('/v1/') ? url.pathname.slice(4) : url.pathname;
    const header = String(req.headers['x-vault-namespace'] ?? '').replace(/^\/+|\/+$/g, '');
    // Vault reserves `root` as the name of the root namespace.
    const namespace = header === 'root' ? '' : header;
    const tokenHeader = req.headers['x-vault-token'];
    const token = typeof tokenHeader === 'string' && tokenHeader !== '' ? tokenHeader : undefined;
    const method = req.method ?? 'GET';
    let status: number;
    let body: unknown;
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      'cache-control': 'no-store',
    };
    try {
      const raw = await readBody(req);
      const fault = this.#faults.find(
        (f) => f.remaining > 0 && (f.path === undefined || path.startsWith(f.path)),
      );
      if (fault?.hang) {
        fault.remaining--;
        return;
      }
      if (fault) {
        fault.remaining--;
        if (fault.retryAfterSec !== undefined) headers['retry-after'] = String(fault.retryAfterSec);
        throw new VaultHttpError(fault.status, fault.errors ?? defaultFaultErrors(fault.status, path));
      }
      if (!url.pathname.startsWith('/v1/')) throw notFound();
      let input: Record<string, unknown> = {};
      if (raw !== '') {
        try {
          input = JSON.parse(raw) as Record<string, unknown>;
        } catch {
          throw new VaultHttpError(400, ['failed to parse JSON input: invalid character']);
        }
      }
      const peer = req.socket instanceof TLSSocket ? req.socket.getPeerCertificate() : undefined;
      const clientCert = peer?.raw ? new X509Certificate(peer.raw) : undefined;
      const answer = await this.#route(method, path, url.searchParams, namespace, token, input, clientCert);
      status = answer.status ?? 200;
      body = answer.body;
    } catch (e) {
      // A fault of the fake itself answers as Vault's own internal errors do.
      status = e instanceof VaultHttpError ? e.status : 500;
      body = { errors: e instanceof VaultHttpError ? e.errors : [`internal error: ${(e as Error).message}`] };
    }
    this.requests.push({
      method,
      path,
      query: url.search,
      namespace,
      hasToken: token !== undefined,
      userAgent: String(req.headers['user-agent'] ?? ''),
      status,
    });
    if (status === 204) {
      res.writeHead(204).end();
      return;
    }
    res.writeHead(status, headers).end(JSON.stringify(body));
  }

  async #route(
    method: string,
    path: string,
    query: URLSearchParams,
    namespace: string,
    tokenText: string | undefined,
    input: Record<string, unknown>,
    clientCert: X509Certificate | undefined,
  ): Promise<{ status?: number; body: unknown }> {
    const write = method === 'POST' || method === 'PUT';
    const login = /^auth\/(.+)\/login$/.exec(path);
    if (login && write && login[1] !== 'token')
      return { body: await this.#login(namespace, login[1]!, input, clientCert) };
    if (path === 'sys/health') return { body: { initialized: true, sealed: false, standby: false } };

    const token = this.#validToken(tokenText, namespace);
    const allow = (p: string, capability: Capability): void => {
      // #validToken made sure the token's namespace is this one or a parent.
      if (!this.#allowed(token, policyPath(namespace, token.namespace, p)!, capability)) throw denied();
    };

    if (path === 'auth/token/lookup-self' && method === 'GET') {
      allow(path, 'read');
      return { body: envelope({ data: this.#tokenData(token) }) };
    }
    if (path === 'auth/token/renew-self' && write) {
      allow(path, 'update');
      return this.#renewToken(token, input);
    }
    if (path === 'auth/token/revoke-self' && write) {
      allow(path, 'update');
      this.#tokens.delete(token.token);
      this.revocations.push({ kind: 'token', id: token.accessor, namespace: token.namespace });
      return { status: 204, body: undefined };
    }
    if (path === 'sys/leases/revoke' && write) {
      allow(path, 'update');
      const id = String(input.lease_id ?? '');
      if (this.#liveLease(id, namespace)) {
        this.#leases.delete(id);
        this.revocations.push({ kind: 'lease', id, namespace });
      }
      return { status: 204, body: undefined };
    }
    if (path === 'sys/leases/renew' && write) {
      allow(path, 'update');
      return this.#renewLease(namespace, input);
    }
    if (path === 'sys/leases/lookup' && write) {
      allow(path, 'update');
      const lease = this.#liveLease(String(input.lease_id ?? ''), namespace);
      if (!lease) throw new VaultHttpError(400, ['invalid lease']);
      const now = this.clock.now();
      return {
        body: envelope({
          data: {
            id: lease.id,
            issue_time: iso(lease.issuedAt),
            expire_time: iso(lease.expiresAt),
            last_renewal: lease.lastRenewal === undefined ? null : iso(lease.lastRenewal),
            renewable: lease.renewable,
            ttl: Math.floor((lease.expiresAt - now) / 1000),
          },
        }),
      };
    }
    const ui = /^sys\/internal\/ui\/mounts\/(.+)$/.exec(path);
    if (ui && method === 'GET') return { body: this.#mountInfo(token, namespace, ui[1]!) };

    if (method !== 'GET') throw new VaultHttpError(405, ['1 error occurred:\n\t* unsupported operation\n\n']);
    allow(path, 'read');
    const found = this.#findMount(namespace, path);
    if (!found) throw notFound();
    const [mountPath, mount] = found;
    const rest = path.slice(mountPath.length - (namespace ? namespace.length + 1 : 0));
    switch (mount.type) {
      case 'kv':
        return mount.version === 1 ? this.#readKv1(mount, rest) : this.#readKv2(mount, rest, query);
      case 'database':
        return this.#issueCreds(mount, namespace, path, rest, token);
    }
  }

  #readKv1(mount: Extract<Mount, { version: 1 }>, key: string): { body: unknown } {
    const data = mount.entries.get(key);
    if (!data) throw notFound();
    return { body: envelope({ data: structuredClone(data), lease_duration: KV1_TTL_SEC }) };
  }

  #readKv2(
    mount: Extract<Mount, { version: 2 }>,
    rest: string,
    query: URLSearchParams,
  ): { status?: number; body: unknown } {
    if (rest.startsWith('metadata/')) return this.#readKv2Metadata(mount, rest.slice(9));
    if (!rest.startsWith('data/')) throw notFound();
    const versions = mount.entries.get(rest.slice(5));
    if (!versions) throw notFound();
    const asked = Number(query.get('version') ?? '0');
    const number = asked > 0 ? asked : versions.length;
    const version = versions[number - 1];
    if (!version) throw notFound();
    const metadata = {
      created_time: iso(version.createdAt),
      custom_metadata: null,
      deletion_time: version.deletedAt === undefined ? '' : iso(version.deletedAt),
      destroyed: version.destroyed,
      version: number,
    };
    const gone =
      version.destroyed || (version.deletedAt !== undefined && version.deletedAt <= this.clock.now());
    // The real plugin answers a deleted or destroyed version with its metadata and a 404.
    if (gone) return { status: 404, body: envelope({ data: { data: null, metadata } }) };
    return { body: envelope({ data: { data: structuredClone(version.data), metadata } }) };
  }

  /** `GET <mount>/metadata/<key>`: the key's versions without any value, as the real plugin answers. */
  #readKv2Metadata(mount: Extract<Mount, { version: 2 }>, key: string): { body: unknown } {
    const versions = mount.entries.get(key);
    if (!versions || versions.length === 0) throw notFound();
    const now = this.clock.now();
    return {
      body: envelope({
        data: {
          cas_required: false,
          created_time: iso(versions[0]!.createdAt),
          current_version: versions.length,
          custom_metadata: null,
          delete_version_after: '0s',
          max_versions: 0,
          oldest_version: 0,
          updated_time: iso(versions.at(-1)!.createdAt),
          versions: Object.fromEntries(
            versions.map((v, i) => [
              String(i + 1),
              {
                created_time: iso(v.createdAt),
                deletion_time: v.deletedAt === undefined || v.deletedAt > now ? '' : iso(v.deletedAt),
                destroyed: v.destroyed,
              },
            ]),
          ),
        },
      }),
    };
  }

  #issueCreds(
    mount: Extract<Mount, { type: 'database' }>,
    namespace: string,
    path: string,
    rest: string,
    token: Token,
  ): { body: unknown } {
    const m = /^creds\/([^/]+)$/.exec(rest);
    if (!m) throw notFound();
    const role = mount.roles.get(m[1]!);
    if (!role) throw new VaultHttpError(400, [`unknown role: ${m[1]}`]);
    const now = this.clock.now();
    const lease: Lease = {
      id: `${path}/${randomBytes(12).toString('base64url')}`,
      namespace,
      owner: token.token,
      issuedAt: now,
      durationSec: role.ttlSec,
      renewable: role.renewable ?? true,
      maxExpiresAt: now + role.maxTtlSec * 1000,
      expiresAt: now + role.ttlSec * 1000,
      lastRenewal: undefined,
    };
    this.#leases.set(lease.id, lease);
    return {
      body: envelope({
        lease_id: lease.id,
        lease_duration: role.ttlSec,
        renewable: lease.renewable,
        data: role.credentials(),
      }),
    };
  }

  #renewLease(namespace: string, input: Record<string, unknown>): { body: unknown } {
    const lease = this.#liveLease(String(input.lease_id ?? ''), namespace);
    if (!lease) throw new VaultHttpError(400, ['lease not found']);
    if (!lease.renewable) throw new VaultHttpError(400, ['lease is not renewable']);
    const now = this.clock.now();
    const asked = seconds(input.increment) ?? lease.durationSec;
    const left = Math.floor((lease.maxExpiresAt - now) / 1000);
    const granted = Math.max(0, Math.min(asked, left));
    lease.expiresAt = now + granted * 1000;
    lease.lastRenewal = now;
    return {
      body: envelope({
        lease_id: lease.id,
        renewable: true,
        lease_duration: granted,
        warnings:
          granted < asked
            ? [
                `TTL of "${asked}s" exceeded the effective max_ttl of "${left}s"; TTL value is capped accordingly`,
              ]
            : null,
      }),
    };
  }

  #renewToken(token: Token, input: Record<string, unknown>): { body: unknown } {
    if (!token.renewable || token.expiresAt === undefined)
      throw new VaultHttpError(400, ['lease is not renewable']);
    const now = this.clock.now();
    const asked = seconds(input.increment) ?? token.creationTtlSec;
    const left = token.maxExpiresAt === undefined ? asked : Math.floor((token.maxExpiresAt - now) / 1000);
    const granted = Math.max(0, Math.min(asked, left));
    token.expiresAt = now + granted * 1000;
    return {
      body: envelope({
        auth: this.#authBlock(token, granted),
        warnings:
          granted < asked
            ? [
                `TTL of "${asked}s" exceeded the effective max_ttl of "${left}s"; TTL value is capped accordingly`,
              ]
            : null,
      }),
    };
  }

  async #login(
    namespace: string,
    mountPath: string,
    input: Record<string, unknown>,
    clientCert: X509Certificate | undefined,
  ): Promise<unknown> {
    const mount = this.#authMounts.get(join(namespace, mountPath));
    // No mount serves the path, so the request needs a token, and a login carries none.
    if (!mount) throw denied();
    let role: LoginRole;
    switch (mount.type) {
      case 'kubernetes': {
        if (typeof input.role !== 'string' || input.role === '')
          throw new VaultHttpError(400, ['missing role']);
        if (typeof input.jwt !== 'string' || input.jwt === '') throw new VaultHttpError(400, ['missing jwt']);
        const r = mount.roles.get(input.role);
        if (!r) throw new VaultHttpError(400, [`invalid role name "${input.role}"`]);
        if (r.jwt !== input.jwt) throw denied();
        role = r;
        break;
      }
      case 'jwt': {
        const name = typeof input.role === 'string' && input.role !== '' ? input.role : mount.defaultRole;
        if (!name) throw new VaultHttpError(400, ['missing role']);
        const r = mount.roles.get(name);
        if (!r) throw new VaultHttpError(400, [`role "${name}" could not be found`]);
        if (r.jwt !== input.jwt)
          throw new VaultHttpError(400, ['error validating token: invalid audience (aud) claim']);
        role = r;
        break;
      }
      case 'approle': {
        const r = [...mount.roles.values()].find((x) => x.roleId === input.role_id);
        if (!r || (r.secretId !== undefined && r.secretId !== input.secret_id))
          throw new VaultHttpError(400, ['invalid role or secret ID']);
        role = r;
        break;
      }
      case 'cert': {
        if (!clientCert) throw new VaultHttpError(400, ['client certificate must be supplied']);
        const named = typeof input.name === 'string' && input.name !== '' ? input.name : undefined;
        const candidates = named
          ? [mount.roles.get(named)].filter((r) => r !== undefined)
          : [...mount.roles.values()];
        const r = candidates.find((c) => signedBy(clientCert, c.certificate));
        if (!r) throw new VaultHttpError(400, ['invalid certificate or no client certificate supplied']);
        role = r;
        break;
      }
      case 'aws': {
        const caller = await awsCallerIdentity(mount.config, input);
        const entity = iamEntity(caller.arn);
        const name = typeof input.role === 'string' && input.role !== '' ? input.role : entity.friendlyName;
        const r = mount.roles.get(name);
        if (!r) throw new VaultHttpError(400, [`entry for role ${name} not found`]);
        const bound = r.boundIamPrincipalArn.some(
          (b) => b === entity.canonicalArn || (b.endsWith('*') && caller.arn.startsWith(b.slice(0, -1))),
        );
        if (!bound)
          throw new VaultHttpError(400, [
            `IAM Principal "${caller.arn}" does not belong to the role "${name}"`,
          ]);
        this.awsLogins.push({ arn: caller.arn, role: name, url: caller.url });
        role = r;
        break;
      }
      case 'gcp':
        role = await gcpIamLogin(mount.config, mount.roles, input);
        break;
    }
    const token = this.#issue(namespace, `auth/${mountPath}/login`, {
      policies: role.policies,
      ttlSec: role.ttlSec,
      maxTtlSec: role.maxTtlSec ?? 0,
      renewable: role.renewable ?? true,
    });
    return { ...envelope({ auth: this.#authBlock(token, role.ttlSec) }), mount_type: mount.type };
  }

  #mountInfo(token: Token, namespace: string, path: string): unknown {
    const found = this.#findMount(namespace, path);
    if (!found) throw denied();
    const [fullPath, mount] = found;
    const relative = fullPath.slice(namespace ? namespace.length + 1 : 0);
    // As the real endpoint: any capability on any path inside the mount lets the token see it.
    const policies = this.#policiesOf(token);
    const seen = policyPath(namespace, token.namespace, relative)!;
    const inside = policies.some((rules) =>
      Object.keys(rules).some(
        (glob) => glob.startsWith(seen) || seen.startsWith(glob.replace(/[*+].*$/, '')),
      ),
    );
    if (!inside) throw denied();
    return envelope({
      data: {
        accessor: `${mount.type}_${fullPath.length.toString(16)}a1b2c3`,
        config: { default_lease_ttl: 0, force_no_cache: false, max_lease_ttl: 0 },
        description: '',
        external_entropy_access: false,
        local: false,
        options: mount.type === 'kv' ? { version: String(mount.version) } : null,
        path: relative,
        plugin_version: '',
        running_plugin_version: '',
        running_sha256: '',
        seal_wrap: false,
        type: mount.type,
        uuid: randomUUID(),
      },
    });
  }

  // ---- state -------------------------------------------------------------------------------

  #issue(namespace: string, path: string, role: Required<LoginRole>): Token {
    const now = this.clock.now();
    const token: Token = {
      token: `hvs.${randomBytes(18).toString('base64url')}`,
      accessor: randomBytes(12).toString('base64url'),
      namespace,
      policies: ['default', ...role.policies],
      path,
      issuedAt: now,
      creationTtlSec: role.ttlSec,
      renewable: role.renewable && role.ttlSec > 0,
      expiresAt: role.ttlSec > 0 ? now + role.ttlSec * 1000 : undefined,
      maxExpiresAt: role.ttlSec > 0 && role.maxTtlSec > 0 ? now + role.maxTtlSec * 1000 : undefined,
    };
    this.#tokens.set(token.token, token);
    return token;
  }

  /** A token works in its own namespace and in the namespaces below it. */
  #validToken(text: string | undefined, namespace: string): Token {
    const token = text === undefined ? undefined : this.#tokens.get(text);
    if (!token || !this.#tokenAlive(token) || policyPath(namespace, token.namespace, '') === undefined)
      throw denied();
    return token;
  }

  #tokenAlive(token: Token): boolean {
    return token.expiresAt === undefined || this.clock.now() < token.expiresAt;
  }

  /** With `namespace`: the lease as a request in that namespace sees it (only its own namespace does). */
  #liveLease(id: string, namespace?: string): Lease | undefined {
    const lease = this.#leases.get(id);
    if (!lease || (namespace !== undefined && lease.namespace !== namespace)) return undefined;
    const owner = this.#tokens.get(lease.owner);
    // Vault revokes a lease when it ends, and with the token that created it.
    if (this.clock.now() >= lease.expiresAt || !owner || !this.#tokenAlive(owner)) {
      this.#leases.delete(id);
      return undefined;
    }
    return lease;
  }

  #tokenData(token: Token): Record<string, unknown> {
    const now = this.clock.now();
    return {
      accessor: token.accessor,
      creation_time: Math.floor(token.issuedAt / 1000),
      creation_ttl: token.creationTtlSec,
      display_name: 'token',
      entity_id: '',
      expire_time: token.expiresAt === undefined ? null : iso(token.expiresAt),
      explicit_max_ttl: 0,
      id: token.token,
      issue_time: iso(token.issuedAt),
      meta: null,
      num_uses: 0,
      orphan: true,
      path: token.path,
      policies: token.policies,
      renewable: token.renewable,
      ttl: token.expiresAt === undefined ? 0 : Math.floor((token.expiresAt - now) / 1000),
      type: 'service',
    };
  }

  #authBlock(token: Token, leaseDuration: number): Record<string, unknown> {
    return {
      client_token: token.token,
      accessor: token.accessor,
      policies: token.policies,
      token_policies: token.policies,
      metadata: null,
      lease_duration: leaseDuration,
      renewable: token.renewable,
      entity_id: '',
      token_type: 'service',
      orphan: true,
      mfa_requirement: null,
      num_uses: 0,
    };
  }

  #policiesOf(token: Token): Record<string, Capability[]>[] {
    return token.policies.map((name) =>
      name === 'default' ? DEFAULT_POLICY : (this.#policies.get(join(token.namespace, name)) ?? {}),
    );
  }

  #allowed(token: Token, path: string, capability: Capability): boolean {
    const relevant = capability === 'update' ? ['update', 'create'] : [capability];
    return this.#policiesOf(token).some((rules) =>
      Object.entries(rules).some(
        ([glob, caps]) => globMatches(glob, path) && caps.some((c) => relevant.includes(c)),
      ),
    );
  }

  #findMount(namespace: string, path: string): [string, Mount] | undefined {
    const full = `${join(namespace, path)}/`;
    let best: [string, Mount] | undefined;
    for (const [mountPath, mount] of this.#mounts) {
      if (full.startsWith(mountPath) && (!best || mountPath.length > best[0].length))
        best = [mountPath, mount];
    }
    return best;
  }

  #kvMount(path: string): [string, Extract<Mount, { type: 'kv' }>, string] {
    for (const [mountPath, mount] of this.#mounts) {
      if (path.startsWith(mountPath) && mount.type === 'kv')
        return [mountPath, mount, path.slice(mountPath.length)];
    }
    throw new Error(`no KV mount for ${path}`);
  }

  #auth(mount: string, type: AuthMount['type']): AuthMount {
    let m = this.#authMounts.get(mount);
    if (!m) {
      m = (
        type === 'jwt'
          ? { type, roles: new Map(), defaultRole: undefined }
          : type === 'aws'
            ? { type, roles: new Map(), config: { stsEndpoint: 'https://sts.amazonaws.com' } }
            : type === 'gcp'
              ? { type, roles: new Map(), config: { apiEndpoint: 'https://www.googleapis.com' } }
              : { type, roles: new Map() }
      ) as AuthMount;
      this.#authMounts.set(mount, m);
    }
    if (m.type !== type) throw new Error(`auth/${mount} is a ${m.type} mount`);
    return m;
  }
}

function envelope(parts: {
  data?: unknown;
  auth?: unknown;
  lease_id?: string;
  renewable?: boolean;
  lease_duration?: number;
  warnings?: readonly string[] | null;
}): Record<string, unknown> {
  return {
    request_id: randomUUID(),
    lease_id: parts.lease_id ?? '',
    renewable: parts.renewable ?? false,
    lease_duration: parts.lease_duration ?? 0,
    data: parts.data ?? null,
    wrap_info: null,
    warnings: parts.warnings ?? null,
    auth: parts.auth ?? null,
    mount_type: '',
  };
}

function defaultFaultErrors(status: number, path: string): string[] {
  if (status === 503) return ['Vault is sealed'];
  if (status === 429) return [`request path "${path}": rate limit quota exceeded`];
  return ['internal error'];
}

/** The X-Amz-* headers Vault passes on to STS unless allowed_sts_header_values adds more. */
const ALLOWED_STS_HEADERS = new Set([
  'x-amz-algorithm',
  'x-amz-content-sha256',
  'x-amz-credential',
  'x-amz-date',
  'x-amz-security-token',
  'x-amz-signature',
  'x-amz-signedheaders',
  'x-amz-user-agent',
]);
const IAM_SERVER_ID_HEADER = 'X-Vault-AWS-IAM-Server-ID';

/** Vault's iam login up to STS's answer: the fields checked in its order, with its messages. */
async function awsCallerIdentity(
  config: AwsAuthConfig,
  input: Record<string, unknown>,
): Promise<{ arn: string; userId: string; account: string; url: string }> {
  const field = (name: string): string => (typeof input[name] === 'string' ? (input[name] as string) : '');
  const fail = (message: string): never => {
    throw new VaultHttpError(400, [message]);
  };
  const method = field('iam_http_request_method');
  if (method === '') fail('missing iam_http_request_method');
  if (method !== 'POST') fail("invalid iam_http_request_method; currently only 'POST' is supported");
  if (field('iam_request_url') === '') fail('missing iam_request_url');
  let url: URL;
  try {
    url = new URL(Buffer.from(field('iam_request_url'), 'base64').toString('utf8'));
  } catch {
    return fail('error parsing iam_request_url');
  }
  if (field('iam_request_body') === '') fail('missing iam_request_body');
  const body = Buffer.from(field('iam_request_body'), 'base64').toString('utf8');
  let headers: Record<string, string[]> = {};
  try {
    const decoded = JSON.parse(
      Buffer.from(field('iam_request_headers'), 'base64').toString('utf8'),
    ) as Record<string, unknown>;
    headers = Object.fromEntries(
      Object.entries(decoded).map(([k, v]) => [k, (Array.isArray(v) ? v : [v]).map(String)]),
    );
  } catch {
    headers = {};
  }
  if (Object.keys(headers).length === 0) fail('missing iam_request_headers');
  for (const name of Object.keys(headers))
    if (name.toLowerCase().startsWith('x-amz-') && !ALLOWED_STS_HEADERS.has(name.toLowerCase()))
      fail(`invalid request header: ${name}`);
  const header = (name: string): string | undefined =>
    Object.entries(headers)
      .find(([k]) => k.toLowerCase() === name.toLowerCase())?.[1]
      .join(',');
  if (config.iamServerId !== undefined) {
    const given = header(IAM_SERVER_ID_HEADER);
    const problem =
      given === undefined
        ? `missing header "${IAM_SERVER_ID_HEADER}"`
        : given !== config.iamServerId
          ? `expected "${config.iamServerId}" but got "${given}"`
          : !/SignedHeaders=([^,]+)/
                .exec(header('authorization') ?? '')?.[1]!
                .split(';')
                .includes(IAM_SERVER_ID_HEADER.toLowerCase())
            ? "vault header wasn't signed"
            : undefined;
    if (problem) fail(`error validating ${IAM_SERVER_ID_HEADER} header: ${problem}`);
  }
  // As Vault's buildHttpRequest: the configured endpoint, the client's path, the Host it signed.
  const target = new URL(`${url.pathname}${url.search}`, config.stsEndpoint);
  const answer = await new Promise<{ status: number; text: string }>((resolve, reject) => {
    const out: Record<string, string> = { host: url.host };
    for (const [k, v] of Object.entries(headers)) if (k.toLowerCase() !== 'host') out[k] = v.join(',');
    const req = httpRequest(target, { method: 'POST', headers: out }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }),
      );
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  }).catch((e: Error) => fail(`error making upstream request: error making request: ${e.message}`));
  if (answer.status !== 200)
    fail(`error making upstream request: received error code ${answer.status} from STS: ${answer.text}`);
  const tag = (name: string): string => new RegExp(`<${name}>([^<]*)</${name}>`).exec(answer.text)?.[1] ?? '';
  return { arn: tag('Arn'), userId: tag('UserId'), account: tag('Account'), url: url.href };
}

/**
 * vault-plugin-auth-gcp's iam login up to the token: JWT, key, claims, role. JWT times are judged
 * on the wall clock, as the agent that asked for the JWT sets them.
 */
async function gcpIamLogin(
  config: GcpAuthConfig,
  roles: ReadonlyMap<string, GcpRole>,
  input: Record<string, unknown>,
): Promise<GcpRole> {
  const fail = (message: string): never => {
    throw new VaultHttpError(400, [message]);
  };
  const roleName = typeof input.role === 'string' ? input.role : '';
  if (roleName === '') fail('role is required');
  const role = roles.get(roleName) ?? fail(`role "${roleName}" not found`);
  if (typeof input.jwt !== 'string') return fail('jwt argument is required');
  const parts = input.jwt.split('.');
  const decode = (part: string | undefined): Record<string, unknown> => {
    try {
      return JSON.parse(Buffer.from(part ?? '', 'base64url').toString('utf8')) as Record<string, unknown>;
    } catch {
      return fail('unable to parse signed JWT: go-jose/go-jose: compact JWS format must have three parts');
    }
  };
  if (parts.length !== 3)
    fail('unable to parse signed JWT: go-jose/go-jose: compact JWS format must have three parts');
  const header = decode(parts[0]);
  const claims = decode(parts[1]);
  const kid = String(header.kid ?? '');
  const sub = typeof claims.sub === 'string' ? claims.sub : '';
  if (sub === '') fail("unable to get public key for signed JWT: expected 'sub' claim from JWT");
  const keyUrl = `${config.apiEndpoint.replace(/\/$/, '')}/service_accounts/v1/metadata/x509/${encodeURIComponent(sub)}`;
  const keys = await fetch(keyUrl).then(async (r) =>
    r.ok ? ((await r.json()) as Record<string, string>) : undefined,
  );
  const pem = keys?.[kid];
  if (!pem)
    fail(
      `unable to get public key for signed JWT: unable to get public key "${kid}" for JWT subject "${sub}": service account "${kid}" key "${sub}" not found at GET "${keyUrl}"`,
    );
  const valid =
    header.alg === 'RS256' &&
    verify(
      'RSA-SHA256',
      Buffer.from(`${parts[0]}.${parts[1]}`),
      new X509Certificate(pem!).publicKey,
      Buffer.from(parts[2]!, 'base64url'),
    );
  if (!valid) fail('go-jose/go-jose: error in cryptographic primitive');
  const now = Date.now() / 1000;
  const exp = typeof claims.exp === 'number' ? claims.exp : 0;
  if (exp === 0 || exp < now - 60) fail("JWT is expired or does not have proper 'exp' claim");
  if (exp - now > 15 * 60 + 60) fail(`JWT must expire in 15 minutes, expires in ${Math.round(exp - now)}s`);
  const audiences = Array.isArray(claims.aud) ? claims.aud.map(String) : [String(claims.aud ?? '')];
  const expected = `vault/${roleName}`;
  if (audiences.some((a) => !a.endsWith(expected)))
    fail(`at least one of the JWT claim 'aud' must end in "${expected}"`);
  const maxJwtExp = role.maxJwtExpSec ?? 900;
  if (exp > now + maxJwtExp)
    fail(`role requires that service account JWTs expire within ${maxJwtExp} seconds`);
  if (
    !role.boundServiceAccounts.includes(sub) &&
    !(role.boundServiceAccounts.length === 1 && role.boundServiceAccounts[0] === '*')
  )
    fail(`service account ${sub} (id: ${uniqueId(sub)}) is not authorized for role`);
  return role;
}

/** A stable numeric id for an account email, as IAM gives each service account one. */
function uniqueId(email: string): string {
  return BigInt(`0x${Buffer.from(email).toString('hex').slice(0, 16)}`)
    .toString()
    .slice(0, 21);
}

/** Vault's parseIamArn and canonicalArn: an assumed role's session becomes its role. */
function iamEntity(arn: string): { friendlyName: string; canonicalArn: string } {
  const parts = arn.split(':');
  if (parts.length !== 6 || parts[0] !== 'arn')
    throw new VaultHttpError(400, [`error parsing arn "${arn}": unrecognized arn`]);
  const [type, ...names] = parts[5]!.split('/');
  const friendlyName = type === 'assumed-role' ? names[0]! : names.at(-1)!;
  const canonicalType = type === 'assumed-role' ? 'role' : type!;
  return { friendlyName, canonicalArn: `arn:${parts[1]}:iam::${parts[4]}:${canonicalType}/${friendlyName}` };
}

/**
 * Whether `cert` is `ca` itself or signed by it, and valid now: the check of Vault's cert auth.
 * Validity is judged on the wall clock, as the TLS layer judges the certificates it is handed.
 */
function signedBy(cert: X509Certificate, ca: string): boolean {
  const authority = new X509Certificate(ca);
  const now = Date.now();
  const valid = Date.parse(cert.validFrom) <= now && now <= Date.parse(cert.validTo);
  return valid && cert.checkIssued(authority) && cert.verify(authority.publicKey);
}

/** Vault's path globs: a trailing `*` matches any rest, `+` matches one segment. */
function globMatches(glob: string, path: string): boolean {
  const pattern = glob
    .split('')
    .map((c, i) =>
      c === '*' && i === glob.length - 1
        ? '.*'
        : c === '+'
          ? '[^/]+'
          : c.replace(/[.?^${}()|[\]\\/*]/g, '\\$&'),
    )
    .join('');
  return new RegExp(`^${pattern}$`).test(path);
}

/** Seconds from a number or a Go-style duration string ("90", "90s", "1h"). */
function seconds(value: unknown): number | undefined {
  if (typeof value === 'number') return value;
  if (typeof value !== 'string' || value === '') return undefined;
  const m = /^(\d+)(s|m|h)?$/.exec(value);
  if (!m) return undefined;
  return Number(m[1]) * (m[2] === 'h' ? 3600 : m[2] === 'm' ? 60 : 1);
}

/**
 * `path` in namespace `namespace` as a policy of namespace `tokenNamespace` names it: the child
 * namespace's path below the token's in front. Undefined when `tokenNamespace` is neither
 * `namespace` nor one of its parents.
 */
function policyPath(namespace: string, tokenNamespace: string, path: string): string | undefined {
  if (namespace === tokenNamespace) return path;
  if (tokenNamespace === '') return join(namespace, path);
  if (namespace.startsWith(`${tokenNamespace}/`))
    return join(namespace.slice(tokenNamespace.length + 1), path);
  return undefined;
}

function slash(path: string): string {
  return path.endsWith('/') ? path : `${path}/`;
}

function join(namespace: string, path: string): string {
  return namespace ? `${namespace}/${path}` : path;
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}
