/**
 * A tenant's hostile admission bodies, sent concurrently to a running webhook while ordinary pods keep
 * arriving: how far its memory goes and whether ordinary pods are still answered in time.
 * test/image/webhook-hostile-load.test.ts runs it against the image under the Deployment's memory limit
 * and asserts on the figures. `node test/webhook/hostile-load.ts [BUNDLE [ROOT]]` runs it against a built
 * bundle (dist/webhook.js by default; ROOT's deploy/base gives NODE_OPTIONS, HOSTILE_NODE_OPTIONS
 * overrides it, HOSTILE_KINDS picks kinds) and prints them: how the figures before the limits were
 * measured, with a build of the commit before them.
 *
 * Every request is sent as the API server sends it and retried as it retries: client-go's REST client
 * retries an answer 429 (or 5xx) that carries Retry-After, after that many seconds, until the webhook's
 * timeoutSeconds runs out.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { Agent, request } from 'node:https';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { ROOT } from '../support/run-agent.ts';
import { deployedWebhook } from './deployed-webhook.ts';
import { AGENT_IMAGE, basicPod, review } from './fixtures.ts';
import { certDir, makeServingPair, SERVER_NAME } from './tls-certs.ts';

const MiB = 1024 * 1024;

/** The kinds of hostile body, each a way one pod's spec made the webhook's memory grow. */
export type HostileKind =
  | 'template-1MiB'
  | 'template-2.5MiB'
  | 'rotation-command-1MiB'
  | 'many-annotations'
  | 'deep-json'
  | 'wide-json'
  | 'containers-9000';

export const HOSTILE_KINDS: readonly HostileKind[] = [
  'template-1MiB',
  'template-2.5MiB',
  'rotation-command-1MiB',
  'many-annotations',
  'deep-json',
  'wide-json',
  'containers-9000',
];

/** Text of `bytes` characters that differs with `seed`, so no two bodies share a cache entry. */
function filler(bytes: number, seed: number): string {
  const line = `line ${seed} of a config file nobody needs, with words and {braces} and spaces\n`;
  return line.repeat(Math.ceil(bytes / line.length)).slice(0, bytes);
}

/** A hostile AdmissionReview body: the n-th of its kind, in its own namespace and with its own uid. */
export function hostileBody(kind: HostileKind, n: number): Buffer {
  const namespace = `tenant-${n}`;
  const uid = `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`;
  const withPod = (pod: ReturnType<typeof basicPod>) =>
    Buffer.from(
      JSON.stringify(review({ ...pod, metadata: { ...pod.metadata, namespace } }, { namespace, uid })),
    );
  switch (kind) {
    case 'template-1MiB':
    case 'template-2.5MiB':
      // mustache's parser makes a token per character of text.
      return withPod(
        basicPod({
          'secret-agent.io/secret-db': 'aws:prod/db',
          'secret-agent.io/aws-region': 'eu-west-1',
          'secret-agent.io/template-db': `{{password}} ${filler(kind === 'template-1MiB' ? MiB : 2.5 * MiB, n)}`,
        }),
      );
    case 'rotation-command-1MiB':
      // Admitted, its env parsed by the agent's parser, and (before the limits) kept in a cache.
      return withPod(
        basicPod({
          'secret-agent.io/secret-db': 'aws:prod/db',
          'secret-agent.io/aws-region': 'eu-west-1',
          'secret-agent.io/mode': 'sidecar',
          'secret-agent.io/rotation-command': `/bin/reload ${filler(MiB, n)}`,
        }),
      );
    case 'many-annotations': {
      // Distinct free text under distinct names: an error each, every error redacted against every value.
      const annotations: Record<string, string> = { 'secret-agent.io/secret-db': 'aws:prod/db' };
      for (let i = 0; i < 5000; i++)
        annotations[`secret-agent.io/note-${n}-${i}`] = `free text ${n}.${i} that is no setting at all`;
      return withPod(basicPod(annotations));
    }
    case 'deep-json': {
      // A field the webhook reads (restartPolicy is copied into its view of the pod), nested 1.4M deep.
      const depth = 1_400_000;
      const pod = basicPod({ 'secret-agent.io/secret-db': `aws:prod/db-${n}` }, { restartPolicy: '@' });
      const text = JSON.stringify(
        review({ ...pod, metadata: { ...pod.metadata, namespace } }, { namespace, uid }),
      );
      return Buffer.from(text.replace('"@"', `${'['.repeat(depth)}${']'.repeat(depth)}`));
    }
    case 'containers-9000': {
      // The answer's amplification (issue 30): every container got a mount and an env var holding the
      // mount path, so this 0.26 MB pod of 9,000 minimal containers was a 27 MB answer.
      const containers = Array.from({ length: 9000 }, (_, i) => ({ name: `c${i}`, image: 'x' }));
      return withPod(
        basicPod(
          {
            'secret-agent.io/secret-db': 'aws:prod/db',
            'secret-agent.io/aws-region': 'eu-west-1',
            'secret-agent.io/mount-path': `/${'m'.repeat(1023)}`,
          },
          { containers },
        ),
      );
    }
    case 'wide-json': {
      // A field the webhook never reads, holding a million empty objects.
      const pod = basicPod({ 'secret-agent.io/secret-db': `aws:prod/db-${n}` }, { tolerations: '@' });
      const text = JSON.stringify(
        review({ ...pod, metadata: { ...pod.metadata, namespace } }, { namespace, uid }),
      );
      return Buffer.from(text.replace('"@"', `[${Array(1_000_000).fill('{}').join(',')}]`));
    }
  }
}

