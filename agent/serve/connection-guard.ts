import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Server, Socket } from 'node:net';

/**
 * What a listening HTTP(S) server holds for connections, whoever opens them (any pod, unless a
 * NetworkPolicy says otherwise): each costs memory, a TLS one tens of KiB, request or not.
 */
export interface ConnectionLimits {
  /** Connections held at once, but for newcomers within their grace (`maxInGrace`). */
  readonly maxConnections: number;
  /**
   * Connections from one source address (a pod, a node) past their grace: its next newcomer closes its
   * oldest such to make room. Never a newcomer within its grace: the node's address, whose kubelet
   * probes, may be shared (hostNetwork pods, traffic SNATed to it).
   */
  readonly maxPerSource: number;
  /** How long a connection may stay open before its first request's headers are complete. */
  readonly firstRequestMs: number;
  /**
   * A connection's first moments, from its accept: within them it is closed to make room only if more
   * than `maxInGrace` newcomers are within theirs, and never before it has been read once. A kubelet
   * probe, a scrape or the API server sends its request at once, so it is read within its grace.
   */
  readonly graceMs: number;
  /**
   * How many newcomers within their grace may be held beyond `maxConnections`: room for those whose
   * request has not been read yet, however many sources keep the port full. Past it, the oldest goes.
   */
  readonly maxInGrace: number;
  /**
   * At a cap, close a connection idle between keep-alive requests to make room rather than keep the
   * newcomer waiting (at the per-source cap that source's longest idle; when full, once no connection
   * read once without a request is left): the API server's pool may hold more idle connections than the
   * per-source cap (one address behind Konnectivity), and its next call must get in. Off by default.
   */
  readonly replaceIdle?: boolean;
  /**
   * A request still arriving this long after it began (pipelined: after its connection was last
   * answered) is slow: at a cap its connection makes room as a silent one does, before any newcomer or
   * idle one. The API server, a probe and a scrape send a request whole; connections dribbling their
   * bodies were never idle nor silent and kept the port full (issue 37).
   */
  readonly slowRequestMs: number;
  /**
   * Places newcomers always have: past maxConnections − newcomerLane connections beyond their first request
   * (idle, with replaceIdle; a request still arriving; an answer unread), the one without progress the
   * longest makes room before any newcomer. A tenant's keep-alive
   * pool looked like the API server's and was kept, while newcomers were closed mid-handshake (issue 37,
   * an eighth review). 0 (the default): no lane.
   */
  readonly newcomerLane?: number;
  /**
   * Requests one connection carries: the answer to the last says `Connection: close`, and a request
   * after it (sent without waiting for that answer: pipelined) closes the connection at once, before
   * the server sees it. Unbounded if not given.
   */
  readonly maxRequests?: number;
}

/** Newcomers one caller has mid-handshake at once (a node's probes, an API server's few): more is a crowd. */
const CROWD = 8;

/** Why the guard closed a connection: the `reason` a caller counts. */
export type ConnectionRefusal = 'per-source' | 'full' | 'no-request';

interface Held {
  readonly socket: Socket;
  readonly key: string;
  readonly from: Source;
  /** performance.now() at accept, and the turn of the event loop it was accepted in. */
  readonly born: number;
  readonly turn: number;
  /** Until its first request's headers are complete: the first to go when the server is full. */
  fresh: boolean;
  /** Requests whose answer is not done yet (with none, it is idle), and requests seen on it. */
  busy: number;
  requests: number;
  /** Its latest request (while not `complete`, still arriving) and its answer (pipelined if before its end). */
  latest?: IncomingMessage;
  answering?: ServerResponse;
  /** The stream answers are written to (a pipelined response has none until the one before it ends). */
  wire?: Socket;
  /** performance.now() when it last began a request with nothing of its own in progress. */
  since: number;
  /**
   * performance.now() when its last answer ended, and whether that answer said `Connection: close`: such
   * a connection is closing already, and closing it again with a reset could cut the answer short.
   */
  idleSince: number;
  closing: boolean;
  timer?: NodeJS.Timeout;
  /** While fresh: its neighbours in its source's list, and in the list of all, oldest first. */
  older?: Held;
  younger?: Held;
  olderOfAll?: Held;
  youngerOfAll?: Held;
}

