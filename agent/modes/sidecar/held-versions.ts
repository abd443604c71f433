import type { SecretSpec } from '../../contract/agent-config.ts';
import { fileLabel } from '../../fetch/fetch-secrets.ts';
import type { AgentMetrics } from '../../serve/metrics.ts';
import type { SecretValue } from '../../providers/provider.ts';

/** What one secret's files hold now: the version its backend names, never a value nor a digest of one. */
export interface HeldVersion {
  /** The secret's env id (SECRET_0, …): what the pod's annotations map to a reference. */
  readonly secret: string;
  readonly file: string;
  readonly provider: string;
  /** As the backend names it; '' when it names none (file:, Vault KV v1, an exec helper without one). */
  readonly version: string;
  /** When this agent (or an earlier run of the small sidecar) saw the version change, ms since the epoch. */
  readonly changedAt: number;
}

/** At most this many characters of a version reach a label: a backend's ids are far shorter. */
const MAX_VERSION_CHARS = 128;

/**
 * The version each secret's files hold, as the metrics publish it
 * (secret_agent_secret_version_info, secret_agent_secret_changed_timestamp_seconds): one series per
 * secret, replaced when its version changes, so the cardinality is the number of secrets. Known once a
 * set is written or taken over by a fetch; for the small sidecar, carried from run to run.
 */
export class HeldVersions {
  readonly #metrics: AgentMetrics;
  readonly #held = new Map<string, HeldVersion>();

  constructor(metrics: AgentMetrics, carried: readonly HeldVersion[] = []) {
    this.#metrics = metrics;
    for (const h of carried) this.#set(h);
  }

  /** Every secret's, in the order the configuration lists them. */
  list(): HeldVersion[] {
    return [...this.#held.values()];
  }

  /**
   * After a set was written (or found equal to what the volume holds): each secret's version is its
   * source's, and it changed if the version did, or (no version named) if the value did. Returns
   * whether any secret's entry is new or changed.
   */
  record(
    specs: readonly SecretSpec[],
    valueOf: (spec: SecretSpec) => SecretValue | undefined,
    changedContent: (spec: SecretSpec) => boolean,
    now = Date.now(),
  ): boolean {
    let any = false;
    for (const spec of specs) {
      const value = valueOf(spec);
      if (value === undefined) continue;
      const version = (value.backendVersion ?? '').slice(0, MAX_VERSION_CHARS);
      const before = this.#held.get(spec.id);
      const changed =
        before === undefined || before.version !== version || (version === '' && changedContent(spec));
      any ||= changed;
      this.#set({
        secret: spec.id,
        file: fileLabel(spec),
        provider: spec.ref.provider,
        version,
        changedAt: changed ? now : before.changedAt,
      });
    }
    return any;
  }

  /** A reloaded configuration: secrets it no longer has are no longer held. */
  retain(specs: readonly SecretSpec[]): void {
    const ids = new Set(specs.map((s) => s.id));
    for (const h of [...this.#held.values()]) if (!ids.has(h.secret)) this.#remove(h);
  }

  #set(h: HeldVersion): void {
    const before = this.#held.get(h.secret);
    if (before !== undefined) this.#remove(before);
    this.#held.set(h.secret, h);
    this.#metrics.versionInfo.set(
      { secret: h.secret, file: h.file, provider: h.provider, version: h.version },
      1,
    );
    this.#metrics.versionChanged.set({ secret: h.secret, file: h.file }, h.changedAt / 1000);
  }

  #remove(h: HeldVersion): void {
    this.#held.delete(h.secret);
    this.#metrics.versionInfo.remove({
      secret: h.secret,
      file: h.file,
      provider: h.provider,
      version: h.version,
    });
    this.#metrics.versionChanged.remove({ secret: h.secret, file: h.file });
  }
}

/** Versions handed over by an earlier run, as far as they have the shape: a bad entry is dropped. */
export function carriedVersions(saved: unknown): HeldVersion[] {
  if (!Array.isArray(saved)) return [];
  return saved.filter(
    (h): h is HeldVersion =>
      typeof h === 'object' &&
      h !== null &&
      typeof (h as HeldVersion).secret === 'string' &&
      typeof (h as HeldVersion).file === 'string' &&
      typeof (h as HeldVersion).provider === 'string' &&
      typeof (h as HeldVersion).version === 'string' &&
      (h as HeldVersion).version.length <= MAX_VERSION_CHARS &&
      Number.isFinite((h as HeldVersion).changedAt),
  );
}