/** An ordinary pod: its own uid and reference, so it is never answered from a cache. */
export function ordinaryBody(n: number): Buffer {
  const pod = basicPod({
    'secret-agent.io/secret-token': `aws:prod/api-token-${n}`,
    'secret-agent.io/aws-region': 'eu-west-1',
  });
  return Buffer.from(
    JSON.stringify(review(pod, { uid: `00000000-0000-4000-9000-${String(n).padStart(12, '0')}` })),
  );
}

export interface Answer {
  /** The final HTTP status, after retries; 0 when the deadline passed (error `deadline`) or the connection failed. */
  readonly status: number;
  readonly body: string;
  /** Milliseconds from the first attempt to the final answer. */
  readonly ms: number;
  /** Answers 429 (or 5xx) with Retry-After that were retried. */
  readonly retried: number;
  /** Retry-After of the last answer that had one. */
  readonly retryAfter?: string;
  readonly error?: string;
}

function post(
  port: number,
  ca: string,
  agent: Agent,
  body: Buffer,
  timeoutMs: number,
): Promise<{ status: number; body: string; retryAfter?: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path: '/mutate',
        method: 'POST',
        ca,
        servername: SERVER_NAME,
        agent,
        // The whole call, waiting for a socket included: the API server's deadline is for the answer.
        signal: AbortSignal.timeout(Math.ceil(timeoutMs)),
        headers: { 'content-type': 'application/json', 'content-length': body.length },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const retryAfter = res.headers['retry-after'];
          resolve({
            status: res.statusCode!,
            body: Buffer.concat(chunks).toString('utf8'),
            ...(typeof retryAfter === 'string' ? { retryAfter } : {}),
          });
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** One admission call as the API server makes it: retried on 429/5xx with Retry-After, until the deadline. */
export async function admissionCall(
  port: number,
  ca: string,
  agent: Agent,
  body: Buffer,
  deadlineMs: number,
): Promise<Answer> {
  const started = performance.now();
  let retried = 0;
  let retryAfter: string | undefined;
  const failed = (error: string): Answer => ({
    status: 0,
    body: '',
    ms: performance.now() - started,
    retried,
    error,
    ...(retryAfter ? { retryAfter } : {}),
  });
  for (;;) {
    const left = deadlineMs - (performance.now() - started);
    if (left <= 0) return failed('deadline');
    let reply;
    try {
      reply = await post(port, ca, agent, body, left);
    } catch (e) {
      // The deadline's abort, while waiting for a socket, sending or waiting for the answer.
      return failed((e as Error).name === 'AbortError' ? 'deadline' : (e as Error).message);
    }
    const wait = reply.retryAfter === undefined ? NaN : Number(reply.retryAfter);
    if ((reply.status === 429 || reply.status >= 500) && Number.isInteger(wait)) {
      retried++;
      retryAfter = reply.retryAfter;
      await sleep(wait * 1000);
      continue;
    }
    return {
      ...reply,
      ms: performance.now() - started,
      retried,
      ...(retryAfter && !reply.retryAfter ? { retryAfter } : {}),
    };
  }
}

/** A webhook under test: where it listens, the CA of its certificate, its process. */
export interface LoadTarget {
  readonly port: number;
  readonly ca: string;
  /** Its process id on this machine, for /proc. */
  readonly pid: number;
  /** Settles when the process is gone (killed for want of memory, say). */
  readonly gone: Promise<unknown>;
}

export interface RunningBundle extends LoadTarget {
  /** The process's stderr so far. */
  stderr(): string;
  /** Its log lines at level error or above, so far. */
  errors(): readonly Record<string, unknown>[];
  stop(): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Starts `webhookJs` as the image runs it: env only, TLS files, NODE_OPTIONS as deployed. */
export async function startBundle(webhookJs: string, nodeOptions: string): Promise<RunningBundle> {
  const pair = await makeServingPair();
  const dir = certDir();
  dir.write(pair);
  const child = spawn(process.execPath, [webhookJs], {
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      ...(nodeOptions ? { NODE_OPTIONS: nodeOptions } : {}),
      AGENT_IMAGE,
      NATIVE_SIDECARS: 'true',
      WEBHOOK_HOST: '127.0.0.1',
      WEBHOOK_PORT: '0',
      TLS_CERT_FILE: dir.cert,
      TLS_KEY_FILE: dir.key,
    },
  });
  let stderr = '';
  let partial = '';
  const errors: Record<string, unknown>[] = [];
  let exited: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => resolve((exited = { code, signal }))),
  );
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const port = new Promise<number>((resolve, reject) => {
    child.stdout.on('data', (d: Buffer) => {
      const lines = (partial + d.toString()).split('\n');
      partial = lines.pop()!;
      for (const line of lines) {
        // Admission decisions are one line each: only the start-up line and errors are kept.
        if (!line.startsWith('{')) continue;
        const entry = JSON.parse(line) as Record<string, unknown>;
        if (entry.msg === 'webhook listening') resolve(entry.port as number);
        if ((entry.level as number) >= 50) errors.push(entry);
      }
    });
    void exit.then(({ code, signal }) =>
      reject(new Error(`the webhook exited (${code ?? signal}): ${stderr}`)),
    );
  });
  return {
    port: await port,
    ca: pair.ca,
    pid: child.pid!,
    gone: exit,
    stderr: () => stderr,
    errors: () => errors,
    stop: async () => {
      if (!exited) child.kill('SIGTERM');
      const result = await exit;
      dir[Symbol.dispose]();
      return result;
    },
  };
}

