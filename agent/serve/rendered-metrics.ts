import type { Registry } from 'prom-client';

/**
 * How many times its own rendering time a rendered text is served again: rendering takes at most a
 * tenth of the agent's time, however many ask. Rendering (the process metrics read /proc, the text is
 * tens of KiB) is the dearest thing the port does: 506 connections asking /metrics as fast as
 * answered, each rendered on its own, left 0 to 36 % of the kubelet's probes answered within 1 s
 * (issue 37).
 */
const REUSE_FACTOR = 9;

/**
 * The registry's exposition text for /metrics: one rendering at a time, whoever asks meanwhile waits
 * for it, and its text is served again for REUSE_FACTOR times as long as it took. A scrape every few
 * seconds always gets a fresh one: rendering takes milliseconds.
 */
export class RenderedMetrics {
  readonly #registry: Registry;
  #text: Buffer | undefined;
  /** performance.now() until which #text is served again. */
  #until = -Infinity;
  #rendering: Promise<Buffer> | undefined;

  constructor(registry: Registry) {
    this.#registry = registry;
  }

  get contentType(): string {
    return this.#registry.contentType;
  }

  /** The text, as bytes ready to send. */
  text(): Promise<Buffer> {
    if (this.#text !== undefined && performance.now() < this.#until) return Promise.resolve(this.#text);
    return (this.#rendering ??= this.#render());
  }

  async #render(): Promise<Buffer> {
    const started = performance.now();
    try {
      const text = Buffer.from(await this.#registry.metrics());
      const done = performance.now();
      this.#text = text;
      this.#until = done + REUSE_FACTOR * (done - started);
      return text;
    } finally {
      this.#rendering = undefined;
    }
  }
}
