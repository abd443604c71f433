/**
 * A local Kubernetes API server, read-only, for what `secret-agent-webhook versions` reads through
 * kubectl: GET pods (one namespace or all; labelSelector, limit and continue) and GET pods/log
 * (container, tailLines, limitBytes), over HTTPS with a throwaway certificate and one bearer token.
 * It answers as the real API server does where a client can tell: 401 before 403 before 404, errors
 * as `kind: Status` with the real messages, a container not started yet as the kubelet's 400.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { selfSignedCertificate } from '../support/self-signed-cert.ts';
import { writeStatus } from './kubernetes-status.ts';

type Json = Record<string, unknown>;

export interface KubernetesPodsFake {
  /** A kubeconfig file for kubectl, pointing at this server with its CA and token. */
  readonly kubeconfig: string;
  /** The RBAC rules granted, as `verb resource`: `list pods`, `get pods/log` by default. */
  readonly allowed: Set<string>;
  /** Stores a pod (the object as the API server would: metadata.namespace and name set). */
  putPod(pod: object): void;
  /** What the pod's container logged so far; undefined: the container is waiting to start. */
  setLog(namespace: string, pod: string, container: string, log: () => string | undefined): void;
  /** Every request, in order, as "METHOD path?query". */
  readonly requests: readonly string[];
  /** The most log reads it was answering at once, since it started or `countFromNow`. */
  readonly mostLogReadsAtOnce: number;
  countFromNow(): void;
  stop(): Promise<void>;
}

const USER = 'system:serviceaccount:ops:rotator';

/** Equality-based selectors as the API server reads them: `a=b`, `a==b`, `a!=b`, `a`, `!a`. */
function matches(selector: string, labels: Record<string, string>): boolean | undefined {
  for (const term of selector
    .split(',')
    .map((t) => t.trim())
    .filter((t) => t !== '')) {
    const m = /^(!?)([A-Za-z0-9._/-]+)\s*(?:(==|=|!=)\s*([A-Za-z0-9._-]*))?$/.exec(term);
    if (!m) return undefined;
    const [, not, key, op, value] = m;
    const has = Object.hasOwn(labels, key!);
    if (
      op === undefined
        ? not === '!'
          ? has
          : !has
        : op === '!='
          ? labels[key!] === value
          : labels[key!] !== value
    )
      return false;
  }
  return true;
}

