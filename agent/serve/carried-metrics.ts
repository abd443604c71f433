import { AggregatorRegistry, type MetricObjectWithValues, type MetricValue } from 'prom-client';
import type { AgentMetrics } from './metrics.ts';

/**
 * Series that describe this run's configuration or what its set holds (the versions come with the
 * hand-over state, held-versions.ts): never carried over from an earlier one's metrics.
 */
const CURRENT_ONLY = new Set([
  'secret_agent_ready',
  'secret_agent_refresh_interval_seconds',
  'secret_agent_secret_version_info',
  'secret_agent_secret_changed_timestamp_seconds',
]);
/** The port is the resident's: it counts its own refusals, under the same name. */
const RESIDENT_OWN = new Set(['secret_agent_http_connections_refused_total']);

export type CarriedMetrics = MetricObjectWithValues<MetricValue<string>>[];

/**
 * The small sidecar's metrics: each run starts from zero, so its counters and histograms are added to
 * what the earlier runs counted (`previous`, as the last run handed it back), and the latest success
 * per file is kept, for the files this run's configuration still has. Returns the exposition text the
 * resident serves until the next run, and the same as JSON for the next run to add to.
 */
export async function carryMetrics(
  previous: unknown,
  current: AgentMetrics,
  files: ReadonlySet<string>,
): Promise<{ text: string; carried: CarriedMetrics }> {
  const mine = ((await current.registry.getMetricsAsJSON()) as CarriedMetrics).filter(
    (m) => !RESIDENT_OWN.has(m.name),
  );
  const names = new Map(mine.map((m) => [m.name, m]));
  // Only what this version of the agent declares, with the same type: a state from another version
  // must not make the sum fail or add series nobody documents.
  const earlier = (Array.isArray(previous) ? (previous as CarriedMetrics) : [])
    .filter(
      (m) => names.get(m?.name)?.type === m.type && !CURRENT_ONLY.has(m.name) && Array.isArray(m.values),
    )
    .map((m) =>
      m.name === 'secret_agent_last_success_timestamp_seconds'
        ? { ...m, values: m.values.filter((v) => files.has(String(v.labels?.file))) }
        : m,
    )
    .map((m) => ({ ...m, aggregator: names.get(m.name)!.aggregator }));
  const merged = AggregatorRegistry.aggregate([mine, earlier]);
  return {
    text: await merged.metrics(),
    carried: (await merged.getMetricsAsJSON()) as CarriedMetrics,
  };
}