/** A process's memory in MiB from /proc/PID/status. */
export interface ProcessMemory {
  /** Resident set now (VmRSS). */
  readonly rss: number;
  /** Its peak since the process started (VmHWM). */
  readonly peak: number;
  /** The private part of the resident set (RssAnon): heap, buffers; what no reclaim can take back. */
  readonly anonymous: number;
  /** The part backed by files (RssFile): Node's own binary, mostly, charged to whoever read it first. */
  readonly file: number;
}

export function processMemory(pid: number): ProcessMemory {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const mib = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)![1]) / 1024;
  return { rss: mib('VmRSS'), peak: mib('VmHWM'), anonymous: mib('RssAnon'), file: mib('RssFile') };
}

export interface HostileLoadFigures {
  /** Peak resident set of the webhook over its life (VmHWM), MiB. */
  readonly peakMiB: number;
  /** The largest private (anonymous) resident set sampled during the run, MiB. */
  readonly peakAnonymousMiB: number;
  /** Its file-backed resident set at that sample, MiB. */
  readonly fileMiB: number;
  /** Its resident set once the attack was over, MiB. */
  readonly afterMiB: number;
  /** The webhook process was gone before the run ended (e.g. killed for want of memory). */
  readonly gone: boolean;
  /** The kinds sent: the run's `kinds`. */
  readonly kinds: readonly HostileKind[];
  /** The answers to each kind sent; a kind not sent has none. */
  readonly hostile: Readonly<Record<HostileKind, readonly Answer[]>>;
  readonly ordinary: readonly Answer[];
}

