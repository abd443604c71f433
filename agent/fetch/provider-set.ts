import type { ProviderName, SecretReference } from '../contract/reference.ts';
import {
  ProviderError,
  type Provider,
  type ProviderFactory,
  type ProviderOptions,
  type ReleaseOutcome,
} from '../providers/provider.ts';
import { PROVIDERS } from '../providers/registry.ts';

/** Providers loaded so far, one per backend, created on first use. */
export class ProviderSet {
  readonly #providers = new Map<ProviderName, Promise<Provider>>();
  readonly #kept = new Set<ProviderName>();
  readonly #options: ProviderOptions;

  constructor(options: ProviderOptions) {
    this.#options = options;
  }

  get(name: ProviderName): Promise<Provider> {
    let provider = this.#providers.get(name);
    if (!provider) {
      // Each registry entry's factory takes its own reference type; the caller routes refs by provider name.
      const load = PROVIDERS[name] as (() => Promise<ProviderFactory<SecretReference>>) | undefined;
      provider = load
        ? load().then((factory) => factory(this.#options))
        : Promise.reject(
            new ProviderError(
              'invalid',
              `the ${name} provider is not part of this build`,
              'use a build that includes it',
              { transient: false },
            ),
          );
      this.#providers.set(name, provider);
    }
    return provider;
  }

  /** Starts background upkeep in every provider loaded so far (idempotent per provider). */
  async keepAlive(refetch: (provider: ProviderName, reason: string) => void): Promise<void> {
    for (const [name, p] of this.#providers) {
      if (this.#kept.has(name)) continue;
      const provider = await p.catch(() => undefined);
      if (!provider?.keepAlive) continue;
      this.#kept.add(name);
      provider.keepAlive((reason) => refetch(name, reason));
    }
  }

  /**
   * The small sidecar's next run: loads each provider an earlier run handed state off for and gives
   * it back (Provider.resume), so a token still valid is used instead of a new login.
   */
  async resume(states: Readonly<Record<string, unknown>>, signal: AbortSignal): Promise<void> {
    await Promise.all(
      Object.entries(states).map(async ([name, state]) => {
        if (!Object.hasOwn(PROVIDERS, name)) return;
        const provider = await this.get(name as ProviderName).catch(() => undefined);
        await provider?.resume?.(state, signal);
      }),
    );
  }

  /** What every provider loaded so far hands to the next run, and the earliest time one needs it. */
  async handOff(): Promise<{ states: Record<string, unknown>; dueAt: number | undefined }> {
    const states: Record<string, unknown> = {};
    let dueAt: number | undefined;
    for (const [name, p] of this.#providers) {
      const provider = await p.catch(() => undefined);
      const handoff = provider?.handOff?.();
      if (!handoff) continue;
      states[name] = handoff.state;
      if (handoff.dueAt !== undefined) dueAt = Math.min(dueAt ?? Infinity, handoff.dueAt);
    }
    return { states, dueAt };
  }

  /** Asks every provider loaded so far to give back what it holds on its backend (a stopping sidecar). */
  async release(signal: AbortSignal): Promise<{ provider: ProviderName; outcome: ReleaseOutcome }[]> {
    const released = await Promise.all(
      [...this.#providers].map(async ([name, p]) => {
        const provider = await p.catch(() => undefined);
        const outcomes = provider?.release ? await provider.release(signal).catch(() => []) : [];
        return outcomes.map((outcome) => ({ provider: name, outcome }));
      }),
    );
    return released.flat();
  }

  /** Closes every provider loaded so far and waits until their clients are gone; idempotent. */
  async close(): Promise<void> {
    const loaded = [...this.#providers.values()];
    this.#providers.clear();
    this.#kept.clear();
    await Promise.all(
      loaded.map(async (p) => {
        const provider = await p.catch(() => undefined);
        await Promise.resolve(provider?.close?.()).catch(() => undefined);
      }),
    );
  }
}
