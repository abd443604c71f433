/**
 * A local Kubernetes API server for the endpoints restart-on-change, the pod's Events and the
 * kubernetes-secret exec: helper use, over HTTPS with a throwaway certificate: GET secrets, GET/DELETE pods, GET replicasets, GET/PATCH deployments,
 * statefulsets and daemonsets, POST (create) core/v1 events. It answers as the real API server does where the agent can tell: authentication
 * (401) before authorization (403) before existence (404), errors as `kind: Status` objects with
 * the real messages, strategic-merge / merge patches only (415 otherwise), objects validated against
 * the Kubernetes schemas after a patch (422), resourceVersion bumped on every real change and
 * metadata.generation only when the spec changes. A pod-template change counts as one rollout.
 * Events go through the create path's checks in the real order (see createEvent).
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createServer, type Server } from 'node:https';
import { selfSignedCertificate } from '../support/self-signed-cert.ts';
import { writeStatus } from './kubernetes-status.ts';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { DaemonSet, Deployment, ReplicaSet, StatefulSet } from 'kubernetes-models/apps/v1';
import { Event, Pod, Secret } from 'kubernetes-models/v1';

export type Verb = 'get' | 'patch' | 'delete' | 'create';
export type Resource = 'pods' | 'secrets' | 'replicasets' | 'deployments' | 'statefulsets' | 'daemonsets';
type Json = Record<string, unknown>;

export interface SeenRequest {
  readonly method: string;
  readonly path: string;
  readonly query: string;
  readonly contentType: string;
  readonly status: number;
  /** The request body as sent (a test scans it for leaked secret values). */
  readonly body: string;
}

export interface KubernetesWorkloadsFake {
  /** `https://127.0.0.1:PORT`. */
  readonly url: string;
  /** The serving certificate (self-signed), as a pod's ca.crt holds it. */
  readonly caPem: string;
  /** The only bearer token accepted; change it to act out a token rotation. */
  token: string;
  /**
   * A new directory under `parent` holding what the kubelet mounts for the service account (token,
   * ca.crt, namespace), as the agent reads it from SERVICE_ACCOUNT_DIR.
   */
  serviceAccountDir(parent: string, namespace: string): string;
  /** `system:serviceaccount:NS:NAME`, as RBAC messages name the caller. */
  readonly user: string;
  /** The RBAC rules granted, as `verb resource` (e.g. `patch deployments`). */
  readonly allowed: Set<string>;
  addDeployment(namespace: string, name: string, replicas: number, template?: PodTemplate): string[];
  addStatefulSet(namespace: string, name: string, replicas: number, template?: PodTemplate): string[];
  addDaemonSet(namespace: string, name: string, nodes: number, template?: PodTemplate): string[];
  /** A pod owned by a Job (batch/v1); the Job itself is not served. */
  addJobPod(namespace: string, job: string): string;
  /** A pod owned by a ReplicaSet that no Deployment owns. */
  addReplicaSetPod(namespace: string, replicaSet: string): string;
  addBarePod(namespace: string, name: string, template?: PodTemplate): string;
  /** An Opaque Secret; each value is stored base64-encoded in `data`, as the API serves it. Returns it as stored. */
  addSecret(namespace: string, name: string, data: Record<string, string | Uint8Array>): Json;
  object(resource: Resource, namespace: string, name: string): Json | undefined;
  /** Pod-template changes of a workload: each one makes the real controller roll all its pods. */
  rollouts(resource: Resource, namespace: string, name: string): number;
  /** The core/v1 Events created in a namespace, oldest first, as stored. */
  events(namespace: string): readonly Json[];
  /**
   * The next `times` requests (after authentication) get this code, as an overloaded API server or
   * a failing etcd answers: 429 TooManyRequests (with Retry-After), 500 InternalError, 503 ServiceUnavailable.
   */
  failNext(code: 429 | 500 | 503, times?: number): void;
  readonly requests: readonly SeenRequest[];
  stop(): Promise<void>;
}

