/**
 * Many tenants at once, each sending the webhook a large pod that looks ordinary (issue 37): tens of
 * thousands of volumes, hundreds of thousands of args, or a large object with an `oldObject` as large.
 * Every body is different (its own namespace, uid and secret reference), so no cache answers one.
 *
 * Run as its own process (a tenant's pods are not the API server's client): `node
 * test/siege/tenant-crowd.ts` with the plan as JSON in argv[2]. Caller i sends from 127.1.x.y, an
 * address of its own, each round one body of `bodyShapes[(i + round) % length]`, as the API server sends
 * it: retried after Retry-After on 429 until the webhook's timeoutSeconds runs out. When every caller is
 * done it prints one JSON line: a TenantCall per call.
 */
import { execFileSync, spawn } from 'node:child_process';
import { Agent, request } from 'node:https';
import type { TLSSocket } from 'node:tls';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import {
  admissionCall,
  ordinaryBody,
  processMemory,
  type Answer,
  type LoadTarget,
} from '../webhook/hostile-load.ts';
import { MAX_JSON_VALUES } from '../../webhook/admission/json-limits.ts';
import { MAX_BODY_BYTES } from '../../webhook/body-budget.ts';
import { SERVER_NAME } from '../webhook/tls-certs.ts';

/**
 * The kinds of large body a tenant sends: as many volumes, args or env entries (in an object and an
 * `oldObject` alike) as the JSON value limit lets through, or the review's 59,000 volumes, past it.
 */
export type TenantShape = 'volumes' | 'args' | 'object-and-old' | 'volumes-59000';

export const TENANT_SHAPES: readonly TenantShape[] = ['volumes', 'args', 'object-and-old', 'volumes-59000'];

/** How a crowd's bodies arrive. */
export type CrowdTiming =
  /** Every caller sends its round's body at the same moment. */
  | 'together'
  /** Callers start `staggerMs` apart, then go on at their own pace. */
  | 'staggered'
  /** Every body is sent in 64 KiB pieces, one every `slowMs`: seconds per body. */
  | 'slow';

export interface CrowdPlan {
  readonly port: number;
  readonly ca: string;
  readonly callers: number;
  readonly rounds: number;
  readonly timing: CrowdTiming;
  readonly shapes?: readonly TenantShape[];
  /** Bodies between 1.8 and 2.8 MB: each caller's size follows from its number. */
  readonly deadlineMs: number;
  readonly staggerMs?: number;
  readonly slowMs?: number;
}

/** One tenant's call: its body, and what the webhook answered (after retries). */
export interface TenantCall {
  readonly shape: TenantShape;
  readonly bytes: number;
  /** The final HTTP status; 0 when the deadline passed (`error` says so) or the connection failed. */
  readonly status: number;
  /** allowed or denied for an AdmissionReview answer; the HTTP error's text otherwise. */
  readonly outcome: string;
  /** The refusal's message or the error's text, cut to 300 characters. */
  readonly message: string;
  /** Answers 429 with Retry-After before the last one. */
  readonly shed: number;
  /** Retry-After of every 429 seen. */
  readonly retryAfter: readonly string[];
  readonly error?: string;
  /** Where a try without an answer was when it ended: its TLS handshake, sending its body, or after. */
  readonly stage?: Stage;
}

/** How far a try got: its connection's handshake not done yet, its body not all sent, or all sent. */
export type Stage = 'handshake' | 'sending' | 'sent';

/** An error of a try, and how far the try got. */
class TryError extends Error {
  readonly stage: Stage;
  constructor(cause: Error, stage: Stage) {
    super(cause.message);
    this.name = cause.name;
    this.stage = stage;
  }
}

/** The address caller `i` sends from: 127.1.0.1 and up, never 127.0.0.1 (the ordinary pods'). */
export const callerAddress = (i: number): string => `127.1.${Math.floor(i / 250)}.${1 + (i % 250)}`;

