/**
 * The kubelet's HTTP probes of a port while tenants flood it (tenant-flood.ts, in processes of their
 * own): each probe as the kubelet sends one (its own connection, the request written as soon as it is
 * connected, `Connection: close`, success on 200-399 within timeoutSeconds, the connect included), /healthz and /readyz each on its own schedule. Shared by the resident's and the
 * Node sidecar's batteries (test/siege/resident-probes.test.ts, test/siege/agent-probes.test.ts).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { connect, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  tenantAddress,
  type FloodKind,
  type TenantFloodFigures,
  type TenantFloodPlan,
} from './tenant-flood.ts';

const FLOOD_JS = new URL('./tenant-flood.ts', import.meta.url).pathname;

/**
 * What a client gives the agent's port here, where it is exposed (AGENT_HTTP_ADDR 0.0.0.0, for Prometheus):
 * the 3 s the kubelet's probes had when the agent had probes. A connect flood can fill the port's kernel
 * queue for a moment; the kernel then drops a SYN, which the client's connect retries 1 s later (Linux's
 * initial retransmission timeout): 3 s survives one dropped SYN and still leaves 2 s for the answer.
 * Prometheus gives a scrape 10 s.
 */
export const PORT_CLIENT_TIMEOUT_SECONDS = 3;

/** A tenants' attack: which addresses keep which connections. */
export interface TenantShape {
  readonly name: string;
  readonly sources: TenantFloodPlan['sources'];
}

const KIND_NAMES: Record<FloodKind, string> = {
  idle: 'idle',
  slow: 'slow-sending',
  churn: 'connect-and-close',
  dribble: 'dribbling',
  'tls-idle': 'idle-after-TLS',
  'tls-slow': 'slow-sending-after-TLS',
  scrape: 'GET-/metrics',
  pipelined: 'pipelining-GET-/metrics',
  'tls-busy': 'dribbling-pipelined-bodies-after-TLS',
  'tls-pool': 'keep-alive-pool',
  blink: 'silent-for-0.9-s',
};

/**
 * Groups of `addresses` addresses, each keeping `each` connections of `kind`, every one reopened as
 * soon as it is closed; the addresses numbered on from one group to the next (tenantAddress).
 */
export function tenants(
  ...groups: readonly [addresses: number, each: number, kind: FloodKind][]
): TenantShape {
  const sources: TenantFloodPlan['sources'][number][] = [];
  for (const [addresses, each, kind] of groups)
    for (let i = 0; i < addresses; i++)
      sources.push({ from: tenantAddress(sources.length), count: each, kind });
  const parts = groups.map(
    ([addresses, each, kind]) => `${addresses} addresses × ${each} ${KIND_NAMES[kind]}`,
  );
  return { name: parts.join(' + '), sources };
}

export interface ProbeResult {
  readonly ok: boolean;
  /** From the connect call to the handshake's completion: the SYN's fate (a dropped SYN waits 1 s). */
  readonly connectMs: number;
  /** From the connect call to the answer's end (or the failure). */
  readonly ms: number;
  readonly failure?: string;
}

/** Where the kubelet probes: a port, over TLS (scheme: HTTPS, the certificate not checked) or not. */
export interface ProbeTarget {
  readonly host: string;
  readonly port: number;
  readonly tls?: boolean;
  /** The source address (the node's), if not the default. */
  readonly from?: string;
  /** The probe's timeoutSeconds, in ms: the connect, the request and the whole answer within it. */
  readonly timeoutMs: number;
  /**
   * How long after its handshake the request arrives: a network hop and the kubelet's own scheduling,
   * next to nothing on loopback. 0: written as soon as connected.
   */
  readonly requestDelayMs?: number;
}