/** What one source address holds; of those, how many have sent no request yet, and their list's ends. */
interface Source {
  readonly address: string;
  held: number;
  fresh: number;
  oldest?: Held;
  youngest?: Held;
}

/**
 * Caps a server's connections in all and per source address, and closes a connection that sends no
 * complete request in time. When the server is full, a connection that has sent no request makes room:
 * one past its grace, from the source holding the most such, the oldest of those. A newcomer is never
 * the one closed before it could be read: libuv accepts every connection waiting in the kernel's queue
 * before it reads any of them, so room is made only after the accepts of a turn of the event loop (in
 * its check phase), never from that turn's newcomers, and a newcomer within its grace goes only when
 * more than `maxInGrace` are (#oldestNewcomer). A kubelet probe, whose request follows its connect at
 * once, is read and answered before it could be closed, however many sources keep the port full.
 *
 * Its work for a newcomer is bounded by the number of sources (but for an idle or stalled one): the
 * agent's port runs it in V8's interpreter, under floods of thousands of connections a second.
 * Connections without a request are kept in age order, each source's and all together. Each is watched
 * from TCP accept ('connection'), before any TLS handshake, and told apart by its peer's address and
 * port, which a TLS socket shares with the TCP socket under it.
 */
export class ConnectionGuard {
  readonly #limits: ConnectionLimits;
  readonly #onRefuse: (reason: ConnectionRefusal, source: string) => void;
  /** By `address port`, oldest first (a Map keeps insertion order). */
  readonly #held = new Map<string, Held>();
  readonly #sources = new Map<string, Source>();
  /** Sources holding more than their share. */
  readonly #overShare = new Set<Source>();
  /** All connections without a request, oldest first, and how many. */
  #oldestFresh: Held | undefined;
  #freshCount = 0;
  #youngestFresh: Held | undefined;
  /** The turn of the event loop whose newcomers are being accepted (not read yet); -1 between turns. */
  #openTurn = -1;
  #turns = 0;
  /** When the first newcomer's grace ends, while a cap is passed. */
  #graceTimer: NodeJS.Timeout | undefined;

  /** `onRefuse` gets the reason and the peer's address of each connection closed. */
  constructor(
    limits: ConnectionLimits,
    onRefuse: (reason: ConnectionRefusal, source: string) => void = () => {},
  ) {
    this.#limits = limits;
    this.#onRefuse = onRefuse;
  }

  /** Connections held now. */
  get size(): number {
    return this.#held.size;
  }

  /** Closes every connection it holds, uncounted: the server is being stopped. */
  closeAll(): void {
    for (const held of this.#held.values()) {
      held.socket.destroy();
      this.#release(held);
    }
  }

