import { createServer, type Server } from 'node:http';
import { ConfigError } from '../contract/errors.ts';
import type { AgentMetrics } from './metrics.ts';

export interface HealthState {
  /** The volume holds a complete set, written by this agent or found there at its start: the app may start. */
  ready(): boolean;
  /** The refresh loop is alive (it has attempted a cycle recently). */
  live(): boolean;
}

/**
 * /healthz (liveness): the refresh loop is not stuck. A failing backend does not fail it: restarting
 * the agent would not fix the backend and would lose nothing but time.
 * /readyz (readiness, and what the native sidecar's postStart hook waits for): the volume holds a
 * complete set, the first one this agent wrote or one it found there at its start (the init
 * container's, or its own before a restart). It stays ready while refreshes fail, because the last
 * good files are still in place and the app must not be taken out of service for a backend outage.
 * /metrics: Prometheus text.
 */
export function startHealthServer(
  addr: { host: string; port: number },
  state: HealthState,
  metrics: AgentMetrics,
): Promise<Server> {
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD' }).end();
      return;
    }
    const plain = (code: number, body: string) =>
      res.writeHead(code, { 'content-type': 'text/plain; charset=utf-8' }).end(body);
    switch (path) {
      case '/healthz':
        return state.live() ? plain(200, 'ok\n') : plain(503, 'refresh loop stalled\n');
      case '/readyz':
        return state.ready() ? plain(200, 'ready\n') : plain(503, 'secrets not written yet\n');
      case '/metrics':
        metrics.registry.metrics().then(
          (text) => res.writeHead(200, { 'content-type': metrics.registry.contentType }).end(text),
          () => plain(500, 'metrics unavailable\n'),
        );
        return;
      default:
        return plain(404, 'not found\n');
    }
  });
  server.keepAliveTimeout = 5000;
  return new Promise((resolve, reject) => {
    const failed = (e: Error) => reject(listenError(e, addr));
    server.once('error', failed);
    server.listen(addr.port, addr.host, () => {
      server.off('error', failed);
      resolve(server);
    });
  });
}

/**
 * Why AGENT_HTTP_ADDR cannot be listened on, as the configuration error it is: the containers of a
 * pod share one network namespace, so the usual cause is the app (or another sidecar) on the port.
 */
function listenError(e: Error, addr: { host: string; port: number }): Error {
  const code = (e as NodeJS.ErrnoException).code;
  const where = `${addr.host.includes(':') ? `[${addr.host}]` : addr.host}:${addr.port}`;
  const fix =
    'set AGENT_HTTP_ADDR to a free port (with the webhook: the secret-agent.io/agent-http-addr annotation)';
  if (code === 'EADDRINUSE')
    return new ConfigError(
      'AGENT_HTTP_ADDR',
      `${where} is already in use (EADDRINUSE): another container of the pod or another process listens there`,
      fix,
    );
  if (code === 'EACCES')
    return new ConfigError(
      'AGENT_HTTP_ADDR',
      `port ${addr.port} needs privileges the agent does not have (EACCES)`,
      'use a port above 1023',
    );
  if (code === 'EADDRNOTAVAIL')
    return new ConfigError(
      'AGENT_HTTP_ADDR',
      `${addr.host} is not an address of this pod (EADDRNOTAVAIL)`,
      'use 0.0.0.0 (or [::]) so the kubelet’s probes reach it, or 127.0.0.1',
    );
  return e;
}