/** Volumes, args and env: how many of each make a body of about `mb` MB. */
function bodyTemplate(shape: TenantShape, mb: number): string {
  const pod = (spec: Record<string, unknown>) => ({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      generateName: 'web-@SEED@-',
      namespace: 'tenant-@SEED@',
      labels: { app: 'web', 'secret-agent.io/inject': 'true' },
      annotations: {
        'secret-agent.io/inject': 'true',
        'secret-agent.io/secret-db': 'aws:prod/db-@SEED@',
        'secret-agent.io/aws-region': 'eu-west-1',
      },
    },
    spec,
  });
  const bytes = mb * 1_000_000;
  const app = { name: 'app', image: 'nginx:1.27' };
  let object: unknown;
  let oldObject: unknown = null;
  switch (shape) {
    case 'volumes':
    case 'volumes-59000': {
      // Volumes of 4 JSON values each, as many as fit the value limit; their names make the size.
      const count = shape === 'volumes' ? Math.floor((MAX_JSON_VALUES - 100) / 4) : 59_000;
      const name = (i: number) => i.toString(36).padEnd(Math.round(bytes / count) - 26, '-');
      object = pod({
        containers: [app],
        volumes: Array.from({ length: count }, (_, i) => ({ name: name(i), emptyDir: {} })),
      });
      break;
    }
    case 'args': {
      // Args of a JSON value each, as many as fit the value limit; their length makes the size.
      const count = MAX_JSON_VALUES - 100;
      const arg = (i: number) => i.toString(36).padEnd(Math.round(bytes / count) - 3, '-');
      object = pod({ containers: [{ ...app, args: Array.from({ length: count }, (_, i) => arg(i)) }] });
      break;
    }
    case 'object-and-old': {
      // Half the body each: env entries of about 48 bytes and 3 JSON values (the oldObject's are not
      // counted: it is never parsed).
      const count = Math.min(Math.floor((MAX_JSON_VALUES - 100) / 3), Math.round(bytes / 2 / 48));
      const env = Array.from({ length: count }, (_, i) => ({
        name: `VAR_${i}`,
        value: `value of ${i} here`,
      }));
      object = pod({ containers: [{ ...app, env }] });
      oldObject = pod({ containers: [{ ...app, env }] });
      break;
    }
  }
  return JSON.stringify({
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: '00000000-0000-4000-b000-@SEED@',
      kind: { group: '', version: 'v1', kind: 'Pod' },
      resource: { group: '', version: 'v1', resource: 'pods' },
      namespace: 'tenant-@SEED@',
      operation: 'CREATE',
      userInfo: { username: 'system:serviceaccount:kube-system:replicaset-controller' },
      object,
      oldObject,
      dryRun: false,
    },
  });
}

/** Templates by shape and size, made once: a body is its template with its seed in place. */
const templates = new Map<string, string>();

/** Caller `i`'s body of round `round`: 1.9 to 2.8 MB, and no other body like it. */
export function tenantBody(shape: TenantShape, i: number, round: number): Buffer {
  const mb = 1.9 + ((i * 7 + round * 3) % 10) / 10;
  const key = `${shape}:${mb}`;
  let template = templates.get(key);
  if (template === undefined) templates.set(key, (template = bodyTemplate(shape, mb)));
  const seed = String(i * 1000 + round).padStart(12, '0');
  return Buffer.from(template.replaceAll('@SEED@', seed));
}

/**
 * The bodies that make admission hold the most, each with as many JSON values as the limit lets
 * through and at most MAX_BODY_BYTES: one-member objects whose names are all new (a hidden class each),
 * one object of that many members (a dictionary), and env entries, mounts or containers, which the pod
 * view copies and admission checks one by one.
 */
export type WorstShape = 'new-names' | 'one-object' | 'env' | 'mounts' | 'containers';

export const WORST_SHAPES: readonly WorstShape[] = ['new-names', 'one-object', 'env', 'mounts', 'containers'];

/** The n-th body of `shape`: its own names, namespace and uid, so no cache answers it. */
export function worstBody(shape: WorstShape, n: number): Buffer {
  // Each name padded so that the values the limit allows fill the body.
  const fields: Record<WorstShape, [field: string, values: number, item: (i: number, w: number) => string]> =
    {
      'new-names': ['tolerations', 2, (i, w) => `{"${tag(i, w)}":0}`],
      'one-object': ['nodeSelector', 1, (i, w) => `"${tag(i, w)}":"0"`],
      env: ['env', 3, (i, w) => `{"name":"V${tag(i, w)}","value":"0"}`],
      mounts: ['volumeMounts', 3, (i, w) => `{"name":"m","mountPath":"/${tag(i, w)}"}`],
      containers: ['containers', 2, (i, w) => `{"name":"c${tag(i, w)}"}`],
    };
  const tag = (i: number, width: number) => (n * 1_000_000 + i).toString(36).padStart(width, 'k');
  const [field, values, item] = fields[shape];
  const count = Math.floor((MAX_JSON_VALUES - 100) / values);
  const namespace = `worst-${n}`;
  const pod = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      generateName: 'web-',
      namespace,
      labels: { 'secret-agent.io/inject': 'true' },
      annotations: {
        'secret-agent.io/inject': 'true',
        'secret-agent.io/secret-db': `aws:prod/db-${n}`,
        'secret-agent.io/aws-region': 'eu-west-1',
      },
    },
    spec: {
      containers: [
        {
          name: 'app',
          image: 'nginx:1.27',
          ...(field === 'env' || field === 'volumeMounts' ? { [field]: '@' } : {}),
        },
      ],
      ...(field === 'env' || field === 'volumeMounts' ? {} : { [field]: '@' }),
    },
  };
  const text = JSON.stringify({
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: `00000000-0000-4000-c000-${String(n).padStart(12, '0')}`,
      kind: { group: '', version: 'v1', kind: 'Pod' },
      namespace,
      operation: 'CREATE',
      object: pod,
      oldObject: null,
    },
  });
  const [open, close] = field === 'nodeSelector' ? ['{', '}'] : ['[', ']'];
  const width =
    Math.floor((MAX_BODY_BYTES - text.length - 64) / count) - 1 - (item(0, 0).length - tag(0, 0).length);
  const items = Array.from({ length: count }, (_, i) => item(i, width));
  return Buffer.from(text.replace('"@"', `${open}${items.join(',')}${close}`));
}

