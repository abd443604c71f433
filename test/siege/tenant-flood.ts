/**
 * Tenants' pods working a port with connections that never complete a request, each opened again as
 * soon as it is closed, run as its own process (its sockets and event loop are not the prober's):
 * `node test/siege/tenant-flood.ts` with the plan as JSON in argv[2]. It prints `ramped` once every
 * lane has opened its first connection (or failed to), and one JSON line of figures on SIGTERM, then
 * exits.
 *
 * Each source address runs `count` lanes; a lane keeps one connection of its kind:
 *   idle   connects and sends nothing;
 *   slow   sends a request's first line, then one header byte every `slowMs`;
 *   churn  connects and closes at once, alternately with a FIN and a reset;
 *   dribble  sends a request's first line and the start of a header at once, then one byte of it after
 *          each of its own random intervals within `dribbleMs`, never finishing (issue 37's "dribbling"
 *          connections: with the grace counted from a peer's last byte, each looked new when accepted);
 *   tls-idle, tls-slow  the same as idle and slow once a TLS handshake is done (for an HTTPS port);
 *   scrape  sends a complete GET /metrics at once: reopened as soon as answered and closed;
 *   pipelined  writes `pipelined` GET /metrics in one go, none waiting for an answer;
 *   tls-busy  after TLS, a POST /mutate whose `bodyBytes`-byte body comes one byte every `slowMs`,
 *           the next request's headers with its last byte: never silent, never idle between requests;
 *   tls-pool  after TLS, one whole keep-alive GET /healthz, then idle: a keep-alive pool as the API
 *           server keeps one (issue 37, an eighth review);
 *   blink   connects, sends nothing and closes itself after `holdMs` (900 unless given), within the
 *           port's grace: a newcomer that never grows old enough to be the first to go.
 * Whatever closes a lane's connection (the server, a reset, its own churn), the lane connects again at
 * once: the shape that took the kubelet's probes down (issue 37), whatever the number of sources.
 */