/** One probe of `path`, as the kubelet sends it. */
export function kubeletProbe(target: ProbeTarget, path: string): Promise<ProbeResult> {
  const { host, port, from } = target;
  const started = performance.now();
  return new Promise((resolve) => {
    const tcp = connect({ host, port, ...(from === undefined ? {} : { localAddress: from }) });
    let connectMs = NaN;
    let got = '';
    let settled = false;
    const done = (failure?: string) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      tcp.destroy();
      const status = Number(/^HTTP\/1\.[01] (\d{3}) /.exec(got)?.[1]);
      const answered = failure === undefined && status >= 200 && status < 400;
      resolve({
        ok: answered,
        connectMs,
        ms: performance.now() - started,
        ...(answered ? {} : { failure: failure ?? (got === '' ? 'closed unanswered' : `HTTP ${status}`) }),
      });
    };
    const timer = setTimeout(
      () => done(Number.isNaN(connectMs) ? 'timeout connecting' : 'timeout after connecting'),
      target.timeoutMs,
    );
    const request = `GET ${path} HTTP/1.1\r\nHost: ${host}:${port}\r\nUser-Agent: kube-probe/1.33\r\nAccept: */*\r\nConnection: close\r\n\r\n`;
    const listen = (stream: Socket) => {
      stream.on('data', (d: Buffer) => (got += d.toString('latin1')));
      stream.once('end', () => done());
      stream.once('error', (e: NodeJS.ErrnoException) => done(e.code ?? e.message));
      stream.once('close', () => done());
    };
    tcp.once('connect', () => {
      connectMs = performance.now() - started;
      if (target.tls !== true) {
        if (!target.requestDelayMs) return void tcp.write(request);
        return void setTimeout(() => tcp.write(request), target.requestDelayMs);
      }
      // As the kubelet's HTTPS probes: no certificate check.
      const secure = tlsConnect({ socket: tcp, servername: host, rejectUnauthorized: false }, () =>
        secure.write(request),
      );
      listen(secure);
    });
    if (target.tls !== true) listen(tcp);
    else tcp.once('error', (e: NodeJS.ErrnoException) => done(e.code ?? e.message));
  });
}

export interface ProbeSiegeFigures {
  readonly probes: number;
  readonly answered: number;
  /** The answered probes' times (connect to answer), ms, in order: how many within any timeout. */
  readonly answeredMs: readonly number[];
  /** Failures by kind, e.g. { "timeout connecting": 2 }. */
  readonly failures: Readonly<Record<string, number>>;
  /** Probe times (connect to answer), ms: median, 99th percentile, most. */
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
  /** The longest connect (a SYN that waited in, or was dropped from, a full queue). */
  readonly maxConnectMs: number;
  /** The samples' largest values: `sample` is called every 50 ms throughout. */
  readonly peak: Readonly<Record<string, number>>;
  /** What each flood process reported when it was stopped. */
  readonly floods: readonly TenantFloodFigures[];
}

/**
 * At a lower CPU priority (nice 5, about a third of the target's weight): an attacking pod spends its
 * own CPU, not its target's. Here the floods share two cores with the target; at an equal share they
 * would outrun any server by starving it of CPU, which says nothing about the port.
 */
