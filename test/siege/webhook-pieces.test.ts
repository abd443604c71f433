/**
 * Issue 37 ("Fortress"), adversarial review of the webhook: bodies that arrive in tiny pieces, and
 * answers their callers never read. A body's pieces (TLS records, chunks of its chunked encoding) are
 * each a Buffer of their own, a few hundred bytes of heap whatever their length: 200,000 one-byte
 * chunks (1.2 MB on the wire) once took the webhook past its heap limit, as did one TLS record per
 * byte, and 8 callers each under the size that crashed it alone. A large answer written at once left
 * its size outside V8's heap on each connection that did not read it (200 callers: 265 MiB resident).
 *
 * The built bundle (dist/webhook.js, `node images/build.ts`) runs with its Deployment's NODE_OPTIONS,
 * a fresh one per shape; ordinary pods arrive from 127.0.0.1 every 100 ms, as the API server sends
 * them. Whatever the shape, the webhook stays up, its peak resident set (VmHWM) stays within its stated
 * worst case and three quarters of the limit, 95 % of ordinary pods are injected in time, and a body
 * in too many pieces is refused naming the limit.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { Agent } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it, type TestContext } from 'node:test';
import { connect, type ConnectionOptions } from 'node:tls';
import { setTimeout as sleep } from 'node:timers/promises';
import { MAX_BODY_PIECES } from '../../webhook/body-budget.ts';
import { ANSWER_DEADLINE_MS } from '../../webhook/connection-limits.ts';
import { WORST_CASE_MIB } from '../../webhook/limits.ts';
import { bigAnswerBody, served } from '../webhook/connection-attacks.ts';
import { deployedWebhook } from '../webhook/deployed-webhook.ts';
import {
  admissionCall,
  ordinaryBody,
  processMemory,
  type Answer,
  type RunningBundle,
} from '../webhook/hostile-load.ts';
import { SERVER_NAME } from '../webhook/tls-certs.ts';
import { deployedBundles } from './deployed-bundle.ts';
import { callerAddress } from './tenant-crowd.ts';

const CALLERS_PY = join(import.meta.dirname, 'raw-tls-callers.py');
const deployed = deployedWebhook();
const DEADLINE_MS = deployed.timeoutSeconds * 1000;
const CEILING_MIB = Math.min(WORST_CASE_MIB, deployed.memoryLimitMiB * 0.75);
const SERVED_SHARE = 0.95;
const PIECES_REFUSED = new RegExp(`more than ${MAX_BODY_PIECES} pieces`);

const scratch = mkdtempSync(join(tmpdir(), 'webhook-pieces-'));
after(() => rmSync(scratch, { recursive: true, force: true }));
const webhook = deployedBundles();

function python(): string {
  try {
    execFileSync('python3', ['-c', 'import ssl']);
  } catch (e) {
    throw new Error('python3 with ssl is needed for raw TLS callers: apt-get install python3', { cause: e });
  }
  return 'python3';
}

/** What an attack ended as, and what the webhook did meanwhile. */
interface Figures {
  readonly peakMiB: number;
  readonly gone: boolean;
  readonly ordinary: readonly Answer[];
}

/** Ordinary pods sent during every attack at least: an attack that ends sooner is made again. */
const MIN_ORDINARY = 20;

/**
 * Runs `attack` against a fresh webhook while an ordinary pod is sent every 100 ms, again until
 * MIN_ORDINARY were sent; asserts the webhook survived within its ceiling and served ordinary pods.
 */
async function under<T>(
  t: TestContext,
  name: string,
  attack: (w: RunningBundle) => Promise<T>,
): Promise<{ result: T[]; figures: Figures; w: RunningBundle }> {
  const w = await webhook();
  let gone = false;
  void w.gone.then(() => (gone = true));
  const agent = new Agent({ keepAlive: true });
  const ordinary: Answer[] = [];
  const calls: Promise<void>[] = [];
  let done = false;
  const loop = (async () => {
    for (let n = 0; !done && !gone; n++) {
      calls.push(
        admissionCall(w.port, w.ca, agent, ordinaryBody(n), DEADLINE_MS).then((a) => void ordinary.push(a)),
      );
      await sleep(100);
    }
  })();
  const result: T[] = [];
  try {
    do result.push(await attack(w));
    while (calls.length < MIN_ORDINARY && !gone);
  } finally {
    done = true;
    await loop;
    await Promise.all(calls);
    agent.destroy();
  }
  const figures = { peakMiB: gone ? NaN : processMemory(w.pid).peak, gone, ordinary };
  const report = `${name}: peak RSS ${figures.peakMiB.toFixed(0)} MiB (VmHWM, ceiling ${CEILING_MIB})${gone ? ', the webhook was GONE' : ''}; ordinary served ${served(ordinary)}/${ordinary.length}; ${JSON.stringify(result).slice(0, 300)}`;
  t.diagnostic(report);
  assert.equal(gone, false, `the webhook died:\n${report}\n${w.stderr().slice(-2000)}`);
  assert.ok(figures.peakMiB <= CEILING_MIB, `peak RSS over ${CEILING_MIB} MiB:\n${report}`);
  assert.ok(ordinary.length >= MIN_ORDINARY, `the attack lasted: ${report}`);
  assert.ok(served(ordinary) >= ordinary.length * SERVED_SHARE, `ordinary pods not served:\n${report}`);
  assert.equal(w.stderr(), '', 'nothing on stderr: V8 never ran out of heap');
  assert.deepEqual(w.errors(), [], 'nothing logged as an error');
  await w.stop();
  return { result, figures, w };
}

