import { createServer, type Server } from 'node:http';
import type { AgentMetrics } from './metrics.ts';

export interface HealthState {
  /** The first complete set is written: the app may start. */
  ready(): boolean;
  /** The refresh loop is alive (it has attempted a cycle recently). */
  live(): boolean;
}

/**
 * /healthz (liveness): the refresh loop is not stuck. A failing backend does not fail it: restarting
 * the agent would not fix the backend and would lose nothing but time.
 * /readyz (readiness, and the native sidecar's startupProbe): the first complete set is written. It
 * stays ready while refreshes fail, because the last good files are still in place and the app must
 * not be taken out of service for a backend outage.
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
    server.once('error', reject);
    server.listen(addr.port, addr.host, () => {
      server.off('error', reject);
      resolve(server);
    });
  });
}
