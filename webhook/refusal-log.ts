import type { ConnectionRefusal } from '../agent/serve/connection-guard.ts';
import type { Logger } from '../agent/log.ts';

/** How often at most a line about closed connections is written: a flood writes one a minute. */
export const REFUSAL_LOG_EVERY_MS = 60_000;

/** Addresses named in one line: enough to find the pod, never a flood's worth. */
const MAX_SOURCES = 5;

/**
 * The log of connections the webhook's caps closed: the first at once, then what came since at most
 * once every REFUSAL_LOG_EVERY_MS, counted by reason, with a few of the peers' addresses (which pod to
 * look at). Caps reached (per-source, full) are a warning; connections that sent no request in time
 * alone (a TCP check, a client that gave up) are debug.
 */
export class RefusalLog {
  readonly #log: Logger;
  #counts: Partial<Record<ConnectionRefusal, number>> = {};
  #sources = new Set<string>();
  #timer?: NodeJS.Timeout;

  constructor(log: Logger) {
    this.#log = log;
  }

  note(reason: ConnectionRefusal, source: string): void {
    this.#counts[reason] = (this.#counts[reason] ?? 0) + 1;
    if (this.#sources.size < MAX_SOURCES) this.#sources.add(source);
    if (this.#timer !== undefined) return;
    this.#flush();
  }

  #flush(): void {
    const counts = this.#counts;
    if (Object.keys(counts).length === 0) {
      this.#timer = undefined;
      return;
    }
    const capped = (counts['per-source'] ?? 0) + (counts.full ?? 0) > 0;
    const fields = { closed: counts, sources: [...this.#sources] };
    if (capped)
      this.#log.warn(
        fields,
        'connections closed: the webhook holds as many as it may (in all, or from one address); a pod may be opening connections to it',
      );
    else this.#log.debug(fields, 'connections closed: no request within the deadline');
    this.#counts = {};
    this.#sources = new Set();
    this.#timer = setTimeout(() => this.#flush(), REFUSAL_LOG_EVERY_MS);
    this.#timer.unref();
  }
}
