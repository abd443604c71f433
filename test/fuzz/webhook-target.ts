import { Agent, request } from 'node:https';
import { parseWebhookConfig } from '../../webhook/config/parse-webhook-config.ts';
import { startWebhook, type RunningWebhook } from '../../webhook/start.ts';
import { captureLog } from '../support/captured-log.ts';
import { AGENT_IMAGE } from '../webhook/fixtures.ts';
import { certDir, makeServingPair, SERVER_NAME } from '../webhook/tls-certs.ts';

export interface WebhookReply {
  readonly status: number;
  readonly contentType: string;
  readonly body: string;
}

/** The real webhook server, twice (native sidecars on and off), reached over HTTPS on loopback. */
export interface WebhookTarget {
  /** POSTs to /mutate; rejects only on a transport failure (refused, reset, timed out). */
  post(body: string | Uint8Array, options: { native: boolean; contentType: string }): Promise<WebhookReply>;
  /** Everything the servers logged since the last call. */
  takeLogs(): string;
  close(): Promise<void>;
}

const REQUEST_TIMEOUT_MS = 15_000;

export async function startWebhookTarget(): Promise<WebhookTarget> {
  const pair = await makeServingPair();
  const dir = certDir();
  dir.write(pair);
  const { log, take } = captureLog();
  const start = (native: boolean): Promise<RunningWebhook> =>
    startWebhook(
      parseWebhookConfig({
        AGENT_IMAGE,
        WEBHOOK_PORT: '0',
        WEBHOOK_HOST: '127.0.0.1',
        TLS_CERT_FILE: dir.cert,
        TLS_KEY_FILE: dir.key,
        NATIVE_SIDECARS: String(native),
        AGENT_AWS_REGION: 'eu-west-1',
        // Keeps rotation-command among the settings a clean pod may use (test/fuzz/arbitraries.ts).
        ALLOW_ROTATION_COMMAND: 'true',
      }),
      { log },
    );
  const servers = { native: await start(true), classic: await start(false) };
  const agent = new Agent({ keepAlive: true, maxSockets: 2 });

  return {
    post(body, options) {
      const port = (options.native ? servers.native : servers.classic).port;
      return new Promise((resolve, reject) => {
        const req = request(
          {
            host: '127.0.0.1',
            port,
            path: '/mutate',
            method: 'POST',
            ca: pair.ca,
            servername: SERVER_NAME,
            agent,
            timeout: REQUEST_TIMEOUT_MS,
            headers: { 'content-type': options.contentType },
          },
          (res) => {
            const chunks: Buffer[] = [];
            res.on('data', (c: Buffer) => chunks.push(c));
            res.on('end', () =>
              resolve({
                status: res.statusCode ?? 0,
                contentType: String(res.headers['content-type'] ?? ''),
                body: Buffer.concat(chunks).toString('utf8'),
              }),
            );
            res.on('error', reject);
          },
        );
        req.on('timeout', () => req.destroy(new Error(`no answer within ${REQUEST_TIMEOUT_MS} ms`)));
        req.on('error', reject);
        req.end(body);
      });
    },
    takeLogs: take,
    async close() {
      agent.destroy();
      await Promise.all([servers.native.close(), servers.classic.close()]);
      dir[Symbol.dispose]();
    },
  };
}
