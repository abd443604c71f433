import { createServer, type Server } from 'node:http';
import type { Socket } from 'node:net';
import { ConfigError } from '../contract/errors.ts';
import { ConnectionGuard, type ConnectionLimits } from './connection-guard.ts';
import type { AgentMetrics } from './metrics.ts';
import { RenderedMetrics } from './rendered-metrics.ts';

/**
 * What the agent's port holds for whoever connects, declared once (the reference's agent-port table
 * is generated from it; whatever serves the port must keep to it: the Node agent through
 * ConnectionGuard, the small sidecar's resident in agent/native/resident.c). Every pod in the cluster
 * can reach the port: before these, 12,000 idle connections took 123 MiB of a 128Mi container and its
 * probes; then connections that reconnect as soon as closed, from many addresses, cost the kubelet's
 * probes theirs (issue 37), until no connection was closed to make room within its grace.
 */
export const AGENT_PORT_LIMITS = {
  /**
   * Held at once, but for newcomers within their grace. Probes and scrapes need a handful, each
   * connection serves one request and is closed (so one that has sent a request goes within
   * milliseconds), and a full port closes a connection past its grace that has sent nothing to make
   * room: from the address holding the most such, the oldest of those.
   */
  maxConnections: 64,
  /**
   * From one address (a pod; the node, whose kubelet probes), past their grace: one flooding pod
   * leaves the others room, its newcomer closing its own oldest. A newcomer within its grace is never
   * refused for its address: the node's may be shared (hostNetwork pods, traffic SNATed to it).
   */
  maxPerSource: 16,
  /**
   * From its handshake (the resident; Node: its accept), a connection is not closed to make room: a
   * kubelet probe writes its request as soon as it is connected, and is read and answered within it.
   */
  graceMs: 200,
  /**
   * Newcomers within their grace the Node agent holds beyond maxConnections, whatever number of sources
   * keeps the port full (about 9 KiB each): it cannot leave them in the kernel's queue, where the
   * resident leaves them until a grace ends.
   */
  maxInGrace: 512,
  /**
   * The kernel's queue of connections not accepted yet (Node's default). Node accepts all it holds in
   * one turn of its event loop before it reads any, and a probe waits behind all of them: a longer
   * queue holds more newcomers at once and keeps a probe waiting longer (the resident, which costs
   * nothing for what waits there and accepts faster, keeps 4096).
   */
  listenBacklog: 511,
  /** The small sidecar's queue: what waits there costs it nothing (net.core.somaxconn caps it, 4096 by default). */
  residentListenBacklog: 4096,
  /** A kubelet probe or a scrape sends its request at once; a connection that has not, within this, is closed. */
  firstRequestMs: 3000,
  /**
   * One request per connection: kubelet probes never reuse one, a scrape every 15 s or more gains
   * nothing by it, and a connection that is answered and closed cannot be held against the cap. A
   * request pipelined after it closes the connection before any work is done for it.
   */
  maxRequests: 1,
  /** A request, body included, arrives whole from a prober or a scraper: still arriving after this, it is slow. */
  slowRequestMs: 200,
  /** A request's headers: probes and scrapes send a few hundred bytes (Node's default is 16 KiB). */
  maxHeaderBytes: 8192,
  /** Headers kept per request (Node's default is 2000). */
  maxHeadersCount: 32,
  /** Node's own timers, checked every checkMs: headers (as the first request, above), the whole request. */
  headersMs: 3000,
  requestMs: 5000,
  checkMs: 1000,
} as const satisfies ConnectionLimits & Record<string, number>;

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
  const limits = AGENT_PORT_LIMITS;
  const rendered = new RenderedMetrics(metrics.registry);
  const server = createServer(
    {
      maxHeaderSize: limits.maxHeaderBytes,
      headersTimeout: limits.headersMs,
      requestTimeout: limits.requestMs,
      connectionsCheckingInterval: limits.checkMs,
    },
    (req, res) => {
      // One request per connection (limits.maxRequests; the guard also says so before this runs).
      res.shouldKeepAlive = false;
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
          rendered.text().then(
            (text) => res.writeHead(200, { 'content-type': rendered.contentType }).end(text),
            () => plain(500, 'metrics unavailable\n'),
          );
          return;
        default:
          return plain(404, 'not found\n');
      }
    },
  );
  server.maxHeadersCount = limits.maxHeadersCount;
  // The guard decides first, and the HTTP server's per-connection state (its parser, its listeners)
  // comes with the first bytes: a connection that sends none, closed unanswered, never costs it. Under
  // a flood of such, that is a quarter of the agent's CPU for each connection. What was read waits in
  // the socket's buffer for the parser.
  const http = server.listeners('connection') as ((socket: Socket) => void)[];
  server.removeAllListeners('connection');
  const guard = new ConnectionGuard(limits, (reason) => metrics.refusedConnections.inc({ reason })).attach(
    server,
  );
  // What the agent calls when it stops: the connections the HTTP server has not seen yet close too.
  const closeAllConnections = server.closeAllConnections.bind(server);
  server.closeAllConnections = () => {
    guard.closeAll();
    closeAllConnections();
  };
  server.on('connection', (socket: Socket) => {
    // Until then, a reset is this listener's to handle: unhandled, it would end the agent.
    const gone = () => socket.destroy();
    const serve = () => {
      socket.off('readable', serve).off('error', gone);
      if (socket.destroyed) return;
      for (const listener of http) listener.call(server, socket);
      firstHeadOnly(socket);
    };
    if (!socket.destroyed) socket.on('error', gone).on('readable', serve);
  });
  return new Promise((resolve, reject) => {
    const failed = (e: Error) => reject(listenError(e, addr));
    server.once('error', failed);
    server.listen({ port: addr.port, host: addr.host, backlog: limits.listenBacklog }, () => {
      server.off('error', failed);
      resolve(server);
    });
  });
}

const HEAD_END = Buffer.from('\r\n\r\n');

/**
 * Lets the HTTP server's parser, just attached to `socket`, read its first request's head and nothing
 * after it: no body (no answer here needs one) and no pipelined request, whose bytes are dropped and
 * the socket no longer read. Node's parser dispatches every request in what it reads at once, each
 * with its own objects kept until the connection's close: 64 connections each writing 3,600 pipelined
 * requests ended a 44 MiB heap however soon the guard closed them (issue 37). Node reads a socket into
 * its parser without JavaScript in between unless the socket has a `data` listener of its own: this one
 * is, and it passes the parser's chunks on cut.
 */
function firstHeadOnly(socket: Socket): void {
  const parser = socket.listeners('data') as ((chunk: Buffer) => void)[];
  socket.removeAllListeners('data');
  /** The last bytes seen, to find a head's end split across chunks. */
  let tail = Buffer.alloc(0);
  let done = false;
  socket.on('data', (chunk: Buffer) => {
    if (done) return;
    const seen = Buffer.concat([tail, chunk]);
    const end = seen.indexOf(HEAD_END);
    if (end >= 0) {
      done = true;
      chunk = chunk.subarray(0, end + HEAD_END.length - tail.length);
      socket.pause();
    } else tail = seen.subarray(Math.max(0, seen.length - (HEAD_END.length - 1)));
    for (const listener of parser) listener.call(socket, chunk);
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