function startFlood(plan: TenantFloodPlan): {
  child: ChildProcess;
  ramped: Promise<void>;
  figures: Promise<TenantFloodFigures>;
} {
  const child = spawn('nice', ['-n', '5', process.execPath, FLOOD_JS, JSON.stringify(plan)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  const lines: ((text: string) => void)[] = [];
  child.stdout!.on('data', (d: Buffer) => {
    out += d.toString();
    for (const l of lines) l(out);
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  const waitFor = <T>(parse: (text: string) => T | undefined, what: string) =>
    new Promise<T>((resolve, reject) => {
      const check = (text: string) => {
        const value = parse(text);
        if (value !== undefined) resolve(value);
      };
      lines.push(check);
      check(out);
      void exited.then((code) => reject(new Error(`the flood exited (${code}) before ${what}: ${out}`)));
    });
  const ramped = waitFor((t) => (t.includes('ramped\n') ? true : undefined), 'it ramped').then(() => {});
  const figures = waitFor((t) => {
    const line = t.split('\n').find((l) => l.startsWith('{'));
    return line === undefined ? undefined : (JSON.parse(line) as TenantFloodFigures);
  }, 'its figures');
  ramped.catch(() => {});
  figures.catch(() => {});
  return { child, ramped, figures };
}

const percentile = (sorted: readonly number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] ?? NaN;

/**
 * Starts the floods, waits until every lane has connected once (bounded), then probes: one worker per
 * entry of `paths`, each probing its path every `everyMs` (one probe in flight at a time, as the
 * kubelet's worker), until `probes` have been sent or `maxMs` has passed; then stops the floods.
 * `sample` is read every 50 ms from the start of the floods to their end.
 */
export async function probeSiege(options: {
  readonly target: ProbeTarget;
  readonly floods: readonly TenantFloodPlan[];
  readonly paths: readonly string[];
  /** The workers' requestDelayMs, in turn (worker i gets the i-th, modulo): as on a real network. */
  readonly requestDelaysMs?: readonly number[];
  readonly everyMs: number;
  readonly probes: number;
  readonly maxMs: number;
  /** Run alongside the probes, from the ramp on; `probing()` turns false when they are done. */
  readonly alongside?: (probing: () => boolean) => Promise<void>;
  readonly sample: () => Readonly<Record<string, number>>;
}): Promise<ProbeSiegeFigures> {
  const peak: Record<string, number> = { ...options.sample() };
  const read = () => {
    try {
      for (const [k, v] of Object.entries(options.sample())) peak[k] = Math.max(peak[k] ?? v, v);
    } catch {
      // The target is gone: the probes say so.
    }
  };
  const sampler = setInterval(read, 50);
  const floods = options.floods.map(startFlood);
  const results: ProbeResult[] = [];
  try {
    await Promise.race([
      Promise.all(floods.map((f) => f.ramped)),
      sleep(30_000, undefined, { ref: false }).then(() => {
        throw new Error('the floods did not ramp up within 30 s');
      }),
    ]);
    const end = performance.now() + options.maxMs;
    let sent = 0;
    let probing = true;
    const alongside = options.alongside?.(() => probing);
    await Promise.all(
      options.paths.map(async (path, i) => {
        // Spread over the period, as the kubelet's workers start at random offsets.
        await sleep((options.everyMs * i) / options.paths.length);
        while (sent < options.probes && performance.now() < end) {
          sent++;
          const tick = sleep(options.everyMs);
          const delays = options.requestDelaysMs ?? [];
          const requestDelayMs =
            delays.length === 0 ? options.target.requestDelayMs : delays[i % delays.length];
          results.push(await kubeletProbe({ ...options.target, requestDelayMs }, path));
          await tick;
        }
      }),
    );
    probing = false;
    await alongside;
  } finally {
    clearInterval(sampler);
    for (const f of floods) f.child.kill('SIGTERM');
  }
  read();
  const figures = await Promise.all(
    floods.map((f) =>
      Promise.race([
        f.figures,
        sleep(10_000, undefined, { ref: false }).then(() => {
          f.child.kill('SIGKILL');
          throw new Error('a flood did not report its figures within 10 s of SIGTERM');
        }),
      ]),
    ),
  );
  const failures: Record<string, number> = {};
  for (const r of results) if (!r.ok) failures[r.failure!] = (failures[r.failure!] ?? 0) + 1;
  const ms = results.map((r) => r.ms).sort((a, b) => a - b);
  return {
    probes: results.length,
    answered: results.filter((r) => r.ok).length,
    answeredMs: results
      .filter((r) => r.ok)
      .map((r) => r.ms)
      .sort((a, b) => a - b),
    failures,
    p50Ms: percentile(ms, 0.5),
    p99Ms: percentile(ms, 0.99),
    maxMs: ms.at(-1) ?? NaN,
    maxConnectMs: Math.max(
      ...results.map((r) => (Number.isNaN(r.connectMs) ? options.target.timeoutMs : r.connectMs)),
    ),
    peak,
    floods: figures,
  };
}

/** One line: the shape's figures. */
export function describeSiege(name: string, f: ProbeSiegeFigures): string {
  const pct = ((100 * f.answered) / Math.max(1, f.probes)).toFixed(1);
  const peaks = Object.entries(f.peak)
    .map(([k, v]) => `${k} ${Number.isInteger(v) ? v : v.toFixed(1)}`)
    .join(', ');
  const opened = f.floods.reduce((n, x) => n + x.opened, 0);
  const failed = f.floods.reduce((n, x) => n + x.failed, 0);
  const closed = f.floods.reduce((n, x) => n + x.closedByServer, 0);
  const most = f.floods.reduce((n, x) => n + x.mostOpen, 0);
  return (
    `${name}: probes answered ${f.answered}/${f.probes} (${pct} %)` +
    `${f.answered < f.probes ? ` failures ${JSON.stringify(f.failures)}` : ''}; ms p50 ${f.p50Ms.toFixed(1)} p99 ${f.p99Ms.toFixed(1)} max ${f.maxMs.toFixed(1)} (connect max ${f.maxConnectMs.toFixed(1)}); ` +
    `peak ${peaks}; flood opened ${opened}, failed ${failed}, closed by the port ${closed}, at most ${most} open`
  );
}
