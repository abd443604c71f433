import { request } from 'undici';
import { readCapped } from './capped-body.ts';
import type { HeldFile, PodHolding } from './held-versions.ts';
import { printable } from './printable.ts';
import type { InjectedPod } from './injected-pods.ts';

/** Prometheus could not be asked, or did not answer a query: the message names the fix. */
export class PrometheusError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PrometheusError';
  }
}

interface Sample {
  readonly metric: Record<string, string>;
  readonly value: readonly [number, string];
}

const MAX_ANSWER_BYTES = 64 * 1024 * 1024;
const TIMEOUT_MS = 60_000;

async function query(base: string, promql: string): Promise<Sample[]> {
  const url = new URL('api/v1/query', base.endsWith('/') ? base : `${base}/`);
  url.searchParams.set('query', promql);
  let res;
  try {
    res = await request(url, { headersTimeout: TIMEOUT_MS, bodyTimeout: TIMEOUT_MS });
  } catch (e) {
    throw new PrometheusError(
      `--prometheus: ${url.origin} cannot be reached (${(e as Error).message}). Fix: name Prometheus's URL, e.g. http://prometheus.monitoring:9090`,
    );
  }
  const answer = await readCapped(res.body, MAX_ANSWER_BYTES);
  if (answer.cut)
    throw new PrometheusError(
      `--prometheus: the answer to ${promql} is over ${MAX_ANSWER_BYTES >> 20} MiB. Fix: narrow it with -n or -l`,
    );
  const body = JSON.parse(answer.text || '{}') as {
    status?: string;
    error?: string;
    data?: { resultType?: string; result?: Sample[] };
  };
  if (res.statusCode !== 200 || body.status !== 'success' || body.data?.resultType !== 'vector')
    throw new PrometheusError(
      `--prometheus: the query ${promql} failed (HTTP ${res.statusCode}${body.error ? `: ${body.error}` : ''}). Fix: check the URL is Prometheus's API root`,
    );
  return body.data.result ?? [];
}

/** A PromQL string literal. */
const literal = (s: string) => JSON.stringify(s);

/**
 * What each pod holds, as Prometheus last scraped it from its agent (the monitoring component's
 * PodMonitor labels every series with `namespace` and `pod`): the same fields as the agents' logs. A
 * pod without series was not scraped: an init-only pod serves no metrics, and a sidecar's port is
 * on the pod's loopback unless AGENT_HTTP_ADDR is 0.0.0.0:8099.
 */
export async function prometheusHoldings(
  base: string,
  pods: readonly InjectedPod[],
  namespace: string | undefined,
): Promise<PodHolding[]> {
  const where = namespace === undefined ? '' : `{namespace=${literal(namespace)}}`;
  const [info, changed] = await Promise.all([
    query(base, `secret_agent_secret_version_info${where}`),
    query(base, `secret_agent_secret_changed_timestamp_seconds${where}`),
  ]);
  const key = (m: Record<string, string>) => `${m.namespace}/${m.pod}/${m.secret}`;
  const changedAt = new Map(changed.map((s) => [key(s.metric), Number(s.value[1])]));
  const byPod = new Map<string, Map<string, HeldFile>>();
  for (const s of info) {
    const m = s.metric;
    const at = changedAt.get(key(m));
    const pod = `${m.namespace}/${m.pod}`;
    const files = byPod.get(pod) ?? new Map<string, HeldFile>();
    const secret = printable(m.secret);
    // A pod's series are its agent's to write: each secret once, a time only if it is one.
    if (files.has(secret)) continue;
    files.set(secret, {
      secret,
      ref: '',
      file: printable(m.file),
      provider: printable(m.provider),
      version: printable(m.version),
      since:
        at !== undefined && Number.isFinite(at) && at > 0 && at * 1000 < 8.64e15
          ? new Date(Math.round(at * 1000)).toISOString()
          : '',
    });
    byPod.set(pod, files);
  }
  return pods.map((pod) => {
    const held = byPod.get(`${pod.namespace}/${pod.name}`);
    // Only the pod's own secrets, in its spec's order.
    const files = pod.secrets.flatMap((sec) => {
      const f = held?.get(sec.secret);
      return f === undefined ? [] : [{ ...f, ref: sec.ref }];
    });
    if (files.length > 0) return { pod, files };
    return {
      pod,
      files: [],
      problem:
        pod.agent === 'init-only'
          ? 'init only: it serves no metrics (without --prometheus its log says what it fetched)'
          : 'Prometheus has no series for it: not scraped (the monitoring component, AGENT_HTTP_ADDR 0.0.0.0:8099) or not started',
    };
  });
}
