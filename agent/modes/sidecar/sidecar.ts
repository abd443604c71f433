import type { Server } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import type { AgentConfig, SecretSpec } from '../../contract/agent-config.ts';
import { backoffDelay } from '../../fetch/backoff.ts';
import { fileLabel } from '../../fetch/fetch-secrets.ts';
import { ProviderSet } from '../../fetch/provider-set.ts';
import type { FormatKit } from '../../format/render-files.ts';
import type { Logger } from '../../log.ts';
import type { Notifier } from '../../notify/notifier.ts';
import type { PodEventRecorder } from '../../notify/pod-events.ts';
import { startHealthServer } from '../../serve/health-server.ts';
import { AgentMetrics } from '../../serve/metrics.ts';
import type { AtomicDir } from '../../write/atomic-dir.ts';
import { openSecretsDir } from '../open-secrets-dir.ts';
import {
  FILL_BACKOFF,
  REFRESH_BACKOFF,
  REFRESH_ROUND_MS,
  RefreshSchedule,
  type RoundResult,
} from './refresh-schedule.ts';
import { RotationAnnouncer } from './rotation-announcer.ts';
import { refreshSecrets, type RefreshOptions } from './refresh-secrets.ts';
import { SecretSet } from './secret-set.ts';

/**
 * How long a stopping sidecar gives providers to hand back credentials (VAULT_REVOKE_ON_SHUTDOWN):
 * a small part of Kubernetes' default 30 s termination grace period.
 */
const RELEASE_BUDGET_MS = 5_000;

export interface SidecarDeps {
  readonly log: Logger;
  readonly agentVersion: string;
  readonly notifiers: readonly Notifier[];
  /** The formats' code the secrets need (agent/format/load-formats.ts). */
  readonly formats: FormatKit;
  /** Kubernetes Events on the pod, when KUBERNETES_EVENTS is on. */
  readonly events?: PodEventRecorder;
}

/**
 * Sidecar mode: write the whole set once (ready only then), then refresh each secret on its interval
 * with jitter (refresh-schedule.ts), swap the set only when content changed (secret-set.ts), and tell
 * the app once per changed set (rotation-announcer.ts). Refresh failures keep the last good files; a
 * failed cycle backs off, capped at the interval. Serves the probes and metrics meanwhile.
 */
export class Sidecar {
  readonly metrics: AgentMetrics;
  #config: AgentConfig;
  readonly #log: Logger;
  readonly #dir: AtomicDir;
  readonly #set: SecretSet;
  readonly #announcer: RotationAnnouncer;
  readonly #providers: ProviderSet;
  readonly #events: PodEventRecorder | undefined;
  #schedule: RefreshSchedule | undefined;
  /** Bumped by a reconfigure and by stop: a fill or refetch for an older configuration gives up. */
  #generation = 0;
  #stopping = false;
  #lastCycleAt = Date.now();
  #server: Server | undefined;

