import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

/** Outcome label of an admission request: a fixed set, never derived from request content. */
export type RequestOutcome = 'injected' | 'skipped' | 'denied' | 'invalid' | 'shed' | 'error';

export interface WebhookMetrics {
  readonly registry: Registry;
  readonly requests: Counter<'outcome'>;
  readonly duration: Histogram<'outcome'>;
  readonly tlsReloads: Counter<'result'>;
  readonly certificateExpiry: Gauge;
  readonly nativeSidecars: Gauge<'source'>;
  readonly admissionCache: Counter<'result'>;
  readonly connectionsClosed: Counter<'reason'>;
}

/** One registry per server, so tests and several servers in one process do not share counters. */
export function createWebhookMetrics(options: { defaultMetrics?: boolean } = {}): WebhookMetrics {
  const registry = new Registry();
  if (options.defaultMetrics) collectDefaultMetrics({ register: registry, prefix: 'secret_agent_webhook_' });
  return {
    registry,
    requests: new Counter({
      name: 'secret_agent_webhook_admission_requests_total',
      help: 'Admission requests by outcome: injected, skipped (not ours), denied (bad annotations), invalid (not an AdmissionReview), shed (answered 429 with Retry-After: the bytes of requests and answers in flight were at their limit; the API server retries), error.',
      labelNames: ['outcome'],
      registers: [registry],
    }),
    duration: new Histogram({
      name: 'secret_agent_webhook_admission_duration_seconds',
      help: 'Time from the request arriving to the response being written.',
      labelNames: ['outcome'],
      buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
      registers: [registry],
    }),
    tlsReloads: new Counter({
      name: 'secret_agent_webhook_tls_reloads_total',
      help: 'Serving certificate reloads by result (ok, failed: the previous certificate stays in use).',
      labelNames: ['result'],
      registers: [registry],
    }),
    certificateExpiry: new Gauge({
      name: 'secret_agent_webhook_certificate_expiry_timestamp_seconds',
      help: 'notAfter of the serving certificate in use, as a Unix timestamp.',
      registers: [registry],
    }),
    nativeSidecars: new Gauge({
      name: 'secret_agent_webhook_native_sidecars',
      help: 'NATIVE_SIDECARS as decided at start: 1 native sidecars, 0 classic. source: config (true or false set), api-server (auto, from GET /version), fallback (auto, the version could not be read).',
      labelNames: ['source'],
      registers: [registry],
    }),
    admissionCache: new Counter({
      name: 'secret_agent_webhook_admission_cache_lookups_total',
      help: 'Pod admissions looked up in the admission cache (ADMISSION_CACHE_SIZE), by result: hit (the decision made for an identical pod, e.g. another replica, was reused), miss (decided and rendered).',
      labelNames: ['result'],
      registers: [registry],
    }),
    connectionsClosed: new Counter({
      name: 'secret_agent_webhook_connections_closed_total',
      help: 'Connections the webhook closed to stay within its connection limits, by reason: per-source (one address held as many as it may: its oldest one idle between requests, else the newcomer), full (as many in all: the oldest idle one, or the newcomer), no-request (no complete request within the first-request deadline). Growth while the API server is the only caller means a pod is opening connections to the webhook.',
      labelNames: ['reason'],
      registers: [registry],
    }),
  };
}
