import type { AgentConfig } from '../../contract/agent-config.ts';
import type { Env } from '../../contract/settings.ts';
import { backoffDelay } from '../../fetch/backoff.ts';
import { fileLabel } from '../../fetch/fetch-secrets.ts';
import { ProviderSet } from '../../fetch/provider-set.ts';
import type { FormatKit } from '../../format/render-files.ts';
import type { Logger } from '../../log.ts';
import { loadNotifiers, notifierDepsOf } from '../../notify/load-notifiers.ts';
import { openPodEvents } from '../../notify/open-pod-events.ts';
import { carryMetrics } from '../../serve/carried-metrics.ts';
import { carriedVersions } from './held-versions.ts';
import { AgentMetrics } from '../../serve/metrics.ts';
import { openSecretsDir } from '../open-secrets-dir.ts';
import { encodeOutcome, readHandoffState, writeOutcome, type HandoffState } from './handoff-wire.ts';
import { FILL_BACKOFF, jittered, REFRESH_BACKOFF, REFRESH_ROUND_MS } from './refresh-schedule.ts';
import { refreshSecrets } from './refresh-secrets.ts';
import { RotationAnnouncer } from './rotation-announcer.ts';
import { SecretSet } from './secret-set.ts';

export interface HandoffRunOptions {
  readonly log: Logger;
  readonly agentVersion: string;
  readonly env: Env;
  readonly formats: FormatKit;
}

/**
 * One run of the small sidecar (AGENT_HANDOFF_FDS, set by /app/resident): takes the state the last run
 * handed back, refreshes every secret once (the volume's files are what a change is told against, as
 * when a sidecar takes over an init container's set), tells the app of a rotation through every
 * notifier, hands back what must survive and when the next run must come, and exits. The resident
 * serves /healthz, /readyz and /metrics from the outcome until the next run.
 *
 * Each run refreshes every secret: secrets with different REFRESH_INTERVALs are refreshed at the
 * shortest. A run also comes sooner when a provider or notifier needs it (a Vault renewal, the end of
 * a sentinel hold). Returns the exit code: 0 once the outcome is written, whatever the refresh came to:
 * the outcome says whether every secret was refreshed, and the resident counts a run that was not as failed.
 */
export async function runHandoff(config: AgentConfig, options: HandoffRunOptions): Promise<number> {
  const { log, env } = options;
  const fds = config.sidecar.handoff!;
  const taken = readHandoffState(fds.stateFd);
  if (taken.problem) log.warn({ problem: taken.problem }, 'starting without the last run’s state');
  const previous = taken.state;

  const metrics = new AgentMetrics({ processMetrics: false });
  const notifierDeps = notifierDepsOf(config, log, env);
  const events = await openPodEvents(config, {
    log,
    kubernetesApiUrl: notifierDeps.kubernetesApiUrl,
    onOutcome: (reason, outcome) => metrics.events.inc({ reason, outcome }),
  });
  const notifiers = await loadNotifiers(config.sidecar, notifierDeps);
  const dir = await openSecretsDir(config, log);
  const withEvents = events ? { events } : {};
  const announcer = new RotationAnnouncer(
    { log, metrics, ...withEvents },
    notifiers,
    config.sidecar.debounceMs,
  );
  const set = await SecretSet.open(dir, config.secrets, options.formats, {
    log,
    metrics,
    announcer,
    ...withEvents,
    carriedVersions: carriedVersions(previous?.versions),
  });
  const providers = new ProviderSet({
    pod: config.pod,
    agentVersion: options.agentVersion,
    serviceAccountDir: config.serviceAccountDir,
    // A run lives as briefly as an init container: GCP over REST, which starts faster and is in the
    // GCP snapshot, not gRPC, which pays off only over a long-lived process.
    mode: 'init',
  });

  try {
    await providers.resume(previous?.providers ?? {}, AbortSignal.timeout(REFRESH_ROUND_MS));
    for (const spec of config.secrets)
      metrics.refreshInterval.set({ file: fileLabel(spec) }, spec.refreshIntervalMs / 1000);
    // Before the app has files this is the first fill, with init's deadline and retries; after, one attempt.
    const filled = set.inherited;
    const result = await refreshSecrets(
      config.secrets,
      { providers, set, log, metrics },
      filled
        ? { deadlineMs: REFRESH_ROUND_MS, full: true, fresh: true, maxAttempts: 1 }
        : { deadlineMs: config.initDeadlineMs, full: true, fresh: true },
    );
    const failuresInARow = result.ok ? 0 : (previous?.failuresInARow ?? 0) + 1;
    if (events && failuresInARow === config.events?.failingAfter)
      events.record(
        'SecretRefreshFailing',
        `refresh failed ${failuresInARow} times in a row; keeping the last good files. ${result.failures
          .map((f) => `${f.file} (${f.id}): ${f.reason}`)
          .join('; ')}`,
      );
    await announcer.flush();
    const ready = set.readable;

    const interval = Math.min(...config.secrets.map((s) => s.refreshIntervalMs));
    let nextMs = result.ok
      ? jittered(interval)
      : ready
        ? Math.max(result.retryAfterMs, Math.min(interval, backoffDelay(failuresInARow, REFRESH_BACKOFF)))
        : Math.max(result.retryAfterMs, backoffDelay(failuresInARow, FILL_BACKOFF));
    // Which secrets are missing, where they were asked and why: the pod's only clue while not ready (as the sidecar's).
    if (!ready)
      log.warn(
        { attempt: failuresInARow, delayMs: Math.round(nextMs), secrets: result.failures },
        'not every secret could be delivered yet; retrying',
      );
    const handed = await providers.handOff();
    const due = [handed.dueAt];
    for (const n of notifiers) if (n.settle) due.push((await n.settle()).dueAt);
    for (const at of due) if (at !== undefined) nextMs = Math.min(nextMs, at - Date.now());

    const carried = await carryMetrics(
      previous?.metrics,
      metrics,
      new Set(config.secrets.map((s) => fileLabel(s))),
    );
    const state: HandoffState = {
      v: 1,
      failuresInARow,
      providers: handed.states,
      metrics: carried.carried,
      versions: set.versions,
    };
    await events?.close();
    const outcome = encodeOutcome({ ready, refreshed: result.ok, nextMs, metrics: carried.text, state });
    if (outcome.dropped.length > 0)
      log.warn({ dropped: outcome.dropped }, 'left out of the handoff: over what the resident takes');
    writeOutcome(fds.outcomeFd, outcome.bytes);
    log.info(
      { ok: result.ok, ready, nextMs: Math.round(nextMs) },
      'refresh run done; handed back to the resident',
    );
    return 0;
  } finally {
    await providers.close();
  }
}
