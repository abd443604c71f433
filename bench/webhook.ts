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
 * `node bench/webhook.ts` runs it alone (after `node images/build.ts`). BENCH_WEBHOOK_SECONDS: measured
 * seconds per server, mode and shape (default 10); BENCH_WEBHOOK_ROUNDS: rounds they are split into (5).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { Agent, request } from 'node:https';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { isMainThread, parentPort, Worker } from 'node:worker_threads';
import autocannon from 'autocannon';
import { deployedWebhook } from '../test/webhook/deployed-webhook.ts';
import { issueCertificateAuthority, issueServingCertificate } from '../webhook/tls/issue-certificates.ts';

const root = new URL('../', import.meta.url).pathname;

const RATE = 1000;
const CONNECTIONS = 16;
/** Unmeasured start of every fixed-rate round: the keep-alive connections are opened then. */
const PACED_WARMUP_MS = 250;
/** Full-load warm-up of each server and body mode before anything is measured (JIT, TLS, sockets). */
const WARMUP_SECONDS = 3;

/** How the request bodies vary from one request to the next (see the top of this file). */
export type BodyMode = 'replicas' | 'distinct';
const MODES: readonly BodyMode[] = ['replicas', 'distinct'];

export interface RateFigures {
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
  /** Measured requests answered 200 with the expected body size. */
  readonly ok: number;
  /** Connection errors, other statuses, short bodies. */
  readonly errors: number;
  /** Requests sent per second over the measured part: the schedule kept. */
  readonly sentPerSec: number;
}

export interface MaxFigures {
  readonly reqPerSec: number;
  readonly p99Ms: number;
  readonly errors: number;
  /**
   * Server CPU time per answered request (µs): what a request costs, whatever else the machine is
   * doing; 1e6 / this is the ceiling of one dedicated core. Null where /proc is missing.
   */
  readonly cpuUsPerRequest: number | null;
}

/** One body mode: both load shapes, webhook and floor. */
export interface ModeFigures {
  readonly fixedRate: {
    readonly webhook: RateFigures;
    readonly floor: RateFigures;
    readonly p50VsFloor: number;
    readonly p99VsFloor: number;
    /** The webhook's p99 minus the floor's, at the same rate in the same rounds. */
    readonly p99OverFloorMs: number;
  };
  readonly max: {
    readonly webhook: MaxFigures;
    readonly floor: MaxFigures;
    readonly throughputVsFloor: number;
    readonly cpuPerRequestVsFloor: number | null;
  };
}

export interface WebhookFigures {
  readonly requestBytes: number;
  readonly responseBytes: number;
  readonly rounds: number;
  readonly rate: number;
  readonly connections: number;
  /** Measured seconds per server, mode and shape. */
  readonly seconds: number;
  readonly modes: Readonly<Record<BodyMode, ModeFigures>>;
  readonly targets: {
    readonly cpuPerAdmissionVsFloor: number;
    readonly p99OverFloorMsAtRate: number;
    readonly minReqPerSec: number;
  };
  /** 1-minute load average before and after, against the number of CPUs: how shared the machine was. */
  readonly machine: { readonly cpus: number; readonly loadAverage: readonly [number, number] };
}

/** A load run, executed in the worker thread. */
type LoadJob =
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
interface LoadResult {
  readonly latencies: number[];
  readonly errors: number;
  /** Requests sent (paced, measured part) or answered 2xx (max). */
  readonly count: number;
  readonly seconds: number;
}

// ---------------------------------------------------------------------------------------------
// The request: a pod as a Deployment's ReplicaSet creates it, opting in with 3 secrets.

const UID_PREFIX = '705ab4f5-6393-11e8-b7cc-';
const REF_PREFIX = 'vault:secret/data/shop/web-';
/** Digits of the request number in a uid and a reference: fixed, so every body and answer has one size. */
const UID_DIGITS = 12;
const REF_DIGITS = 8;

