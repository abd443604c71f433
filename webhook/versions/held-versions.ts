import type { InjectedPod } from './injected-pods.ts';
import { printable } from './printable.ts';
import { apiMessage, refusal } from './injected-pods.ts';
import type { KubernetesReader } from './kubectl-proxy.ts';

/** One file's secret as a pod holds it: the version its backend names, never a value. */
export interface HeldFile {
  readonly secret: string;
  readonly ref: string;
  readonly file: string;
  readonly provider: string;
  /** '' where the backend names none (file:, Vault KV v1, an exec helper without a version line). */
  readonly version: string;
  /** When the agent saw it change (a sidecar) or wrote it (an init container), ISO 8601; '' if unknown. */
  readonly since: string;
}

export interface PodHolding {
  readonly pod: InjectedPod;
  /** Empty when unknown: then `problem` says why. */
  readonly files: readonly HeldFile[];
  readonly problem?: string;
  /** The agent's last error since it last said what it holds: a refresh failing (its message, never a value). */
  readonly lastError?: string;
}

interface LogLine {
  readonly level?: number;
  readonly time?: string;
  readonly msg?: string;
  readonly versions?: unknown;
  readonly id?: unknown;
  readonly ref?: unknown;
  readonly file?: unknown;
  readonly version?: unknown;
}

const TAIL_LINES = 2000;
const TAIL_BYTES = 1024 * 1024;
/** The kubelet rotates a container's log at 10 MiB by default: the whole current file. */
const WHOLE_LOG_BYTES = 16 * 1024 * 1024;
const PINO_ERROR = 50;

function lines(text: string): LogLine[] {
  const out: LogLine[] = [];
  for (const raw of text.split('\n')) {
    if (!raw.startsWith('{')) continue;
    try {
      out.push(JSON.parse(raw) as LogLine);
    } catch {
      // A line cut by limitBytes, or not the agent's.
    }
  }
  return out;
}

const text = printable;

/**
 * What a log says the pod holds: a sidecar's last `holding versions` line, else (an init container,
 * or a sidecar that has not said yet) the `fetched` line of each secret, the last of each.
 */
export function heldFromLog(
  pod: InjectedPod,
  log: string,
): { files: HeldFile[]; lastError?: string } | undefined {
  const all = lines(log);
  const refOf = new Map(pod.secrets.map((s) => [s.secret, s.ref]));
  let at = -1;
  for (let i = all.length - 1; i >= 0 && at < 0; i--)
    if (all[i]!.msg === 'holding versions' && Array.isArray(all[i]!.versions)) at = i;
  const errorAfter = (from: number) => {
    for (let i = all.length - 1; i > from; i--)
      if ((all[i]!.level ?? 0) >= PINO_ERROR) return text(all[i]!.msg) || undefined;
    return undefined;
  };
  if (at >= 0) {
    const files = (all[at]!.versions as Record<string, unknown>[]).map((v) => ({
      secret: text(v.secret),
      ref: refOf.get(text(v.secret)) ?? '',
      file: text(v.file),
      provider: text(v.provider),
      version: text(v.version),
      since: typeof v.changedAt === 'number' ? new Date(v.changedAt).toISOString() : '',
    }));
    const lastError = errorAfter(at);
    return lastError === undefined ? { files } : { files, lastError };
  }
  const fetched = new Map<string, HeldFile>();
  let last = -1;
  all.forEach((l, i) => {
    if (l.msg !== 'fetched' || typeof l.id !== 'string') return;
    last = i;
    fetched.set(l.id, {
      secret: l.id,
      ref: refOf.get(l.id) ?? text(l.ref),
      file: text(l.file),
      provider: text(l.ref).split(':')[0] ?? '',
      version: text(l.version),
      since: text(l.time),
    });
  });
  if (fetched.size === 0) return undefined;
  const lastError = errorAfter(last);
  return lastError === undefined
    ? { files: [...fetched.values()] }
    : { files: [...fetched.values()], lastError };
}

async function readLog(api: KubernetesReader, pod: InjectedPod, query: Record<string, string>, max: number) {
  const q = new URLSearchParams({ container: pod.logContainer, ...query });
  return api.get(
    `/api/v1/namespaces/${encodeURIComponent(pod.namespace)}/pods/${encodeURIComponent(pod.name)}/log?${q}`,
    max,
  );
}

/** What `pod` holds, from its agent's log: the tail, then (not said there) the whole current file. */
export async function readHolding(api: KubernetesReader, pod: InjectedPod): Promise<PodHolding> {
  let answer = await readLog(
    api,
    pod,
    { tailLines: String(TAIL_LINES), limitBytes: String(TAIL_BYTES) },
    TAIL_BYTES,
  );
  if (answer.status === 403 || answer.status === 401)
    throw refusal(answer.status, answer.text, `reading the log of pod ${pod.namespace}/${pod.name}`);
  if (answer.status !== 200)
    return {
      pod,
      files: [],
      problem: `its agent's log cannot be read: ${apiMessage(answer.status, answer.text)}`,
    };
  let held = heldFromLog(pod, answer.text);
  if (held === undefined) {
    answer = await readLog(api, pod, { limitBytes: String(WHOLE_LOG_BYTES) }, WHOLE_LOG_BYTES);
    if (answer.status === 200) held = heldFromLog(pod, answer.text);
  }
  if (held === undefined)
    return {
      pod,
      files: [],
      problem:
        pod.agent === 'sidecar'
          ? 'its agent has not said what it holds yet (no "holding versions" line in its log)'
          : 'its init container did not log what it fetched',
    };
  return { pod, ...held };
}

/** Each pod's holding, `concurrency` log reads at a time, in the pods' order. */
export async function readHoldings(
  api: KubernetesReader,
  pods: readonly InjectedPod[],
  concurrency: number,
  onRead: (done: number) => void = () => {},
): Promise<PodHolding[]> {
  const out: PodHolding[] = new Array<PodHolding>(pods.length);
  let next = 0;
  let done = 0;
  const worker = async () => {
    while (next < pods.length) {
      const i = next++;
      out[i] = await readHolding(api, pods[i]!);
      onRead(++done);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, pods.length) }, worker));
  return out;
}
