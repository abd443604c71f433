import type { Logger } from '../../log.ts';
import type { Notifier, RotationEvent } from '../../notify/notifier.ts';
import type { PodEventRecorder } from '../../notify/pod-events.ts';
import type { AgentMetrics } from '../../serve/metrics.ts';

/** How long one announcement may take, every notifier together. */
const ANNOUNCE_TIMEOUT_MS = 60_000;

/**
 * Tells the app about rotations: the rotations landing within `debounceMs` of each other are told
 * once, through every notifier and the SecretsRotated event, one announcement after the other. Each
 * outcome is logged and counted; a failed notifier never fails the sidecar.
 */
export class RotationAnnouncer {
  readonly #log: Logger;
  readonly #metrics: AgentMetrics;
  readonly #events: PodEventRecorder | undefined;
  #notifiers: readonly Notifier[];
  #debounceMs: number;
  #pending:
    | { versions: Record<string, string>; unnamed: Set<string>; changed: Set<string>; timer: NodeJS.Timeout }
    | undefined;
  #announcing: Promise<unknown> = Promise.resolve();

  constructor(
    deps: { readonly log: Logger; readonly metrics: AgentMetrics; readonly events?: PodEventRecorder },
    notifiers: readonly Notifier[],
    debounceMs: number,
  ) {
    this.#log = deps.log;
    this.#metrics = deps.metrics;
    this.#events = deps.events;
    this.#notifiers = notifiers;
    this.#debounceMs = debounceMs;
  }

  /** A reloaded configuration's notifiers and debounce, for rotations from now on. */
  configure(notifiers: readonly Notifier[], debounceMs: number): void {
    this.#notifiers = notifiers;
    this.#debounceMs = debounceMs;
  }

  /**
   * A swap changed `changed` (file paths), the secrets now being at `versions` (as their backends name
   * them), but for `unnamed`, whose backends name none.
   */
  queue(versions: Record<string, string>, unnamed: readonly string[], changed: readonly string[]): void {
    if (this.#notifiers.length === 0 && !this.#events) return;
    if (this.#pending) {
      clearTimeout(this.#pending.timer);
      // Each swap names the whole set's versions: the latest is what the app now reads.
      this.#pending.versions = { ...versions };
      this.#pending.unnamed = new Set(unnamed);
      for (const f of changed) this.#pending.changed.add(f);
    } else {
      this.#pending = {
        versions: { ...versions },
        unnamed: new Set(unnamed),
        changed: new Set(changed),
        timer: undefined as unknown as NodeJS.Timeout,
      };
    }
    this.#pending.timer = setTimeout(() => {
      const pending = this.#pending!;
      this.#pending = undefined;
      const event = eventOf(pending);
      this.#announcing = this.#announcing.then(() => this.#announce(event));
    }, this.#debounceMs);
  }

  /**
   * Announces a rotation still waiting out its debounce now, and resolves once every announcement
   * has ended: a run of the small sidecar, about to exit, made its one swap already.
   */
  async flush(): Promise<void> {
    const pending = this.#pending;
    if (pending) {
      clearTimeout(pending.timer);
      this.#pending = undefined;
      const event = eventOf(pending);
      this.#announcing = this.#announcing.then(() => this.#announce(event));
    }
    await this.#announcing;
  }

  /** Drops a rotation still waiting out its debounce (the sidecar is stopping). */
  cancel(): void {
    if (this.#pending) clearTimeout(this.#pending.timer);
  }

  async #announce(event: RotationEvent): Promise<void> {
    this.#events?.record('SecretsRotated', `new content in: ${event.changedFiles.join(', ')}`);
    const signal = AbortSignal.timeout(ANNOUNCE_TIMEOUT_MS);
    await Promise.all(
      this.#notifiers.map(async (n) => {
        const outcome = await n
          .notify(event, signal)
          .catch((): { ok: false; reason: string } => ({ ok: false, reason: 'internal' }));
        this.#metrics.notifications.inc({ kind: n.kind, outcome: outcome.ok ? 'ok' : outcome.reason });
        if (outcome.ok)
          this.#log.info({ kind: n.kind, changed: event.changedFiles }, 'app notified of rotation');
        else this.#log.warn({ kind: n.kind, reason: outcome.reason }, 'rotation notification failed');
      }),
    );
  }
}

function eventOf(pending: {
  readonly versions: Record<string, string>;
  readonly unnamed: ReadonlySet<string>;
  readonly changed: ReadonlySet<string>;
}): RotationEvent {
  return {
    versions: pending.versions,
    unnamed: [...pending.unnamed].sort(),
    changedFiles: [...pending.changed].sort(),
  };
}
