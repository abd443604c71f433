/**
 * A pod that floods another pod's port with connections that send nothing, run as its own process (its
 * sockets and its event loop are not the prober's): `node test/siege/idle-flood.ts` with the plan as
 * JSON in argv[2]. It opens `count` connections from each source address, at most `pending` of them
 * connecting at once, holds every one until the server closes it, prints one JSON line of figures
 * when all have been opened (and again on SIGTERM), and exits on SIGTERM.
 *
 * A `slow` source sends a request's first line and then one header byte every `slowMs`: the slowest
 * way to keep a connection that has not sent a complete request.
 */
import { connect, type Socket } from 'node:net';

export interface FloodPlan {
  readonly host: string;
  readonly port: number;
  readonly sources: readonly { readonly from: string; readonly count: number; readonly slow?: boolean }[];
  readonly pending?: number;
  readonly slowMs?: number;
}

export interface FloodFigures {
  /** Connections the server accepted (TCP handshake completed). */
  readonly opened: number;
  /** Connects that failed (refused, reset, timed out: the backlog was full). */
  readonly failed: number;
  /** Of the opened, how many the server has closed. */
  readonly closedByServer: number;
  /** Held open now. */
  readonly open: number;
  readonly done: boolean;
}

/** Bounded: a connect that neither completes nor fails in this long counts as failed. */
const CONNECT_TIMEOUT_MS = 10_000;

async function flood(plan: FloodPlan): Promise<void> {
  const pending = plan.pending ?? 500;
  const slowMs = plan.slowMs ?? 500;
  const held = new Set<Socket>();
  let opened = 0;
  let failed = 0;
  let closedByServer = 0;
  let done = false;
  const figures = (): FloodFigures => ({ opened, failed, closedByServer, open: held.size, done });
  const report = () => process.stdout.write(`${JSON.stringify(figures())}\n`);
  process.on('SIGTERM', () => {
    report();
    for (const s of held) s.destroy();
    process.exit(0);
  });

  const one = (from: string, slow: boolean) =>
    new Promise<void>((resolve) => {
      const socket = connect({ host: plan.host, port: plan.port, localAddress: from });
      const timer = setTimeout(() => socket.destroy(new Error('connect timed out')), CONNECT_TIMEOUT_MS);
      let connected = false;
      let trickle: NodeJS.Timeout | undefined;
      socket.once('connect', () => {
        clearTimeout(timer);
        connected = true;
        opened++;
        held.add(socket);
        if (slow) {
          socket.write('GET /healthz HTTP/1.1\r\nx-slow: ');
          trickle = setInterval(() => socket.write('a'), slowMs);
        }
        resolve();
      });
      socket.on('error', () => {});
      socket.once('close', () => {
        clearTimeout(timer);
        clearInterval(trickle);
        if (held.delete(socket)) closedByServer++;
        if (!connected) {
          failed++;
          resolve();
        }
      });
    });

  // Round-robin over the sources, so each one's connections arrive throughout the flood.
  const queue: FloodPlan['sources'][number][] = [];
  for (let round = 0; queue.length < plan.sources.reduce((n, s) => n + s.count, 0); round++)
    for (const s of plan.sources) if (round < s.count) queue.push(s);
  let next = 0;
  const worker = async () => {
    while (next < queue.length) {
      const s = queue[next++]!;
      await one(s.from, s.slow === true);
    }
  };
  await Promise.all(Array.from({ length: pending }, worker));
  done = true;
  report();
}

if (import.meta.filename === process.argv[1]) await flood(JSON.parse(process.argv[2]!) as FloodPlan);