/** What a caller got: the status line and the start of the body; '' when the connection ended first. */
interface Reply {
  readonly status: number;
  readonly body: string;
}

/**
 * One POST with chunked encoding from `from`: `body` in chunks of `chunk` bytes, written in blocks of
 * about 16 KiB (a TLS record each), as fast as the socket takes them.
 */
function chunkedPost(w: RunningBundle, from: string, body: Buffer, chunk: number): Promise<Reply> {
  return new Promise((resolve) => {
    const socket = connect({
      host: '127.0.0.1',
      port: w.port,
      ca: w.ca,
      servername: SERVER_NAME,
      localAddress: from,
    } as ConnectionOptions);
    let answer = '';
    socket.on('data', (d: Buffer) => (answer += d.toString('latin1')));
    socket.on('error', () => {});
    socket.on('close', () => {
      const status = Number(/^HTTP\/1\.1 (\d+)/.exec(answer)?.[1] ?? 0);
      resolve({ status, body: answer.slice(answer.indexOf('\r\n\r\n') + 4, 2000) });
    });
    socket.on('secureConnect', async () => {
      socket.write(
        `POST /mutate HTTP/1.1\r\nhost: ${SERVER_NAME}\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n`,
      );
      let block: Buffer[] = [];
      let blockBytes = 0;
      for (let at = 0; at < body.length && !socket.destroyed; at += chunk) {
        const piece = Buffer.concat([
          Buffer.from(`${Math.min(chunk, body.length - at).toString(16)}\r\n`),
          body.subarray(at, at + chunk),
          Buffer.from('\r\n'),
        ]);
        block.push(piece);
        blockBytes += piece.length;
        if (blockBytes < 16_000) continue;
        if (!socket.write(Buffer.concat(block))) await new Promise((r) => socket.once('drain', r));
        block = [];
        blockBytes = 0;
      }
      if (!socket.destroyed) socket.write(Buffer.concat([...block, Buffer.from('0\r\n\r\n')]));
    });
  });
}

/** An ordinary pod's review padded with whitespace to `bytes`: still an ordinary pod, injected. */
function paddedOrdinary(n: number, bytes: number): Buffer {
  const body = ordinaryBody(1_000_000 + n);
  return Buffer.concat([body, Buffer.alloc(Math.max(0, bytes - body.length), 0x20)]);
}