export interface HostileLoadOptions {
  /** Hostile requests in flight at once. */
  readonly concurrency: number;
  /** Bodies of each hostile kind sent in all, each a different one. */
  readonly perKind: number;
  /** An ordinary pod is sent this often while the attack lasts. */
  readonly ordinaryEveryMs: number;
  /**
   * The attack goes on (more hostile bodies, each a new one) until at least this many ordinary pods
   * were sent during it: how many pods meet the attack depends on the machine's speed otherwise.
   */
  readonly minOrdinary: number;
  /** The API server's deadline for an answer (timeoutSeconds). */
  readonly deadlineMs: number;
  /** The kinds to send; HOSTILE_KINDS unless given. */
  readonly kinds?: readonly HostileKind[];
}

/**
 * Sends `perKind` bodies of every hostile kind, `concurrency` at once, kinds interleaved; meanwhile
 * an ordinary pod every `ordinaryEveryMs`. The webhook's peak memory is read from /proc at the end.
 */
export async function runHostileLoad(
  target: LoadTarget,
  options: HostileLoadOptions,
): Promise<HostileLoadFigures> {
  const { port, ca } = target;
  const kinds = options.kinds ?? HOSTILE_KINDS;
  const hostileAgent = new Agent({ keepAlive: true, maxSockets: options.concurrency });
  // The API server opens another connection rather than queue an admission behind a slow one.
  const ordinaryAgent = new Agent({ keepAlive: true });
  const hostile = Object.fromEntries(HOSTILE_KINDS.map((k) => [k, [] as Answer[]])) as Record<
    HostileKind,
    Answer[]
  >;
  const ordinary: Answer[] = [];
  // Each body made when it is sent, every one different: no cache answers any of them. Kinds
  // interleaved; past perKind of each, more only while too few ordinary pods have met the attack.
  let next = 0;
  const ordinaryCalls: Promise<void>[] = [];
  const take = (): [HostileKind, number] | undefined => {
    const i = next;
    if (i >= options.perKind * kinds.length && ordinaryCalls.length >= options.minOrdinary) return undefined;
    next++;
    return [kinds[i % kinds.length]!, Math.floor(i / kinds.length)];
  };
  let attacking = true;
  let gone = false;
  void target.gone.then(() => (gone = true));
  // Sampled often: heap garbage lives until the next collection, so a peak lasts longer than this.
  let peak: ProcessMemory | undefined;
  const sampler = setInterval(() => {
    if (gone) return;
    try {
      const now = processMemory(target.pid);
      if (!peak || now.anonymous > peak.anonymous) peak = now;
    } catch {
      // Gone between the check and the read.
    }
  }, 20);
  const workers = Array.from({ length: options.concurrency }, async () => {
    for (let body = take(); body && !gone; body = take()) {
      const [kind, n] = body;
      hostile[kind].push(
        await admissionCall(port, ca, hostileAgent, hostileBody(kind, n), options.deadlineMs),
      );
    }
  });
  const sender = (async () => {
    for (let n = 0; attacking && !gone; n++) {
      ordinaryCalls.push(
        admissionCall(port, ca, ordinaryAgent, ordinaryBody(n), options.deadlineMs).then((a) => {
          ordinary.push(a);
        }),
      );
      await sleep(options.ordinaryEveryMs);
    }
  })();
  try {
    await Promise.all(workers);
  } finally {
    attacking = false;
    await sender;
    await Promise.all(ordinaryCalls);
    hostileAgent.destroy();
    ordinaryAgent.destroy();
    clearInterval(sampler);
  }
  const after = gone ? undefined : processMemory(target.pid);
  return {
    peakMiB: after?.peak ?? NaN,
    peakAnonymousMiB: peak?.anonymous ?? NaN,
    fileMiB: peak?.file ?? NaN,
    afterMiB: after?.rss ?? NaN,
    gone,
    kinds,
    hostile,
    ordinary,
  };
}