  /**
   * Watches `server`'s connections, and sees each request before the `request` listeners `server`
   * has now (attach it after them): one it refuses reaches none of them, and costs nothing.
   */
  attach(server: Server): this {
    server.on('connection', (socket: Socket) => this.#accept(socket));
    const listeners = server.listeners('request') as ((req: IncomingMessage, res: ServerResponse) => void)[];
    server.removeAllListeners('request');
    server.on('request', (req: IncomingMessage, res: ServerResponse) => {
      if (this.#admit(req, res)) for (const listener of listeners) listener.call(server, req, res);
    });
    server.once('close', () => clearTimeout(this.#graceTimer));
    return this;
  }

  #accept(socket: Socket): void {
    const address = socket.remoteAddress;
    // No peer address: the peer reset it before it was accepted. It is gone; holding it under a
    // placeholder made all of them one source, refused as such, whose count leaked when they collided.
    if (address === undefined) return void socket.destroy();
    if (this.#openTurn < 0) {
      this.#openTurn = this.#turns++;
      // Check phase: after this turn's accepts, before the next turn's reads.
      setImmediate(() => this.#endTurn());
    }
    let from = this.#sources.get(address);
    if (from === undefined) this.#sources.set(address, (from = { address, held: 0, fresh: 0 }));
    const held: Held = {
      socket,
      key: `${address} ${socket.remotePort}`,
      from,
      born: performance.now(),
      turn: this.#openTurn,
      fresh: true,
      busy: 0,
      requests: 0,
      since: 0,
      idleSince: 0,
      closing: false,
    };
    held.timer = setTimeout(() => {
      if (held.fresh) this.#close(held, 'no-request');
    }, this.#limits.firstRequestMs);
    held.timer.unref();
    this.#held.set(held.key, held);
    this.#link(held);
    if (++from.held > this.#limits.maxPerSource) this.#overShare.add(from);
    socket.once('close', () => this.#release(held));
  }

  /** Whether the server may see `req`: not past its connection's last request, nor on a closed one. */
  #admit(req: IncomingMessage, res: ServerResponse): boolean {
    const socket = req.socket;
    // Node's parser dispatches every request in what it read at once, even after the connection was
    // closed by an earlier one: those are gone already.
    if (socket.destroyed) return false;
    const held = this.#held.get(`${socket.remoteAddress ?? 'unknown'} ${socket.remotePort}`);
    if (held === undefined) return true;
    const most = this.#limits.maxRequests ?? Infinity;
    // Before the previous answer was ended: pipelined. Not 'close' of the previous response, which a
    // large answer's last write completion can follow after the client read it and sent its next.
    if (held.requests >= most || (held.answering !== undefined && !held.answering.writableEnded)) {
      // Pipelined, before the answer to the one before it or past its last: a thousand GET /metrics
      // in one write rendered a thousand answers at once and ended the agent's heap, and 64 kept-alive
      // connections of 400 each ended the webhook's (issue 37). No prober, scraper nor API server
      // sends a request before the answer to the one before it.
      socket.destroy();
      held.socket.destroy();
      this.#release(held);
      return false;
    }
    if (++held.requests >= most) res.shouldKeepAlive = false;
    if (held.busy === 0 && held.latest?.complete !== false) held.since = performance.now();
    held.latest = req;
    held.answering = res;
    held.wire = res.socket ?? held.wire;
    held.busy++;
    // 'close' comes once per response, whether it was sent in full or cut off.
    res.once('close', () => {
      held.busy--;
      held.idleSince = performance.now();
      held.closing = !res.shouldKeepAlive;
    });
    if (held.fresh) {
      this.#unlink(held);
      clearTimeout(held.timer);
    }
    return true;
  }

  #endTurn(): void {
    this.#makeRoom();
    this.#openTurn = -1;
    // Newcomers this turn that a cap is still passed for are read in the next turn, then may go.
    if (this.#passed()) setImmediate(() => this.#makeRoom());
  }

  /** A cap is passed: more held than maxConnections, or a source past its share. */
  #passed(): boolean {
    return this.#held.size > this.#limits.maxConnections || this.#overShare.size > 0;
  }

  /**
   * Closes what is past the caps, never a newcomer not read yet: this turn's, in its check phase; from
   * a timer, which runs before the turn's poll phase, the latest turn's too.
   */
  #makeRoom(fromTimer = false): void {
    if (!this.#passed()) return;
    const now = performance.now();
    const { maxConnections, maxInGrace, maxPerSource, graceMs } = this.#limits;
    const latest = this.#turns - 1;
    const readOnce = fromTimer ? (h: Held) => h.turn < latest : (h: Held) => h.turn !== this.#openTurn;
    const waiting = (h: Held) => now - h.born >= graceMs && readOnce(h);
    const slow = (h: Held) => now - h.since >= this.#limits.slowRequestMs;
    // A source past its share makes room from its own, every connection counted: the oldest past its
    // grace without a request, else (replaceIdle) the oldest idle between requests, else the slowest
    // request still arriving. Never one whose requests have all arrived, being answered.
    for (const from of this.#overShare) {
      while (from.held > maxPerSource) {
        const own =
          (from.oldest !== undefined && waiting(from.oldest) ? from.oldest : this.#longestIdle(from)) ??
          this.#slowest(slow, from);
        if (own === undefined) break;
        this.#close(own, 'per-source');
      }
    }
    // The oldest of all is past its grace if any is.
    while (this.#held.size > maxConnections && this.#oldestFresh !== undefined && waiting(this.#oldestFresh))
      this.#evict(this.#fromMostHeld(waiting)!);
    // Then one whose request is still arriving, slowly: from the address holding the most connections,
    // the slowest of its own.
    while (this.#held.size > maxConnections) {
      const victim = this.#slowest(slow);
      if (victim === undefined) break;
      this.#evict(victim);
    }
    // Within their grace, more of them than the port keeps. Connections past their first request in the
    // newcomers' lane first (newcomerLane); then the oldest read once already, whatever its source; only
    // then the longest idle between requests.
    const established = maxConnections - (this.#limits.newcomerLane ?? 0);
    while (this.#held.size > maxConnections + maxInGrace) {
      const victim =
        (this.#held.size - this.#freshCount > established ? this.#establishedVictim(now) : undefined) ??
        this.#oldestNewcomer(readOnce) ??
        this.#longestIdle();
      if (victim === undefined) break;
      this.#evict(victim);
    }
    this.#whenGraceEnds(now);
  }

  /** Past a cap with newcomers within their grace: room is made again when the first one's ends. */
  #whenGraceEnds(now: number): void {
    clearTimeout(this.#graceTimer);
    this.#graceTimer = undefined;
    if (!this.#passed()) return;
    let firstBorn = Infinity;
    const young = (h: Held | undefined) => {
      if (h !== undefined && now - h.born < this.#limits.graceMs) firstBorn = Math.min(firstBorn, h.born);
    };
    if (this.#held.size > this.#limits.maxConnections) {
      // Those past their grace went first: the oldest left, if any, is within its grace.
      let h = this.#oldestFresh;
      while (h !== undefined && now - h.born >= this.#limits.graceMs) h = h.youngerOfAll;
      young(h);
    }
    for (const from of this.#overShare) young(from.oldest);
    if (firstBorn === Infinity) return;
    const wait = Math.max(1, firstBorn + this.#limits.graceMs - now);
    this.#graceTimer = setTimeout(() => this.#makeRoom(true), wait).unref();
  }

  /**
   * The oldest connection without a request, if it `may` go, from the source holding the most such;
   * between sources holding as many, the one whose oldest is oldest. A source's connections are in age
   * order, so only its oldest is looked at: the cost is the number of sources, not of connections.
   */
  #fromMostHeld(may: (h: Held) => boolean): Held | undefined {
    let best: Held | undefined;
    for (const from of this.#sources.values()) {
      const oldest = from.oldest;
      if (oldest === undefined || !may(oldest)) continue;
      if (
        best === undefined ||
        from.fresh > best.from.fresh ||
        (from.fresh === best.from.fresh && oldest.born < best.born)
      )
        best = oldest;
    }
    return best;
  }

  /**
   * The connection whose latest request is still arriving, if it `may` go, the one that began it
   * longest ago: of `from` if given, else of the address holding the most connections. A pass over
   * all it holds, only when a cap is passed and no silent connection past its grace is left.
   */
  #slowest(may: (h: Held) => boolean, from?: Source): Held | undefined {
    let best: Held | undefined;
    for (const h of this.#held.values()) {
      if (h.latest === undefined || h.latest.complete || (from !== undefined && h.from !== from) || !may(h))
        continue;
      if (
        best === undefined ||
        h.from.held > best.from.held ||
        (h.from.held === best.from.held && h.since < best.since)
      )
        best = h;
    }
    return best;
  }

  /**
   * Of a source holding more than CROWD without a request, the most, its oldest; else the oldest of
   * all. By the most alone, a node's two probes at once went before a tenant's one each from many
   * addresses (the same CI run); by age alone, one address closing and reopening its silent newcomers
   * kept them all younger than a probe's TLS handshake on a loaded machine (the run after).
   */
  #oldestNewcomer(may: (h: Held) => boolean): Held | undefined {
    let crowd: Source | undefined;
    for (const from of this.#sources.values())
      if (from.fresh > CROWD && from.fresh > (crowd?.fresh ?? 0) && may(from.oldest!)) crowd = from;
    let h = crowd?.oldest ?? this.#oldestFresh;
    while (h !== undefined && !may(h)) h = h.youngerOfAll;
    return h;
  }

  /**
   * Past their first request and not being answered: the one without progress the longest, whatever
   * its source (by the address holding the most, the API server's few went before a tenant's one each
   * from many: the tenth review's CI run). A pass over all it holds, only while such are in the lane.
   */
  #establishedVictim(now: number): Held | undefined {
    let best: Held | undefined;
    let stalled = -1;
    for (const h of this.#held.values()) {
      const since = this.#stalledSince(h);
      if (since !== undefined && now - since > stalled) [best, stalled] = [h, now - since];
    }
    return best;
  }

  /**
   * Since when `h` has made no progress, if it may make room for a newcomer: idle (replaceIdle), or its
   * request still arriving, or its answer not taken, however briefly. A threshold (250 ms) was a state
   * its client resets with one round trip: 256 requests each finished and begun again every 220 ms held
   * the lane, and newcomers went instead (the eleventh review: 51 % of calls and probes). Never one
   * whose whole request the server is answering, nor one closing after its answer (a probe's).
   */
  #stalledSince(h: Held): number | undefined {
    if (h.fresh || h.closing) return undefined;
    if (h.busy === 0) return this.#limits.replaceIdle === true ? h.idleSince : undefined;
    // The connection's stream, not its latest answer's: a request pipelined behind an unread answer has
    // no socket of its own yet, and hid the one before it (a tenth review).
    const unread = (h.wire?.writableLength ?? 0) > 0;
    return h.latest?.complete === false || unread ? h.since : undefined;
  }

  /** Idle between keep-alive requests: not busy, and not closing after an answer that said `Connection: close`. */
  #idle(h: Held): boolean {
    return !h.fresh && h.busy === 0 && !h.closing;
  }

  /**
   * With replaceIdle, the longest idle between requests (of `from`, if given): a pool reuses its latest
   * idle connection first (Go's, Node's), so the longest idle is the least likely to be written to.
   */
  #longestIdle(from?: Source): Held | undefined {
    let best: Held | undefined;
    if (this.#limits.replaceIdle === true)
      for (const h of this.#held.values())
        if (this.#idle(h) && (from ?? h.from) === h.from && !(best && best.idleSince <= h.idleSince))
          best = h;
    return best;
  }

  /** Closes `held` to make room: per-source while its address holds more than its share, else full. */
  #evict(held: Held): void {
    this.#close(held, held.from.held > this.#limits.maxPerSource ? 'per-source' : 'full');
  }

  #close(held: Held, reason: ConnectionRefusal): void {
    this.#onRefuse(reason, held.from.address);
    // No goodbye: a TLS alert or HTTP answer would cost what the cap saves.
    held.socket.destroy();
    this.#release(held);
  }

  /** Idempotent: a connection closed to make room is released at once, its 'close' comes later. */
  #release(held: Held): void {
    if (this.#held.get(held.key) !== held) return;
    clearTimeout(held.timer);
    this.#held.delete(held.key);
    this.#unlink(held);
    const from = held.from;
    if (--from.held <= this.#limits.maxPerSource) this.#overShare.delete(from);
    if (from.held === 0) this.#sources.delete(from.address);
  }

  /** A newcomer joins the youngest end of its source's list and of the list of all. */
  #link(held: Held): void {
    const from = held.from;
    held.older = from.youngest;
    if (from.youngest === undefined) from.oldest = held;
    else from.youngest.younger = held;
    from.youngest = held;
    from.fresh++;
    this.#freshCount++;
    held.olderOfAll = this.#youngestFresh;
    if (this.#youngestFresh === undefined) this.#oldestFresh = held;
    else this.#youngestFresh.youngerOfAll = held;
    this.#youngestFresh = held;
  }

  /** It has sent a request, or is gone: out of both lists. */
  #unlink(held: Held): void {
    if (!held.fresh) return;
    held.fresh = false;
    const from = held.from;
    from.fresh--;
    this.#freshCount--;
    if (held.older === undefined) from.oldest = held.younger;
    else held.older.younger = held.younger;
    if (held.younger === undefined) from.youngest = held.older;
    else held.younger.older = held.older;
    if (held.olderOfAll === undefined) this.#oldestFresh = held.youngerOfAll;
    else held.olderOfAll.youngerOfAll = held.youngerOfAll;
    if (held.youngerOfAll === undefined) this.#youngestFresh = held.olderOfAll;
    else held.youngerOfAll.olderOfAll = held.olderOfAll;
    held.older = held.younger = held.olderOfAll = held.youngerOfAll = undefined;
  }
}
