import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Server, Socket } from 'node:net';

/**
 * What a listening HTTP(S) server holds for connections, whoever opens them: any pod can reach the
 * webhook's port and every agent's port unless a NetworkPolicy says otherwise, and each open
 * connection costs memory (a TLS one tens of KiB) whether or not it ever sends a request.
 */
export interface ConnectionLimits {
  /** Connections held at once. */
  readonly maxConnections: number;
  /** Connections held at once from one source address (a pod, a node): the others keep the rest. */
  readonly maxPerSource: number;
  /** How long a connection may stay open before its first request's headers are complete. */
  readonly firstRequestMs: number;
  /**
   * At a cap, close a connection idle between keep-alive requests to make room rather than refuse the
   * newcomer: at the per-source cap that source's oldest such, when full (and none has sent no request
   * yet) the oldest such of any source. For a port the API server calls: its keep-alive pool may hold
   * more idle connections than the per-source cap (all of it from one address behind Konnectivity),
   * and its next call must get in. A source's connections that never sent a request still block its
   * own newcomers: refused at accept, before a TLS handshake is spent on them. Off by default.
   */
  readonly replaceIdle?: boolean;
}

/** Why the guard closed a connection: the `reason` a caller counts. */
export type ConnectionRefusal = 'per-source' | 'full' | 'no-request';

interface Held {
  readonly socket: Socket;
  readonly source: string;
  /** Until its first request's headers are complete: the first to go when the server is full. */
  fresh: boolean;
  /** Requests whose answer is not done yet: with none, the connection is idle. */
  busy: number;
  timer?: NodeJS.Timeout;
}

/**
 * Caps a server's connections in all and per source address, and closes a connection that sends no
 * complete request in time. When the server is full, the oldest connection that has not sent a
 * request yet makes room for the new one: idle openers cannot keep out a prober or the API server,
 * whose connections send their request at once. After a connection's first request, the server's own
 * keepAliveTimeout and headersTimeout bound it.
 *
 * Connections are watched at TCP accept ('connection'), before any TLS handshake, and told apart by
 * their peer's address and port, which a TLS socket shares with the TCP socket under it.
 */
export class ConnectionGuard {
  readonly #limits: ConnectionLimits;
  readonly #onRefuse: (reason: ConnectionRefusal, source: string) => void;
  /** By `address port`, oldest first (a Map keeps insertion order). */
  readonly #held = new Map<string, Held>();
  readonly #perSource = new Map<string, number>();

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

  /** Watches `server`'s connections; `request` events mark a connection as having sent one. */
  attach(server: Server): this {
    server.on('connection', (socket: Socket) => this.#accept(socket));
    server.on('request', (req: IncomingMessage, res: ServerResponse) => this.#requested(req.socket, res));
    return this;
  }

  #accept(socket: Socket): void {
    const source = socket.remoteAddress;
    // No peer address: the peer reset it before it was accepted. It is gone; holding it under a
    // placeholder made all of them one source, refused as such, whose count leaked when they collided.
    if (source === undefined) return void socket.destroy();
    const key = `${source} ${socket.remotePort}`;
    if ((this.#perSource.get(source) ?? 0) >= this.#limits.maxPerSource) {
      const own = this.#limits.replaceIdle ? this.#oldestIdle(source) : undefined;
      if (own === undefined) return this.#refuse(socket, 'per-source');
      this.#evict(own, 'per-source');
    }
    if (this.#held.size >= this.#limits.maxConnections) {
      const idle = this.#oldestFresh() ?? (this.#limits.replaceIdle ? this.#oldestIdle() : undefined);
      if (idle === undefined) return this.#refuse(socket, 'full');
      this.#evict(idle, 'full');
    }
    const held: Held = { socket, source, fresh: true, busy: 0 };
    held.timer = setTimeout(() => {
      if (held.fresh) this.#refuse(socket, 'no-request');
    }, this.#limits.firstRequestMs);
    held.timer.unref();
    this.#held.set(key, held);
    this.#perSource.set(source, (this.#perSource.get(source) ?? 0) + 1);
    socket.once('close', () => this.#release(key, held));
  }

  #requested(socket: Socket, res: ServerResponse): void {
    const held = this.#held.get(`${socket.remoteAddress ?? 'unknown'} ${socket.remotePort}`);
    if (held === undefined) return;
    held.busy++;
    // 'close' comes once per response, whether it was sent in full or cut off.
    res.once('close', () => held.busy--);
    if (!held.fresh) return;
    held.fresh = false;
    clearTimeout(held.timer);
  }

  #oldestFresh(): Held | undefined {
    for (const held of this.#held.values()) if (held.fresh) return held;
    return undefined;
  }

  /** The oldest connection (of `source`, if given) between keep-alive requests. */
  #oldestIdle(source?: string): Held | undefined {
    for (const held of this.#held.values())
      if ((source === undefined || held.source === source) && !held.fresh && held.busy === 0) return held;
    return undefined;
  }

  #evict(held: Held, reason: ConnectionRefusal): void {
    this.#refuse(held.socket, reason);
    this.#release(`${held.source} ${held.socket.remotePort}`, held);
  }

  #refuse(socket: Socket, reason: ConnectionRefusal): void {
    this.#onRefuse(reason, socket.remoteAddress ?? 'gone');
    // No goodbye: a TLS alert or HTTP answer would cost what the cap saves.
    socket.destroy();
  }

  /** Idempotent: a connection evicted to make room is released at once, its 'close' comes later. */
  #release(key: string, held: Held): void {
    if (this.#held.get(key) !== held) return;
    clearTimeout(held.timer);
    this.#held.delete(key);
    const left = (this.#perSource.get(held.source) ?? 1) - 1;
    if (left > 0) this.#perSource.set(held.source, left);
    else this.#perSource.delete(held.source);
  }
}
