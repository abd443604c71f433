import assert from 'node:assert/strict';
import { createServer, type ServerResponse } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  ConnectionGuard,
  type ConnectionLimits,
  type ConnectionRefusal,
} from '../../agent/serve/connection-guard.ts';
import { closedAfterEach } from '../support/closed-after-each.ts';
import { eventually } from '../support/run-agent.ts';

/**
 * ConnectionGuard and connections busy with a request: one whose body is still arriving, slowly, makes
 * room as a silent one does (issue 37: 256 connections dribbling bodies, each pipelining its next
 * request with its last byte, kept the webhook full); one whose request has arrived, being answered,
 * never does; and a connection carries at most maxRequests, a request pipelined past them closing it
 * before the server sees it.
 */

const SLOW_MS = 100;
const { servers, clients } = closedAfterEach();

interface Guarded {
  readonly guard: ConnectionGuard;
  readonly port: number;
  readonly refusals: [ConnectionRefusal, string][];
  /** Requests the server's own listener saw. */
  seen(): number;
}

/** A server that answers once a request's body has all arrived; GET /hold is never answered. */
async function guarded(limits: Partial<ConnectionLimits>): Promise<Guarded> {
  let seen = 0;
  const held: ServerResponse[] = [];
  const server = createServer((req, res) => {
    seen++;
    if (req.url === '/hold') return void held.push(res);
    req.resume().once('end', () => res.end('ok\n'));
  });
  servers.push(server);
  const refusals: [ConnectionRefusal, string][] = [];
  const guard = new ConnectionGuard(
    {
      maxConnections: 10,
      maxPerSource: 10,
      firstRequestMs: 60_000,
      graceMs: 0,
      maxInGrace: 0,
      slowRequestMs: SLOW_MS,
      ...limits,
    },
    (reason, source) => refusals.push([reason, source]),
  ).attach(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { guard, port: (server.address() as AddressInfo).port, refusals, seen: () => seen };
}

interface Client {
  readonly socket: Socket;
  received(): string;
  isClosed(): boolean;
}

async function open(port: number, from: string, write?: string): Promise<Client> {
  const socket = connect({ host: '127.0.0.1', port, localAddress: from });
  clients.push(socket);
  let closed = false;
  let got = '';
  socket.on('data', (d: Buffer) => (got += d.toString()));
  socket.once('close', () => (closed = true));
  socket.on('error', () => {});
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  if (write !== undefined) socket.write(write);
  return { socket, received: () => got, isClosed: () => closed };
}

/** A POST whose 10-byte body has sent one byte: still arriving. */
const STARTED = 'POST / HTTP/1.1\r\nhost: guard\r\ncontent-length: 10\r\n\r\nx';
const GET = (path: string) => `GET ${path} HTTP/1.1\r\nhost: guard\r\n\r\n`;

const closes = (c: Client, what: string) => eventually(() => (c.isClosed() ? true : undefined), what, 5000);
const answered = (c: Client, what: string) =>
  eventually(() => (c.received().endsWith('ok\n') ? true : undefined), what, 5000);
const holds = (g: Guarded, n: number) =>
  eventually(() => (g.guard.size === n ? true : undefined), `the guard to hold ${n}`, 5000);

describe('ConnectionGuard and requests still arriving', { timeout: 30_000 }, () => {
  it('at a source’s share, its connection whose body is still arriving past slowRequestMs is closed for the newcomer; never one whose request has arrived, being answered', async () => {
    const g = await guarded({ maxPerSource: 2 });
    const dribbling = await open(g.port, '127.0.0.2', STARTED);
    const answering = await open(g.port, '127.0.0.2', GET('/hold'));
    await eventually(() => (g.seen() === 2 ? true : undefined), 'both requests seen', 5000);
    // Past slowRequestMs: the dribbling request is slow now.
    await sleep(SLOW_MS * 2);
    const newcomer = await open(g.port, '127.0.0.2', GET('/'));
    await closes(dribbling, 'the slow request’s connection');
    await answered(newcomer, 'the newcomer');
    assert.deepEqual(g.refusals, [['per-source', '127.0.0.2']]);
    assert.equal(answering.isClosed(), false, 'a connection being answered was closed');
  });

  it('when full, the slowest request from the address holding the most connections goes, before any newcomer, whatever the addresses', async () => {
    for (const [many, few] of [
      ['127.0.0.2', '127.0.0.3'],
      ['127.0.0.5', '127.0.0.4'],
    ] as const) {
      const g = await guarded({ maxConnections: 4 });
      // The oldest slow request is the lone address's: it stays, its address holding fewer.
      const lone = await open(g.port, few, STARTED);
      const first = await open(g.port, many, STARTED);
      const second = await open(g.port, many, STARTED);
      const whole = await open(g.port, many, GET('/hold'));
      await eventually(() => (g.seen() === 4 ? true : undefined), 'four requests seen', 5000);
      await sleep(SLOW_MS * 2);
      const newcomers = [await open(g.port, '127.0.0.9', GET('/')), await open(g.port, '127.0.0.10')];
      await answered(newcomers[0]!, 'a newcomer that sent its request');
      await closes(first, `${many}’s slowest`);
      await closes(second, `${many}’s next slowest`);
      await holds(g, 4);
      assert.deepEqual(g.refusals, [
        ['full', many],
        ['full', many],
      ]);
      for (const c of [lone, whole, newcomers[1]!]) assert.equal(c.isClosed(), false);
      // A body that completes is answered as ever.
      lone.socket.write('x'.repeat(9));
      await answered(lone, 'the lone address’s request, once whole');
    }
  });

  it('a request arriving within slowRequestMs is not slow: a full port closes the newcomer once read, not it', async () => {
    const g = await guarded({ maxConnections: 2, slowRequestMs: 60_000 });
    const dribbling = [await open(g.port, '127.0.0.2', STARTED), await open(g.port, '127.0.0.2', STARTED)];
    await eventually(() => (g.seen() === 2 ? true : undefined), 'both requests seen', 5000);
    const newcomer = await open(g.port, '127.0.0.3');
    await closes(newcomer, 'the newcomer');
    assert.deepEqual(g.refusals, [['full', '127.0.0.3']]);
    for (const c of dribbling) assert.equal(c.isClosed(), false);
  });

  it('answers maxRequests on a connection, the last with Connection: close; a request pipelined before the answer to the one before it closes it before the server sees it', async () => {
    for (const [maxRequests, pipelined] of [
      [1, 2],
      [1, 1000],
      [3, 50],
    ] as const) {
      const g = await guarded({ maxRequests });
      // One after the other, each after its answer: the last answer says close, and it is closed.
      const polite = await open(g.port, '127.0.0.2');
      for (let i = 1; i <= maxRequests; i++) {
        polite.socket.write(GET('/'));
        await eventually(
          () => (polite.received().split('ok\n').length - 1 === i ? true : undefined),
          `answer ${i}`,
          5000,
        );
      }
      await closes(polite, 'the connection after its last answer');
      assert.match(polite.received(), /\r\nConnection: close\r\n/i);
      assert.equal(polite.received().match(/\r\nConnection: close\r\n/gi)?.length, 1);
      const before = g.seen();

      // All at once: the server sees the first, whose answer is held; the second, pipelined before
      // it, closes the connection (issue 37: 64 kept-alive connections of 400 ended the webhook's heap).
      const rude = await open(g.port, '127.0.0.3', GET('/hold').repeat(pipelined));
      await closes(rude, 'the pipelining connection');
      assert.equal(g.seen() - before, 1, `of ${pipelined} pipelined requests`);
      assert.deepEqual(g.refusals, []);
      await holds(g, 0);
      servers.splice(0).forEach((s) => s.close());
    }
  });
});