/**
 * A pod template as a manifest writes it (labels, annotations, spec); default: one container, no
 * annotations. Workloads keep it as their spec.template (with their selector label added) and their
 * pods are made from it, as the controllers make them.
 */
export interface PodTemplate {
  readonly metadata?: {
    readonly labels?: Record<string, string>;
    readonly annotations?: Record<string, string>;
  };
  readonly spec: Json;
}

const GROUP: Readonly<Record<Resource, '' | 'apps'>> = {
  pods: '',
  secrets: '',
  replicasets: 'apps',
  deployments: 'apps',
  statefulsets: 'apps',
  daemonsets: 'apps',
};
const KIND: Readonly<Record<Resource, string>> = {
  pods: 'Pod',
  secrets: 'Secret',
  replicasets: 'ReplicaSet',
  deployments: 'Deployment',
  statefulsets: 'StatefulSet',
  daemonsets: 'DaemonSet',
};
const VALIDATE: Readonly<Record<Resource, (o: Json) => void>> = {
  pods: (o) => new Pod(o as ConstructorParameters<typeof Pod>[0]).validate(),
  secrets: (o) => new Secret(o as ConstructorParameters<typeof Secret>[0]).validate(),
  replicasets: (o) => new ReplicaSet(o as ConstructorParameters<typeof ReplicaSet>[0]).validate(),
  deployments: (o) => new Deployment(o as ConstructorParameters<typeof Deployment>[0]).validate(),
  statefulsets: (o) => new StatefulSet(o as ConstructorParameters<typeof StatefulSet>[0]).validate(),
  daemonsets: (o) => new DaemonSet(o as ConstructorParameters<typeof DaemonSet>[0]).validate(),
};
const STATUS_REASON: Readonly<Record<429 | 500 | 503, string>> = {
  429: 'TooManyRequests',
  500: 'InternalError',
  503: 'ServiceUnavailable',
};
const isObject = (v: unknown): v is Json => v !== null && typeof v === 'object' && !Array.isArray(v);
const now = () => new Date().toISOString().replace(/\.\d+Z$/, 'Z');
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const PATCH_TYPES = new Set(['application/strategic-merge-patch+json', 'application/merge-patch+json']);

/** A self-signed serving certificate for 127.0.0.1, as the API server's service name too. */
function makeCertificate(): { cert: string; key: string } {
  return selfSignedCertificate('kubernetes', 'IP:127.0.0.1,DNS:kubernetes.default.svc');
}

/** RFC 7386 JSON merge patch; for the maps we patch, strategic merge does the same. */
function mergePatch(target: unknown, patch: unknown): unknown {
  if (patch === null || typeof patch !== 'object' || Array.isArray(patch)) return patch;
  const base =
    target !== null && typeof target === 'object' && !Array.isArray(target) ? (target as Json) : {};
  const out: Json = {};
  for (const [key, value] of Object.entries(base)) if ((patch as Json)[key] !== null) out[key] = value;
  for (const [key, value] of Object.entries(patch as Json))
    if (value !== null) out[key] = mergePatch(out[key], value);
  return out;
}

const defaultTemplate = (): PodTemplate => ({
  spec: { containers: [{ name: 'app', image: 'registry.example/app:1' }] },
});
/** The template's metadata with `labels` added to its own. */
const templateMeta = (template: PodTemplate, labels: Record<string, string>): Json => ({
  ...template.metadata,
  labels: { ...template.metadata?.labels, ...labels },
});
const suffix = (n: number) => randomBytes(8).toString('hex').slice(0, n);

