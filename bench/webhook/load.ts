import { Agent, request } from 'node:https';
import { isMainThread, parentPort, Worker } from 'node:worker_threads';
import autocannon from 'autocannon';
import { bodyFor, type BodyMode, type BodyTemplate } from './admission-request.ts';

/**
 * The load, generated in a worker thread (its own event loop) that takes one job at a time, in two
 * shapes over keep-alive HTTPS: a fixed rate, open loop, paced and timed here; and autocannon's
 * closed loop at full speed. This module is the worker's entry too.
 */

/** A load run, executed in the worker thread. */
export type LoadJob =
  | {
      readonly kind: 'paced';
      readonly port: number;
      readonly ca: string;
      readonly bodies: BodyTemplate;
      readonly mode: BodyMode;
      readonly responseBytes: number;
      readonly rate: number;
      readonly warmupMs: number;
      readonly seconds: number;
    }
  | {
      readonly kind: 'max';
      readonly port: number;
      readonly bodies: BodyTemplate;
      readonly mode: BodyMode;
      readonly connections: number;
      readonly seconds: number;
    };

/** What a run returns: raw latencies (ms), so rounds can be pooled before percentiles are taken. */
export interface LoadResult {
  readonly latencies: number[];
  readonly errors: number;
  /** Requests sent (paced, measured part) or answered 2xx (max). */
  readonly count: number;
  readonly seconds: number;
}

/** Request numbers, shared by every run of the worker: no uid (or distinct pod) is ever sent twice. */
let sequence = 1;

export class LoadWorker {
  readonly #worker = new Worker(new URL(import.meta.url));
  #next = 0;

  run(job: LoadJob): Promise<LoadResult> {
    const id = this.#next++;
    return new Promise((resolve, reject) => {
      const onMessage = (m: { id: number; result?: LoadResult; error?: string }) => {
        if (m.id !== id) return;
        this.#worker.off('message', onMessage);
        this.#worker.off('error', reject);
        if (m.result) resolve(m.result);
        else reject(new Error(`load worker: ${m.error}`));
      };
      this.#worker.on('message', onMessage);
      this.#worker.once('error', reject);
      this.#worker.postMessage({ id, job });
    });
  }

  async close(): Promise<void> {
    await this.#worker.terminate();
  }
}

/** Open loop: request i leaves at start + i/rate, whether or not earlier ones have returned. */
async function pacedLoad(job: Extract<LoadJob, { kind: 'paced' }>): Promise<LoadResult> {
  const agent = new Agent({ keepAlive: true, maxSockets: 64, ca: job.ca, scheduling: 'lifo' });
  const unmeasured = Math.round((job.rate * job.warmupMs) / 1000);
  const total = unmeasured + job.rate * job.seconds;
  const latencies: number[] = [];
  let errors = 0;
  let sent = 0;
  let finished = 0;
  let firstMeasuredAt = 0;
  let lastSentAt = 0;
  const started = performance.now();
  await new Promise<void>((resolve) => {
    const send = (measured: boolean) => {
      const body = bodyFor(job.bodies, job.mode, sequence++);
      const t0 = performance.now();
      if (measured && firstMeasuredAt === 0) firstMeasuredAt = t0;
      lastSentAt = t0;
      const done = (ok: boolean) => {
        if (measured) {
          if (ok) latencies.push(performance.now() - t0);
          else errors++;
        }
        if (++finished === total) resolve();
      };
      const req = request(
        {
          host: '127.0.0.1',
          port: job.port,
          path: '/mutate',
          method: 'POST',
          agent,
          headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
        },
        (res) => {
          let bytes = 0;
          res.on('data', (d: Buffer) => (bytes += d.length));
          res.on('end', () => done(res.statusCode === 200 && bytes === job.responseBytes));
          res.on('error', () => done(false));
        },
      );
      req.on('error', () => done(false));
      req.end(body);
    };
    const tick = () => {
      const due = Math.min(total, Math.floor(((performance.now() - started) * job.rate) / 1000) + 1);
      while (sent < due) send(sent++ >= unmeasured);
      // setTimeout(0) fires about every millisecond: one request per tick at 1,000 req/s.
      if (sent < total) setTimeout(tick, 0);
    };
    tick();
  });
  agent.destroy();
  const measured = total - unmeasured;
  return {
    latencies,
    errors,
    count: measured,
    seconds: (lastSentAt - firstMeasuredAt) / 1000 + 1 / job.rate,
  };
}

/** Closed loop: autocannon keeps `connections` requests in flight for `seconds`. */
async function maxLoad(job: Extract<LoadJob, { kind: 'max' }>): Promise<LoadResult> {
  const latencies: number[] = [];
  let wrong = 0;
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    const instance = autocannon(
      {
        url: `https://127.0.0.1:${job.port}/mutate`,
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        // A body per request (setupRequest), not one prepared for all.
        requests: [{ setupRequest: (r) => ({ ...r, body: bodyFor(job.bodies, job.mode, sequence++) }) }],
        connections: job.connections,
        duration: job.seconds,
      },
      (err: unknown, res: autocannon.Result) => (err ? reject(err as Error) : resolve(res)),
    );
    // The response event carries the exact time in ms; the result's histogram rounds to whole ms.
    instance.on('response', (_client, status, _bytes, ms) => {
      if (status === 200) latencies.push(ms);
      else wrong++;
    });
  });
  return {
    latencies,
    errors: result.errors + result.timeouts + wrong,
    count: result['2xx'],
    seconds: result.duration,
  };
}

if (!isMainThread) {
  parentPort!.on('message', ({ id, job }: { id: number; job: LoadJob }) => {
    (job.kind === 'paced' ? pacedLoad(job) : maxLoad(job)).then(
      (result) => parentPort!.postMessage({ id, result }),
      (e: unknown) => parentPort!.postMessage({ id, error: (e as Error).message }),
    );
  });
}
