import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { ConnectionRefusal } from './connection-guard.ts';

/** Every reason the port's guard closes a connection: each series exists from the start, at 0. */
const REFUSALS = { 'per-source': true, full: true, 'no-request': true } as const satisfies Record<
  ConnectionRefusal,
  true
>;

/**
 * The sidecar's metrics, declared once: the reference table is generated from METRIC_DOCS. Labels are
 * provider names, reasons, file names and notifier kinds: configuration, never a value. `help` is what
 * the series means in the Node sidecar (and its HELP text in both); `small`, what it means where
 * /app/resident serves it, for the small sidecar.
 */
export const METRIC_DOCS = [
  {
    name: 'secret_agent_fetches_total',
    type: 'counter',
    labels: 'provider, outcome',
    help: 'Secret fetches by provider and outcome (success, failure).',
    small: 'The same, summed over every run (each run adds its own to what the earlier runs handed on).',
  },
  {
    name: 'secret_agent_fetch_failures_total',
    type: 'counter',
    labels: 'provider, reason',
    help: 'Failed fetches by provider and reason (not-found, throttled, unavailable, …).',
    small: 'The same, summed over every run (each run adds its own to what the earlier runs handed on).',
  },
  {
    name: 'secret_agent_backend_request_duration_seconds',
    type: 'histogram',
    labels: 'provider',
    help: 'Duration of one provider call (a batch counts once).',
    small: 'The same, summed over every run (each run adds its own to what the earlier runs handed on).',
  },
  {
    name: 'secret_agent_last_success_timestamp_seconds',
    type: 'gauge',
    labels: 'file',
    help: 'When each secret (by file name) was last fetched successfully.',
    small: "The same, the latest over every run, for the files the last run's configuration has.",
  },
  {
    name: 'secret_agent_secret_version_info',
    type: 'gauge',
    labels: 'secret, file, provider, version',
    help: 'What each secret’s files hold: 1 for the version its backend names (AWS VersionId, GCP version number, Vault KV v2 version or lease id, an exec helper’s secret-agent-version line; empty where it names none: never a digest of a value). One series per secret, replaced when the version changes. Known once this sidecar has fetched the set it holds.',
    small:
      'The same, carried from run to run: a run that cannot refresh a secret keeps the version its files still hold.',
  },
  {
    name: 'secret_agent_secret_changed_timestamp_seconds',
    type: 'gauge',
    labels: 'secret, file',
    help: 'When each secret’s version (or, where the backend names none, its value) last changed, as this sidecar saw it. secret_agent_last_success_timestamp_seconds says when it was last refreshed.',
    small: 'The same, carried from run to run.',
  },
  {
    name: 'secret_agent_refresh_interval_seconds',
    type: 'gauge',
    labels: 'file',
    help: 'Each secret’s refresh interval (by file name): alerts compare the time since the last success with it.',
    small: 'The same, as the last run read its configuration.',
  },
  {
    name: 'secret_agent_rotations_total',
    type: 'counter',
    labels: '',
    help: 'Swaps that changed the set of files.',
    small: 'The same, summed over every run (each run adds its own to what the earlier runs handed on).',
  },
  {
    name: 'secret_agent_notifications_total',
    type: 'counter',
    labels: 'kind, outcome',
    help: 'Rotation notifications by kind (sentinel, signal, http, command, restart) and outcome (ok or a reason).',
    small: 'The same, summed over every run (each run adds its own to what the earlier runs handed on).',
  },
  {
    name: 'secret_agent_kubernetes_events_total',
    type: 'counter',
    labels: 'reason, outcome',
    help: 'Kubernetes Events sent about the pod (KUBERNETES_EVENTS) by reason (SecretsDelivered, SecretsRotated, SecretRefreshFailing) and outcome (ok or a reason).',
    small: 'The same, summed over every run (each run adds its own to what the earlier runs handed on).',
  },
  {
    name: 'secret_agent_ready',
    type: 'gauge',
    labels: '',
    help: '1 while the app has a whole set to read: written by this sidecar, or found in the volume when it started (from the init container, or before a restart). /readyz answers 200 exactly then; a failing refresh changes neither.',
    small:
      'The same, as the last run that wrote a whole outcome found it; /readyz answers from the same run.',
  },
  {
    name: 'secret_agent_config_reloads_total',
    type: 'counter',
    labels: 'outcome',
    help: 'AGENT_CONFIG_FILE reloads by outcome (applied, rejected).',
    small:
      'Not served: every run reads AGENT_CONFIG_FILE afresh; a run that rejects it exits 2 and counts as failed in secret_agent_resident_runs_total.',
  },
  {
    name: 'secret_agent_http_connections_refused_total',
    type: 'counter',
    labels: 'reason',
    help: "Connections to the agent's port it closed unserved, by reason: per-source (to make room, while its address held more than its share), full (to make room when the port was full: one that had sent nothing, those past their grace first, from the address holding the most such), no-request (no complete request within the deadline).",
    small: "The same, for the resident's port (the resident counts it).",
  },
  {
    name: 'secret_agent_resident_runs_total',
    type: 'counter',
    labels: 'outcome',
    help: 'Agent runs by outcome: ok (refreshed every secret), failed (could not refresh every secret, exited non-zero, was killed or wrote a bad outcome; the files stay the last good ones), timeout (passed AGENT_RUN_DEADLINE).',
    small: 'Served by the resident alone: the Node sidecar has no runs.',
  },
  {
    name: 'secret_agent_resident_consecutive_failures',
    type: 'gauge',
    labels: '',
    help: 'Runs failed or timed out since the last ok one: 0 again once every secret is refreshed.',
    small: 'Served by the resident alone: the Node sidecar has no runs.',
  },
  {
    name: 'secret_agent_resident_last_run_seconds',
    type: 'gauge',
    labels: '',
    help: 'How long the last run took, from its start to its end.',
    small: 'Served by the resident alone: the Node sidecar has no runs.',
  },
] as const;