export async function startKubernetesPodsFake(): Promise<KubernetesPodsFake> {
  const { cert, key } = selfSignedCertificate('127.0.0.1', 'IP:127.0.0.1');
  const token = `token-${Math.random().toString(36).slice(2)}`;
  const pods = new Map<string, Json>();
  const logs = new Map<string, () => string | undefined>();
  const allowed = new Set(['list pods', 'get pods/log']);
  const requests: string[] = [];
  let logReads = 0;
  let mostLogReads = 0;
  const forbidden = (
    res: ServerResponse,
    verb: string,
    resource: string,
    namespace?: string,
    name?: string,
  ) =>
    writeStatus(
      res,
      403,
      'Forbidden',
      `pods${name === undefined ? '' : ` "${name}"`} is forbidden: User "${USER}" cannot ${verb} resource "${resource}" in API group "" ${namespace === undefined ? 'at the cluster scope' : `in the namespace "${namespace}"`}`,
      { ...(name === undefined ? {} : { name }), kind: 'pods' },
    );

  const server: Server = createServer({ cert, key }, (req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? '/', 'https://fake');
    requests.push(`${req.method} ${url.pathname}${url.search}`);
    if (req.headers.authorization !== `Bearer ${token}`)
      return writeStatus(res, 401, 'Unauthorized', 'Unauthorized');
    if (req.method !== 'GET')
      return writeStatus(res, 405, 'MethodNotAllowed', 'the server does not allow this method');
    const list = /^\/api\/v1(?:\/namespaces\/([^/]+))?\/pods$/.exec(url.pathname);
    if (list) {
      const namespace = list[1];
      if (!allowed.has('list pods')) return forbidden(res, 'list', 'pods', namespace);
      const selector = url.searchParams.get('labelSelector') ?? '';
      const all = [...pods.values()].filter((p) => {
        const meta = p.metadata as { namespace: string; labels?: Record<string, string> };
        return namespace === undefined || meta.namespace === namespace;
      });
      const selected = all.filter((p) =>
        matches(selector, (p.metadata as { labels?: Record<string, string> }).labels ?? {}),
      );
      if (
        all.some(
          (p) =>
            matches(selector, (p.metadata as { labels?: Record<string, string> }).labels ?? {}) === undefined,
        )
      )
        return writeStatus(
          res,
          400,
          'BadRequest',
          `unable to parse requirement: ${JSON.stringify(selector)}`,
        );
      const from = Number(Buffer.from(url.searchParams.get('continue') ?? '', 'base64url').toString() || '0');
      const limit = Number(url.searchParams.get('limit') ?? '0') || selected.length;
      const page = selected.slice(from, from + limit);
      const more = from + limit < selected.length;
      res.writeHead(200, { 'content-type': 'application/json' });
      return res.end(
        JSON.stringify({
          kind: 'PodList',
          apiVersion: 'v1',
          metadata: {
            resourceVersion: '4242',
            ...(more ? { continue: Buffer.from(String(from + limit)).toString('base64url') } : {}),
          },
          // The real API leaves kind and apiVersion out of a list's items.
          items: page.map(({ kind: _k, apiVersion: _a, ...rest }) => rest),
        }),
      );
    }
    const log = /^\/api\/v1\/namespaces\/([^/]+)\/pods\/([^/]+)\/log$/.exec(url.pathname);
    if (log) {
      const [, namespace, name] = log as unknown as [string, string, string];
      if (!allowed.has('get pods/log')) return forbidden(res, 'get', 'pods/log', namespace, name);
      const pod = pods.get(`${namespace}/${name}`);
      if (pod === undefined)
        return writeStatus(res, 404, 'NotFound', `pods "${name}" not found`, { name, kind: 'pods' });
      const spec = pod.spec as { containers: { name: string }[]; initContainers?: { name: string }[] };
      const container = url.searchParams.get('container') ?? spec.containers[0]!.name;
      if (![...(spec.initContainers ?? []), ...spec.containers].some((c) => c.name === container))
        return writeStatus(res, 400, 'BadRequest', `container ${container} is not valid for pod ${name}`);
      const text = logs.get(`${namespace}/${name}/${container}`)?.();
      // Answered on the next turn, as a kubelet's stream is: reads at once overlap here as they do there.
      logReads++;
      mostLogReads = Math.max(mostLogReads, logReads);
      res.once('finish', () => logReads--);
      if (text === undefined)
        return writeStatus(
          res,
          400,
          'BadRequest',
          `container "${container}" in pod "${name}" is waiting to start: PodInitializing`,
        );
      let lines = text.split(/(?<=\n)/);
      const tail = url.searchParams.get('tailLines');
      if (tail !== null) lines = lines.slice(Math.max(0, lines.length - Number(tail)));
      let body = Buffer.from(lines.join(''));
      const limit = url.searchParams.get('limitBytes');
      if (limit !== null) body = body.subarray(0, Number(limit));
      res.writeHead(200, { 'content-type': 'text/plain' });
      return void setTimeout(() => res.end(body), 2);
    }
    writeStatus(res, 404, 'NotFound', 'the server could not find the requested resource');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  const dir = mkdtempSync(join(tmpdir(), 'kube-pods-fake-'));
  const kubeconfig = join(dir, 'config');
  writeFileSync(
    kubeconfig,
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [
        {
          name: 'fake',
          cluster: {
            server: `https://127.0.0.1:${port}`,
            'certificate-authority-data': Buffer.from(cert).toString('base64'),
          },
        },
      ],
      users: [{ name: 'rotator', user: { token } }],
      contexts: [{ name: 'fake', context: { cluster: 'fake', user: 'rotator', namespace: 'shop' } }],
      'current-context': 'fake',
    }),
  );
  return {
    kubeconfig,
    allowed,
    putPod(pod) {
      const stored = structuredClone(pod) as Json;
      const meta = stored.metadata as { namespace: string; name: string };
      pods.set(`${meta.namespace}/${meta.name}`, stored);
    },
    setLog(namespace, pod, container, log) {
      logs.set(`${namespace}/${pod}/${container}`, log);
    },
    requests,
    get mostLogReadsAtOnce() {
      return mostLogReads;
    },
    countFromNow() {
      mostLogReads = logReads;
    },
    stop: () => new Promise<void>((r) => server.close(() => r())),
  };
}