describe(
  'bodies in tiny pieces and answers never read, on the built webhook with its Deployment’s NODE_OPTIONS',
  { timeout: 600_000 },
  () => {
    for (const [callers, bytes, chunk] of [
      [1, 200_000, 1],
      [8, 60_000, 1],
      // Many at once, each past the piece limit: what a refused body still sends is dropped, not queued.
      [32, 30_000, 1],
      [2, 3_000_000, 16],
    ] as const)
      it(`${callers} caller${callers > 1 ? 's' : ''} at once, each a ${bytes.toLocaleString('en')}-byte body in ${chunk}-byte chunks: refused naming the limit, the webhook stays within its memory`, async (t) => {
        const { result } = await under(t, `${callers} × ${bytes} B in ${chunk} B chunks`, (w) =>
          Promise.all(
            Array.from({ length: callers }, (_, i) =>
              chunkedPost(w, callerAddress(i), paddedOrdinary(i, bytes), chunk),
            ),
          ),
        );
        // Refused as soon as the limit is passed, the connection closed at once: a caller still
        // sending may see it reset before the answer (status 0), never anything else.
        const replies = result.flat();
        for (const reply of replies) {
          if (reply.status === 0) continue;
          assert.equal(reply.status, 413, JSON.stringify(reply));
          assert.match(reply.body, PIECES_REFUSED);
        }
        assert.ok(
          replies.filter((r) => r.status === 413).length >= replies.length / 2,
          JSON.stringify(replies),
        );
      });

    for (const [callers, sources, bytes, chunk] of [
      [64, 64, MAX_BODY_PIECES - 100, 1],
      [64, 8, MAX_BODY_PIECES * 4 - 400, 4],
    ] as const)
      it(`${callers} callers from ${sources} addresses, each a ${bytes.toLocaleString('en')}-byte pod in ${chunk}-byte chunks (under the limit), twice: each injected, the webhook stays within its memory`, async (t) => {
        const { result } = await under(t, `${callers} × ${bytes} B in ${chunk} B chunks`, async (w) => {
          const replies: Reply[] = [];
          for (let round = 0; round < 2; round++)
            replies.push(
              ...(await Promise.all(
                Array.from({ length: callers }, (_, i) =>
                  chunkedPost(w, callerAddress(i % sources), paddedOrdinary(round * 1000 + i, bytes), chunk),
                ),
              )),
            );
          return replies.map((r) => ({ status: r.status, allowed: /"allowed":true/.test(r.body) }));
        });
        // Under the piece limit, a pod is admitted whatever its chunks, or shed with 429 (retried).
        const replies = result.flat();
        for (const r of replies)
          assert.ok(r.status === 429 || (r.status === 200 && r.allowed), JSON.stringify(r));
        assert.ok(
          replies.filter((r) => r.status === 200).length >= replies.length / 2,
          `most were admitted: ${JSON.stringify(replies)}`,
        );
      });

    it('one TLS record per body byte: an ordinary pod so sent is injected, one past the piece limit refused naming it', async (t) => {
      const py = python();
      const run = (bytes: number, n: number) => {
        const file = join(scratch, `records-${n}.json`);
        writeFileSync(file, paddedOrdinary(2_000_000 + n, bytes));
        return (w: RunningBundle) => {
          const ca = join(scratch, 'ca.pem');
          writeFileSync(ca, w.ca);
          return new Promise<{ sent: number; status: string; body: string }>((resolve, reject) => {
            const child = spawn(py, [CALLERS_PY, 'records', String(w.port), ca, SERVER_NAME, file]);
            let out = '';
            child.stdout.on('data', (d: Buffer) => (out += d.toString()));
            child.on('exit', (code) =>
              code === 0 ? resolve(JSON.parse(out) as never) : reject(new Error(`exit ${code}: ${out}`)),
            );
          });
        };
      };
      const ordinary = await under(t, 'an ordinary pod, a record per byte', run(4_000, 0));
      for (const r of ordinary.result) {
        assert.match(r.status, / 200 /);
        assert.match(r.body, /"allowed":true/);
      }
      const past = await under(t, `${MAX_BODY_PIECES * 6} records of a byte`, run(MAX_BODY_PIECES * 6, 1));
      for (const r of past.result) {
        // Refused and closed: a caller still sending may see the reset first.
        if (r.status === '') continue;
        assert.match(r.status, / 413 /, JSON.stringify(r));
        assert.match(r.body, PIECES_REFUSED);
      }
      assert.ok(
        past.result.some((r) => / 413 /.test(r.status)),
        JSON.stringify(past.result),
      );
    });

    for (const [callers, sources] of [
      [64, 8],
      [200, 50],
    ] as const)
      it(`${callers} callers from ${sources} addresses that never read a ~400 KiB answer (2 KiB receive buffers): the webhook stays within its memory`, async (t) => {
        const py = python();
        const file = join(scratch, 'big-answer.json');
        writeFileSync(file, bigAnswerBody(7));
        // Held past the answer deadline: what the kernel has not taken of an answer by then goes with
        // its connection.
        const holdS = ANSWER_DEADLINE_MS / 1000 + 5;
        const { result } = await under(t, `${callers} unread answers`, (w) => {
          const ca = join(scratch, 'ca.pem');
          writeFileSync(ca, w.ca);
          return new Promise<{ sent: number; failed: number; closed: number }>((resolve, reject) => {
            const args = ['unread', String(w.port), ca, SERVER_NAME, file, String(callers), String(sources)];
            const child = spawn(py, [CALLERS_PY, ...args, String(holdS)]);
            let out = '';
            child.stdout.on('data', (d: Buffer) => (out += d.toString()));
            child.on('exit', (code) =>
              code === 0 ? resolve(JSON.parse(out) as never) : reject(new Error(`exit ${code}: ${out}`)),
            );
          });
        });
        for (const r of result) {
          assert.equal(r.sent + r.failed, callers);
          assert.ok(r.sent >= callers / 2, `most callers got their pod in: ${JSON.stringify(r)}`);
        }
      });
  },
);
