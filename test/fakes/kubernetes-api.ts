import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:https';
import { writeStatus } from './kubernetes-status.ts';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
// kubernetes-models' own dependency: the apimachinery types, version.Info among them.
import { Info } from '@kubernetes-models/apimachinery/version';
import { MutatingWebhookConfiguration } from 'kubernetes-models/admissionregistration.k8s.io/v1';
import { Secret } from 'kubernetes-models/v1';
import { issueCertificateAuthority, issueServingCertificate } from '../../webhook/tls/issue-certificates.ts';
import { applyJsonPatch, type JsonPatchOperation } from '../../webhook/apply-patch.ts';

/**
 * A local HTTPS stand-in for the few Kubernetes API endpoints the webhook uses, speaking the
 * real API's shapes: objects with metadata.resourceVersion, optimistic concurrency on PUT (409
 * Conflict), 409 AlreadyExists on POST, 404 NotFound, metav1.Status error bodies, bearer-token
 * auth, RBAC (403 Forbidden with the API server's own message, checked before existence as there),
 * JSON Patch on MutatingWebhookConfigurations, and GET /version (a version.Info, readable
 * without a token as system:public-info-viewer allows). Objects it stores and the version it
 * reports are validated with kubernetes-models, as the API server's own types are.
 */

type KubeObject = Record<string, unknown> & { metadata: Record<string, unknown> };

/** The version fields that differ between clusters; the rest of version.Info is filled in. */
export interface FakeVersion {
  readonly gitVersion: string;
  readonly major: string;
  readonly minor: string;
}

/**
 * What GET /version answers: a version, a metav1.Status failure, a raw body (not necessarily JSON),
 * or no answer at all (the request hangs until the client gives up).
 */
export type VersionAnswer =
  | { readonly version: FakeVersion }
  | { readonly status: number; readonly reason: string; readonly message: string }
  | { readonly body: string }
  | { readonly hang: true };

/** A full version.Info as kube-apiserver serves it. */
export function versionInfo(v: FakeVersion): Record<string, string> {
  const info = {
    major: v.major,
    minor: v.minor,
    gitVersion: v.gitVersion,
    gitCommit: 'bc79e92d7a4a6b8b4b8a1e4c7d0c1a1d0f6e7b3c',
    gitTreeState: 'clean',
    buildDate: '2024-09-11T20:52:58Z',
    goVersion: 'go1.22.6',
    compiler: 'gc',
    platform: 'linux/amd64',
  };
  new Info(info).validate();
  return info;
}

export interface FakeKubernetesApi {
  readonly baseUrl: string;
  /** PEM of the CA that signed the fake's serving certificate. */
  readonly ca: string;
  readonly token: string;
  /** `system:serviceaccount:NS:NAME`, as RBAC messages name the caller. */
  readonly user: string;
  /**
   * The RBAC rules the token's user holds, as `verb resource` (e.g. `get secrets`); default: what
   * deploy/overlays/self-managed/rbac.yaml grants. Delete one to act out an installation without it.
   */
  readonly allowed: Set<string>;
  /**
   * The namespaces that exist: creating an object elsewhere is 404 `namespaces "x" not found`, as the
   * NamespaceLifecycle admission plugin answers. Default: the service account's, default, kube-system.
   */
  readonly namespaces: Set<string>;
  /** Every request, in order, as "METHOD path". */
  readonly log: string[];
  secret(namespace: string, name: string): KubeObject | undefined;
  webhookConfiguration(name: string): KubeObject | undefined;
  putWebhookConfiguration(object: KubeObject): void;
  /** As `kubectl delete mutatingwebhookconfiguration NAME`, or a configuration never applied. */
  deleteWebhookConfiguration(name: string): void;
  /** Holds the next `count` Secret GET responses until all of them have arrived, so callers race. */
  holdSecretReads(count: number): void;
  /** The next GET /version answers, in order; the last one repeats. Default: v1.31.2. */
  answerVersion(...answers: VersionAnswer[]): void;
  close(): Promise<void>;
}