export function admissionReviewBody(
  uid = `${UID_PREFIX}42010a800002`,
  apiKeyRef = `${REF_PREFIX}${'0'.repeat(REF_DIGITS)}#api_key`,
): string {
  const pod = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      generateName: 'web-7d4b9c8f6d-',
      namespace: 'shop',
      labels: {
        app: 'web',
        'app.kubernetes.io/name': 'web',
        'app.kubernetes.io/part-of': 'shop',
        'pod-template-hash': '7d4b9c8f6d',
        'secret-agent.io/inject': 'true',
      },
      annotations: {
        'kubectl.kubernetes.io/restartedAt': '2026-11-20T09:12:44Z',
        'secret-agent.io/inject': 'true',
        'secret-agent.io/secret-db-password':
          'arn:aws:secretsmanager:eu-west-1:123456789012:secret:prod/db-AbCdEf#password',
        'secret-agent.io/secret-api-key': apiKeyRef,
        'secret-agent.io/secret-tls': 'projects/shop-prod-1234/secrets/web-tls',
        'secret-agent.io/format-tls': 'split',
        'secret-agent.io/refresh-interval': '5m',
        'secret-agent.io/rotation-http-url': 'POST http://127.0.0.1:8080/-/reload',
      },
      ownerReferences: [
        {
          apiVersion: 'apps/v1',
          kind: 'ReplicaSet',
          name: 'web-7d4b9c8f6d',
          uid: '0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9',
          controller: true,
          blockOwnerDeletion: true,
        },
      ],
    },
    spec: {
      serviceAccountName: 'web',
      securityContext: { runAsUser: 10001, runAsGroup: 10001, fsGroup: 10001 },
      containers: [
        {
          name: 'web',
          image: 'registry.example.com/shop/web:4.18.2',
          ports: [
            { name: 'http', containerPort: 8080, protocol: 'TCP' },
            { name: 'metrics', containerPort: 9090, protocol: 'TCP' },
          ],
          env: [
            { name: 'NODE_ENV', value: 'production' },
            { name: 'DB_HOST', value: 'db.shop.svc.cluster.local' },
            { name: 'LOG_FORMAT', value: 'json' },
            { name: 'POD_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } },
          ],
          resources: { requests: { cpu: '250m', memory: '256Mi' }, limits: { memory: '512Mi' } },
          readinessProbe: { httpGet: { path: '/ready', port: 'http' }, periodSeconds: 5 },
          livenessProbe: { httpGet: { path: '/live', port: 'http' }, periodSeconds: 10 },
          volumeMounts: [
            {
              name: 'kube-api-access-x7k2p',
              mountPath: '/var/run/secrets/kubernetes.io/serviceaccount',
              readOnly: true,
            },
            { name: 'cache', mountPath: '/var/cache/web' },
          ],
          securityContext: { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true },
          terminationMessagePath: '/dev/termination-log',
          terminationMessagePolicy: 'File',
          imagePullPolicy: 'IfNotPresent',
        },
        {
          name: 'log-shipper',
          image: 'registry.example.com/infra/log-shipper:2.3.0',
          resources: { requests: { cpu: '20m', memory: '32Mi' }, limits: { memory: '64Mi' } },
          volumeMounts: [
            {
              name: 'kube-api-access-x7k2p',
              mountPath: '/var/run/secrets/kubernetes.io/serviceaccount',
              readOnly: true,
            },
          ],
        },
      ],
      volumes: [
        { name: 'cache', emptyDir: {} },
        {
          name: 'kube-api-access-x7k2p',
          projected: {
            defaultMode: 420,
            sources: [
              { serviceAccountToken: { expirationSeconds: 3607, path: 'token' } },
              { configMap: { name: 'kube-root-ca.crt', items: [{ key: 'ca.crt', path: 'ca.crt' }] } },
              {
                downwardAPI: {
                  items: [
                    { path: 'namespace', fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.namespace' } },
                  ],
                },
              },
            ],
          },
        },
      ],
      restartPolicy: 'Always',
      terminationGracePeriodSeconds: 30,
      dnsPolicy: 'ClusterFirst',
      schedulerName: 'default-scheduler',
      enableServiceLinks: true,
      preemptionPolicy: 'PreemptLowerPriority',
      priority: 0,
      tolerations: [
        {
          key: 'node.kubernetes.io/not-ready',
          operator: 'Exists',
          effect: 'NoExecute',
          tolerationSeconds: 300,
        },
        {
          key: 'node.kubernetes.io/unreachable',
          operator: 'Exists',
          effect: 'NoExecute',
          tolerationSeconds: 300,
        },
      ],
    },
  };
  return JSON.stringify({
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid,
      kind: { group: '', version: 'v1', kind: 'Pod' },
      resource: { group: '', version: 'v1', resource: 'pods' },
      requestKind: { group: '', version: 'v1', kind: 'Pod' },
      requestResource: { group: '', version: 'v1', resource: 'pods' },
      name: '',
      namespace: 'shop',
      operation: 'CREATE',
      userInfo: {
        username: 'system:serviceaccount:kube-system:replicaset-controller',
        uid: '1c2b3a49-5867-4e7d-9c0b-a1f2e3d4c5b6',
        groups: ['system:serviceaccounts', 'system:serviceaccounts:kube-system', 'system:authenticated'],
      },
      object: pod,
      oldObject: null,
      dryRun: false,
      options: { apiVersion: 'meta.k8s.io/v1', kind: 'CreateOptions' },
    },
  });
}

