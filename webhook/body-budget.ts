/**
 * How many request bytes the server holds at once, and what it does past that: answer 429 with
 * Retry-After before reading a body, which the API server's client retries after that many seconds
 * (within the webhook's timeoutSeconds). Admission itself is synchronous, so only one request is
 * parsed and rendered at a time; what piles up under load is bodies being received and answers being
 * sent. A body is counted from its first byte until its answer is sent (or the connection closes).
 *
 * Large bodies get a small pool of their own, so a few of them cannot crowd out the ordinary pods,
 * whose bodies are a few KiB.
 */

/** The API server sends at most about 3 MiB (its own request limit); anything larger is not from it. */
export const MAX_BODY_BYTES = 3 * 1024 * 1024;

/** A body larger than this is large: ordinary pods are 2 to 20 KiB, a pod with a long env maybe 100. */
export const LARGE_BODY_BYTES = 128 * 1024;

/** Large bodies in flight together: two of the largest the API server sends. */
export const MAX_LARGE_IN_FLIGHT_BYTES = 2 * MAX_BODY_BYTES;

/** Other bodies in flight together: over a thousand ordinary pods, 128 of the largest small ones. */
export const MAX_SMALL_IN_FLIGHT_BYTES = 16 * 1024 * 1024;

/** Seconds the API server is told to wait before it sends a shed request again. */
export const RETRY_AFTER_SECONDS = 1;

/** A body's bytes, counted until release() (idempotent). */
export interface BodyReservation {
  readonly large: boolean;
  release(): void;
}

export class BodyBudget {
  #small = 0;
  #large = 0;

  /** Bytes of bodies in flight, by pool. */
  get inFlight(): { readonly small: number; readonly large: number } {
    return { small: this.#small, large: this.#large };
  }

  /**
   * Counts a body of `bytes` (its Content-Length; a body without one may be as large as
   * MAX_BODY_BYTES), or undefined when its pool is full.
   */
  reserve(bytes: number): BodyReservation | undefined {
    const large = bytes > LARGE_BODY_BYTES;
    if (
      large
        ? this.#large + bytes > MAX_LARGE_IN_FLIGHT_BYTES
        : this.#small + bytes > MAX_SMALL_IN_FLIGHT_BYTES
    )
      return undefined;
    if (large) this.#large += bytes;
    else this.#small += bytes;
    let held = true;
    return {
      large,
      release: () => {
        if (!held) return;
        held = false;
        if (large) this.#large -= bytes;
        else this.#small -= bytes;
      },
    };
  }
}