function send(res: ServerResponse, code: number, object: unknown): void {
  res.writeHead(code, { 'content-type': 'application/json' });
  res.end(JSON.stringify(object));
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

/** What the API server's authorizer checks a request as: verb, resource, group, namespace, name. */
interface Attributes {
  readonly verb: string;
  readonly resource: string;
  readonly group: string;
  readonly namespace?: string;
  readonly name?: string;
}

/**
 * The apiserver's 403 for a resource request (responsewriters.forbiddenMessage wrapped by
 * errors.NewForbidden): `secrets "x" is forbidden: User "u" cannot get resource "secrets" in API
 * group "" in the namespace "ns"`; without a name (create) `secrets is forbidden: …`; cluster-scoped
 * `… at the cluster scope`.
 */
function forbidden(res: ServerResponse, user: string, a: Attributes): void {
  const qualified = a.group === '' ? a.resource : `${a.resource}.${a.group}`;
  const scope = a.namespace === undefined ? 'at the cluster scope' : `in the namespace "${a.namespace}"`;
  writeStatus(
    res,
    403,
    'Forbidden',
    `${qualified}${a.name === undefined ? '' : ` "${a.name}"`} is forbidden: User "${user}" cannot ${a.verb} resource "${a.resource}" in API group "${a.group}" ${scope}`,
    {
      ...(a.name === undefined ? {} : { name: a.name }),
      ...(a.group === '' ? {} : { group: a.group }),
      kind: a.resource,
    },
  );
}

const VERBS: Readonly<Record<string, string>> = {
  GET: 'get',
  POST: 'create',
  PUT: 'update',
  PATCH: 'patch',
  DELETE: 'delete',
};

export async function startFakeKubernetesApi(
  options: { serviceAccount?: { namespace: string; name: string } } = {},
): Promise<FakeKubernetesApi> {
  const sa = options.serviceAccount ?? { namespace: 'secret-agent', name: 'secret-agent-webhook' };
  const user = `system:serviceaccount:${sa.namespace}:${sa.name}`;
  const allowed = new Set([
    'get secrets',
    'update secrets',
    'create secrets',
    'get mutatingwebhookconfigurations',
    'patch mutatingwebhookconfigurations',
  ]);
  const namespaces = new Set([sa.namespace, 'default', 'kube-system']);
  const now = new Date();
  const ca = await issueCertificateAuthority('fake kubernetes CA', now, 86_400_000);
  const serving = await issueServingCertificate(ca, ['kubernetes.default.svc'], now, 86_400_000, [
    '127.0.0.1',
  ]);
  const token = `fake-token-${randomUUID()}`;
  const secrets = new Map<string, KubeObject>();
  const configs = new Map<string, KubeObject>();
  const log: string[] = [];
  let resourceVersion = 1000;
  let held: { count: number; waiting: (() => void)[] } | undefined;
  let versionAnswers: VersionAnswer[] = [{ version: { gitVersion: 'v1.31.2', major: '1', minor: '31' } }];
  const nextVersion = () => String(++resourceVersion);

  const stamp = (object: KubeObject, namespace?: string): KubeObject => ({
    ...object,
    metadata: {
      ...object.metadata,
      ...(namespace ? { namespace } : {}),
      uid: (object.metadata.uid as string | undefined) ?? randomUUID(),
      creationTimestamp:
        (object.metadata.creationTimestamp as string | undefined) ??
        new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
      resourceVersion: nextVersion(),
    },
  });

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const url = new URL(req.url ?? '/', 'https://fake');
    const method = req.method ?? 'GET';
    log.push(`${method} ${url.pathname}`);
    // A wrong token is refused everywhere; no token at all is system:anonymous, which the default
    // system:public-info-viewer binding lets read /version (with anonymous auth on, the default).
    const anonymous = req.headers.authorization === undefined;
    if (!(anonymous && url.pathname === '/version') && req.headers.authorization !== `Bearer ${token}`)
      return writeStatus(res, 401, 'Unauthorized', 'Unauthorized');
    const body = await readBody(req);

    if (url.pathname === '/version') {
      if (method !== 'GET')
        return writeStatus(
          res,
          405,
          'MethodNotAllowed',
          'the server does not allow this method on the requested resource',
        );
      const answer = versionAnswers.length > 1 ? versionAnswers.shift()! : versionAnswers[0]!;
      if ('hang' in answer) return;
      if ('version' in answer) return send(res, 200, versionInfo(answer.version));
      if ('body' in answer) {
        res.writeHead(200, { 'content-type': 'application/json' });
        return void res.end(answer.body);
      }
      return writeStatus(res, answer.status, answer.reason, answer.message, {});
    }

    const verb = VERBS[method] ?? method.toLowerCase();
    let m = /^\/api\/v1\/namespaces\/([^/]+)\/secrets(?:\/([^/]+))?$/.exec(url.pathname);
    if (m) {
      const [, namespace, name] = m as unknown as [string, string, string | undefined];
      if (!allowed.has(`${verb} secrets`))
        return forbidden(res, user, {
          verb,
          resource: 'secrets',
          group: '',
          namespace,
          ...(name === undefined ? {} : { name }),
        });
      const key = (n: string) => `${namespace}/${n}`;
      const notFound = (n: string) =>
        writeStatus(res, 404, 'NotFound', `secrets "${n}" not found`, { name: n, kind: 'secrets' });
      if (method === 'GET' && name) {
        if (held && held.count > 0) {
          const gate = held;
          gate.count--;
          await new Promise<void>((resolve) => {
            gate.waiting.push(resolve);
            if (gate.count === 0) for (const w of gate.waiting) w();
          });
        }
        const found = secrets.get(key(name));
        return found ? send(res, 200, found) : notFound(name);
      }
      if (method === 'POST' && !name) {
        if (!namespaces.has(namespace))
          return writeStatus(res, 404, 'NotFound', `namespaces "${namespace}" not found`, {
            name: namespace,
            kind: 'namespaces',
          });
        const object = JSON.parse(body) as KubeObject;
        const n = object.metadata?.name as string;
        new Secret(object as never).validate();
        if (secrets.has(key(n)))
          return writeStatus(res, 409, 'AlreadyExists', `secrets "${n}" already exists`, {
            name: n,
            kind: 'secrets',
          });
        const stored = stamp(object, namespace);
        secrets.set(key(n), stored);
        return send(res, 201, stored);
      }
      if (method === 'PUT' && name) {
        const object = JSON.parse(body) as KubeObject;
        new Secret(object as never).validate();
        const current = secrets.get(key(name));
        if (!current) return notFound(name);
        const sent = object.metadata?.resourceVersion;
        // An update without resourceVersion is unconditional, as in the real API.
        if (sent !== undefined && sent !== '' && sent !== current.metadata.resourceVersion)
          return writeStatus(
            res,
            409,
            'Conflict',
            `Operation cannot be fulfilled on secrets "${name}": the object has been modified; please apply your changes to the latest version and try again`,
            { name, kind: 'secrets' },
          );
        const stored = stamp(
          {
            ...object,
            metadata: {
              ...object.metadata,
              uid: current.metadata.uid,
              creationTimestamp: current.metadata.creationTimestamp,
            },
          },
          namespace,
        );
        secrets.set(key(name), stored);
        return send(res, 200, stored);
      }
      return writeStatus(
        res,
        405,
        'MethodNotAllowed',
        'the server does not allow this method on the requested resource',
      );
    }

    m = /^\/apis\/admissionregistration\.k8s\.io\/v1\/mutatingwebhookconfigurations\/([^/]+)$/.exec(
      url.pathname,
    );
    if (m) {
      const name = m[1]!;
      const current = configs.get(name);
      const details = { name, group: 'admissionregistration.k8s.io', kind: 'mutatingwebhookconfigurations' };
      if (!allowed.has(`${verb} mutatingwebhookconfigurations`))
        return forbidden(res, user, {
          verb,
          resource: 'mutatingwebhookconfigurations',
          group: 'admissionregistration.k8s.io',
          name,
        });
      if (!current)
        return writeStatus(
          res,
          404,
          'NotFound',
          `mutatingwebhookconfigurations.admissionregistration.k8s.io "${name}" not found`,
          details,
        );
      if (method === 'GET') return send(res, 200, current);
      if (method === 'PATCH') {
        if (req.headers['content-type'] !== 'application/json-patch+json')
          return writeStatus(
            res,
            415,
            'UnsupportedMediaType',
            `the media type is not supported by this fake: ${String(req.headers['content-type'])}`,
          );
        let patched: KubeObject;
        try {
          patched = applyJsonPatch(current, JSON.parse(body) as JsonPatchOperation[]);
        } catch (e) {
          return writeStatus(res, 422, 'Invalid', `the request is invalid: ${(e as Error).message}`, details);
        }
        new MutatingWebhookConfiguration(patched as never).validate();
        const stored = stamp(patched);
        configs.set(name, stored);
        return send(res, 200, stored);
      }
      return writeStatus(
        res,
        405,
        'MethodNotAllowed',
        'the server does not allow this method on the requested resource',
      );
    }
    return writeStatus(res, 404, 'NotFound', 'the server could not find the requested resource');
  };

  const server: Server = createServer({ cert: serving.cert, key: serving.key }, (req, res) => {
    handle(req, res).catch((e: unknown) => writeStatus(res, 500, 'InternalError', (e as Error).message));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;

  return {
    baseUrl: `https://127.0.0.1:${port}`,
    ca: ca.cert,
    token,
    user,
    allowed,
    namespaces,
    log,
    secret: (namespace, name) => secrets.get(`${namespace}/${name}`),
    webhookConfiguration: (name) => configs.get(name),
    putWebhookConfiguration: (object) => {
      new MutatingWebhookConfiguration(object as never).validate();
      configs.set(object.metadata.name as string, stamp(object));
    },
    deleteWebhookConfiguration: (name) => {
      configs.delete(name);
    },
    holdSecretReads: (count) => {
      held = { count, waiting: [] };
    },
    answerVersion: (...answers) => {
      if (answers.length === 0) throw new Error('answerVersion needs at least one answer');
      for (const a of answers) if ('version' in a) versionInfo(a.version);
      versionAnswers = answers;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