/** The bench body cut where the per-request parts go: [before uid, between, after reference]. */
type BodyTemplate = readonly [string, string, string];

function bodyTemplate(): BodyTemplate {
  const uid = '\u0000UID\u0000';
  const ref = '\u0000REF\u0000';
  const text = admissionReviewBody(uid, ref);
  const [before, rest] = text.split(JSON.stringify(uid));
  const [between, after] = rest!.split(JSON.stringify(ref));
  return [before!, between!, after!];
}

/**
 * Request `n`'s body: its own uid, as the API server sends; in `distinct` mode its own secret
 * reference too, so its pod is one the webhook has not seen.
 */
function bodyFor(template: BodyTemplate, mode: BodyMode, n: number): string {
  const uid = `${UID_PREFIX}${String(n).padStart(UID_DIGITS, '0')}`;
  const ref = `${REF_PREFIX}${String(mode === 'distinct' ? n : 0).padStart(REF_DIGITS, '0')}#api_key`;
  return `${template[0]}"${uid}"${template[1]}"${ref}"${template[2]}`;
}

/** Request numbers, shared by every run of the worker: no uid (or distinct pod) is ever sent twice. */
let sequence = 1;

// ---------------------------------------------------------------------------------------------
// The servers under test: child processes that log their port.

const FLOOR_SOURCE = `
const { createServer } = require('node:https');
const { readFileSync } = require('node:fs');
const body = readFileSync(process.env.FLOOR_BODY_FILE);
const server = createServer(
  { cert: readFileSync(process.env.TLS_CERT_FILE), key: readFileSync(process.env.TLS_KEY_FILE), minVersion: 'TLSv1.2' },
  (req, res) => {
    req.on('data', () => {});
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length });
      res.end(body);
    });
  },
);
server.keepAliveTimeout = 30000;
server.listen(0, '127.0.0.1', () => console.log(JSON.stringify({ msg: 'floor listening', port: server.address().port })));
process.once('SIGTERM', () => { server.close(() => process.exit(0)); server.closeIdleConnections(); });
`;

interface Server {
  readonly port: number;
  /** CPU time the process has used (user + system), in ms; undefined where /proc is missing. */
  cpuMs(): number | undefined;
  stop(): Promise<void>;
}

/** Linux: utime + stime from /proc/PID/stat, in clock ticks of 10 ms (USER_HZ is 100 on Linux). */
function processCpuMs(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return undefined;
  }
}

function startServer(argv: string[], env: Record<string, string>, listening: string): Promise<Server> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, argv, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    const exited = new Promise<void>((r) => child.once('close', () => r()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.once('close', (code) => reject(new Error(`${argv[0]} exited ${code} before listening: ${err}`)));
    const onData = (d: Buffer) => {
      out += d.toString();
      const line = out.split('\n').find((l) => l.startsWith('{') && l.includes(listening));
      if (!line) return;
      child.stdout.off('data', onData);
      child.stdout.resume(); // keep draining its logs
      resolve({
        port: (JSON.parse(line) as { port: number }).port,
        cpuMs: () => processCpuMs(child.pid!),
        stop: async () => {
          child.kill('SIGTERM');
          await exited;
        },
      });
    };
    child.stdout.on('data', onData);
  });
}