/** One line per kind: what its answers were. */
export function summarize(figures: HostileLoadFigures): string {
  const outcome = (a: Answer) => {
    if (a.status === 0) return `failed (${a.error})`;
    if (a.status !== 200) return `HTTP ${a.status}`;
    const response = (JSON.parse(a.body) as { response: { allowed: boolean } }).response;
    return response.allowed ? 'allowed' : 'denied';
  };
  const count = (answers: readonly Answer[]) => {
    const by = new Map<string, number>();
    for (const a of answers) by.set(outcome(a), (by.get(outcome(a)) ?? 0) + 1);
    const ms = answers.map((a) => a.ms).sort((x, y) => x - y);
    const retried = answers.reduce((n, a) => n + a.retried, 0);
    return `${[...by].map(([k, v]) => `${v} ${k}`).join(', ')}; ${retried} retries; ms p50 ${ms[Math.floor(ms.length / 2)]?.toFixed(0)} max ${ms.at(-1)?.toFixed(0)}`;
  };
  return [
    `peak RSS ${figures.peakMiB.toFixed(0)} MiB (VmHWM), peak private ${figures.peakAnonymousMiB.toFixed(0)} MiB + ${figures.fileMiB.toFixed(0)} MiB of files, after ${figures.afterMiB.toFixed(0)} MiB${figures.gone ? '; the webhook was GONE before the end' : ''}`,
    ...figures.kinds.map((k) => `  ${k}: ${count(figures.hostile[k])}`),
    `  ordinary: ${count(figures.ordinary)}`,
  ].join('\n');
}

if (import.meta.main) {
  const webhookJs = process.argv[2] ?? join(ROOT, 'dist/webhook.js');
  const deployed = deployedWebhook(process.argv[3] ?? ROOT);
  const nodeOptions = process.env.HOSTILE_NODE_OPTIONS ?? deployed.nodeOptions;
  const webhook = await startBundle(webhookJs, nodeOptions);
  const figures = await runHostileLoad(webhook, {
    concurrency: Number(process.env.HOSTILE_CONCURRENCY ?? 8),
    perKind: Number(process.env.HOSTILE_PER_KIND ?? 8),
    ordinaryEveryMs: 100,
    minOrdinary: 50,
    deadlineMs: deployed.timeoutSeconds * 1000,
    // A comma-separated subset of HOSTILE_KINDS, e.g. HOSTILE_KINDS=containers-9000.
    ...(process.env.HOSTILE_KINDS ? { kinds: process.env.HOSTILE_KINDS.split(',') as HostileKind[] } : {}),
  });
  const stopped = await webhook.stop();
  console.log(
    `${webhookJs} NODE_OPTIONS=${JSON.stringify(nodeOptions)}\n${summarize(figures)}\n${JSON.stringify(stopped)}`,
  );
  console.log(webhook.stderr().slice(0, 2000));
}
