import assert from 'node:assert/strict';
import { createServer, type ServerResponse } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { ConnectionGuard, type ConnectionRefusal } from '../../agent/serve/connection-guard.ts';
import { closedAfterEach } from '../support/closed-after-each.ts';
import { eventually } from '../support/run-agent.ts';

/**
 * ConnectionGuard with replaceIdle, as the webhook uses it: at a cap an idle connection makes room
 * for the newcomer (the API server's keep-alive pool may hold more idle connections than the
 * per-source cap), and a connection busy with a request is never the one closed.
 */

const { servers, clients } = closedAfterEach();

interface Guarded {
  readonly guard: ConnectionGuard;
  readonly port: number;
  readonly refusals: [ConnectionRefusal, string][];
  /** Answers of GET /hold, held until released. */
  readonly held: ServerResponse[];
}

async function guarded(
  maxConnections: number,
  maxPerSource: number,
  graceMs = 0,
  newcomerLane = 0,
  slowRequestMs = 60_000,
): Promise<Guarded> {
  const held: ServerResponse[] = [];
  const server = createServer((req, res) => {
    if (req.url === '/hold') held.push(res);
    // An answer larger than the kernel's buffers hold: it waits on its reader.
    else if (req.url === '/big') res.end(Buffer.alloc(32 * 1024 * 1024));
    else res.end('ok\n');
  });
  servers.push(server);
  const refusals: [ConnectionRefusal, string][] = [];
  const guard = new ConnectionGuard(
    {
      maxConnections,
      maxPerSource,
      firstRequestMs: 60_000,
      graceMs,
      maxInGrace: 0,
      newcomerLane,
      replaceIdle: true,
      slowRequestMs,
    },
    (reason, source) => refusals.push([reason, source]),
  ).attach(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { guard, port: (server.address() as AddressInfo).port, refusals, held };
}

interface Client {
  readonly socket: Socket;
  isClosed(): boolean;
}

async function open(port: number, from: string): Promise<Client> {
  const socket = connect({ host: '127.0.0.1', port, localAddress: from });
  clients.push(socket);
  let closed = false;
  socket.once('close', () => (closed = true));
  socket.on('error', () => {});
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  return { socket, isClosed: () => closed };
}

/** Sends a keep-alive GET of `path`; for `/ok`, resolves once its answer arrived. */
function get(client: Client, path: '/ok' | '/hold'): Promise<void> {
  client.socket.write(`GET ${path} HTTP/1.1\r\nhost: guard\r\n\r\n`);
  if (path === '/hold') return Promise.resolve();
  return new Promise((resolve) => {
    let got = '';
    const onData = (d: Buffer) => {
      got += d.toString();
      if (got.endsWith('ok\n')) {
        client.socket.off('data', onData);
        resolve();
      }
    };
    client.socket.on('data', onData);
  });
}

const closes = (client: Client, what: string) =>
  eventually(() => (client.isClosed() ? true : undefined), what, 5000);
const holds = (g: Guarded, n: number) =>
  eventually(() => (g.guard.size === n ? true : undefined), `the guard to hold ${n}`, 5000);
const held = (g: Guarded, n: number) =>
  eventually(() => (g.held.length === n ? true : undefined), `${n} requests in progress`, 5000);

describe('ConnectionGuard with replaceIdle', { timeout: 30_000 }, () => {
  it('at a source’s cap, closes that source’s oldest connection without a request, else its oldest idle between requests, for the newcomer; never a busy one nor another source’s', async () => {
    const g = await guarded(10, 2);
    const other = await open(g.port, '127.0.0.3');
    await get(other, '/ok');
    const busy = await open(g.port, '127.0.0.2');
    await get(busy, '/hold');
    await held(g, 1);
    const idle = await open(g.port, '127.0.0.2');
    await get(idle, '/ok');
    const newcomer = await open(g.port, '127.0.0.2');
    await closes(idle, 'the idle connection of the source at its cap');
    await get(newcomer, '/ok');
    assert.deepEqual(g.refusals, [['per-source', '127.0.0.2']]);
    // Of a source's connections, the oldest that sent no request goes before any idle one.
    const fresh = [await open(g.port, '127.0.0.4'), await open(g.port, '127.0.0.4')];
    const third = await open(g.port, '127.0.0.4');
    await closes(fresh[0]!, 'the oldest connection without a request of a source at its cap');
    assert.deepEqual(g.refusals.at(-1), ['per-source', '127.0.0.4']);
    await get(fresh[1]!, '/ok');
    await get(third, '/ok');
    // Now both of the source's connections are busy: the next one goes once read, and no one else.
    await get(newcomer, '/hold');
    await held(g, 2);
    const refused = await open(g.port, '127.0.0.2');
    await closes(refused, 'a newcomer of a source whose connections are all busy');
    assert.deepEqual(g.refusals.at(-1), ['per-source', '127.0.0.2']);
    await sleep(100);
    assert.equal(busy.isClosed() || newcomer.isClosed() || other.isClosed(), false);
    // Once a held answer is sent, that connection is idle again and makes room.
    const answered = new Promise((resolve) => busy.socket.once('data', resolve));
    g.held.shift()!.end('ok\n');
    await answered;
    await holds(g, 5);
    const next = await open(g.port, '127.0.0.2');
    await closes(busy, 'the connection whose answer was sent');
    await get(next, '/ok');
  });

  it('when full, closes the oldest connection with no request first, then the oldest idle one, never a busy one', async () => {
    const g = await guarded(3, 3);
    const busy = await open(g.port, '127.0.0.2');
    await get(busy, '/hold');
    await held(g, 1);
    const idle = await open(g.port, '127.0.0.3');
    await get(idle, '/ok');
    const fresh = await open(g.port, '127.0.0.4');
    await holds(g, 3);
    const first = await open(g.port, '127.0.0.5');
    await closes(fresh, 'the connection that sent no request');
    await get(first, '/hold');
    await held(g, 2);
    const second = await open(g.port, '127.0.0.5');
    await closes(idle, 'the idle connection');
    await get(second, '/hold');
    await held(g, 3);
    const third = await open(g.port, '127.0.0.6');
    await closes(third, 'a newcomer when every connection is busy');
    assert.deepEqual(
      g.refusals.map(([reason]) => reason),
      ['full', 'full', 'full'],
    );
    assert.equal(busy.isClosed() || first.isClosed() || second.isClosed(), false);
  });

  it('when full of connections within their grace, one without a request goes (the oldest), never one idle between requests: the API server’s pool keeps its lane', async () => {
    const g = await guarded(3, 10, 60_000);
    const pool = await open(g.port, '127.0.0.2');
    await get(pool, '/ok');
    const tenants = [await open(g.port, '127.0.0.3'), await open(g.port, '127.0.0.4')];
    await holds(g, 3);
    const newcomer = await open(g.port, '127.0.0.5');
    await closes(tenants[0]!, 'the oldest connection without a request');
    const another = await open(g.port, '127.0.0.6');
    await closes(tenants[1]!, 'the next oldest without a request');
    assert.deepEqual(
      g.refusals.map(([reason]) => reason),
      ['full', 'full'],
    );
    assert.equal(pool.isClosed(), false, 'the idle keep-alive connection was closed');
    await get(pool, '/ok');
    await get(newcomer, '/ok');
    await get(another, '/ok');
  });

  it('newcomerLane: a pool of idle connections that fills the port makes room for newcomers, the longest idle first whatever its address (the API server’s few, just used, stay); without the lane the newcomer mid-handshake went', async () => {
    for (const lane of [2, 0]) {
      const g = await guarded(4, 10, 60_000, lane);
      // A tenant's pool from many addresses, one request each then idle; then the API server's two
      // keep-alive connections from one address, used since: by the address holding the most, those went.
      const pool = [
        await open(g.port, '127.0.0.3'),
        await open(g.port, '127.0.0.4'),
        await open(g.port, '127.0.0.2'),
        await open(g.port, '127.0.0.2'),
      ];
      for (const c of pool) await get(c, '/ok');
      await holds(g, 4);
      // The kubelet's probe, its request not sent yet (its TLS handshake, say), then a tenant's silent newcomer.
      const probe = await open(g.port, '127.0.0.9');
      await eventually(() => (g.refusals.length === 1 ? true : undefined), 'room made for the probe', 5000);
      const silent = await open(g.port, '127.0.0.6');
      await eventually(() => (g.refusals.length === 2 ? true : undefined), 'room made for the next', 5000);
      if (lane > 0) {
        assert.deepEqual(g.refusals, [
          ['full', '127.0.0.3'],
          ['full', '127.0.0.4'],
        ]);
        await closes(pool[0]!, 'the longest idle');
        await closes(pool[1]!, 'the next longest idle');
        for (const c of pool.slice(2)) assert.equal(c.isClosed(), false, 'the API server’s pool was closed');
        await get(probe, '/ok');
        await get(pool[3]!, '/ok');
        assert.equal(silent.isClosed(), false);
      } else {
        assert.deepEqual(g.refusals, [
          ['full', '127.0.0.3'],
          ['full', '127.0.0.9'],
        ]);
        await closes(probe, 'the probe, mid-handshake');
      }
    }
  });

  it('newcomerLane: while connections past their first request hold no more than maxConnections − newcomerLane, a newcomer without a request goes before any of them', async () => {
    const g = await guarded(4, 10, 60_000, 2);
    const pool = [await open(g.port, '127.0.0.2'), await open(g.port, '127.0.0.2')];
    for (const c of pool) await get(c, '/ok');
    const silent = [await open(g.port, '127.0.0.3'), await open(g.port, '127.0.0.4')];
    await holds(g, 4);
    const newcomer = await open(g.port, '127.0.0.5');
    await closes(silent[0]!, 'the oldest connection without a request');
    assert.deepEqual(g.refusals, [['full', '127.0.0.3']]);
    for (const c of [...pool, silent[1]!, newcomer]) assert.equal(c.isClosed(), false);
    await get(newcomer, '/ok');
  });

  it('newcomerLane: answers their readers never take make room too, once their request arrived slowRequestMs ago, the longest stalled first whatever its address; never an answer being read', async () => {
    const g = await guarded(3, 10, 60_000, 1, 200);
    const stalled = [
      await open(g.port, '127.0.0.3'),
      await open(g.port, '127.0.0.2'),
      await open(g.port, '127.0.0.2'),
    ];
    // Each asks for a large answer and never reads it.
    for (const c of stalled) c.socket.write('GET /big HTTP/1.1\r\nhost: guard\r\n\r\n');
    await holds(g, 3);
    await sleep(400);
    const probe = await open(g.port, '127.0.0.9');
    await get(probe, '/ok');
    assert.deepEqual(g.refusals, [['full', '127.0.0.3']]);
    // The one closed sees it once it reads (a peer that never reads never notices a reset).
    stalled[0]!.socket.resume();
    await closes(stalled[0]!, 'the longest unread answer');
    await holds(g, 3);
  });

  it('newcomerLane: requests still arriving make room however recently they began; the one begun longest ago goes', async () => {
    // slowRequestMs an hour: no request here is slow, and each still makes room (the eleventh review reset
    // its requests every 220 ms, under the 250 ms that made one count).
    const g = await guarded(3, 10, 60_000, 1, 3_600_000);
    const arriving = [
      await open(g.port, '127.0.0.3'),
      await open(g.port, '127.0.0.2'),
      await open(g.port, '127.0.0.2'),
    ];
    for (const c of arriving) {
      c.socket.write('POST /hold HTTP/1.1\r\nhost: guard\r\ncontent-length: 10\r\n\r\nab');
      await sleep(20);
    }
    await holds(g, 3);
    const probe = await open(g.port, '127.0.0.9');
    await get(probe, '/ok');
    assert.deepEqual(g.refusals, [['full', '127.0.0.3']]);
    arriving[0]!.socket.resume();
    await closes(arriving[0]!, 'the request begun longest ago');
    for (const c of arriving.slice(1)) assert.equal(c.isClosed(), false);
  });

  it('newcomerLane: an unread answer with a request pipelined behind it makes room too', async () => {
    const g = await guarded(2, 10, 60_000, 1, 200);
    const stalled = [await open(g.port, '127.0.0.2'), await open(g.port, '127.0.0.3')];
    for (const c of stalled) c.socket.write('GET /big HTTP/1.1\r\nhost: guard\r\n\r\n');
    await holds(g, 2);
    await sleep(100);
    // The next request, sent once the server ended the answer before it, which is still unread.
    for (const c of stalled) c.socket.write('GET /ok HTTP/1.1\r\nhost: guard\r\n\r\n');
    await sleep(300);
    const probe = await open(g.port, '127.0.0.9');
    await get(probe, '/ok');
    assert.equal(g.refusals.length, 1, 'one stalled connection made room');
    assert.notEqual(g.refusals[0]![1], '127.0.0.9', 'not the probe');
  });
});
