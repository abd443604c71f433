import type { FSWatcher } from 'chokidar';
import { readFileSync } from 'node:fs';
import type { Server } from 'node:http';
import { dirname } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { findFileClash } from '../config/file-clash.ts';
import { parseAgentConfig } from '../config/parse-agent-config.ts';
import type { AgentConfig, SecretSpec, SidecarSettings } from '../contract/agent-config.ts';
import type { Env } from '../contract/settings.ts';
import { ConfigError, ConfigErrors } from '../contract/errors.ts';
import { checkBackendSettings } from '../config/check-backend-settings.ts';
import { sourceKey } from '../contract/reference.ts';
import { backoffDelay } from '../fetch/backoff.ts';
import { describeFailure, fetchSecrets, ProviderSet, type FailedSecret } from '../fetch/fetch-secrets.ts';
import { loadFormats } from '../format/load-formats.ts';
import {
  renderFiles,
  SecretFormatError,
  valuesByName,
  type FileEntry,
  type FormatKit,
} from '../format/render-files.ts';
import type { Logger } from '../log.ts';
import type { Notifier, NotifierDeps, RotationEvent } from '../notify/notifier.ts';
import { kubernetesApiUrl } from '../notify/kubernetes-api-url.ts';
import { deliveredMessage, openPodEvents } from '../notify/open-pod-events.ts';
import type { PodEventRecorder } from '../notify/pod-events.ts';
import { watchAppExit, type AppExitWatch } from '../proc/watch-app-exit.ts';
import type { FetchOutcome } from '../providers/provider.ts';
import { startHealthServer } from '../serve/health-server.ts';
import { AgentMetrics } from '../serve/metrics.ts';
import { AtomicDir } from '../write/atomic-dir.ts';
import { applySidecarV8Flags } from '../contract/sidecar-v8-flags.ts';

/** A refresh makes one attempt per cycle; a failed cycle is retried on this schedule, capped at the interval. */
const REFRESH_BACKOFF = { baseMs: 1000, maxMs: 60_000 };
/** How long one refresh round may take before it counts as failed. */
const REFRESH_ROUND_MS = 30_000;
/**
 * How long a stopping sidecar gives providers to hand back credentials (VAULT_REVOKE_ON_SHUTDOWN):
 * a small part of Kubernetes' default 30 s termination grace period.
 */
const RELEASE_BUDGET_MS = 5_000;