  private constructor(
    config: AgentConfig,
    parts: { dir: AtomicDir; set: SecretSet; announcer: RotationAnnouncer; metrics: AgentMetrics },
    deps: SidecarDeps,
  ) {
    this.#config = config;
    this.#dir = parts.dir;
    this.#set = parts.set;
    this.#announcer = parts.announcer;
    this.metrics = parts.metrics;
    this.#log = deps.log;
    this.#events = deps.events;
    this.#providers = new ProviderSet({
      pod: config.pod,
      agentVersion: deps.agentVersion,
      serviceAccountDir: config.serviceAccountDir,
      mode: 'sidecar',
    });
  }

  /** Opens the volume and starts serving probes; call run() to fill and refresh. */
  static async start(config: AgentConfig, deps: SidecarDeps): Promise<Sidecar> {
    const dir = await openSecretsDir(config, deps.log);
    const metrics = new AgentMetrics();
    const events = deps.events ? { events: deps.events } : {};
    const announcer = new RotationAnnouncer(
      { log: deps.log, metrics, ...events },
      deps.notifiers,
      config.sidecar.debounceMs,
    );
    const set = await SecretSet.open(dir, config.secrets, deps.formats, {
      log: deps.log,
      metrics,
      announcer,
      ...events,
    });
    const sidecar = new Sidecar(config, { dir, set, announcer, metrics }, deps);
    // Ready with a set it found: the app has files to read, so a restart (whose postStart hook waits
    // on /readyz) holds nothing up and a backend outage takes nothing out of service.
    sidecar.#server = await startHealthServer(
      config.sidecar.httpAddr,
      { ready: () => set.readable, live: () => sidecar.live() },
      metrics,
    );
    return sidecar;
  }

  /** The port probes and metrics are served on (useful when AGENT_HTTP_ADDR asks for port 0). */
  get httpPort(): number {
    const address = this.#server?.address();
    return typeof address === 'object' && address ? address.port : 0;
  }

  /** Fills the volume (retrying until it succeeds or the agent stops), then schedules refreshes. */
  async run(): Promise<void> {
    const generation = this.#generation;
    // Only configured files carry these series: a secret dropped by a reload must not look stale.
    this.metrics.refreshInterval.reset();
    for (const spec of this.#config.secrets)
      this.metrics.refreshInterval.set({ file: fileLabel(spec) }, spec.refreshIntervalMs / 1000);
    const files = new Set(this.#config.secrets.map(fileLabel));
    for (const { labels } of (await this.metrics.lastSuccess.get()).values)
      if (!files.has(String(labels.file))) this.metrics.lastSuccess.remove({ file: String(labels.file) });
    for (let attempt = 1; !this.#stopping && generation === this.#generation; attempt++) {
      this.#lastCycleAt = Date.now();
      const fill = { deadlineMs: this.#config.initDeadlineMs, full: true, fresh: true };
      const { ok, failures } = await this.#refresh(this.#config.secrets, fill);
      if (ok) break;
      const delay = backoffDelay(attempt, FILL_BACKOFF);
      // Which secrets are missing, where they were asked and why: the pod's only clue while not ready.
      this.#log.warn(
        { attempt, delayMs: delay, secrets: failures },
        'not every secret could be delivered yet; retrying',
      );
      await sleep(delay);
    }
    if (this.#stopping || generation !== this.#generation) return;
    // Token and lease upkeep starts once the providers this config needs are loaded.
    await this.#providers.keepAlive((provider, reason) => void this.#refetch(provider, reason, generation));
    this.#schedule = new RefreshSchedule(
      (specs) => this.#scheduledRound(specs),
      (failuresInARow, result) => this.#afterRound(failuresInARow, result),
    );
    this.#schedule.start(this.#config.secrets);
  }

  /** A provider says a value must be fetched again now (a lease that cannot be renewed is ending). */
  async #refetch(provider: string, reason: string, generation: number): Promise<void> {
    const current = () => !this.#stopping && generation === this.#generation;
    if (!current()) return;
    this.#log.info({ provider, reason }, 'fetching new credentials before the old ones end');
    const specs = this.#config.secrets.filter((s) => s.ref.provider === provider);
    for (let attempt = 1; attempt <= 5 && current(); attempt++) {
      const round = { deadlineMs: REFRESH_ROUND_MS, full: false, fresh: true };
      if ((await this.#refresh(specs, round)).ok) return;
      await sleep(backoffDelay(attempt, REFRESH_BACKOFF));
    }
  }

  /**
   * Applies a new configuration (from AGENT_CONFIG_FILE). What needs a restart (directory, listen
   * address, mode) is kept and reported; everything else takes effect with an immediate refresh.
   */
  async reconfigure(next: AgentConfig, notifiers: readonly Notifier[], formats: FormatKit): Promise<void> {
    const fixed = (['secretsDir', 'setName', 'mode', 'requireMemoryFs'] as const).filter(
      (k) => next[k] !== this.#config[k],
    );
    if (JSON.stringify(next.sidecar.httpAddr) !== JSON.stringify(this.#config.sidecar.httpAddr))
      fixed.push('httpAddr' as never);
    if (fixed.length > 0)
      this.#log.warn(
        { settings: fixed },
        'these settings change only with a restart; keeping the running values',
      );
    this.#config = {
      ...next,
      secretsDir: this.#config.secretsDir,
      setName: this.#config.setName,
      mode: this.#config.mode,
      requireMemoryFs: this.#config.requireMemoryFs,
      sidecar: { ...next.sidecar, httpAddr: this.#config.sidecar.httpAddr },
    };
    this.#announcer.configure(notifiers, this.#config.sidecar.debounceMs);
    this.#set.configure(this.#config.secrets, formats);
    this.#generation++;
    this.#schedule?.cancel();
    this.metrics.reloads.inc({ outcome: 'applied' });
    await this.run();
  }

  /**
   * SIGTERM: no new work, the swap in flight finishes, files stay. Then providers give back what the
   * settings ask them to (a revoked Vault token), within RELEASE_BUDGET_MS.
   */
  async stop(): Promise<void> {
    this.#stopping = true;
    this.#generation++;
    this.#schedule?.cancel();
    this.#announcer.cancel();
    await this.#set.idle();
    await this.#dir.idle();
    for (const { provider, outcome } of await this.#providers.release(
      AbortSignal.timeout(RELEASE_BUDGET_MS),
    )) {
      if (outcome.ok) this.#log.info({ provider, what: outcome.what }, 'released backend credentials');
      else
        this.#log.warn(
          { provider, what: outcome.what, detail: outcome.detail, fix: outcome.fix },
          'could not release backend credentials; they expire on their own',
        );
    }
    this.#server?.closeAllConnections();
    await new Promise<void>((r) => (this.#server ? this.#server.close(() => r()) : r()));
    await this.#providers.close();
    await this.#events?.close();
  }

  /** Whether the refresh loop has started a cycle recently: /healthz, and the sidecar's own watchdog. */
  live(): boolean {
    const longest = Math.max(...this.#config.secrets.map((s) => s.refreshIntervalMs), 30_000);
    return Date.now() - this.#lastCycleAt < longest * 1.2 + REFRESH_ROUND_MS * 2;
  }

  /** One scheduled refresh of a group: a single attempt, within REFRESH_ROUND_MS. */
  #scheduledRound(specs: readonly SecretSpec[]): Promise<RoundResult> {
    this.#lastCycleAt = Date.now();
    return this.#refresh(specs, { deadlineMs: REFRESH_ROUND_MS, full: false, maxAttempts: 1 });
  }

  /** Once per failing streak, so `kubectl describe pod` shows it without an event every cycle. */
  #afterRound(failuresInARow: number, { failures }: RoundResult): void {
    if (this.#events && failuresInARow === this.#config.events?.failingAfter)
      this.#events.record(
        'SecretRefreshFailing',
        `refresh failed ${failuresInARow} times in a row; keeping the last good files. ${failures
          .map((f) => `${f.file} (${f.id}): ${f.reason}`)
          .join('; ')}`,
      );
  }

  #refresh(specs: readonly SecretSpec[], opts: RefreshOptions): Promise<RoundResult> {
    return refreshSecrets(
      specs,
      { providers: this.#providers, set: this.#set, log: this.#log, metrics: this.metrics },
      opts,
    );
  }
}
