import {
  createServer,
  request,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo } from 'node:net';

export interface RecordedRequest {
  readonly target: string | undefined;
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
}

/**
 * An HTTP proxy in front of a real backend that can answer with injected faults first. moto never
 * throttles; this makes it, with the exact error shape of the AWS JSON protocol.
 */
export class FaultProxy {
  readonly requests: RecordedRequest[] = [];
  #faults: { status: number; type: string; message: string }[] = [];
  #down = false;
  #server: Server;
  #upstream: URL;

  private constructor(upstream: string) {
    this.#upstream = new URL(upstream);
    this.#server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks);
        this.requests.push({
          target: req.headers['x-amz-target'] as string | undefined,
          headers: req.headers,
          body: body.toString(),
        });
        if (this.#down) {
          req.socket.destroy();
          return;
        }
        const fault = this.#faults.shift();
        if (fault) {
          res.writeHead(fault.status, {
            'content-type': 'application/x-amz-json-1.1',
            'x-amzn-errortype': fault.type,
          });
          res.end(JSON.stringify({ __type: fault.type, message: fault.message }));
          return;
        }
        forwardRequest(this.#upstream, req, body, res);
      });
    });
  }

  static async start(upstream: string): Promise<FaultProxy> {
    const proxy = new FaultProxy(upstream);
    await new Promise<void>((r) => proxy.#server.listen(0, '127.0.0.1', r));
    return proxy;
  }

  get endpoint(): string {
    return `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }

  /** The next `count` requests get a ThrottlingException (HTTP 400, as Secrets Manager sends it). */
  throttle(count: number): void {
    for (let i = 0; i < count; i++)
      this.#faults.push({ status: 400, type: 'ThrottlingException', message: 'Rate exceeded' });
  }

  /** The next `count` requests get an InternalServiceError (HTTP 500). */
  failInternally(count: number): void {
    for (let i = 0; i < count; i++)
      this.#faults.push({
        status: 500,
        type: 'InternalServiceError',
        message: 'An error occurred on the server side.',
      });
  }

  /** While down, every request's connection is dropped: the backend is unreachable. */
  setDown(down: boolean): void {
    this.#down = down;
  }

  /** Forgets recorded requests and pending faults. */
  reset(): void {
    this.requests.length = 0;
    this.#faults = [];
    this.#down = false;
  }

  targets(): (string | undefined)[] {
    return this.requests.map((r) => r.target?.replace('secretsmanager.', ''));
  }

  close(): Promise<void> {
    this.#server.closeAllConnections();
    return new Promise((r) => this.#server.close(() => r()));
  }
}

/** Sends a request already read (`body`) on to `upstream` and streams the answer back; 502 if unreachable. */
export function forwardRequest(upstream: URL, req: IncomingMessage, body: Buffer, res: ServerResponse): void {
  const up = request(
    { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers },
    (upRes) => {
      res.writeHead(upRes.statusCode ?? 502, upRes.headers);
      upRes.pipe(res);
    },
  );
  up.on('error', () => {
    res.writeHead(502);
    res.end();
  });
  up.end(body);
}
