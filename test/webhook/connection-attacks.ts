/**
 * A tenant's connections to the webhook's port, held open while ordinary pods keep arriving from
 * another address: how far the webhook's memory goes and how many ordinary pods are still answered.
 * The sibling of hostile-load.ts (hostile bodies), with its admission calls, bodies and /proc readings:
 * test/siege/webhook-connections.test.ts runs it against the bundle, and
 * test/image/webhook-hostile-load.test.ts against the image under its memory limit.
 *
 * The attacker connects from 127.0.0.2 and up (any 127.0.0.0/8 address is this machine's; the webhook
 * tells sources apart by address), the ordinary pods come from 127.0.0.1. Every attacking connection
 * the webhook closes is opened again after a short pause, until the attack ends.
 */
import { spawn } from 'node:child_process';
import { connect as tcpConnect, type Socket } from 'node:net';
import { Agent } from 'node:https';
import { connect as tlsConnect } from 'node:tls';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { basicPod, review } from './fixtures.ts';
import { admissionCall, ordinaryBody, processMemory, type Answer, type LoadTarget } from './hostile-load.ts';
import { SERVER_NAME } from './tls-certs.ts';

/** What the attacking connections do once connected. */
export type ConnectionAttack =
  /** Finish the TLS handshake, then send nothing. */
  | { readonly kind: 'idle-tls' }
  /** Connect over TCP and never start TLS. */
  | { readonly kind: 'idle-tcp' }
  /** Declare a body of `declared` bytes, send `first` of them at once, then a byte every `everyMs`. */
  | { readonly kind: 'drip'; readonly declared: number; readonly first: number; readonly everyMs: number }
  /** Ask for as large an answer as a pod can get (about 400 KiB), and never read it. */
  | { readonly kind: 'slow-reader' };

export interface ConnectionAttackOptions {
  readonly attack: ConnectionAttack;
  /** Connections the attacker tries to hold at once, spread evenly over its addresses. */
  readonly connections: number;
  /** How many addresses it attacks from: 127.0.0.2 and up (at most 250). */
  readonly sources: number;
  /** How long the attack lasts once every connection was first opened. */
  readonly durationMs: number;
  /** An ordinary pod is sent from 127.0.0.1 this often while it lasts. */
  readonly ordinaryEveryMs: number;
  /** The API server's deadline for an answer (timeoutSeconds). */
  readonly deadlineMs: number;
}

export interface ConnectionAttackFigures {
  /** Peak resident set of the webhook over its life (VmHWM), MiB. */
  readonly peakMiB: number;
  /** The largest private (anonymous) resident set sampled during the attack, MiB. */
  readonly peakAnonymousMiB: number;
  /** Its resident set before the attack, MiB. */
  readonly beforeMiB: number;
  /** The webhook process was gone before the attack ended. */
  readonly gone: boolean;
  /** Attacking connections opened, and how many of them the webhook closed. */
  readonly opened: number;
  readonly closedByWebhook: number;
  /** The most attacking connections open at once, as the attacker saw them. */
  readonly mostOpen: number;
  readonly ordinary: readonly Answer[];
}

/** The address of the n-th attacking source. */
export const attackerAddress = (n: number): string => `127.0.0.${2 + n}`;

/**
 * A pod whose admission answer is about 400 KiB, as large as the answer limits let a pod make it (450
 * files, 64 containers, a long mount path); every n different, so no cache answers it.
 */
export function bigAnswerBody(n: number): Buffer {
  const annotations: Record<string, string> = {
    'secret-agent.io/aws-region': 'eu-west-1',
    'secret-agent.io/mount-path': `/${'p'.repeat(200)}`,
  };
  for (let i = 0; i < 450; i++)
    annotations[`secret-agent.io/secret-f${i}`] = `aws:prod/${'x'.repeat(500)}-${n}-${i}`;
  const pod = basicPod(annotations, {
    containers: Array.from({ length: 64 }, (_, i) => ({ name: `app-${i}`, image: 'nginx:1.27' })),
  });
  return Buffer.from(
    JSON.stringify(review(pod, { uid: `00000000-0000-4000-a000-${String(n).padStart(12, '0')}` })),
  );
}

/** A TCP connection to the webhook from `from` (tls.connect's types lack localAddress). */
function tcpFrom(port: number, from: string): Socket {
  const socket = tcpConnect({ host: '127.0.0.1', port, localAddress: from });
  socket.on('error', () => {});
  return socket;
}

function post(path: string, length: number): string {
  return `POST ${path} HTTP/1.1\r\nhost: ${SERVER_NAME}\r\ncontent-type: application/json\r\ncontent-length: ${length}\r\n\r\n`;
}

