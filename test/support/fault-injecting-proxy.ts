import { forwardRequest } from './fault-proxy.ts';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import {
  createConnection,
  createServer as createTcpServer,
  type Server as TcpServer,
  type Socket,
} from 'node:net';

/**
 * What the proxy does with one request instead of passing it to the real backend:
 * - `reset`: reads the request, then drops the connection (ECONNRESET on the client);
 * - `hang`: reads the request and never answers, until the client gives up;
 * - `delay`: passes the request on after `ms`, a slow backend that still answers;
 * - `respond`: answers with this status, headers and body; with `truncateAt`, promises the whole
 *   body in Content-Length, sends only that many bytes and closes the connection.
 */
export type Fault =
  | { readonly kind: 'reset' }
  | { readonly kind: 'hang' }
  | { readonly kind: 'delay'; readonly ms: number }
  | {
      readonly kind: 'respond';
      readonly status: number;
      readonly headers: Readonly<Record<string, string>>;
      readonly body: string;
      readonly truncateAt?: number;
    };

/** One request as the proxy saw it: when (performance.now()), which AWS operation, what it did. */
export interface ProxiedCall {
  readonly at: number;
  readonly target: string | undefined;
  readonly fault: Fault['kind'] | 'pass';
}

/** The exact error shape of the AWS JSON protocol, as Secrets Manager sends it. */
export function awsError(status: number, type: string, message: string): Fault {
  return {
    kind: 'respond',
    status,
    headers: { 'content-type': 'application/x-amz-json-1.1', 'x-amzn-errortype': type },
    body: JSON.stringify({ __type: type, message }),
  };
}

/**
 * An HTTP proxy in front of a real backend (moto) that injects connection, latency and body faults
 * and records when every request arrived, so a test can hold the agent's retries against its
 * backoff schedule. `refuse()` closes the listening port (ECONNREFUSED) until `accept()` reopens it.
 */
export class FaultInjectingProxy {
  readonly calls: ProxiedCall[] = [];
  readonly #upstream: URL;
  readonly #server: Server;
  readonly #held = new Set<ServerResponse>();
  #queued: Fault[] = [];
  #standing: Fault | undefined;
  #port = 0;

  private constructor(upstream: string) {
    this.#upstream = new URL(upstream);
    this.#server = createServer((req, res) => this.#handle(req, res));
  }

  static async start(upstream: string): Promise<FaultInjectingProxy> {
    const proxy = new FaultInjectingProxy(upstream);
    await proxy.accept();
    return proxy;
  }

  get endpoint(): string {
    return `http://127.0.0.1:${this.#port}`;
  }

  /** The next `count` requests get `fault`, before any standing fault. */
  next(fault: Fault, count = 1): void {
    for (let i = 0; i < count; i++) this.#queued.push(fault);
  }

  /** Every request gets `fault` until this is called again with undefined. */
  always(fault: Fault | undefined): void {
    this.#standing = fault;
    // Requests held by a `hang` stay held until their client gives up, as a stuck backend does.
  }

  /** Requests with a fault given by `next` not yet served. */
  get queued(): number {
    return this.#queued.length;
  }

  /** Stops listening: new connections are refused. Open keep-alive connections are dropped. */
  async refuse(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise<void>((r) => this.#server.close(() => r()));
  }

  /** Listens (again) on the same port. */
  async accept(): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      this.#server.once('error', reject);
      this.#server.listen(this.#port, '127.0.0.1', () => {
        this.#server.off('error', reject);
        resolve();
      });
    });
    const address = this.#server.address();
    if (typeof address === 'object' && address) this.#port = address.port;
  }

  /** Forgets recorded calls and faults. */
  reset(): void {
    this.calls.length = 0;
    this.#queued = [];
    this.#standing = undefined;
  }

  /** Calls whose AWS operation ends with `operation` (e.g. GetSecretValue). */
  callsTo(operation: string): ProxiedCall[] {
    return this.calls.filter((c) => c.target?.endsWith(operation));
  }

  async close(): Promise<void> {
    for (const res of this.#held) res.destroy();
    if (this.#server.listening) await this.refuse();
  }

  #handle(req: IncomingMessage, res: ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const fault = this.#queued.shift() ?? this.#standing;
      const target = req.headers['x-amz-target'] as string | undefined;
      this.calls.push({ at: performance.now(), target, fault: fault?.kind ?? 'pass' });
      if (!fault) return this.#pass(req, Buffer.concat(chunks), res);
      switch (fault.kind) {
        case 'reset':
          req.socket.destroy();
          return;
        case 'hang':
          this.#held.add(res);
          res.on('close', () => this.#held.delete(res));
          return;
        case 'delay': {
          const timer = setTimeout(() => this.#pass(req, Buffer.concat(chunks), res), fault.ms);
          res.on('close', () => clearTimeout(timer));
          return;
        }
        case 'respond': {
          const body = Buffer.from(fault.body);
          res.writeHead(fault.status, { ...fault.headers, 'content-length': String(body.length) });
          if (fault.truncateAt === undefined) {
            res.end(body);
            return;
          }
          res.write(body.subarray(0, fault.truncateAt), () => req.socket.destroy());
          return;
        }
      }
    });
  }

  #pass(req: IncomingMessage, body: Buffer, res: ServerResponse): void {
    forwardRequest(this.#upstream, req, body, res);
  }
}

/**
 * A TCP pass-through (for TLS servers such as the fake Kubernetes API, whose certificate names
 * 127.0.0.1): while down, every connection is reset before the TLS handshake. Counts connections.
 */
export class TcpFaultProxy {
  connections = 0;
  #down = false;
  readonly #server: TcpServer;
  readonly #sockets = new Set<Socket>();

  private constructor(upstreamPort: number) {
    this.#server = createTcpServer((client) => {
      this.connections++;
      this.#track(client);
      if (this.#down) {
        client.resetAndDestroy();
        return;
      }
      const upstream = createConnection({ host: '127.0.0.1', port: upstreamPort });
      this.#track(upstream);
      client.pipe(upstream).pipe(client);
      upstream.on('error', () => client.destroy());
      client.on('error', () => upstream.destroy());
    });
  }

  static async start(upstreamPort: number): Promise<TcpFaultProxy> {
    const proxy = new TcpFaultProxy(upstreamPort);
    await new Promise<void>((r) => proxy.#server.listen(0, '127.0.0.1', r));
    return proxy;
  }

  get port(): number {
    return (this.#server.address() as { port: number }).port;
  }

  /** Down: open connections are cut and new ones reset, as when the API server goes away. */
  setDown(down: boolean): void {
    this.#down = down;
    if (down) for (const s of this.#sockets) s.resetAndDestroy();
  }

  async close(): Promise<void> {
    for (const s of this.#sockets) s.destroy();
    await new Promise<void>((r) => this.#server.close(() => r()));
  }

  #track(socket: Socket): void {
    this.#sockets.add(socket);
    socket.on('close', () => this.#sockets.delete(socket));
  }
}
