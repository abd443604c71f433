import { findFileClash } from '../../config/file-clash.ts';
import type { SecretSpec } from '../../contract/agent-config.ts';
import { ConfigErrors } from '../../contract/errors.ts';
import { sourceKey } from '../../contract/reference.ts';
import { fileLabel, type FailedSecret } from '../../fetch/fetch-secrets.ts';
import {
  renderFiles,
  SecretFormatError,
  valuesByName,
  type FileEntry,
  type FormatKit,
} from '../../format/render-files.ts';
import type { Logger } from '../../log.ts';
import { deliveredMessage } from '../../notify/open-pod-events.ts';
import type { PodEventRecorder } from '../../notify/pod-events.ts';
import type { AgentMetrics } from '../../serve/metrics.ts';
import type { SecretValue } from '../../providers/provider.ts';
import type { AtomicDir } from '../../write/atomic-dir.ts';
import { HeldVersions, type HeldVersion } from './held-versions.ts';
import type { RotationAnnouncer } from './rotation-announcer.ts';

/** A source's value as its provider returned it: bytes, the version compared, the version published. */
export type SourceValue = SecretValue;

export interface SecretSetDeps {
  readonly log: Logger;
  readonly metrics: AgentMetrics;
  /** Told of every swap that changed what the app may already have read. */
  readonly announcer: RotationAnnouncer;
  /** Kubernetes Events on the pod, when KUBERNETES_EVENTS is on. */
  readonly events?: PodEventRecorder;
  /** The versions an earlier run of the small sidecar saw the files hold. */
  readonly carriedVersions?: readonly HeldVersion[];
}

/**
 * The set of files the sidecar keeps in the volume, and what they are made of: the last good value of
 * each source and each secret's files as last written. Fresh values are applied as one swap of the
 * whole set, only when the content changed; a value that does not fit its format keeps that secret's
 * last good files. A set already in the volume (the init container's) is taken over: kept if equal,
 * else replaced as a rotation.
 */
export class SecretSet {
  readonly #dir: AtomicDir;
  readonly #log: Logger;
  readonly #metrics: AgentMetrics;
  readonly #announcer: RotationAnnouncer;
  readonly #events: PodEventRecorder | undefined;
  #secrets: readonly SecretSpec[];
  #formats: FormatKit;
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
  /** A whole set has been written (or found in the volume as it would be written). */
  #ready = false;
  #applying: Promise<unknown> = Promise.resolve();
  readonly #versions: HeldVersions;

  private constructor(
    dir: AtomicDir,
    secrets: readonly SecretSpec[],
    formats: FormatKit,
    deps: SecretSetDeps,
  ) {
    this.#dir = dir;
    this.#secrets = secrets;
    this.#formats = formats;
    this.#log = deps.log;
    this.#metrics = deps.metrics;
    this.#announcer = deps.announcer;
    this.#events = deps.events;
    this.#versions = new HeldVersions(deps.metrics, deps.carriedVersions);
    this.#versions.retain(secrets);
  }

  /** The set of `secrets` in `dir`, taking over the files a previous run left there. */
  static async open(
    dir: AtomicDir,
    secrets: readonly SecretSpec[],
    formats: FormatKit,
    deps: SecretSetDeps,
  ): Promise<SecretSet> {
    const set = new SecretSet(dir, secrets, formats, deps);
    const current = await dir.current();
    if (current) {
      set.#files = new Map(current.map((f) => [f.path, f]));
      set.#inherited = true;
      deps.metrics.ready.set(1);
      // Its values were fetched when it was swapped in: a backend down since the start is then still
      // seen by the time since the last success, as if this process had fetched them itself.
      const writtenAt = await dir.writtenAt();
      if (writtenAt !== undefined)
        for (const spec of secrets) deps.metrics.lastSuccess.set({ file: fileLabel(spec) }, writtenAt / 1000);
    }
    return set;
  }

  /** A whole set has been written, or found in the volume as it would be written. */
  get ready(): boolean {
    return this.#ready;
  }

  /** The volume held a set when the sidecar started: the app has files to read. */
  get inherited(): boolean {
    return this.#inherited;
  }

  /**
   * The app has a whole set to read, written by this process or found in the volume: what /readyz
   * answers and secret_agent_ready says, so that the two never disagree during an outage.
   */
  get readable(): boolean {
    return this.#ready || this.#inherited;
  }

  /** The last good value of each source: a provider that can peek at versions skips unchanged ones. */
  get values(): ReadonlyMap<string, SourceValue> {
    return this.#values;
  }