export async function startKubernetesWorkloadsFake(
  options: { serviceAccount?: { namespace: string; name: string } } = {},
): Promise<KubernetesWorkloadsFake> {
  const { cert, key } = makeCertificate();
  const sa = options.serviceAccount ?? { namespace: 'apps', name: 'secret-agent' };
  const objects = new Map<string, Json>();
  const rollouts = new Map<string, number>();
  const events = new Map<string, Map<string, Json>>();
  const failures: (429 | 500 | 503)[] = [];
  const requests: SeenRequest[] = [];
  let resourceVersion = 1000;
  const keyOf = (resource: Resource, ns: string, name: string) => `${resource}/${ns}/${name}`;

  const put = (resource: Resource, ns: string, name: string, object: Json): Json => {
    const meta = object.metadata as Json;
    const stored: Json = {
      apiVersion: GROUP[resource] ? 'apps/v1' : 'v1',
      kind: KIND[resource],
      ...object,
      metadata: {
        name,
        namespace: ns,
        uid: randomUUID(),
        resourceVersion: String(++resourceVersion),
        creationTimestamp: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
        // Workloads have a generation; pods and secrets have none.
        ...(resource === 'pods' || resource === 'secrets' ? {} : { generation: 1 }),
        ...meta,
      },
    };
    VALIDATE[resource](stored);
    objects.set(keyOf(resource, ns, name), stored);
    return stored;
  };
  const ownerRef = (owner: Json) => {
    const meta = owner.metadata as Json;
    return {
      apiVersion: owner.apiVersion,
      kind: owner.kind,
      name: meta.name,
      uid: meta.uid,
      controller: true,
      blockOwnerDeletion: true,
    };
  };
  const addWorkload = (
    resource: Resource,
    ns: string,
    name: string,
    template: PodTemplate,
    extraSpec: Json,
  ): Json =>
    put(resource, ns, name, {
      metadata: { labels: { app: name } },
      spec: {
        selector: { matchLabels: { app: name } },
        template: { metadata: templateMeta(template, { app: name }), spec: template.spec },
        ...extraSpec,
      },
    });
  const addPod = (
    ns: string,
    name: string,
    owners: unknown[],
    labels: Record<string, string> = {},
    template: PodTemplate = defaultTemplate(),
  ): string => {
    put('pods', ns, name, {
      metadata: {
        ...templateMeta(template, labels),
        ...(owners.length ? { ownerReferences: owners } : {}),
      },
      spec: template.spec,
    });
    return name;
  };

  const send = (res: ServerResponse, object: Json, code = 200) => {
    res.writeHead(code, { 'content-type': 'application/json' });
    res.end(JSON.stringify(object));
  };

  /**
   * POST /api/v1/namespaces/NS/events in the real order: authorization (403), media type (415),
   * decoding (400), request vs object namespace (400, EnsureObjectNamespaceMatchesRequestNamespace),
   * validation (422: the v1 schema, then ValidateEventCreate's legacy rules for core/v1), then
   * storage (409 on an existing name); 201 with the stored object. Accepts JSON only (the real one
   * also takes YAML, protobuf and CBOR).
   */
  const createEvent = (req: IncomingMessage, body: string, res: ServerResponse, ns: string) => {
    if (req.method !== 'POST')
      return writeStatus(
        res,
        405,
        'MethodNotAllowed',
        'the server does not allow this method on the requested resource',
        { kind: 'events' },
      );
    if (!fake.allowed.has('create events'))
      return writeStatus(
        res,
        403,
        'Forbidden',
        `events is forbidden: User "${fake.user}" cannot create resource "events" in API group "" in the namespace "${ns}"`,
        { kind: 'events' },
      );
    if ((req.headers['content-type'] ?? '').split(';')[0]!.trim() !== 'application/json')
      return writeStatus(
        res,
        415,
        'UnsupportedMediaType',
        'the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf, application/cbor',
      );
    let event: unknown;
    try {
      event = JSON.parse(body);
    } catch (e) {
      return writeStatus(
        res,
        400,
        'BadRequest',
        `Event in version "v1" cannot be handled as a Event: ${(e as Error).message}`,
      );
    }
    if (!isObject(event) || (event.apiVersion ?? 'v1') !== 'v1' || (event.kind ?? 'Event') !== 'Event')
      return writeStatus(
        res,
        400,
        'BadRequest',
        'the object provided is unrecognized (must be of type Event)',
      );
    const meta = isObject(event.metadata) ? event.metadata : {};
    if (meta.namespace !== undefined && meta.namespace !== '' && meta.namespace !== ns)
      return writeStatus(
        res,
        400,
        'BadRequest',
        'the namespace of the provided object does not match the namespace sent on the request',
      );
    const name =
      typeof meta.name === 'string' && meta.name !== ''
        ? meta.name
        : typeof meta.generateName === 'string' && meta.generateName !== ''
          ? `${meta.generateName}${suffix(5)}`
          : '';
    const stored: Json = {
      ...event,
      apiVersion: 'v1',
      kind: 'Event',
      metadata: {
        ...meta,
        name,
        namespace: ns,
        uid: randomUUID(),
        resourceVersion: String(++resourceVersion),
        creationTimestamp: now(),
      },
    };
    const invalid = (causes: { field: string; message: string }[]) =>
      writeStatus(
        res,
        422,
        'Invalid',
        `Event "${name}" is invalid: ${causes.length === 1 ? `${causes[0]!.field}: ${causes[0]!.message}` : `[${causes.map((c) => `${c.field}: ${c.message}`).join(', ')}]`}`,
        { name, kind: 'Event', causes: causes.map((c) => ({ reason: 'FieldValueInvalid', ...c })) },
      );
    try {
      new Event(stored as ConstructorParameters<typeof Event>[0]).validate();
    } catch (e) {
      return invalid([{ field: '<schema>', message: (e as Error).message }]);
    }
    const causes: { field: string; message: string }[] = [];
    if (name === '')
      causes.push({ field: 'metadata.name', message: 'Required value: name or generateName is required' });
    else if (name === '.' || name === '..' || /[/%]/.test(name))
      causes.push({
        field: 'metadata.name',
        message: `Invalid value: "${name}": may not be '.' or '..' or contain '/' or '%'`,
      });
    const involved = isObject(stored.involvedObject) ? stored.involvedObject : {};
    const involvedNs = typeof involved.namespace === 'string' ? involved.namespace : '';
    const mismatch = {
      field: 'involvedObject.namespace',
      message: `Invalid value: "${involvedNs}": does not match event.namespace`,
    };
    if (stored.eventTime === undefined || stored.eventTime === null) {
      // A legacy event: only the namespaces have to agree ("default" is tolerated for old clients).
      if (involvedNs === '' ? ns !== 'default' : involvedNs !== ns) causes.push(mismatch);
    } else {
      if (involvedNs === '' && ns !== 'default' && ns !== 'kube-system') causes.push(mismatch);
      const text = (field: string) => (typeof stored[field] === 'string' ? (stored[field] as string) : '');
      for (const [field, limit] of [
        ['reportingComponent', 0],
        ['reportingInstance', 128],
        ['action', 128],
        ['reason', 128],
      ] as const) {
        if (text(field) === '') causes.push({ field, message: 'Required value' });
        if (limit && text(field).length > limit)
          causes.push({ field, message: `Invalid value: "": can have at most ${limit} characters` });
      }
      if (text('message').length > 1024)
        causes.push({ field: 'message', message: 'Invalid value: "": can have at most 1024 characters' });
    }
    if (!DNS1123_SUBDOMAIN.test(ns) || ns.length > 253)
      causes.push({
        field: 'metadata.namespace',
        message: `Invalid value: "${ns}": a lowercase RFC 1123 subdomain`,
      });
    if (causes.length > 0) return invalid(causes);
    const inNamespace = events.get(ns) ?? new Map<string, Json>();
    events.set(ns, inNamespace);
    if (inNamespace.has(name))
      return writeStatus(res, 409, 'AlreadyExists', `events "${name}" already exists`, {
        name,
        kind: 'events',
      });
    inNamespace.set(name, stored);
    return send(res, stored, 201);
  };

  const route = (req: IncomingMessage, body: string, res: ServerResponse, path: string) => {
    const method = req.method ?? '';
    if (req.headers.authorization !== `Bearer ${fake.token}`)
      return writeStatus(res, 401, 'Unauthorized', 'Unauthorized');
    const failure = failures.shift();
    if (failure) {
      if (failure === 429) res.setHeader('retry-after', '1');
      return writeStatus(
        res,
        failure,
        STATUS_REASON[failure],
        `injected ${failure} (${STATUS_REASON[failure]})`,
      );
    }
    const eventsPath = /^\/api\/v1\/namespaces\/([^/]+)\/events$/.exec(path);
    if (eventsPath) return createEvent(req, body, res, decodeURIComponent(eventsPath[1]!));
    const core = /^\/api\/v1\/namespaces\/([^/]+)\/(pods|secrets)\/([^/]+)$/.exec(path);
    const apps =
      /^\/apis\/apps\/v1\/namespaces\/([^/]+)\/(replicasets|deployments|statefulsets|daemonsets)\/([^/]+)$/.exec(
        path,
      );
    const m = core ?? apps;
    if (!m) return writeStatus(res, 404, 'NotFound', 'the server could not find the requested resource', {});
    const [, ns, resourceText, rawName] = m as unknown as [string, string, Resource, string];
    const resource = resourceText;
    const name = decodeURIComponent(rawName);
    const group = GROUP[resource];
    const label = group ? `${resource}.${group}` : resource;
    const details = { name, ...(group ? { group } : {}), kind: resource };
    const verb = ({ GET: 'get', PATCH: 'patch', DELETE: 'delete' } as Record<string, Verb | undefined>)[
      method
    ];
    if (!verb)
      return writeStatus(
        res,
        405,
        'MethodNotAllowed',
        `the server does not allow this method on the requested resource`,
        details,
      );
    if (!fake.allowed.has(`${verb} ${resource}`)) {
      return writeStatus(
        res,
        403,
        'Forbidden',
        `${label} "${name}" is forbidden: User "${fake.user}" cannot ${verb} resource "${resource}" in API group "${group}" in the namespace "${ns}"`,
        details,
      );
    }
    const key = keyOf(resource, ns, name);
    const current = objects.get(key);
    if (!current) return writeStatus(res, 404, 'NotFound', `${label} "${name}" not found`, details);
    if (verb === 'get') return send(res, current);
    if (verb === 'delete') {
      objects.delete(key);
      const meta = current.metadata as Json;
      return send(res, {
        ...current,
        metadata: {
          ...meta,
          deletionTimestamp: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
          deletionGracePeriodSeconds: 30,
        },
      });
    }
    const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim();
    if (!PATCH_TYPES.has(type) || resource === 'pods') {
      return writeStatus(
        res,
        415,
        'UnsupportedMediaType',
        `the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json`,
      );
    }
    let patch: unknown;
    try {
      patch = JSON.parse(body);
    } catch (e) {
      return writeStatus(res, 400, 'BadRequest', `error decoding patch: ${(e as Error).message}`);
    }
    const next = mergePatch(current, patch) as Json;
    try {
      VALIDATE[resource](next);
    } catch (e) {
      return writeStatus(
        res,
        422,
        'Invalid',
        `${KIND[resource]}.apps "${name}" is invalid: ${(e as Error).message}`,
        details,
      );
    }
    const spec = (o: Json) => JSON.stringify(o.spec);
    const template = (o: Json) => JSON.stringify((o.spec as Json | undefined)?.template);
    if (JSON.stringify(next) === JSON.stringify(current)) return send(res, current); // a no-op write changes nothing
    const meta = { ...(next.metadata as Json) };
    meta.resourceVersion = String(++resourceVersion);
    if (spec(next) !== spec(current)) meta.generation = Number(meta.generation ?? 1) + 1;
    if (template(next) !== template(current)) rollouts.set(key, (rollouts.get(key) ?? 0) + 1);
    const stored = { ...next, metadata: meta };
    objects.set(key, stored);
    return send(res, stored);
  };

  const server: Server = createServer({ cert, key }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'https://fake');
      const original = res.writeHead.bind(res);
      let code = 0;
      res.writeHead = ((c: number, ...rest: unknown[]) => {
        code = c;
        return (original as (...a: unknown[]) => ServerResponse)(c, ...rest);
      }) as typeof res.writeHead;
      const body = Buffer.concat(chunks).toString('utf8');
      route(req, body, res, url.pathname);
      requests.push({
        body,
        method: req.method ?? '',
        path: url.pathname,
        query: url.search,
        contentType: req.headers['content-type'] ?? '',
        status: code,
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;

  const fake: KubernetesWorkloadsFake = {
    url: `https://127.0.0.1:${port}`,
    caPem: cert,
    token: `fake-token-${suffix(16)}`,
    serviceAccountDir(parent, namespace) {
      const dir = mkdtempSync(join(parent, 'serviceaccount-'));
      writeFileSync(join(dir, 'token'), `${fake.token}\n`);
      writeFileSync(join(dir, 'ca.crt'), cert);
      writeFileSync(join(dir, 'namespace'), namespace);
      return dir;
    },
    user: `system:serviceaccount:${sa.namespace}:${sa.name}`,
    allowed: new Set([
      'get pods',
      'get replicasets',
      'get deployments',
      'patch deployments',
      'get statefulsets',
      'patch statefulsets',
      'get daemonsets',
      'patch daemonsets',
    ]),
    addDeployment(ns, name, replicas, template = defaultTemplate()) {
      const deployment = addWorkload('deployments', ns, name, template, { replicas });
      const hash = suffix(10);
      const labels = { app: name, 'pod-template-hash': hash };
      const rs = put('replicasets', ns, `${name}-${hash}`, {
        metadata: { labels, ownerReferences: [ownerRef(deployment)] },
        spec: {
          replicas,
          selector: { matchLabels: labels },
          template: { metadata: templateMeta(template, labels), spec: template.spec },
        },
      });
      return Array.from({ length: replicas }, () =>
        addPod(ns, `${name}-${hash}-${suffix(5)}`, [ownerRef(rs)], labels, template),
      );
    },
    addStatefulSet(ns, name, replicas, template = defaultTemplate()) {
      const set = addWorkload('statefulsets', ns, name, template, { replicas, serviceName: name });
      return Array.from({ length: replicas }, (_, i) =>
        addPod(ns, `${name}-${i}`, [ownerRef(set)], { app: name }, template),
      );
    },
    addDaemonSet(ns, name, nodes, template = defaultTemplate()) {
      const set = addWorkload('daemonsets', ns, name, template, {});
      return Array.from({ length: nodes }, () =>
        addPod(ns, `${name}-${suffix(5)}`, [ownerRef(set)], { app: name }, template),
      );
    },
    addJobPod(ns, job) {
      const owner = {
        apiVersion: 'batch/v1',
        kind: 'Job',
        name: job,
        uid: randomUUID(),
        controller: true,
        blockOwnerDeletion: true,
      };
      return addPod(ns, `${job}-${suffix(5)}`, [owner], { 'job-name': job });
    },
    addReplicaSetPod(ns, replicaSet) {
      const rs = put('replicasets', ns, replicaSet, {
        metadata: { labels: { app: replicaSet } },
        spec: {
          replicas: 1,
          selector: { matchLabels: { app: replicaSet } },
          template: { metadata: { labels: { app: replicaSet } }, spec: defaultTemplate().spec },
        },
      });
      return addPod(ns, `${replicaSet}-${suffix(5)}`, [ownerRef(rs)], { app: replicaSet });
    },
    addBarePod(ns, name, template) {
      return addPod(ns, name, [], {}, template);
    },
    addSecret(ns, name, data) {
      const encoded = Object.fromEntries(
        Object.entries(data).map(([k, v]) => [k, Buffer.from(v).toString('base64')]),
      );
      return put('secrets', ns, name, { metadata: {}, type: 'Opaque', data: encoded });
    },
    object: (resource, ns, name) => objects.get(keyOf(resource, ns, name)),
    rollouts: (resource, ns, name) => rollouts.get(keyOf(resource, ns, name)) ?? 0,
    events: (ns) => [...(events.get(ns)?.values() ?? [])],
    failNext(code, times = 1) {
      for (let i = 0; i < times; i++) failures.push(code);
    },
    requests,
    async stop() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  return fake;
}
