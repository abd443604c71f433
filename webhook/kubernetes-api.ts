import { readFileSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import { DEFAULT_SERVICE_ACCOUNT_DIR } from '../agent/contract/service-account.ts';

/**
 * The few Kubernetes API calls the webhook makes, over node:https with the pod's service-account
 * token. Deliberately small: the server version (NATIVE_SIDECARS=auto), and for self-managed TLS
 * Secret get/create/replace and MutatingWebhookConfiguration get/patch. Not a general client.
 */

export interface KubernetesApiOptions {
  /** e.g. https://10.0.0.1:443 */
  readonly baseUrl: string;
  /** PEM of the CA that signed the API server's certificate. */
  readonly ca: string;
  /** Re-read on every request: bound service-account tokens are rotated by the kubelet. */
  readonly tokenFile: string;
  readonly timeoutMs?: number;
}

/**
 * The API server cannot be reached from here at all: not in a pod, or no service-account token
 * mounted. Callers add what needed the API (self-managed TLS, NATIVE_SIDECARS=auto).
 */
export class InClusterConfigError extends Error {
  readonly problem: string;
  /** What to change so in-cluster access works. */
  readonly fix: string;
  constructor(problem: string, fix: string) {
    super(`${problem}. Fix: ${fix}`);
    this.name = 'InClusterConfigError';
    this.problem = problem;
    this.fix = fix;
  }
}

/** In-cluster settings from the env the kubelet sets and the mounted service-account files. */
export function inClusterApiOptions(env: Readonly<Record<string, string | undefined>>): KubernetesApiOptions {
  const host = env.KUBERNETES_SERVICE_HOST;
  const port = env.KUBERNETES_SERVICE_PORT ?? '443';
  if (!host)
    throw new InClusterConfigError(
      'KUBERNETES_SERVICE_HOST is not set: the webhook does not run in a Kubernetes pod',
      'run it in a cluster',
    );
  const hostPart = host.includes(':') ? `[${host}]` : host;
  let ca: string;
  try {
    ca = readFileSync(`${DEFAULT_SERVICE_ACCOUNT_DIR}/ca.crt`, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
    throw new InClusterConfigError(
      `${DEFAULT_SERVICE_ACCOUNT_DIR}/ca.crt does not exist: the service-account token is not mounted`,
      "set automountServiceAccountToken: true in the webhook's pod spec",
    );
  }
  return { baseUrl: `https://${hostPart}:${port}`, ca, tokenFile: `${DEFAULT_SERVICE_ACCOUNT_DIR}/token` };
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

/** GET /version, as the API server answers it (apimachinery version.Info); only the fields read here. */
export interface VersionInfo {
  readonly major?: unknown;
  readonly minor?: unknown;
  readonly gitVersion?: unknown;
}

/** The API server's version, as far as deciding on features needs it. */
export interface ServerVersion {
  readonly major: number;
  readonly minor: number;
  /** gitVersion when it is a plain version string (v1.29.3-eks-adc7111), else "vMAJOR.MINOR". */
  readonly text: string;
}

/** A /version answer this webhook cannot read a version from. */
export class ServerVersionError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ServerVersionError';
  }
}

const GIT_VERSION = /^v(\d+)\.(\d+)(?:\.\d+)?(?:[-+][0-9A-Za-z.+-]*)?$/;

/**
 * gitVersion first (v1.29.3, v1.31.2-eks-adc7111, v1.30.5-gke.1014001); major/minor only when it is
 * unusable, because providers append `+` to minor ("29+") and some builds report gitVersion "v0.0.0".
 */
export function parseVersionInfo(info: unknown): ServerVersion {
  if (typeof info !== 'object' || info === null || Array.isArray(info))
    throw new ServerVersionError('GET /version: the answer is not a JSON object');
  const { major, minor, gitVersion } = info as VersionInfo;
  const git =
    typeof gitVersion === 'string' && gitVersion.length <= 100 ? GIT_VERSION.exec(gitVersion) : null;
  if (git && git[1] !== '0')
    return { major: Number(git[1]), minor: Number(git[2]), text: gitVersion as string };
  // "29+" on EKS and GKE: the digits are the version, the suffix only marks a vendor build.
  const number = (v: unknown) => (typeof v === 'string' && /^\d{1,4}\+?$/.test(v) ? parseInt(v, 10) : NaN);
  const [maj, min] = [number(major), number(minor)];
  if (Number.isInteger(maj) && Number.isInteger(min) && maj > 0)
    return { major: maj, minor: min, text: `v${maj}.${min}` };
  throw new ServerVersionError(
    `GET /version: no version in the answer (gitVersion ${describe(gitVersion)}, major ${describe(major)}, minor ${describe(minor)})`,
  );
}

/** A value from the API server, short and JSON-quoted for an error message. */
function describe(v: unknown): string {
  if (v === undefined) return 'missing';
  const text = typeof v === 'string' ? v : (JSON.stringify(v) ?? String(v));
  return JSON.stringify(text.length > 40 ? `${text.slice(0, 40)}…` : text);
}

export class KubernetesApi {
  readonly #options: KubernetesApiOptions;

  constructor(options: KubernetesApiOptions) {
    this.#options = options;
  }

  /** GET /version: readable by every authenticated client (system:public-info-viewer), no RBAC needed. */
  async serverVersion(timeoutMs = 5_000): Promise<ServerVersion> {
    return parseVersionInfo(await this.#call<unknown>('GET', '/version', undefined, undefined, timeoutMs));
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

  #call<T>(
    method: string,
    path: string,
    body?: unknown,
    contentType = 'application/json',
    timeoutMs = this.#options.timeoutMs ?? 10_000,
  ): Promise<T> {
    const token = readFileSync(this.#options.tokenFile, 'utf8').trim();
    const url = new URL(path, this.#options.baseUrl);
    const payload = body === undefined ? undefined : JSON.stringify(body);
    return new Promise<T>((resolve, reject) => {
      const req = httpsRequest(
        url,
        {
          method,
          ca: this.#options.ca,
          timeout: timeoutMs,
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
            if (status >= 200 && status < 300) {
              if (parsed !== undefined) resolve(parsed as T);
              // A proxy's HTML page, a truncated body: say so instead of "no Status".
              else
                reject(
                  new KubernetesApiError(method, path, status, 'InvalidResponse', 'the body is not JSON'),
                );
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
      req.on('timeout', () =>
        // ETIMEDOUT like a connect timeout, so callers can tell it from a refusal by code.
        req.destroy(
          Object.assign(new Error(`${method} ${path}: timed out after ${timeoutMs} ms`), {
            code: 'ETIMEDOUT',
          }),
        ),
      );
      req.on('error', reject);
      req.end(payload);
    });
  }
}
