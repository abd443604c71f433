import { MAX_CONNECTIONS } from './connection-limits.ts';

/**
 * How many request and answer bytes the server holds at once, and what it does past that: answer 429
 * with Retry-After, which the API server's client retries after that many seconds (within the
 * webhook's timeoutSeconds), read nothing more of that body and close its connection (server.ts).
 *
 * A request holds its bytes from the first one until its answer is sent: its body's blocks as they
 * fill (each counted whole when made), then its answer in their place until the kernel has taken
 * its last byte. Admission is synchronous, so bodies are parsed one at a time, large ones one a turn
 * of the event loop (server.ts): a body waiting for its turn is still its blocks, counted here, and
 * becomes text and objects only in its turn, in V8's heap, whose cap bounds what a parse builds
 * (webhook/limits.ts, the worst case).
 *
 * Bytes are counted as they arrive, never reserved from a declared Content-Length: a client that
 * declares a large body and sends a byte now and then holds one small block, not the budget. A request's
 * first SLOT_BYTES come from a pool sized for every connection the webhook holds, so no one can use it
 * up: an ordinary pod (2 to 20 KiB) and its answer are always taken, whatever large or slow bodies hold.
 * Bytes past a request's slot share a pool for large bodies, of which one source may hold half.
 */
/** The API server sends at most about 3 MiB (its own request limit); anything larger is not from it. */
export const MAX_BODY_BYTES = 3 * 1024 * 1024;

/**
 * The most pieces a body may arrive in: TLS records, or chunks of its chunked encoding, one each per
 * 'data' event. Each piece is a Buffer of its own (a few hundred bytes of heap and allocator whatever
 * its length), so a body is copied into blocks as it arrives and its pieces are let go at once; past
 * this many, it is refused (413) before more is read. The API server's Go client sends about 100
 * records of a segment each, then records of 16 KiB: a 3 MiB body in about 300.
 */
export const MAX_BODY_PIECES = 8192;

/**
 * The blocks a body is copied into, counted whole from the moment each is made: the first of
 * BODY_BLOCK_MIN_BYTES (or less, what Content-Length says is left), then as large as what arrived so
 * far, up to BODY_BLOCK_MAX_BYTES. A body holds at most one block past what arrived, and a byte sent
 * now and then holds one small block.
 */
export const BODY_BLOCK_MIN_BYTES = 16 * 1024;
export const BODY_BLOCK_MAX_BYTES = 64 * 1024;

/**
 * An answer goes out in pieces of this size (one TLS record's), each written once the kernel has
 * taken the one before: TLS then holds one piece of it, not the whole answer encrypted, and keeps
 * no buffer of the answer's size for the life of the connection. One write of a 630 KB answer left
 * about that much outside V8's heap on each kept-alive connection until it closed (measured: 100
 * connections, 63 MiB; in pieces, none), and the answer stays counted until the kernel took its
 * last piece, when the answer deadline stops too.
 */
export const ANSWER_PIECE_BYTES = 16 * 1024;

/** A request's first bytes, body then answer: an ordinary pod whole, and its patch. */
export const SLOT_BYTES = 32 * 1024;

/** Every connection's slot at once: a pool no set of requests can use up. */
export const MAX_SLOT_BYTES = MAX_CONNECTIONS * SLOT_BYTES;

/** Bytes past their request's slot, all requests together: two of the largest bodies the API server sends. */
export const MAX_LARGE_IN_FLIGHT_BYTES = 2 * MAX_BODY_BYTES;

/** Of those, what requests from one source address may hold: one pod cannot take them all. */
export const MAX_LARGE_PER_SOURCE_BYTES = MAX_LARGE_IN_FLIGHT_BYTES / 2;

/** Seconds the API server is told to wait before it sends a shed request again. */
export const RETRY_AFTER_SECONDS = 1;

/**
 * How long a connection whose body was shed part-way stays open after its 429, unread: long enough for
 * the client to read the answer; then it is reset, which frees what the kernel holds of the rest.
 */
export const SHED_LINGER_MS = 200;

/** The bytes one request holds: its body as it arrives, then its answer until it is sent. */
export interface HeldBytes {
  /** Counts `bytes` more; false, counting nothing, when they do not fit. */
  add(bytes: number): boolean;
  /** Counts `bytes` in place of all counted so far; false, counting nothing, when they do not fit. */
  replace(bytes: number): boolean;
  /** Counts nothing any more (idempotent). */
  release(): void;
}

export class BodyBudget {
  #slots = 0;
  #large = 0;
  readonly #largeBySource = new Map<string, number>();

  /** Bytes in flight, by pool. */
  get inFlight(): { readonly slots: number; readonly large: number } {
    return { slots: this.#slots, large: this.#large };
  }

  /** Starts counting a request from `source` (its peer's address), at 0 bytes. */
  open(source: string): HeldBytes {
    let held = 0;
    let open = true;
    /** Moves this request's count to `total`, or changes nothing and answers false. */
    const set = (total: number): boolean => {
      if (!open) return false;
      const slot = Math.min(total, SLOT_BYTES) - Math.min(held, SLOT_BYTES);
      const large = Math.max(0, total - SLOT_BYTES) - Math.max(0, held - SLOT_BYTES);
      const ofSource = this.#largeBySource.get(source) ?? 0;
      if (slot > 0 && this.#slots + slot > MAX_SLOT_BYTES) return false;
      if (
        large > 0 &&
        (this.#large + large > MAX_LARGE_IN_FLIGHT_BYTES || ofSource + large > MAX_LARGE_PER_SOURCE_BYTES)
      )
        return false;
      this.#slots += slot;
      this.#large += large;
      if (ofSource + large > 0) this.#largeBySource.set(source, ofSource + large);
      else this.#largeBySource.delete(source);
      held = total;
      return true;
    };
    return {
      add: (bytes) => set(held + bytes),
      replace: (bytes) => set(bytes),
      release: () => {
        set(0);
        open = false;
      },
    };
  }
}
