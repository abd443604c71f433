import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';

/**
 * A forward proxy (HTTP CONNECT, what `https_proxy` and `grpc_proxy` name) that sends each tunnel to
 * a local address picked by the host the client asked for, and records the hosts asked for. With it
 * a client dials its real, default endpoint names (secretmanager.googleapis.com:443, …) and TLS checks
 * the certificate against them, while the bytes land on local fakes: what the client chose to dial is
 * then a fact the test can read, not an assumption. A host not in the table gets 502.
 */
export interface ConnectProxy {
  /** `http://127.0.0.1:PORT`, for https_proxy / grpc_proxy. */
  readonly url: string;
  /** Every CONNECT target (`host:port`) asked for, in order. */
  readonly asked: readonly string[];
  stop(): Promise<void>;
}

export async function startConnectProxy(routes: Readonly<Record<string, string>>): Promise<ConnectProxy> {
  const asked: string[] = [];
  const sockets = new Set<Socket>();
  const server: Server = createServer((_req, res) => {
    res.writeHead(405).end('CONNECT only\n');
  });
  server.on('connect', (req, client: Socket) => {
    const target = req.url ?? '';
    asked.push(target);
    sockets.add(client);
    client.on('close', () => sockets.delete(client));
    client.on('error', () => client.destroy());
    const upstream = routes[target];
    if (upstream === undefined) {
      client.end('HTTP/1.1 502 Bad Gateway\r\n\r\n');
      return;
    }
    const [host, port] = [
      upstream.slice(0, upstream.lastIndexOf(':')),
      upstream.slice(upstream.lastIndexOf(':') + 1),
    ];
    const backend = connect(Number(port), host, () => {
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      backend.pipe(client);
      client.pipe(backend);
    });
    sockets.add(backend);
    backend.on('close', () => sockets.delete(backend));
    backend.on('error', () => client.destroy());
    client.on('close', () => backend.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    asked,
    stop: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
