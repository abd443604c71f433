/**
 * Time as the Vault session sees it. Injected so tests advance a clock instead of waiting, and so
 * the fake Vault and the session agree on when a token or lease ends.
 */
export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  /** Runs `fn` after `ms`; must not keep the process alive on its own. */
  setTimer(fn: () => void, ms: number): { cancel(): void };
}

export const systemClock: Clock = {
  now: () => Date.now(),
  setTimer(fn, ms) {
    const timer = setTimeout(fn, ms);
    // Init mode must be able to exit while a renewal is scheduled.
    timer.unref();
    return { cancel: () => clearTimeout(timer) };
  },
};