/**
 * The metrics only the small sidecar's resident (agent/native/resident.c) serves, beside the last
 * run's: it also serves secret_agent_http_connections_refused_total for its port, and its own
 * secret_agent_process_resident_memory_bytes.
 */
export const RESIDENT_METRICS: readonly string[] = [
  'secret_agent_resident_runs_total',
  'secret_agent_resident_consecutive_failures',
  'secret_agent_resident_last_run_seconds',
];

/**
 * How often the event-loop lag histogram samples. prom-client's 10 ms wakes an otherwise idle sidecar
 * 100 times a second: measured 0.4 CPU-seconds a minute, most of a 1-secret sidecar's CPU. A stall
 * delays whichever sample is due, so 100 ms still records it in full (max, p99), at 0.05 s a minute.
 */
export const EVENT_LOOP_SAMPLE_MS = 100;

type MetricName = (typeof METRIC_DOCS)[number]['name'];
const help = (name: MetricName) => METRIC_DOCS.find((m) => m.name === name)!.help;

export class AgentMetrics {
  readonly registry = new Registry();
  readonly fetches = new Counter({
    name: 'secret_agent_fetches_total',
    help: help('secret_agent_fetches_total'),
    labelNames: ['provider', 'outcome'],
    registers: [this.registry],
  });
  readonly failures = new Counter({
    name: 'secret_agent_fetch_failures_total',
    help: help('secret_agent_fetch_failures_total'),
    labelNames: ['provider', 'reason'],
    registers: [this.registry],
  });
  readonly latency = new Histogram({
    name: 'secret_agent_backend_request_duration_seconds',
    help: help('secret_agent_backend_request_duration_seconds'),
    labelNames: ['provider'],
    buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });
  readonly lastSuccess = new Gauge({
    name: 'secret_agent_last_success_timestamp_seconds',
    help: help('secret_agent_last_success_timestamp_seconds'),
    labelNames: ['file'],
    // Carried from run to run in the small sidecar (carried-metrics.ts): the latest wins.
    aggregator: 'max',
    registers: [this.registry],
  });
  readonly versionInfo = new Gauge({
    name: 'secret_agent_secret_version_info',
    help: help('secret_agent_secret_version_info'),
    labelNames: ['secret', 'file', 'provider', 'version'],
    registers: [this.registry],
  });
  readonly versionChanged = new Gauge({
    name: 'secret_agent_secret_changed_timestamp_seconds',
    help: help('secret_agent_secret_changed_timestamp_seconds'),
    labelNames: ['secret', 'file'],
    registers: [this.registry],
  });
  readonly refreshInterval = new Gauge({
    name: 'secret_agent_refresh_interval_seconds',
    help: help('secret_agent_refresh_interval_seconds'),
    labelNames: ['file'],
    registers: [this.registry],
  });
  readonly rotations = new Counter({
    name: 'secret_agent_rotations_total',
    help: help('secret_agent_rotations_total'),
    registers: [this.registry],
  });
  readonly notifications = new Counter({
    name: 'secret_agent_notifications_total',
    help: help('secret_agent_notifications_total'),
    labelNames: ['kind', 'outcome'],
    registers: [this.registry],
  });
  readonly events = new Counter({
    name: 'secret_agent_kubernetes_events_total',
    help: help('secret_agent_kubernetes_events_total'),
    labelNames: ['reason', 'outcome'],
    registers: [this.registry],
  });
  readonly ready = new Gauge({
    name: 'secret_agent_ready',
    help: help('secret_agent_ready'),
    registers: [this.registry],
  });
  readonly reloads = new Counter({
    name: 'secret_agent_config_reloads_total',
    help: help('secret_agent_config_reloads_total'),
    labelNames: ['outcome'],
    registers: [this.registry],
  });
  readonly refusedConnections = new Counter({
    name: 'secret_agent_http_connections_refused_total',
    help: help('secret_agent_http_connections_refused_total'),
    labelNames: ['reason'],
    registers: [this.registry],
  });

  /**
   * `processMetrics: false` for a run of the small sidecar: its process lives for one refresh, and
   * what stays between refreshes is the resident, which reports itself.
   */
  constructor({ processMetrics = true }: { processMetrics?: boolean } = {}) {
    for (const reason of Object.keys(REFUSALS)) this.refusedConnections.inc({ reason }, 0);
    if (!processMetrics) return;
    // Process RSS, heap, open fds, event-loop lag: what a leak or a stall shows up in.
    collectDefaultMetrics({
      register: this.registry,
      prefix: 'secret_agent_process_',
      eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLE_MS,
    });
  }
}