/** One request, fully checked: the webhook must inject, not just answer. */
function admitOnce(port: number, ca: string, body: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path: '/mutate',
        method: 'POST',
        ca,
        agent: false,
        headers: { 'content-type': 'application/json' },
      },
      (res) => {
        let text = '';
        res.on('data', (d: Buffer) => (text += d.toString()));
        res.on('end', () => {
          const review = JSON.parse(text) as { response?: { allowed?: boolean; patch?: string } };
          if (res.statusCode !== 200 || review.response?.allowed !== true || !review.response.patch)
            reject(new Error(`the webhook did not inject the bench pod: ${res.statusCode} ${text}`));
          else resolve(text);
        });
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

// ---------------------------------------------------------------------------------------------
// The load, in a worker thread that takes one job at a time.

class LoadWorker {
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

// ---------------------------------------------------------------------------------------------

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

const round3 = (x: number) => Math.round(x * 1000) / 1000;
const ratio = (a: number, b: number) => Math.round((a / b) * 100) / 100;

function pooled(results: readonly LoadResult[]) {
  const latencies = results.flatMap((r) => r.latencies).sort((a, b) => a - b);
  return {
    latencies,
    errors: results.reduce((n, r) => n + r.errors, 0),
    count: results.reduce((n, r) => n + r.count, 0),
    seconds: results.reduce((n, r) => n + r.seconds, 0),
  };
}

function rateFigures(results: readonly LoadResult[]): RateFigures {
  const p = pooled(results);
  return {
    p50Ms: round3(percentile(p.latencies, 50)),
    p99Ms: round3(percentile(p.latencies, 99)),
    maxMs: round3(p.latencies.at(-1) ?? NaN),
    ok: p.latencies.length,
    errors: p.errors,
    sentPerSec: Math.round(p.count / p.seconds),
  };
}

function maxFigures(results: readonly LoadResult[], cpuMs: number | undefined): MaxFigures {
  const p = pooled(results);
  return {
    reqPerSec: Math.round(p.count / p.seconds),
    p99Ms: round3(percentile(p.latencies, 99)),
    errors: p.errors,
    cpuUsPerRequest: cpuMs === undefined ? null : Math.round((cpuMs * 1000) / p.count),
  };
}

function modeFigures(runs: Readonly<Record<RunName, LoadResult[]>>, cpu: CpuTotals): ModeFigures {
  const fixedWebhook = rateFigures(runs.pacedWebhook);
  const fixedFloor = rateFigures(runs.pacedFloor);
  const maxWebhook = maxFigures(runs.maxWebhook, cpu.Webhook);
  const maxFloor = maxFigures(runs.maxFloor, cpu.Floor);
  return {
    fixedRate: {
      webhook: fixedWebhook,
      floor: fixedFloor,
      p50VsFloor: ratio(fixedWebhook.p50Ms, fixedFloor.p50Ms),
      p99VsFloor: ratio(fixedWebhook.p99Ms, fixedFloor.p99Ms),
      p99OverFloorMs: round3(fixedWebhook.p99Ms - fixedFloor.p99Ms),
    },
    max: {
      webhook: maxWebhook,
      floor: maxFloor,
      throughputVsFloor: ratio(maxWebhook.reqPerSec, maxFloor.reqPerSec),
      cpuPerRequestVsFloor:
        maxWebhook.cpuUsPerRequest === null || maxFloor.cpuUsPerRequest === null
          ? null
          : ratio(maxWebhook.cpuUsPerRequest, maxFloor.cpuUsPerRequest),
    },
  };
}

type Who = 'Floor' | 'Webhook';
type RunName = `${'paced' | 'max'}${Who}`;
type CpuTotals = Record<Who, number | undefined>;

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

const MODE_TITLES: Readonly<Record<BodyMode, string>> = {
  replicas: 'replicas of one pod template (cache hits)',
  distinct: 'a distinct pod per request (cache misses)',
};

/** The figures as markdown tables, for a terminal or a report. */
export function formatWebhookFigures(f: WebhookFigures): string {
  const lines = [
    `webhook admission over keep-alive HTTPS: request ${f.requestBytes} B (pod with 3 secrets), response ${f.responseBytes} B, each request its own uid;`,
    `floor and webhook alternate in ${f.rounds} rounds; load average ${f.machine.loadAverage.join(' → ')} on ${f.machine.cpus} CPUs`,
  ];
  for (const mode of MODES) {
    const r = f.modes[mode].fixedRate;
    const m = f.modes[mode].max;
    lines.push(
      '',
      `${MODE_TITLES[mode]}: fixed rate ${f.rate} req/s, open loop, ${f.seconds} s measured per server`,
      '',
      '| server | p50 ms | p99 ms | max ms | ok | errors | sent/s |',
      '| --- | ---: | ---: | ---: | ---: | ---: | ---: |',
      ...(['floor', 'webhook'] as const).map((k) => {
        const x = r[k];
        return `| ${k} | ${x.p50Ms} | ${x.p99Ms} | ${x.maxMs} | ${x.ok} | ${x.errors} | ${x.sentPerSec} |`;
      }),
      '',
      `${MODE_TITLES[mode]}: max throughput, autocannon, ${f.connections} connections, ${f.seconds} s measured per server`,
      '',
      '| server | req/s | p99 ms | errors | server CPU µs/request |',
      '| --- | ---: | ---: | ---: | ---: |',
      ...(['floor', 'webhook'] as const).map((k) => {
        const x = m[k];
        return `| ${k} | ${x.reqPerSec} | ${x.p99Ms} | ${x.errors} | ${x.cpuUsPerRequest ?? 'n/a'} |`;
      }),
    );
  }
  const cpu = (mode: BodyMode) => {
    const m = f.modes[mode].max;
    return `${m.cpuPerRequestVsFloor ?? 'n/a'} (${m.webhook.cpuUsPerRequest ?? 'n/a'} / ${m.floor.cpuUsPerRequest ?? 'n/a'} µs)`;
  };
  const p99 = (mode: BodyMode) => {
    const r = f.modes[mode].fixedRate;
    const over = r.p99OverFloorMs;
    return `${over >= 0 ? '+' : ''}${over} ms (${r.webhook.p99Ms} / ${r.floor.p99Ms} ms = ${r.p99VsFloor})`;
  };
  const row = (name: string, value: (mode: BodyMode) => string, target: string) =>
    `| ${name} | ${MODES.map(value).join(' | ')} | ${target} |`;
  lines.push(
    '',
    `| figure, against the floor in the same rounds | ${MODES.map((mode) => MODE_TITLES[mode]).join(' | ')} | target |`,
    '| --- | ---: | ---: | ---: |',
    row('webhook CPU per admission / TLS echo floor', cpu, `≤ ${f.targets.cpuPerAdmissionVsFloor}`),
    row(
      `webhook p99 at ${f.rate} req/s − floor p99 (webhook / floor)`,
      p99,
      `< ${f.targets.p99OverFloorMsAtRate} ms`,
    ),
    row(
      'max throughput (/ floor)',
      (mode) => `${f.modes[mode].max.webhook.reqPerSec} req/s (${f.modes[mode].max.throughputVsFloor})`,
      `≥ ${f.targets.minReqPerSec} req/s`,
    ),
    '',
  );
  return lines.join('\n');
}

if (!isMainThread) {
  parentPort!.on('message', ({ id, job }: { id: number; job: LoadJob }) => {
    (job.kind === 'paced' ? pacedLoad(job) : maxLoad(job)).then(
      (result) => parentPort!.postMessage({ id, result }),
      (e: unknown) => parentPort!.postMessage({ id, error: (e as Error).message }),
    );
  });
} else if (import.meta.main) {
  const figures = await benchWebhook();
  console.log(formatWebhookFigures(figures));
  console.log(JSON.stringify(figures, null, 2));
}