/** Opens one attacking connection from `from` and does `attack` with it; resolves when it closes. */
function attackOnce(
  target: Pick<LoadTarget, 'port' | 'ca'>,
  from: string,
  attack: ConnectionAttack,
  n: number,
  sockets: Set<Socket>,
  onOpen: () => void,
  onClose: () => void,
): Promise<void> {
  return new Promise((resolve) => {
    let timer: NodeJS.Timeout | undefined;
    let connected = false;
    let done = false;
    const opened = () => {
      connected = true;
      onOpen();
    };
    const tcp = tcpFrom(target.port, from);
    // Closed when either is: a TLS socket over a TCP one that was reset before it connected may not
    // report it.
    const closed = () => {
      if (done) return;
      done = true;
      clearInterval(timer);
      sockets.delete(tcp);
      tcp.destroy();
      if (connected) onClose();
      resolve();
    };
    tcp.once('close', closed);
    sockets.add(tcp);
    if (attack.kind === 'idle-tcp') {
      tcp.once('connect', opened);
      return;
    }
    const tls = tlsConnect({ socket: tcp, ca: target.ca, servername: SERVER_NAME }, () => {
      opened();
      if (attack.kind === 'drip') {
        tls.write(post('/mutate', attack.declared));
        tls.write(Buffer.alloc(attack.first, 0x20));
        timer = setInterval(() => tls.write(' '), attack.everyMs);
      } else if (attack.kind === 'slow-reader') {
        const body = bigAnswerBody(n);
        tls.write(post('/mutate', body.length));
        tls.write(body);
        // Never read: what the webhook sends stays in its buffers once the kernel's are full.
        tls.pause();
      }
    });
    tls.on('error', () => {});
    tls.once('close', closed);
  });
}

/** What the attacker's process reports when the attack ends. */
interface AttackerCounts {
  readonly opened: number;
  readonly closedByWebhook: number;
  readonly mostOpen: number;
}

/**
 * The attacker's side, in a process of its own (as a pod is): its slots each open a connection and
 * open it again whenever the webhook closes it, after a pause, until `stop` settles. `ramped` is
 * called once every slot has tried once.
 */
async function attack(
  target: Pick<LoadTarget, 'port' | 'ca'>,
  options: Pick<ConnectionAttackOptions, 'attack' | 'connections' | 'sources'>,
  stop: Promise<void>,
  ramped: () => void,
): Promise<AttackerCounts> {
  const sockets = new Set<Socket>();
  let attacking = true;
  let tried = 0;
  let opened = 0;
  let closedByWebhook = 0;
  let open = 0;
  let mostOpen = 0;
  const onOpen = () => {
    opened++;
    mostOpen = Math.max(mostOpen, ++open);
  };
  const onClose = () => open--;
  void stop.then(() => {
    attacking = false;
    for (const s of sockets) s.destroy();
  });
  // Opened a few at a time at first, as one pod's event loop would.
  const slots = Array.from({ length: options.connections }, async (_, i) => {
    await sleep(Math.floor(i / 50) * 20);
    for (let n = 0; attacking; n++) {
      const from = attackerAddress(i % options.sources);
      const closed = attackOnce(target, from, options.attack, i * 1000 + n, sockets, onOpen, onClose);
      if (n === 0 && ++tried === options.connections) ramped();
      await closed;
      if (!attacking) break;
      closedByWebhook++;
      await sleep(250);
    }
  });
  await Promise.all(slots);
  return { opened, closedByWebhook, mostOpen };
}

/**
 * Holds `connections` attacking connections (from a process of their own, so the attacker's work does
 * not slow the ordinary pods' client) while ordinary pods are sent, then ends the attack and reads the
 * webhook's peak memory from /proc.
 */
