import { STATUS_ANNOTATION, STATUS_INJECTED } from '../../agent/contract/product-annotations.ts';
import { AGENT_CONTAINER, AGENT_INIT_CONTAINER } from '../injected-names.ts';
import type { KubernetesReader } from './kubectl-proxy.ts';
import { printable } from './printable.ts';

/** The few fields of a core/v1 Pod this command reads. */
interface PodObject {
  readonly metadata: {
    readonly name: string;
    readonly namespace: string;
    readonly annotations?: Record<string, string>;
  };
  readonly spec: {
    readonly containers: readonly ContainerObject[];
    readonly initContainers?: readonly ContainerObject[];
  };
  readonly status?: {
    readonly phase?: string;
    readonly conditions?: readonly { readonly type: string; readonly status: string }[];
  };
}
interface ContainerObject {
  readonly name: string;
  readonly env?: readonly { readonly name: string; readonly value?: string }[];
}

/** One secret the pod's agent delivers: its env id, the reference as the pod's annotations wrote it, its file. */
export interface PodSecret {
  readonly secret: string;
  readonly ref: string;
  readonly file: string;
}

/** An injected pod, as far as its spec and status say. */
export interface InjectedPod {
  readonly namespace: string;
  readonly name: string;
  readonly phase: string;
  readonly ready: boolean;
  /** `sidecar`: refreshes and logs what it holds; `init-only`: holds what its init container wrote at start. */
  readonly agent: 'sidecar' | 'init-only';
  /** The container whose log says what the pod holds. */
  readonly logContainer: string;
  readonly secrets: readonly PodSecret[];
}

/** The API server refused or failed a call: what was asked, its answer, and the fix. */
export class KubernetesReadError extends Error {
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.name = 'KubernetesReadError';
    this.status = status;
  }
}

/** The API server's own message from a `kind: Status` answer, else the status code. */
export function apiMessage(status: number, text: string): string {
  try {
    const m = (JSON.parse(text) as { message?: unknown }).message;
    if (typeof m === 'string') return printable(m);
  } catch {
    // Not a Status object: a proxy's or load balancer's page.
  }
  return `HTTP ${status}`;
}

export function refusal(status: number, text: string, what: string): KubernetesReadError {
  const fix =
    status === 403
      ? 'bind the read-only ClusterRole in deploy/versions-reader to whoever runs this (docs/rotation.md, Finishing a rotation)'
      : status === 401
        ? 'log in again (kubectl get pods works once the credentials are fresh)'
        : 'try again; if it persists, check the API server';
  return new KubernetesReadError(status, `${what}: ${apiMessage(status, text)}. Fix: ${fix}`);
}

/** The most secrets read of one pod. */
const MAX_SECRETS = 256;
const PAGE = 500;
/** A page of 500 ordinary pods is a few MiB. */
const MAX_PAGE_BYTES = 16 * 1024 * 1024;
const SECRET_REF = /^(SECRET_\d+)_REF$/;

/** Every injected pod in `namespace` (all, if undefined) matching `selector`, page by page. */
export async function listInjectedPods(
  api: KubernetesReader,
  where: { readonly namespace: string | undefined; readonly selector: string | undefined },
  onPage: (listed: number) => void = () => {},
): Promise<InjectedPod[]> {
  const base =
    where.namespace === undefined
      ? '/api/v1/pods'
      : `/api/v1/namespaces/${encodeURIComponent(where.namespace)}/pods`;
  const pods: InjectedPod[] = [];
  let listed = 0;
  let next: string | undefined;
  let limit = PAGE;
  for (;;) {
    const query = new URLSearchParams({ limit: String(limit) });
    if (where.selector !== undefined) query.set('labelSelector', where.selector);
    if (next !== undefined) query.set('continue', next);
    const answer = await api.get(`${base}?${query}`, MAX_PAGE_BYTES);
    // Pods are as large as their writers make them (up to etcd's 1.5 MiB): a page past the bound is
    // asked again, smaller, rather than failing every namespace's listing (an eleventh review).
    if (answer.status === 200 && answer.cut && limit > 1) {
      limit = Math.max(1, Math.floor(limit / 4));
      continue;
    }
    if (answer.status !== 200 || answer.cut)
      throw refusal(
        answer.status,
        answer.cut ? '{"message":"one pod is larger than this command reads"}' : answer.text,
        `listing pods ${where.namespace === undefined ? 'in all namespaces' : `in namespace ${JSON.stringify(where.namespace)}`}`,
      );
    const list = JSON.parse(answer.text) as { items?: PodObject[]; metadata?: { continue?: string } };
    for (const item of list.items ?? []) {
      listed++;
      const pod = injectedPod(item);
      if (pod !== undefined) pods.push(pod);
    }
    next = list.metadata?.continue || undefined;
    limit = PAGE;
    onPage(listed);
    if (next === undefined) return pods;
  }
}

/** The pod as this command sees it, if the webhook injected it. */
export function injectedPod(item: PodObject): InjectedPod | undefined {
  if (item.metadata.annotations?.[STATUS_ANNOTATION] !== STATUS_INJECTED) return undefined;
  const all = [...(item.spec.initContainers ?? []), ...item.spec.containers];
  const sidecar = all.find((c) => c.name === AGENT_CONTAINER);
  const init = all.find((c) => c.name === AGENT_INIT_CONTAINER);
  const source = sidecar ?? init;
  const secrets: PodSecret[] = [];
  const env = new Map((source?.env ?? []).map((e) => [e.name, e.value ?? '']));
  for (const [name, ref] of env) {
    const id = SECRET_REF.exec(name)?.[1];
    if (id !== undefined)
      secrets.push({ secret: id, ref: printable(ref), file: printable(env.get(`${id}_FILENAME`)) });
  }
  // Flyte's contract: one secret, SECRET_ARN and SECRET_FILENAME.
  if (env.has('SECRET_ARN'))
    secrets.push({
      secret: 'SECRET_ARN',
      ref: printable(env.get('SECRET_ARN')),
      file: printable(env.get('SECRET_FILENAME')),
    });
  secrets.sort((a, b) => a.secret.localeCompare(b.secret, 'en', { numeric: true }));
  // A pod's spec is its writer's: the webhook renders far fewer, and a forged pod could list thousands.
  secrets.splice(MAX_SECRETS);
  return {
    namespace: item.metadata.namespace,
    name: item.metadata.name,
    phase: item.status?.phase ?? 'Unknown',
    ready: item.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true,
    agent: sidecar !== undefined ? 'sidecar' : 'init-only',
    logContainer: source?.name ?? AGENT_CONTAINER,
    secrets,
  };
}