/** One POST of `body` from `from`; slow: in 64 KiB pieces, one every `slowMs`. */
function post(
  plan: CrowdPlan,
  agent: Agent,
  from: string,
  body: Buffer,
  timeoutMs: number,
): Promise<{ status: number; body: string; retryAfter?: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        localAddress: from,
        port: plan.port,
        path: '/mutate',
        method: 'POST',
        ca: plan.ca,
        servername: SERVER_NAME,
        agent,
        signal: AbortSignal.timeout(Math.ceil(timeoutMs)),
        headers: { 'content-type': 'application/json', 'content-length': body.length },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const retryAfter = res.headers['retry-after'];
          // An answer that came before the body was all sent: the rest is not sent.
          if (!req.writableFinished) req.destroy();
          resolve({
            status: res.statusCode!,
            body: Buffer.concat(chunks).toString('utf8'),
            ...(typeof retryAfter === 'string' ? { retryAfter } : {}),
          });
        });
        res.on('error', reject);
      },
    );
    let stage: Stage = 'handshake';
    req.on('socket', (socket: TLSSocket) => {
      // A kept-alive connection is up already.
      if (socket.getProtocol()) stage = 'sending';
      else socket.once('secureConnect', () => (stage = 'sending'));
    });
    req.on('finish', () => (stage = 'sent'));
    req.on('error', (e) => reject(new TryError(e, stage)));
    if (plan.timing !== 'slow') {
      req.end(body);
      return;
    }
    void (async () => {
      const piece = 64 * 1024;
      for (let at = 0; at < body.length && !req.destroyed; at += piece) {
        req.write(body.subarray(at, at + piece));
        await sleep(plan.slowMs ?? 100);
      }
      if (!req.destroyed) req.end();
    })();
  });
}

/** One admission call as the API server makes it, retried after Retry-After until the deadline. */
async function tenantCall(
  plan: CrowdPlan,
  agent: Agent,
  from: string,
  shape: TenantShape,
  body: Buffer,
): Promise<TenantCall> {
  const started = performance.now();
  const retryAfter: string[] = [];
  const call = (
    status: number,
    outcome: string,
    message: string,
    error?: string,
    stage?: Stage,
  ): TenantCall => ({
    shape,
    bytes: body.length,
    status,
    outcome,
    message: message.slice(0, 300),
    shed: retryAfter.length,
    retryAfter,
    ...(error === undefined ? {} : { error }),
    ...(stage === undefined ? {} : { stage }),
  });
  for (;;) {
    const left = plan.deadlineMs - (performance.now() - started);
    if (left <= 0) return call(0, 'deadline', '', 'deadline');
    let reply;
    try {
      reply = await post(plan, agent, from, body, left);
    } catch (e) {
      const error = (e as Error).name === 'AbortError' ? 'deadline' : (e as Error).message;
      return call(0, error, '', error, e instanceof TryError ? e.stage : undefined);
    }
    if (reply.status === 429 && reply.retryAfter !== undefined) {
      retryAfter.push(reply.retryAfter);
      await sleep(Number(reply.retryAfter) * 1000);
      continue;
    }
    if (reply.status !== 200) {
      const error = (JSON.parse(reply.body) as { error?: string }).error ?? '';
      return call(reply.status, `HTTP ${reply.status}`, error);
    }
    const { response } = JSON.parse(reply.body) as {
      response: { allowed: boolean; status?: { message: string } };
    };
    return call(200, response.allowed ? 'allowed' : 'denied', response.status?.message ?? '');
  }
}