  /** What each secret's files hold, as its backend names the version: for the metrics and the next run. */
  get versions(): readonly HeldVersion[] {
    return this.#versions.list();
  }

  /** Whether secret `id`'s files are stale because its value does not fit its format. */
  isMisfit(id: string): boolean {
    return this.#misfits.has(id);
  }

  /**
   * A reloaded configuration's secrets and formats. A secret's spec may have changed (file, format):
   * its old files are no fallback for the new one, and values no secret reads any more are dropped.
   */
  configure(secrets: readonly SecretSpec[], formats: FormatKit): void {
    this.#secrets = secrets;
    this.#formats = formats;
    this.#rendered.clear();
    this.#misfits.clear();
    const keep = new Set(secrets.map((s) => sourceKey(s.ref)));
    for (const key of this.#values.keys()) if (!keep.has(key)) this.#values.delete(key);
    this.#versions.retain(secrets);
  }

  /**
   * Applies `fresh` values (by source key): renders the whole set and swaps it when content changed.
   * `full` renders even when no value changed (the first fill, a reloaded configuration). Resolves
   * with whether every secret's files are current; `failures` gets the secrets whose new value does
   * not fit their format. One apply at a time, so concurrent refreshes never interleave their swaps.
   */
  apply(fresh: ReadonlyMap<string, SourceValue>, full: boolean, failures: FailedSecret[]): Promise<boolean> {
    const applied = this.#applying.then(() => this.#apply(fresh, full, failures));
    this.#applying = applied.catch(() => undefined);
    return applied;
  }

  /** Resolves once the apply in flight, if any, has ended. */
  async idle(): Promise<void> {
    await this.#applying.catch(() => undefined);
  }

  async #apply(
    fresh: ReadonlyMap<string, SourceValue>,
    full: boolean,
    failures: FailedSecret[],
  ): Promise<boolean> {
    const changedSources = [...fresh].filter(
      ([key, v]) => !equalBytes(this.#values.get(key)?.bytes, v.bytes),
    );
    if (changedSources.length === 0 && !full && this.#misfits.size === 0) return true;
    const candidate = new Map(this.#values);
    for (const [key, v] of fresh) candidate.set(key, v);

    // Every secret must have a value before any is rendered: a template may read any of them.
    if (this.#secrets.some((spec) => !candidate.has(sourceKey(spec.ref)))) return false;
    const valueOf = valuesByName(this.#secrets, (source) => candidate.get(source)?.bytes);
    const files: FileEntry[] = [];
    const owners: { id: string; path: string; split: boolean }[] = [];
    const rendered = new Map<string, readonly FileEntry[]>();
    for (const spec of this.#secrets) {
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
        this.#metrics.failures.inc({ provider: spec.ref.provider, reason: 'format' });
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
        this.#metrics.rotations.inc();
        // Published versions only: a source whose backend names none is listed, never hashed.
        const versions: Record<string, string> = {};
        const unnamed: string[] = [];
        for (const s of this.#secrets) {
          const named = candidate.get(sourceKey(s.ref))?.backendVersion;
          if (named === undefined) unnamed.push(s.id);
          else versions[s.id] = named;
        }
        this.#announcer.queue(
          versions,
          unnamed,
          changedFiles.map((f) => f.path),
        );
      }
    }
    for (const [key, v] of candidate) this.#values.set(key, v);
    // The files hold these now (a misfit's, its last good value's).
    const changedKeys = new Set(changedSources.map(([key]) => key));
    const moved = this.#versions.record(
      this.#secrets,
      (spec) => candidate.get(sourceKey(spec.ref)),
      (spec) => changedKeys.has(sourceKey(spec.ref)) && !this.#misfits.has(spec.id),
    );
    // What `kubectl logs` shows whoever waits for a rotation to finish: versions, never a value.
    if (moved) this.#log.info({ versions: this.#versions.list() }, 'holding versions');
    // Written, or equal to what the volume holds: either way what a bad value later falls back to.
    this.#rendered = rendered;
    if (!this.#ready) {
      // An inherited set was told of by whoever wrote it (the init container); a change to it is a rotation.
      if (!this.#inherited) this.#events?.record('SecretsDelivered', deliveredMessage(files));
      else if (!changed) this.#log.info({ files: files.length }, 'the volume already holds these secrets');
      this.#ready = true;
      this.#metrics.ready.set(1);
    }
    return this.#misfits.size === 0;
  }
}

function equalBytes(a: Uint8Array | undefined, b: Uint8Array): boolean {
  return a !== undefined && Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(b);
}
