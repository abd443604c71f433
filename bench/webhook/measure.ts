/**
 * Webhook admission figures, each against a floor measured in the same run:
 *   webhook  the built dist/webhook.js (child process, env only, generated certificate), answering
 *            a realistic AdmissionReview (a Deployment's pod with 3 secrets) with its JSONPatch
 *   floor    a trivial node:https server (child process, same certificate and TLS settings) that
 *            reads the same request and answers a fixed body of the webhook's response size
 * Each request carries its own uid, as the API server's do, in two body modes:
 *   replicas  one pod template: the admission cache answers all but the first (the realistic case)
 *   distinct  a secret reference differs per request too: every cache lookup misses
 * Two load shapes over keep-alive HTTPS, generated in a worker thread (its own event loop):
 *   fixed rate  1,000 req/s, open loop: each request leaves on a fixed schedule whether or not earlier
 *               ones have returned, as the API server sends them (target: p99 < 2 ms over the floor's)
 *   max         autocannon, 16 connections, closed loop (target: ≥ 5,000 req/s); the servers' CPU per
 *               request is read here (target: ≤ 2 × the floor's)
 * autocannon's own rate limit is a per-second quota (each connection sends its share back to back at
 * the top of every second, then idles), which measures bursts rather than a rate, and its histogram
 * counts whole milliseconds; so the fixed rate is paced here and timed with performance.now().
 * On a shared machine the background load drifts, so the floor and the webhook alternate in short
 * rounds and the ratios compare like with like; and each server's CPU time per request (from /proc)
 * is reported, which the other tenants barely move.
 *
 * `node bench/webhook/measure.ts` runs it alone (after `node images/build.ts`). BENCH_WEBHOOK_SECONDS: measured
 * seconds per server, mode and shape (default 10); BENCH_WEBHOOK_ROUNDS: rounds they are split into (5).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { deployedWebhook } from '../../test/webhook/deployed-webhook.ts';
import { issueCertificateAuthority, issueServingCertificate } from '../../webhook/tls/issue-certificates.ts';
import { bodyFor, bodyTemplate, MODES, REF_DIGITS, type BodyMode } from './admission-request.ts';
import {
  modeFigures,
  type CpuTotals,
  type ModeFigures,
  type RunName,
  type WebhookFigures,
  type Who,
} from './figures.ts';
import { LoadWorker, type LoadResult } from './load.ts';
import { admitOnce, FLOOR_SOURCE, startServer, type Server } from './servers.ts';
import { formatWebhookFigures } from './tables.ts';

const root = new URL('../../', import.meta.url).pathname;

const RATE = 1000;
const CONNECTIONS = 16;
/** Unmeasured start of every fixed-rate round: the keep-alive connections are opened then. */
const PACED_WARMUP_MS = 250;
/** Full-load warm-up of each server and body mode before anything is measured (JIT, TLS, sockets). */
const WARMUP_SECONDS = 3;