export async function runConnectionAttack(
  target: LoadTarget,
  options: ConnectionAttackOptions,
): Promise<ConnectionAttackFigures> {
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
  const attacker = spawn(
    process.execPath,
    [
      fileURLToPath(import.meta.url),
      JSON.stringify({
        port: target.port,
        ca: target.ca,
        attack: options.attack,
        connections: options.connections,
        sources: options.sources,
      }),
    ],
    { stdio: ['pipe', 'pipe', 'inherit'] },
  );
  const exited = new Promise<number | null>((resolve) => attacker.on('exit', resolve));
  let out = '';
  attacker.stdout.on('data', (d: Buffer) => (out += d.toString()));
  try {
    const line = async (what: string, ms: number): Promise<string> => {
      for (let waited = 0; waited < ms; waited += 50) {
        const lines = out.split('\n');
        const found = lines.find((l) => l.startsWith(what));
        if (found) return found;
        await sleep(50);
      }
      throw new Error(`the attacker did not say ${what} within ${ms} ms: ${out}`);
    };
    await line('ramped', 30_000);
    const ordinary: Answer[] = [];
    const calls: Promise<void>[] = [];
    const agent = new Agent({ keepAlive: true });
    const started = performance.now();
    for (let n = 0; performance.now() - started < options.durationMs && !gone; n++) {
      calls.push(
        admissionCall(target.port, target.ca, agent, ordinaryBody(n), options.deadlineMs).then((a) => {
          ordinary.push(a);
        }),
      );
      await sleep(options.ordinaryEveryMs);
    }
    await Promise.all(calls);
    agent.destroy();
    attacker.stdin.end('stop\n');
    const counts = JSON.parse((await line('{', 15_000)).trim()) as AttackerCounts;
    const after = gone ? undefined : processMemory(target.pid);
    return {
      peakMiB: after?.peak ?? NaN,
      peakAnonymousMiB: peakAnonymous,
      beforeMiB: before.rss,
      gone,
      ...counts,
      ordinary,
    };
  } finally {
    clearInterval(sampler);
    attacker.kill('SIGKILL');
    await exited;
  }
}

/** Ordinary pods answered in time and injected: status 200 and allowed with a patch. */
export function served(answers: readonly Answer[]): number {
  return answers.filter((a) => {
    if (a.status !== 200) return false;
    const response = (JSON.parse(a.body) as { response: { allowed: boolean; patch?: string } }).response;
    return response.allowed && response.patch !== undefined;
  }).length;
}

/** One line: what the attack did and what it cost. */
export function describeAttack(name: string, f: ConnectionAttackFigures): string {
  const ms = f.ordinary.map((a) => a.ms).sort((x, y) => x - y);
  return `${name}: peak RSS ${f.peakMiB.toFixed(0)} MiB (VmHWM; ${f.beforeMiB.toFixed(0)} before), peak private ${f.peakAnonymousMiB.toFixed(0)} MiB; attacker opened ${f.opened}, the webhook closed ${f.closedByWebhook}, at most ${f.mostOpen} open at once; ordinary served ${served(f.ordinary)}/${f.ordinary.length}, ms p50 ${ms[Math.floor(ms.length / 2)]?.toFixed(0)} max ${ms.at(-1)?.toFixed(0)}${f.gone ? '; the webhook was GONE' : ''}`;
}

/**
 * What one idle TLS connection costs the webhook: `count` of them opened at once from `sources`
 * addresses (under its caps, so it holds them all), its memory read once all are up, then closed.
 */
export async function measureIdleConnections(
  target: LoadTarget,
  count: number,
  sources: number,
): Promise<{ readonly rssKiB: number; readonly privateKiB: number; readonly held: number }> {
  const before = processMemory(target.pid);
  const sockets: Socket[] = [];
  const up = await Promise.all(
    Array.from(
      { length: count },
      (_, i) =>
        new Promise<boolean>((resolve) => {
          const socket = tlsConnect(
            {
              socket: tcpFrom(target.port, attackerAddress(i % sources)),
              ca: target.ca,
              servername: SERVER_NAME,
            },
            () => resolve(true),
          );
          sockets.push(socket);
          socket.on('error', () => resolve(false));
          socket.once('close', () => resolve(false));
        }),
    ),
  );
  // Read before the first-request deadline closes them.
  const after = processMemory(target.pid);
  const held = sockets.filter((s) => !s.destroyed).length;
  for (const s of sockets) s.destroy();
  await sleep(200);
  void up;
  return {
    rssKiB: ((after.rss - before.rss) * 1024) / held,
    privateKiB: ((after.anonymous - before.anonymous) * 1024) / held,
    held,
  };
}

if (import.meta.main) {
  // The attacker's process: `stop` on stdin (or its end) ends the attack; its counts are the last line.
  const options = JSON.parse(process.argv[2]!) as Pick<LoadTarget, 'port' | 'ca'> &
    Pick<ConnectionAttackOptions, 'attack' | 'connections' | 'sources'>;
  const stop = new Promise<void>((resolve) => {
    process.stdin.on('data', resolve);
    process.stdin.on('end', resolve);
  });
  const counts = await attack(options, options, stop, () => process.stdout.write('ramped\n'));
  process.stdout.write(`${JSON.stringify(counts)}\n`);
  process.exit(0);
}
