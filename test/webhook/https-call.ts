import { request, type Agent } from 'node:https';
import type { TLSSocket } from 'node:tls';
import { SERVER_NAME } from './tls-certs.ts';

export interface Reply {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: string;
  /** Fingerprint of the certificate the server presented on this connection. */
  readonly served: string;
}

/** One request to the webhook on 127.0.0.1, trusting `ca` for the Service's name. */
export function call(
  port: number,
  ca: string | string[],
  path: string,
  options: { method?: string; body?: string | Buffer; contentType?: string; agent?: Agent | false } = {},
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path,
        method: options.method ?? (options.body !== undefined ? 'POST' : 'GET'),
        ca,
        servername: SERVER_NAME,
        agent: options.agent ?? false,
        headers:
          options.body !== undefined ? { 'content-type': options.contentType ?? 'application/json' } : {},
      },
      (res) => {
        const chunks: Buffer[] = [];
        const socket = res.socket as TLSSocket;
        const served = socket.getPeerX509Certificate()?.fingerprint256 ?? '';
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          resolve({
            status: res.statusCode!,
            headers: res.headers,
            body: Buffer.concat(chunks).toString('utf8'),
            served,
          });
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(options.body);
  });
}