interface SourceValue {
  readonly bytes: Uint8Array;
  readonly version: string;
}

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
 * with jitter, swap the set only when content changed, and tell the app once per changed set.
 * Refresh failures keep the last good files; a failed cycle backs off, capped at the interval.
 * A set already in the volume (the init container's) is taken over: kept if equal, else a rotation.
 */
export class Sidecar {
  readonly metrics = new AgentMetrics();
  #config: AgentConfig;
  readonly #log: Logger;
  readonly #dir: AtomicDir;
  readonly #providers: ProviderSet;
  #notifiers: readonly Notifier[];
  #formats: FormatKit;
  readonly #events: PodEventRecorder | undefined;
  /** Each secret's files as last written, kept when a new value does not fit the format. */
  #rendered = new Map<string, readonly FileEntry[]>();
  /**
   * Secrets whose files are stale because their value (or, for a template, a value it reads) does
   * not fit: rendered again every cycle, and the cycle counts as failed until they fit.
   */
  readonly #misfits = new Set<string>();
  /** Last good value per source (a secret read by several specs is held once). */
  readonly #values = new Map<string, SourceValue>();
  /** What the volume holds now, to tell a real change from a version bump with equal content. */
  #files = new Map<string, FileEntry>();
  /**
   * The volume already held a set when this sidecar started (from the init container, or from this
   * sidecar before a restart): the app may have read it, so the first fill is a rotation if it differs.
   */
  #inherited = false;
  readonly #timers = new Set<NodeJS.Timeout>();
  #generation = 0;
  #ready = false;
  #stopping = false;
  #lastCycleAt = Date.now();
  #applying: Promise<unknown> = Promise.resolve();
  #pending: { versions: Record<string, string>; changed: Set<string>; timer: NodeJS.Timeout } | undefined;
  #notifying: Promise<unknown> = Promise.resolve();
  #server: Server | undefined;

  private constructor(config: AgentConfig, dir: AtomicDir, deps: SidecarDeps) {
    this.#config = config;
    this.#dir = dir;
    this.#log = deps.log;
    this.#notifiers = deps.notifiers;
    this.#formats = deps.formats;
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
    const dir = await AtomicDir.open(config.secretsDir, {
      setName: config.setName,
      requireMemoryFs: config.requireMemoryFs,
    });
    if (dir.leftoversRemoved.length > 0)
      deps.log.info({ removed: dir.leftoversRemoved }, 'removed what an interrupted run left in the volume');
    if (dir.linksRestored.length > 0)
      deps.log.info({ restored: dir.linksRestored }, 'made the links an interrupted run did not make');
    const sidecar = new Sidecar(config, dir, deps);
    const current = await dir.current();
    if (current) {
      sidecar.#files = new Map(current.map((f) => [f.path, f]));
      sidecar.#inherited = true;
    }
    // Ready with a set it found: the app has files to read, so a restart (whose postStart hook waits
    // on /readyz) holds nothing up and a backend outage takes nothing out of service.
    sidecar.#server = await startHealthServer(
      config.sidecar.httpAddr,
      { ready: () => sidecar.#ready || sidecar.#inherited, live: () => sidecar.#live() },
      sidecar.metrics,
    );
    return sidecar;
  }

  get ready(): boolean {
    return this.#ready;
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
      const delay = backoffDelay(attempt, { baseMs: 1000, maxMs: 30_000 });
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
    for (const group of groupByInterval(this.#config.secrets))
      this.#schedule(group, jittered(group.intervalMs), 0, generation);
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
    this.#notifiers = notifiers;
    this.#formats = formats;
    // A secret's spec may have changed (file, format): its old files are no fallback for the new one.
    this.#rendered.clear();
    this.#misfits.clear();
    this.#generation++;
    for (const t of this.#timers) clearTimeout(t);
    this.#timers.clear();
    const keep = new Set(next.secrets.map((s) => sourceKey(s.ref)));
    for (const key of this.#values.keys()) if (!keep.has(key)) this.#values.delete(key);
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
    for (const t of this.#timers) clearTimeout(t);
    this.#timers.clear();
    if (this.#pending) clearTimeout(this.#pending.timer);
    await this.#applying.catch(() => undefined);
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

  #live(): boolean {
    const longest = Math.max(...this.#config.secrets.map((s) => s.refreshIntervalMs), 30_000);
    return Date.now() - this.#lastCycleAt < longest * 1.2 + REFRESH_ROUND_MS * 2;
  }

  #schedule(group: IntervalGroup, delayMs: number, failures: number, generation: number): void {
    const timer = setTimeout(async () => {
      this.#timers.delete(timer);
      if (this.#stopping || generation !== this.#generation) return;
      this.#lastCycleAt = Date.now();
      const round = { deadlineMs: REFRESH_ROUND_MS, full: false, maxAttempts: 1 };
      const { ok, retryAfterMs, failures: failed } = await this.#refresh(group.specs, round);
      if (this.#stopping || generation !== this.#generation) return;
      const nextFailures = ok ? 0 : failures + 1;
      // Once per failing streak, so `kubectl describe pod` shows it without an event every cycle.
      if (this.#events && nextFailures === this.#config.events?.failingAfter)
        this.#events.record(
          'SecretRefreshFailing',
          `refresh failed ${nextFailures} times in a row; keeping the last good files. ${failed
            .map((f) => `${f.file} (${f.id}): ${f.reason}`)
            .join('; ')}`,
        );
      // A failed cycle retries sooner than the interval, but never sooner than the backend asked.
      const backoff = { ...REFRESH_BACKOFF, maxMs: Math.min(REFRESH_BACKOFF.maxMs, group.intervalMs) };
      const next = ok
        ? jittered(group.intervalMs)
        : Math.max(retryAfterMs, Math.min(group.intervalMs, backoffDelay(nextFailures, backoff)));
      this.#schedule(group, next, nextFailures, generation);
    }, delayMs);
    this.#timers.add(timer);
  }

  /**
   * One refresh of `specs`: fetch, and when content changed, render the whole set and swap it.
   * `full` re-renders even when no fetched value changed: the first fill, and after a reconfigure
   * (a secret may have been removed or moved to another file). Unless `fresh`, providers that can
   * peek at versions skip values whose version is unchanged.
   */
  async #refresh(
    specs: readonly SecretSpec[],
    opts: { deadlineMs: number; full: boolean; maxAttempts?: number; fresh?: boolean },
  ): Promise<{ ok: boolean; retryAfterMs: number; failures: FailedSecret[] }> {
    const outcomes = await fetchSecrets(specs, this.#providers, {
      deadlineMs: opts.deadlineMs,
      log: this.#log,
      ...(opts.maxAttempts ? { maxAttempts: opts.maxAttempts } : {}),
      ...(opts.fresh ? {} : { known: this.#values }),
      observe: (provider, ms, results) => this.#observe(provider, ms, results),
    });
    let allOk = true;
    let retryAfterMs = 0;
    const failures: FailedSecret[] = [];
    const fresh = new Map<string, SourceValue>();
    for (const spec of specs) {
      const key = sourceKey(spec.ref);
      const outcome = outcomes.get(key)!;
      if (outcome.ok) {
        fresh.set(key, outcome.value);
      } else {
        allOk = false;
        retryAfterMs = Math.max(retryAfterMs, outcome.error.retryAfterMs ?? 0);
        const failed = describeFailure(spec, outcome);
        failures.push(failed);
        this.#log.warn(
          {
            id: failed.id,
            ref: failed.ref,
            file: failed.file,
            endpoint: failed.endpoint,
            reason: failed.reason,
            detail: failed.detail,
            fix: outcome.error.fix,
          },
          this.#ready ? 'refresh failed; keeping the last good files' : 'secret not delivered',
        );
      }
    }
    // Apply one refresh at a time, so concurrent groups never interleave their swaps.
    const applied = this.#applying.then(() => this.#apply(fresh, opts.full, failures));
    this.#applying = applied.catch(() => undefined);
    const wrote = await applied;
    // Fresh only when fetched and written: a file kept because its value does not fit is stale.
    for (const spec of specs)
      if (fresh.has(sourceKey(spec.ref)) && wrote && !this.#misfits.has(spec.id))
        this.metrics.lastSuccess.set({ file: fileLabel(spec) }, Date.now() / 1000);
    return { ok: allOk && wrote, retryAfterMs, failures };
  }

  /** `failures` gets the secrets whose new value does not fit their format. */
  async #apply(
    fresh: ReadonlyMap<string, SourceValue>,
    full: boolean,
    failures: FailedSecret[] = [],
  ): Promise<boolean> {
    const changedSources = [...fresh].filter(
      ([key, v]) => !equalBytes(this.#values.get(key)?.bytes, v.bytes),
    );
    if (changedSources.length === 0 && !full && this.#misfits.size === 0) return true;
    const candidate = new Map(this.#values);
    for (const [key, v] of fresh) candidate.set(key, v);

    // Every secret must have a value before any is rendered: a template may read any of them.
    if (this.#config.secrets.some((spec) => !candidate.has(sourceKey(spec.ref)))) return false;
    const valueOf = valuesByName(this.#config.secrets, (source) => candidate.get(source)?.bytes);
    const files: FileEntry[] = [];
    const owners: { id: string; path: string; split: boolean }[] = [];
    const rendered = new Map<string, readonly FileEntry[]>();
    for (const spec of this.#config.secrets) {
      const key = sourceKey(spec.ref);
      let entries: readonly FileEntry[];
      try {
        entries = renderFiles(spec, candidate.get(key)!.bytes, this.#formats, valueOf);
        this.#misfits.delete(spec.id);
      } catch (e) {
        if (!(e instanceof SecretFormatError)) throw e;
        this.#misfits.add(spec.id);
        this.#log.error(
          { id: spec.id, ref: spec.ref.text, reason: 'format', detail: e.message, fix: e.fix },
          'new value does not fit the format; keeping the last good one',
        );
        failures.push({
          id: spec.id,
          ref: spec.ref.text,
          file: fileLabel(spec),
          reason: 'format',
          detail: e.message,
          endpoint: undefined,
        });
        this.metrics.failures.inc({ provider: spec.ref.provider, reason: 'format' });
        // The value stays unseen, so the next refresh tries it again; the files stay as they were.
        const previous = this.#values.get(key);
        if (previous) candidate.set(key, previous);
        const kept = this.#rendered.get(spec.id);
        if (!kept) return false;
        entries = kept;
      }
      rendered.set(spec.id, entries);
      files.push(...entries);
      owners.push(...entries.map((f) => ({ id: spec.id, path: f.path, split: spec.format === 'split' })));
    }
    // A split secret's keys are known only now. Before the first set that is a configuration error
    // (exit 2, as in init mode); later, a new key that clashes must not cost the app its files.
    const clash = findFileClash(owners);
    if (clash && !this.#ready) throw new ConfigErrors([clash]);
    if (clash) {
      this.#log.error(
        { field: clash.field, problem: clash.problem, fix: clash.fix },
        'new values make two secrets write the same file; keeping the last good files',
      );
      return false;
    }

    const changedFiles = files.filter((f) => {
      const old = this.#files.get(f.path);
      return !old || old.mode !== f.mode || !equalBytes(old.bytes, f.bytes);
    });
    const removed = [...this.#files.keys()].some((path) => !files.some((f) => f.path === path));
    const changed = changedFiles.length > 0 || removed;
    // What the app may already have read: a set written since this sidecar is ready, or inherited.
    const seen = this.#ready || this.#inherited;
    if (changed || !seen) {
      await this.#dir.write(files);
      this.#files = new Map(files.map((f) => [f.path, f]));
      this.#log.info(
        { files: files.length, changed: changedFiles.map((f) => f.path) },
        seen ? 'rotated' : 'secrets written',
      );
      if (seen && changed) {
        this.metrics.rotations.inc();
        const versions = Object.fromEntries(
          this.#config.secrets.map((s) => [s.id, candidate.get(sourceKey(s.ref))?.version ?? '']),
        );
        this.#queueNotification(
          versions,
          changedFiles.map((f) => f.path),
        );
      }
    }
    for (const [key, v] of candidate) this.#values.set(key, v);
    // Written, or equal to what the volume holds: either way what a bad value later falls back to.
    this.#rendered = rendered;
    if (!this.#ready) {
      // An inherited set was told of by whoever wrote it (the init container); a change to it is a rotation.
      if (!this.#inherited) this.#events?.record('SecretsDelivered', deliveredMessage(files));
      else if (!changed) this.#log.info({ files: files.length }, 'the volume already holds these secrets');
      this.#ready = true;
      this.metrics.ready.set(1);
    }
    return this.#misfits.size === 0;
  }

  #observe(provider: string, ms: number, results: readonly FetchOutcome[]): void {
    this.metrics.latency.observe({ provider }, ms / 1000);
    for (const r of results) {
      this.metrics.fetches.inc({ provider, outcome: r.ok ? 'success' : 'failure' });
      if (!r.ok) this.metrics.failures.inc({ provider, reason: r.error.reason });
    }
  }

  #queueNotification(versions: Record<string, string>, changed: readonly string[]): void {
    if (this.#notifiers.length === 0 && !this.#events) return;
    if (this.#pending) {
      clearTimeout(this.#pending.timer);
      Object.assign(this.#pending.versions, versions);
      for (const f of changed) this.#pending.changed.add(f);
    } else {
      this.#pending = {
        versions: { ...versions },
        changed: new Set(changed),
        timer: undefined as unknown as NodeJS.Timeout,
      };
    }
    this.#pending.timer = setTimeout(() => {
      const pending = this.#pending!;
      this.#pending = undefined;
      const event: RotationEvent = { versions: pending.versions, changedFiles: [...pending.changed].sort() };
      this.#notifying = this.#notifying.then(() => this.#notify(event));
    }, this.#config.sidecar.debounceMs);
  }

  async #notify(event: RotationEvent): Promise<void> {
    this.#events?.record('SecretsRotated', `new content in: ${event.changedFiles.join(', ')}`);
    const signal = AbortSignal.timeout(60_000);
    await Promise.all(
      this.#notifiers.map(async (n) => {
        const outcome = await n
          .notify(event, signal)
          .catch((): { ok: false; reason: string } => ({ ok: false, reason: 'internal' }));
        this.metrics.notifications.inc({ kind: n.kind, outcome: outcome.ok ? 'ok' : outcome.reason });
        if (outcome.ok)
          this.#log.info({ kind: n.kind, changed: event.changedFiles }, 'app notified of rotation');
        else this.#log.warn({ kind: n.kind, reason: outcome.reason }, 'rotation notification failed');
      }),
    );
  }

  /** Resolves when notifications queued so far have been sent (tests, shutdown). */
  async settled(): Promise<void> {
    await this.#applying;
    await this.#notifying;
    await this.#events?.flush();
  }
}

interface IntervalGroup {
  readonly intervalMs: number;
  readonly specs: readonly SecretSpec[];
}

/** Secrets sharing an interval refresh together: one batch call covers up to 20 AWS secrets. */
function groupByInterval(specs: readonly SecretSpec[]): IntervalGroup[] {
  const groups = new Map<number, SecretSpec[]>();
  for (const s of specs) groups.set(s.refreshIntervalMs, [...(groups.get(s.refreshIntervalMs) ?? []), s]);
  return [...groups].map(([intervalMs, group]) => ({ intervalMs, specs: group }));
}

/** A secret's metric label: its file name (never a value), `.` for a secret split at the top level. */
function fileLabel(spec: SecretSpec): string {
  return spec.filename || '.';
}

/** ±10 % so a fleet started together never refreshes in lockstep. */
function jittered(ms: number): number {
  return Math.round(ms * (0.9 + Math.random() * 0.2));
}

function equalBytes(a: Uint8Array | undefined, b: Uint8Array): boolean {
  return a !== undefined && Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(b);
}

export interface RunSidecarOptions {
  readonly log: Logger;
  readonly agentVersion: string;
  /** The process env; the config file's settings are laid over it on every reload. */
  readonly env: Env;
  readonly formats: FormatKit;
}

/**
 * The sidecar process: runs until SIGTERM/SIGINT, then stops cleanly (in-flight swap finished,
 * files intact) and resolves with the exit code. AGENT_CONFIG_FILE is watched: a valid edit applies
 * without a restart; a bad one is logged and the running config kept.
 */
export async function runSidecar(config: AgentConfig, options: RunSidecarOptions): Promise<number> {
  // A long-running process from here on: V8 set for memory, not for peak speed.
  applySidecarV8Flags();
  const { log, env } = options;
  const notifierDeps = {
    log,
    pod: config.pod,
    serviceAccountDir: config.serviceAccountDir,
    kubernetesApiUrl: kubernetesApiUrl(env),
    secretsDir: config.secretsDir,
  };
  // Outcomes go to the sidecar's metrics, which exist only once it does.
  const started: { metrics?: AgentMetrics } = {};
  const events = await openPodEvents(config, {
    log,
    kubernetesApiUrl: notifierDeps.kubernetesApiUrl,
    onOutcome: (reason, outcome) => started.metrics?.events.inc({ reason, outcome }),
  });
  const sidecar = await Sidecar.start(config, {
    log,
    agentVersion: options.agentVersion,
    notifiers: await loadNotifiers(config.sidecar, notifierDeps),
    formats: options.formats,
    ...(events ? { events } : {}),
  });
  started.metrics = sidecar.metrics;
  log.info(
    { addr: `${config.sidecar.httpAddr.host}:${sidecar.httpPort}` },
    'serving /healthz, /readyz, /metrics',
  );

  let watcher: FSWatcher | undefined;
  const configFile = config.sidecar.configFile;
  if (configFile) {
    let lastText = safeRead(configFile);
    // Watch the directory: a ConfigMap update swaps a ..data symlink there and never writes the file itself.
    // chokidar and the YAML parser load only when a config file is used.
    const [{ watch }, { withConfigFile }] = await Promise.all([
      import('chokidar'),
      import('../contract/config-file.ts'),
    ]);
    watcher = watch(dirname(configFile), { ignoreInitial: true, depth: 0 });
    watcher.on('all', async () => {
      const text = safeRead(configFile);
      if (text === lastText) return;
      lastText = text;
      try {
        const next = parseAgentConfig(withConfigFile(env, configFile));
        const missing = checkBackendSettings(next, env);
        if (missing.length > 0) throw new ConfigErrors(missing);
        const notifiers = await loadNotifiers(next.sidecar, notifierDeps);
        const formats = await loadFormats(next.secrets);
        log.info({ file: configFile }, 'configuration file changed; applying');
        void sidecar.reconfigure(next, notifiers, formats);
      } catch (e) {
        if (!(e instanceof ConfigError || e instanceof ConfigErrors)) throw e;
        sidecar.metrics.reloads.inc({ outcome: 'rejected' });
        log.error(
          {
            file: configFile,
            problems: e instanceof ConfigErrors ? e.errors.map((x) => x.message) : [e.message],
          },
          'configuration file rejected; keeping the running configuration',
        );
      }
    });
  }

  let exitWatch: AppExitWatch | undefined;
  let fail: (e: unknown) => void = () => undefined;
  const stopped = new Promise<number>((resolve, reject) => {
    let stopping = false;
    // The first fill failing for good (files that clash, a bug): stop as for SIGTERM, then let the
    // caller report it (exit 2 for a ConfigError) instead of dying of an unhandled rejection.
    fail = (e: unknown) => {
      if (stopping) return;
      stopping = true;
      exitWatch?.stop();
      void (async () => {
        await watcher?.close();
        await sidecar.stop().catch(() => undefined);
        reject(e);
      })();
    };
    const stop = (why: string) => {
      if (stopping) return;
      stopping = true;
      log.info({ why }, 'stopping');
      exitWatch?.stop();
      void (async () => {
        await watcher?.close();
        await sidecar.stop();
        resolve(0);
      })();
    };
    // on, not once: a second signal during the final swap must not take the default action.
    process.on('SIGTERM', () => stop('SIGTERM'));
    process.on('SIGINT', () => stop('SIGINT'));
    const app = config.sidecar.exitWithProcess;
    if (app) exitWatch = watchAppExit(app, log, () => stop(`${app} exited`));
  });
  sidecar.run().catch(fail);
  return stopped;
}

/**
 * The notifiers the settings ask for. Their module (most of it the HTTP client, undici) loads only
 * when at least one is configured, so a sidecar that only keeps files fresh never pays for it.
 */
async function loadNotifiers(settings: SidecarSettings, deps: NotifierDeps): Promise<Notifier[]> {
  if (
    !settings.signal &&
    !settings.http &&
    !settings.command &&
    !settings.restartOnChange &&
    !settings.sentinel
  )
    return [];
  const { createNotifiers } = await import('../notify/create-notifiers.ts');
  return createNotifiers(settings, deps);
}

function safeRead(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
}
