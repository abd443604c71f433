import { readFileSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';

/**
 * The few Kubernetes API calls self-managed TLS makes, over node:https with the pod's
 * service-account token. Deliberately small: Secret get/create/replace, MutatingWebhookConfiguration
 * get/patch. Not a general client.
 */

const SA_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

export interface KubernetesApiOptions {
  /** e.g. https://10.0.0.1:443 */
  readonly baseUrl: string;
  /** PEM of the CA that signed the API server's certificate. */
  readonly ca: string;
  /** Re-read on every request: bound service-account tokens are rotated by the kubelet. */
  readonly tokenFile: string;
  readonly timeoutMs?: number;
}

/** In-cluster settings from the env the kubelet sets and the mounted service-account files. */
export function inClusterApiOptions(env: Readonly<Record<string, string | undefined>>): KubernetesApiOptions {
  const host = env.KUBERNETES_SERVICE_HOST;
  const port = env.KUBERNETES_SERVICE_PORT ?? '443';
  if (!host)
    throw new Error(
      'KUBERNETES_SERVICE_HOST is not set: self-managed TLS needs to run in a cluster (or use TLS_MODE=file)',
    );
  const hostPart = host.includes(':') ? `[${host}]` : host;
  return {
    baseUrl: `https://${hostPart}:${port}`,
    ca: readFileSync(`${SA_DIR}/ca.crt`, 'utf8'),
    tokenFile: `${SA_DIR}/token`,
  };
}

/** A non-2xx answer; `reason` is the Status object's reason (NotFound, AlreadyExists, Conflict…). */
export class KubernetesApiError extends Error {
  readonly status: number;
  readonly reason: string;
  constructor(method: string, path: string, status: number, reason: string, message: string) {
    super(`${method} ${path}: ${status} ${reason}: ${message}`);
    this.name = 'KubernetesApiError';
    this.status = status;
    this.reason = reason;
  }
}

export interface ObjectMeta {
  readonly name: string;
  readonly namespace?: string;
  readonly resourceVersion?: string;
  readonly labels?: Record<string, string>;
  readonly annotations?: Record<string, string>;
}

export interface SecretObject {
  readonly apiVersion: 'v1';
  readonly kind: 'Secret';
  readonly metadata: ObjectMeta;
  readonly type?: string;
  /** base64 values. */
  readonly data?: Record<string, string>;
}

export interface MutatingWebhookConfigurationObject {
  readonly apiVersion: 'admissionregistration.k8s.io/v1';
  readonly kind: 'MutatingWebhookConfiguration';
  readonly metadata: ObjectMeta;
  readonly webhooks?: readonly {
    readonly name: string;
    readonly clientConfig: { readonly caBundle?: string };
  }[];
}

export class KubernetesApi {
  readonly #options: KubernetesApiOptions;

  constructor(options: KubernetesApiOptions) {
    this.#options = options;
  }

  async getSecret(namespace: string, name: string): Promise<SecretObject | undefined> {
    try {
      return await this.#call<SecretObject>('GET', `/api/v1/namespaces/${namespace}/secrets/${name}`);
    } catch (e) {
      if (e instanceof KubernetesApiError && e.status === 404) return undefined;
      throw e;
    }
  }

  createSecret(namespace: string, secret: SecretObject): Promise<SecretObject> {
    return this.#call('POST', `/api/v1/namespaces/${namespace}/secrets`, secret);
  }

  /** Fails with 409 Conflict when metadata.resourceVersion is not the current one. */
  replaceSecret(namespace: string, secret: SecretObject): Promise<SecretObject> {
    return this.#call('PUT', `/api/v1/namespaces/${namespace}/secrets/${secret.metadata.name}`, secret);
  }

  getMutatingWebhookConfiguration(name: string): Promise<MutatingWebhookConfigurationObject> {
    return this.#call('GET', `/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/${name}`);
  }

  patchMutatingWebhookConfiguration(
    name: string,
    patch: readonly Record<string, unknown>[],
  ): Promise<MutatingWebhookConfigurationObject> {
    return this.#call(
      'PATCH',
      `/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/${name}`,
      patch,
      'application/json-patch+json',
    );
  }

  #call<T>(method: string, path: string, body?: unknown, contentType = 'application/json'): Promise<T> {
    const token = readFileSync(this.#options.tokenFile, 'utf8').trim();
    const url = new URL(path, this.#options.baseUrl);
    const payload = body === undefined ? undefined : JSON.stringify(body);
    return new Promise<T>((resolve, reject) => {
      const req = httpsRequest(
        url,
        {
          method,
          ca: this.#options.ca,
          timeout: this.#options.timeoutMs ?? 10_000,
          headers: {
            authorization: `Bearer ${token}`,
            accept: 'application/json',
            ...(payload !== undefined
              ? { 'content-type': contentType, 'content-length': Buffer.byteLength(payload) }
              : {}),
          },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('error', reject);
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            let parsed: unknown;
            try {
              parsed = JSON.parse(text);
            } catch {
              parsed = undefined;
            }
            const status = res.statusCode ?? 0;
            if (status >= 200 && status < 300 && parsed !== undefined) {
              resolve(parsed as T);
              return;
            }
            const s = (parsed ?? {}) as { reason?: unknown; message?: unknown };
            // Status messages name objects and reasons; they never carry Secret data.
            reject(
              new KubernetesApiError(
                method,
                path,
                status,
                typeof s.reason === 'string' ? s.reason : 'Unknown',
                typeof s.message === 'string' ? s.message.slice(0, 300) : 'no Status in the response',
              ),
            );
          });
        },
      );
      req.on('timeout', () => req.destroy(new Error(`${method} ${path}: timed out`)));
      req.on('error', reject);
      req.end(payload);
    });
  }
}