/** Every caller's rounds; resolves with their calls. */
export async function crowd(plan: CrowdPlan): Promise<TenantCall[]> {
  const shapes = plan.shapes ?? TENANT_SHAPES;
  const calls: TenantCall[] = [];
  // A round starts for everyone at once when the timing says together: callers wait for the slowest.
  let waiting: (() => void)[] = [];
  const together = () =>
    new Promise<void>((resolve) => {
      waiting.push(resolve);
      if (waiting.length < plan.callers) return;
      const go = waiting;
      waiting = [];
      for (const g of go) g();
    });
  await Promise.all(
    Array.from({ length: plan.callers }, async (_, i) => {
      const agent = new Agent({ keepAlive: true, maxSockets: 1 });
      const from = callerAddress(i);
      if (plan.timing === 'staggered') await sleep(i * (plan.staggerMs ?? 50));
      for (let r = 0; r < plan.rounds; r++) {
        const shape = shapes[(i + r) % shapes.length]!;
        const body = tenantBody(shape, i, r);
        if (plan.timing === 'together') await together();
        calls.push(await tenantCall(plan, agent, from, shape, body));
      }
      agent.destroy();
    }),
  );
  return calls;
}

export interface CrowdFigures {
  /** Peak resident set of the webhook over its life (VmHWM), MiB. */
  readonly peakMiB: number;
  /**
   * The most the webhook's connections held in the kernel's receive buffers at once (sampled), MiB:
   * what arrived and was not read yet. The container's memory is charged for it too, not its RSS.
   */
  readonly peakSocketMiB: number;
  /** The largest private (anonymous) resident set sampled, MiB. */
  readonly peakAnonymousMiB: number;
  /** Its resident set before the crowd, MiB. */
  readonly beforeMiB: number;
  readonly gone: boolean;
  readonly calls: readonly TenantCall[];
  readonly ordinary: readonly Answer[];
}

/**
 * Runs `plan`'s crowd (in a process of its own) against `target` while an ordinary pod is sent from
 * 127.0.0.1 every `ordinaryEveryMs`, until the crowd is done; then reads the webhook's peak from /proc.
 */
export async function runCrowd(
  target: LoadTarget,
  plan: Omit<CrowdPlan, 'port' | 'ca'>,
  ordinaryEveryMs: number,
): Promise<CrowdFigures> {
  try {
    receiveQueues(target.port);
  } catch (e) {
    throw new Error("ss is needed to read the kernel's socket buffers: apt-get install iproute2", {
      cause: e,
    });
  }
  let gone = false;
  void target.gone.then(() => (gone = true));
  const before = processMemory(target.pid);
  let peakAnonymous = before.anonymous;
  const sampler = setInterval(() => {
    if (gone) return;
    try {
      peakAnonymous = Math.max(peakAnonymous, processMemory(target.pid).anonymous);
    } catch {
      // Gone between the check and the read.
    }
  }, 20);
  let peakSocket = 0;
  const sockets = setInterval(() => (peakSocket = Math.max(peakSocket, receiveQueues(target.port))), 100);
  const child = spawn(
    process.execPath,
    [fileURLToPath(import.meta.url), JSON.stringify({ ...plan, port: target.port, ca: target.ca })],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
  let crowdDone = false;
  void exited.then(() => (crowdDone = true));
  const ordinary: Answer[] = [];
  const calls: Promise<void>[] = [];
  const agent = new Agent({ keepAlive: true });
  try {
    for (let n = 0; !crowdDone && !gone; n++) {
      calls.push(
        admissionCall(target.port, target.ca, agent, ordinaryBody(n), plan.deadlineMs).then((a) => {
          ordinary.push(a);
        }),
      );
      await sleep(ordinaryEveryMs);
    }
    await Promise.all(calls);
    const code = await exited;
    if (code !== 0) throw new Error(`the crowd exited ${code}: ${out.slice(0, 500)}`);
  } finally {
    clearInterval(sampler);
    clearInterval(sockets);
    agent.destroy();
    child.kill('SIGKILL');
  }
  const after = gone ? undefined : processMemory(target.pid);
  return {
    peakMiB: after?.peak ?? NaN,
    peakAnonymousMiB: peakAnonymous,
    peakSocketMiB: peakSocket / 2 ** 20,
    beforeMiB: before.rss,
    gone,
    calls: JSON.parse(out) as TenantCall[],
    ordinary,
  };
}

/**
 * The bytes the kernel holds for the server's connections on `port`, received and not read yet
 * (`ss`'s skmem r of each). iproute2's ss: `apt-get install iproute2`.
 */
export function receiveQueues(port: number): number {
  const out = execFileSync('ss', ['-tmnH', 'sport', '=', `:${port}`], { encoding: 'utf8' });
  let bytes = 0;
  for (const m of out.matchAll(/skmem:\(r(\d+),/g)) bytes += Number(m[1]);
  return bytes;
}

if (import.meta.main) {
  const plan = JSON.parse(process.argv[2]!) as CrowdPlan;
  const calls = await crowd(plan);
  process.stdout.write(`${JSON.stringify(calls)}\n`);
  process.exit(0);
}