export async function benchWebhook(
  options: { seconds?: number; rounds?: number } = {},
): Promise<WebhookFigures> {
  const seconds = options.seconds ?? Number(process.env.BENCH_WEBHOOK_SECONDS ?? 10);
  const rounds = options.rounds ?? Number(process.env.BENCH_WEBHOOK_ROUNDS ?? 5);
  const perRound = seconds / rounds;
  const loadBefore = loadavg()[0]!;
  const dir = mkdtempSync(join(tmpdir(), 'secret-agent-bench-webhook-'));
  const servers: Server[] = [];
  const load = new LoadWorker();
  try {
    const now = new Date();
    const ca = await issueCertificateAuthority('bench CA', now, 86_400_000);
    const leaf = await issueServingCertificate(ca, ['localhost'], now, 3_600_000, ['127.0.0.1']);
    const certFile = join(dir, 'tls.crt');
    const keyFile = join(dir, 'tls.key');
    writeFileSync(certFile, leaf.cert, { mode: 0o600 });
    writeFileSync(keyFile, leaf.key, { mode: 0o600 });

    const webhook = await startServer(
      [join(root, 'dist/webhook.js')],
      {
        WEBHOOK_HOST: '127.0.0.1',
        WEBHOOK_PORT: '0',
        TLS_MODE: 'file',
        TLS_CERT_FILE: certFile,
        TLS_KEY_FILE: keyFile,
        AGENT_IMAGE: 'ghcr.io/example/secret-agent:0.1.0',
        // As deploy/base runs it: V8's heap capped below the container's memory limit.
        NODE_OPTIONS: deployedWebhook().nodeOptions,
        // No API server here: fixed, so every run renders the same (native) patch.
        NATIVE_SIDECARS: 'true',
        AGENT_VAULT_ADDR: 'https://vault.example.com:8200',
        AGENT_VAULT_ROLE: 'shop',
        LOG_LEVEL: 'info',
      },
      'webhook listening',
    );
    servers.push(webhook);
    const bodies = bodyTemplate();
    // Numbers the load never sends (it counts up from 1): these answers stay out of its cache hits.
    const answers = await Promise.all(
      MODES.map((mode) => admitOnce(webhook.port, ca.cert, bodyFor(bodies, mode, 10 ** REF_DIGITS - 1))),
    );
    const responseBytes = Buffer.byteLength(answers[0]!);
    if (answers.some((a) => Buffer.byteLength(a) !== responseBytes))
      throw new Error('the body modes get answers of different sizes: the floor cannot match both');
    writeFileSync(join(dir, 'floor-body.json'), answers[0]!);
    const floor = await startServer(
      ['-e', FLOOR_SOURCE],
      { TLS_CERT_FILE: certFile, TLS_KEY_FILE: keyFile, FLOOR_BODY_FILE: join(dir, 'floor-body.json') },
      'floor listening',
    );
    servers.push(floor);
    const server = (who: Who) => (who === 'Floor' ? floor : webhook);

    const paced = (who: Who, mode: BodyMode, s: number) =>
      load.run({
        kind: 'paced',
        port: server(who).port,
        ca: ca.cert,
        bodies,
        mode,
        responseBytes,
        rate: RATE,
        warmupMs: PACED_WARMUP_MS,
        seconds: s,
      });
    const max = (who: Who, mode: BodyMode, s: number) =>
      load.run({ kind: 'max', port: server(who).port, bodies, mode, connections: CONNECTIONS, seconds: s });

    const figures = {} as Record<BodyMode, ModeFigures>;
    for (const mode of MODES) {
      for (const who of ['Floor', 'Webhook'] as const) await max(who, mode, WARMUP_SECONDS);
      const runs: Record<RunName, LoadResult[]> = {
        pacedFloor: [],
        pacedWebhook: [],
        maxFloor: [],
        maxWebhook: [],
      };
      // Alternate who goes first, so neither always follows the other's garbage.
      const order = (i: number): readonly Who[] =>
        i % 2 === 0 ? ['Floor', 'Webhook'] : ['Webhook', 'Floor'];
      for (let i = 0; i < rounds; i++)
        for (const who of order(i)) runs[`paced${who}`].push(await paced(who, mode, perRound));
      const cpu: CpuTotals = { Floor: 0, Webhook: 0 };
      for (let i = 0; i < rounds; i++)
        for (const who of order(i)) {
          const before = server(who).cpuMs();
          runs[`max${who}`].push(await max(who, mode, perRound));
          const after = server(who).cpuMs();
          cpu[who] = before === undefined || after === undefined ? undefined : cpu[who]! + after - before;
        }
      figures[mode] = modeFigures(runs, cpu);
    }

    return {
      requestBytes: Buffer.byteLength(bodyFor(bodies, 'replicas', 0)),
      responseBytes,
      rounds,
      rate: RATE,
      connections: CONNECTIONS,
      seconds,
      modes: figures,
      targets: { cpuPerAdmissionVsFloor: 2, p99OverFloorMsAtRate: 2, minReqPerSec: 5000 },
      machine: {
        cpus: availableParallelism(),
        loadAverage: [Math.round(loadBefore * 100) / 100, Math.round(loadavg()[0]! * 100) / 100],
      },
    };
  } finally {
    await load.close();
    await Promise.all(servers.map((s) => s.stop()));
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.main) {
  const figures = await benchWebhook();
  console.log(formatWebhookFigures(figures));
  console.log(JSON.stringify(figures, null, 2));
}
