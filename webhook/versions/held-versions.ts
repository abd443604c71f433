import { mapLimited } from '../../agent/contract/map-limited.ts';
import { apiMessage, KubernetesReadError, refusal, type InjectedPod } from './injected-pods.ts';
import { printable } from './printable.ts';
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

/**
 * What one read of a log may be: the tail, up to 10,000 lines and 4 MiB. An agent logs a few lines a
 * refresh and says what it holds on every change; reading whole 16 MiB files, 8 at a time, for pods
 * whose containers log on purpose took the command to 1.8 GiB (an eleventh review).
 */
const TAIL_LINES = 10_000;
const TAIL_BYTES = 4 * 1024 * 1024;
const PINO_ERROR = 50;
/** A date as JavaScript can hold it (ms since the epoch). */
const LATEST_MS = 8.64e15;

/** A log line as far as it has the shape this command reads; anything else is passed over. */
function parsed(raw: string): LogLine | undefined {
  if (!raw.startsWith('{')) return undefined;
  try {
    const v: unknown = JSON.parse(raw);
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as LogLine) : undefined;
  } catch {
    return undefined; // A line cut by limitBytes, or not the agent's.
  }
}

const text = printable;
const when = (ms: unknown) =>
  typeof ms === 'number' && Number.isFinite(ms) && ms > 0 && ms < LATEST_MS ? new Date(ms).toISOString() : '';

/**
 * What a log says the pod holds: a sidecar's last `holding versions` line, else (an init container,
 * or a sidecar that has not said yet) the `fetched` line of each secret, the last of each. Only the
 * pod's own secrets (its agent's env names them), each once: a container writes its own log, and a
 * line of 300,000 entries, or entries that are not objects, stopped the command for every namespace.
 */
export function heldFromLog(
  pod: InjectedPod,
  log: string,
): { files: HeldFile[]; lastError?: string } | undefined {
  const refOf = new Map(pod.secrets.map((s) => [s.secret, s.ref]));
  const raws = log.split('\n');
  let lastError: string | undefined;
  const fetched = new Map<string, HeldFile>();
  // From the end: the last holding line wins; errors after it, fetched lines before none.
  for (let i = raws.length - 1; i >= 0; i--) {
    if (!raws[i]!.includes('"msg"')) continue;
    const l = parsed(raws[i]!);
    if (l === undefined) continue;
    if (l.msg === 'holding versions' && Array.isArray(l.versions)) {
      const files = new Map<string, HeldFile>();
      for (const v of l.versions as unknown[]) {
        if (typeof v !== 'object' || v === null) continue;
        const e = v as Record<string, unknown>;
        const secret = text(e.secret);
        if (!refOf.has(secret) || files.has(secret)) continue;
        files.set(secret, {
          secret,
          ref: refOf.get(secret)!,
          file: text(e.file),
          provider: text(e.provider),
          version: text(e.version),
          since: when(e.changedAt),
        });
      }
      const held = pod.secrets.flatMap((sec) => files.get(sec.secret) ?? []);
      return lastError === undefined ? { files: held } : { files: held, lastError };
    }
    if (l.msg === 'fetched' && typeof l.id === 'string' && refOf.has(l.id) && !fetched.has(l.id))
      fetched.set(l.id, {
        secret: l.id,
        ref: refOf.get(l.id)!,
        file: text(l.file),
        provider: text(l.ref).split(':')[0] ?? '',
        version: text(l.version),
        since: typeof l.time === 'string' && !Number.isNaN(Date.parse(l.time)) ? text(l.time) : '',
      });
    if (fetched.size === 0 && lastError === undefined && typeof l.level === 'number' && l.level >= PINO_ERROR)
      lastError = text(l.msg) || undefined;
  }
  if (fetched.size === 0) return undefined;
  const files = pod.secrets.flatMap((s) => fetched.get(s.secret) ?? []);
  return lastError === undefined ? { files } : { files, lastError };
}

/** What `pod` holds, from its agent's log's tail; a pod whose log cannot be read or parsed is `unknown`. */
export async function readHolding(api: KubernetesReader, pod: InjectedPod): Promise<PodHolding> {
  const query = new URLSearchParams({
    container: pod.logContainer,
    tailLines: String(TAIL_LINES),
    limitBytes: String(TAIL_BYTES),
  });
  const answer = await api.get(
    `/api/v1/namespaces/${encodeURIComponent(pod.namespace)}/pods/${encodeURIComponent(pod.name)}/log?${query}`,
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
  const held = heldFromLog(pod, answer.text);
  if (held === undefined)
    return {
      pod,
      files: [],
      problem:
        pod.agent === 'sidecar'
          ? `its agent has not said what it holds in the last ${TAIL_LINES} lines of its log (no "holding versions" line)`
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
  let done = 0;
  return mapLimited(pods, concurrency, async (pod) => {
    const holding = await readHolding(api, pod).catch((e: unknown): PodHolding => {
      // One pod's trouble is that pod's: the API server's refusal of the reads stops the run.
      if (e instanceof KubernetesReadError) throw e;
      return {
        pod,
        files: [],
        problem: `its agent's log could not be read: ${printable((e as Error).message)}`,
      };
    });
    onRead(++done);
    return holding;
  });
}