import { connect, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';

export type FloodKind =
  | 'idle'
  | 'slow'
  | 'churn'
  | 'dribble'
  | 'tls-idle'
  | 'tls-slow'
  | 'scrape'
  | 'pipelined'
  | 'tls-busy'
  | 'tls-pool'
  | 'blink';

export interface TenantFloodPlan {
  readonly host: string;
  readonly port: number;
  readonly sources: readonly { readonly from: string; readonly count: number; readonly kind: FloodKind }[];
  readonly slowMs?: number;
  /** The dribble kind's interval between bytes, drawn anew for each byte from [min, max] ms. */
  readonly dribbleMs?: readonly [min: number, max: number];
  /** How many requests a `pipelined` connection writes at once (1,000 unless given). */
  readonly pipelined?: number;
  /** A `tls-busy` request's body (40 bytes unless given). */
  readonly bodyBytes?: number;
  /** The server name a TLS kind sends. */
  readonly servername?: string;
  /** How long a `blink` connection stays open, ms. */
  readonly holdMs?: number;
}

export interface TenantFloodFigures {
  /** Connections the server accepted into its queue (TCP handshake completed). */
  readonly opened: number;
  /** Connects that failed: refused, reset, or no handshake within CONNECT_TIMEOUT_MS (a full queue). */
  readonly failed: number;
  /** Of the opened, how many the server closed (churn's own closes are not counted). */
  readonly closedByServer: number;
  /** The most connections open at once. */
  readonly mostOpen: number;
}

const METRICS = 'GET /metrics HTTP/1.1\r\nhost: port\r\n\r\n';

/** A connect that neither completes nor fails in this long counts as failed (its SYN was dropped). */
const CONNECT_TIMEOUT_MS = 5_000;

/** The `n`-th attacking address, 127.1.0.1 and up: a /16 of loopback addresses, any of which binds here. */
export const tenantAddress = (n: number): string => `127.1.${Math.floor(n / 250)}.${(n % 250) + 1}`;

function flood(plan: TenantFloodPlan): void {
  const slowMs = plan.slowMs ?? 200;
  const [dribbleMin, dribbleMax] = plan.dribbleMs ?? [100, 190];
  const sockets = new Set<Socket>();
  let stopping = false;
  let opened = 0;
  let failed = 0;
  let closedByServer = 0;
  let open = 0;
  let mostOpen = 0;
  let lanes = plan.sources.reduce((n, s) => n + s.count, 0);

  process.on('SIGTERM', () => {
    stopping = true;
    for (const s of sockets) s.destroy();
    const figures: TenantFloodFigures = { opened, failed, closedByServer, mostOpen };
    process.stdout.write(`${JSON.stringify(figures)}\n`, () => process.exit(0));
  });

  const lane = (from: string, kind: FloodKind, round: number) => {
    if (stopping) return;
    const socket = connect({ host: plan.host, port: plan.port, localAddress: from });
    sockets.add(socket);
    const timer = setTimeout(() => socket.destroy(), CONNECT_TIMEOUT_MS);
    let connected = false;
    let ownClose = false;
    let trickle: NodeJS.Timeout | undefined;
    // Each byte after the last one was written, never after the close (a failed write calls back too).
    const dribble = (error?: Error | null) => {
      if (error || socket.destroyed) return;
      trickle = setTimeout(
        () => socket.write('a', dribble),
        dribbleMin + Math.random() * (dribbleMax - dribbleMin),
      );
    };
    socket.on('error', () => {});
    socket.once('connect', () => {
      clearTimeout(timer);
      connected = true;
      opened++;
      mostOpen = Math.max(mostOpen, ++open);
      if (round === 0 && --lanes === 0) process.stdout.write('ramped\n');
      if (kind === 'churn') {
        ownClose = true;
        if (opened % 2) socket.resetAndDestroy();
        else socket.destroy();
      } else if (kind === 'slow') {
        socket.write('GET /healthz HTTP/1.1\r\nx-slow: ');
        trickle = setInterval(() => socket.write('a'), slowMs);
      } else if (kind === 'dribble') {
        socket.write('GET /healthz HTTP/1.1\r\nX: ', dribble);
      } else if (kind === 'blink') {
        trickle = setTimeout(() => {
          ownClose = true;
          socket.destroy();
        }, plan.holdMs ?? 900);
      } else if (kind === 'scrape') {
        socket.on('data', () => {});
        socket.write(METRICS);
      } else if (kind === 'pipelined') {
        socket.on('data', () => {});
        socket.write(METRICS.repeat(plan.pipelined ?? 1000));
      } else if (kind === 'tls-idle' || kind === 'tls-slow' || kind === 'tls-busy' || kind === 'tls-pool') {
        // An attacker does not check the certificate; the TCP socket's close ends the lane.
        const tls = tlsConnect({ socket, servername: plan.servername, rejectUnauthorized: false }, () => {
          if (kind === 'tls-idle') return;
          if (kind === 'tls-pool') return void tls.write('GET /healthz HTTP/1.1\r\nhost: w\r\n\r\n');
          if (kind === 'tls-slow') {
            tls.write('POST /mutate HTTP/1.1\r\nx-slow: ');
            trickle = setInterval(() => tls.write('a'), slowMs);
            return;
          }
          const body = plan.bodyBytes ?? 40;
          const head = `POST /mutate HTTP/1.1\r\nhost: w\r\ncontent-type: application/json\r\ncontent-length: ${body}\r\n\r\n`;
          let sent = 0;
          tls.write(head);
          trickle = setInterval(() => {
            if (++sent < body) return void tls.write('x');
            sent = 0;
            tls.write(`x${head}`);
          }, slowMs);
        });
        tls.on('data', () => {});
        tls.on('error', () => socket.destroy());
      }
    });
    socket.once('close', () => {
      clearTimeout(timer);
      clearInterval(trickle);
      sockets.delete(socket);
      if (connected) {
        open--;
        if (!ownClose && !stopping) closedByServer++;
      } else {
        failed++;
        if (round === 0 && --lanes === 0) process.stdout.write('ramped\n');
      }
      // At once, as a hostile pod would: the next connection is in the server's queue before it can breathe.
      setImmediate(() => lane(from, kind, round + 1));
    });
  };

  for (const s of plan.sources) for (let i = 0; i < s.count; i++) lane(s.from, s.kind, 0);
}

if (import.meta.filename === process.argv[1]) flood(JSON.parse(process.argv[2]!) as TenantFloodPlan);
