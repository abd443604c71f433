import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Agent, request } from 'undici';

/**
 * The few calls restart-on-change and the pod's Kubernetes Events make to the Kubernetes API from inside a pod, authenticated as
 * the pod's service account. The token is read from disk on every call because projected tokens
 * are rotated by the kubelet (hourly by default); the CA bundle is re-read too and the TLS agent
 * rebuilt only when it changed.
 */
export interface KubernetesClient {
  get(path: string, signal: AbortSignal): Promise<KubernetesResponse>;
  patch(
    path: string,
    body: unknown,
    contentType: PatchType,
    signal: AbortSignal,
  ): Promise<KubernetesResponse>;
  delete(path: string, signal: AbortSignal): Promise<KubernetesResponse>;
  /** Creates an object: the body is sent as JSON. */
  post(path: string, body: unknown, signal: AbortSignal): Promise<KubernetesResponse>;
  /** Waits for requests in flight, then closes the connections. */
  close(): Promise<void>;
  /** Closes the connections at once, ending requests in flight (ones a caller gave up on). */
  destroy(): Promise<void>;
}

export type PatchType = 'application/strategic-merge-patch+json' | 'application/merge-patch+json';

/** An answer from the API server: 2xx with the object, or an error with its `Status` object. */
export type KubernetesResponse =
  | { readonly ok: true; readonly status: number; readonly body: unknown }
  | { readonly ok: false; readonly status: number; readonly failure: KubernetesStatus };

/** The API's error body (`kind: Status`); filled in from the HTTP status when the body is not one. */
export interface KubernetesStatus {
  readonly reason: string;
  readonly message: string;
  readonly code: number;
}

export interface KubernetesClientOptions {
  /** `https://HOST:PORT`, from KUBERNETES_SERVICE_HOST / KUBERNETES_SERVICE_PORT. */
  readonly apiUrl: string;
  /** Holds `token` and `ca.crt` (normally /var/run/secrets/kubernetes.io/serviceaccount). */
  readonly serviceAccountDir: string;
  /** Per request, for headers and for the body each. */
  readonly timeoutMs?: number;
}

/** Reading the service-account files failed: the pod has no token mounted, or it is unreadable. */
export class ServiceAccountError extends Error {
  readonly file: string;
  constructor(file: string, cause: unknown) {
    super(
      `cannot read the service-account ${file} (${(cause as NodeJS.ErrnoException).code ?? 'error'}). Fix: keep automountServiceAccountToken enabled for the pod, or mount a projected token there`,
    );
    this.name = 'ServiceAccountError';
    this.file = file;
  }
}

export function createKubernetesClient(options: KubernetesClientOptions): KubernetesClient {
  const timeoutMs = options.timeoutMs ?? 10_000;
  const base = options.apiUrl.replace(/\/+$/, '');
  let tls: { ca: string; agent: Agent } | undefined;

  const readServiceAccountFile = async (name: string): Promise<string> => {
    try {
      return await readFile(join(options.serviceAccountDir, name), 'utf8');
    } catch (e) {
      throw new ServiceAccountError(name, e);
    }
  };

  const dispatcher = async (): Promise<Agent> => {
    const ca = await readServiceAccountFile('ca.crt');
    if (tls?.ca !== ca) {
      const old = tls?.agent;
      tls = { ca, agent: new Agent({ connect: { ca, timeout: timeoutMs }, keepAliveTimeout: 30_000 }) };
      void old?.close();
    }
    return tls.agent;
  };

  const send = async (
    method: 'GET' | 'PATCH' | 'DELETE' | 'POST',
    path: string,
    signal: AbortSignal,
    payload?: { body: unknown; contentType: PatchType | 'application/json' },
  ): Promise<KubernetesResponse> => {
    const token = (await readServiceAccountFile('token')).trim();
    const res = await request(`${base}${path}`, {
      method,
      dispatcher: await dispatcher(),
      signal,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
      headers: {
        authorization: `Bearer ${token}`,
        accept: 'application/json',
        'user-agent': 'secret-agent',
        ...(payload ? { 'content-type': payload.contentType } : {}),
      },
      ...(payload ? { body: JSON.stringify(payload.body) } : {}),
    });
    const text = await res.body.text();
    let body: unknown;
    try {
      body = text === '' ? undefined : JSON.parse(text);
    } catch {
      body = undefined;
    }
    if (res.statusCode >= 200 && res.statusCode < 300) return { ok: true, status: res.statusCode, body };
    return { ok: false, status: res.statusCode, failure: toStatus(res.statusCode, body) };
  };

  return {
    get: (path, signal) => send('GET', path, signal),
    patch: (path, body, contentType, signal) => send('PATCH', path, signal, { body, contentType }),
    delete: (path, signal) => send('DELETE', path, signal),
    post: (path, body, signal) => send('POST', path, signal, { body, contentType: 'application/json' }),
    async close() {
      await tls?.agent.close();
      tls = undefined;
    },
    async destroy() {
      await tls?.agent.destroy();
      tls = undefined;
    },
  };
}

function toStatus(code: number, body: unknown): KubernetesStatus {
  const status = body as { kind?: unknown; reason?: unknown; message?: unknown } | undefined;
  if (status?.kind === 'Status') {
    return {
      code,
      reason: typeof status.reason === 'string' ? status.reason : '',
      message: typeof status.message === 'string' ? status.message : '',
    };
  }
  return { code, reason: '', message: '' };
}
