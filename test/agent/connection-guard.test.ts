import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, it } from 'node:test';
import {
  ConnectionGuard,
  type ConnectionLimits,
  type ConnectionRefusal,
} from '../../agent/serve/connection-guard.ts';
import { closedAfterEach } from '../support/closed-after-each.ts';
import { eventually } from '../support/run-agent.ts';

/** A real HTTP server on loopback with a guard attached, and every refusal the guard reported. */
interface Guarded {
  readonly server: Server;
  readonly guard: ConnectionGuard;
  readonly port: number;
  readonly refusals: ConnectionRefusal[];
  /** The address of each connection closed, in the same order. */
  readonly sources: string[];
}

const { servers, clients } = closedAfterEach();

/**
 * `limits` without a grace unless given: a connection may go once it has been read; no request is
 * slow unless `slowRequestMs` is given.
 */
async function guarded(
  limits: Omit<ConnectionLimits, 'graceMs' | 'maxInGrace' | 'slowRequestMs'> & Partial<ConnectionLimits>,
): Promise<Guarded> {
  const server = createServer((_req, res) => res.end('ok\n'));
  servers.push(server);
  const refusals: ConnectionRefusal[] = [];
  const sources: string[] = [];
  const guard = new ConnectionGuard(
    { graceMs: 0, maxInGrace: 0, slowRequestMs: LONG, ...limits },
    (reason, source) => {
      refusals.push(reason);
      sources.push(source);
    },
  ).attach(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, guard, port: (server.address() as AddressInfo).port, refusals, sources };
}

/** A TCP connection from `from` (any 127.0.0.0/8 address is this machine's), open once connected. */
interface Client {
  readonly socket: Socket;
  /** Settles when the server has closed it (or it failed). */
  readonly closed: Promise<void>;
  isClosed(): boolean;
}

async function open(port: number, from: string): Promise<Client> {
  const socket = connect({ host: '127.0.0.1', port, localAddress: from });
  clients.push(socket);
  let done = false;
  const closed = new Promise<void>((resolve) => {
    const end = () => {
      done = true;
      resolve();
    };
    socket.once('close', end);
    socket.once('end', end);
    socket.on('error', () => {});
  });
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  return { socket, closed, isClosed: () => done };
}

/** Sends one keep-alive GET and resolves with the status line once its answer has arrived. */
function request(client: Client): Promise<string> {
  return new Promise((resolve, reject) => {
    let got = '';
    const onData = (d: Buffer) => {
      got += d.toString();
      if (got.includes('\r\n\r\n') && got.endsWith('ok\n')) {
        client.socket.off('data', onData);
        resolve(got.split('\r\n')[0]!);
      }
    };
    client.socket.on('data', onData);
    void client.closed.then(() => reject(new Error(`closed before an answer: ${JSON.stringify(got)}`)));
    client.socket.write('GET / HTTP/1.1\r\nhost: guard\r\n\r\n');
  });
}

/** Waits (bounded) until the guard holds `n` connections: accepts are seen asynchronously. */
const holds = (g: Guarded, n: number) =>
  eventually(() => (g.guard.size === n ? true : undefined), `the guard to hold ${n}`, 5000);

/** Fails if `client` gets closed within `ms`: a bounded wait, not a timing assertion. */
async function staysOpen(client: Client, ms: number, what: string): Promise<void> {
  await sleep(ms);
  assert.equal(client.isClosed(), false, `${what} was closed`);
}

const LONG = 60_000;

describe('ConnectionGuard, on a real HTTP server on loopback', { timeout: 30_000 }, () => {
  it('a source past its share: its newcomer closes that source’s oldest connection without a request, and other sources are still accepted', async () => {
    const g = await guarded({ maxConnections: 10, maxPerSource: 2, firstRequestMs: LONG });
    const a1 = await open(g.port, '127.0.0.2');
    const a2 = await open(g.port, '127.0.0.2');
    await holds(g, 2);
    const a3 = await open(g.port, '127.0.0.2');
    await a1.closed;
    await holds(g, 2);
    assert.deepEqual(g.refusals, ['per-source']);
    assert.deepEqual(g.sources, ['127.0.0.2']);
    const b1 = await open(g.port, '127.0.0.3');
    await holds(g, 3);
    assert.equal(await request(b1), 'HTTP/1.1 200 OK');
    assert.equal(await request(a3), 'HTTP/1.1 200 OK');
    assert.equal(a2.isClosed(), false);
    assert.deepEqual(g.refusals, ['per-source']);
  });

  it('a newcomer within its grace is never closed for its address’s share: sending its request at once, it is answered', async () => {
    // The node's address, whose kubelet probes, may be shared (hostNetwork pods, traffic SNATed to it).
    const g = await guarded({ maxConnections: 10, maxPerSource: 2, firstRequestMs: LONG, graceMs: LONG });
    const silent = [await open(g.port, '127.0.0.2'), await open(g.port, '127.0.0.2')];
    await holds(g, 2);
    for (let i = 0; i < 5; i++)
      assert.equal(await request(await open(g.port, '127.0.0.2')), 'HTTP/1.1 200 OK');
    await staysOpen(silent[0]!, 100, 'a connection within its grace');
    assert.deepEqual(g.refusals, []);
  });

  it('when full, closes a connection past its grace without a request, from the address holding the most such, the oldest of those; never one that has sent a request', async () => {
    const g = await guarded({ maxConnections: 4, maxPerSource: 10, firstRequestMs: LONG });
    const requested = await open(g.port, '127.0.0.2');
    assert.equal(await request(requested), 'HTTP/1.1 200 OK');
    const lone = await open(g.port, '127.0.0.3');
    const many = [await open(g.port, '127.0.0.4'), await open(g.port, '127.0.0.4')];
    await holds(g, 4);

    // 127.0.0.4 holds the most without a request: its oldest goes, not the older one of 127.0.0.3.
    const newcomer = await open(g.port, '127.0.0.5');
    await many[0]!.closed;
    await holds(g, 4);
    assert.deepEqual(g.refusals, ['full']);
    assert.deepEqual(g.sources, ['127.0.0.4']);
    // Now every address holds one without a request: the oldest goes.
    const another = await open(g.port, '127.0.0.6');
    await lone.closed;
    assert.deepEqual(g.sources, ['127.0.0.4', '127.0.0.3']);
    assert.equal(requested.isClosed(), false, 'a connection that sent a request was closed');
    assert.equal(await request(requested), 'HTTP/1.1 200 OK');
    assert.equal(await request(newcomer), 'HTTP/1.1 200 OK');
    assert.equal(await request(another), 'HTTP/1.1 200 OK');
  });

  it('within their grace, connections are held beyond the cap, up to maxInGrace; past it the oldest goes, one read once already', async () => {
    const g = await guarded({
      maxConnections: 2,
      maxPerSource: 10,
      firstRequestMs: LONG,
      graceMs: LONG,
      maxInGrace: 2,
    });
    const first = [await open(g.port, '127.0.0.2'), await open(g.port, '127.0.0.3')];
    const inGrace = [await open(g.port, '127.0.0.4'), await open(g.port, '127.0.0.5')];
    await holds(g, 4);
    await staysOpen(first[0]!, 100, 'a connection within its grace, with room for it');
    const fifth = await open(g.port, '127.0.0.6');
    await first[0]!.closed;
    await holds(g, 4);
    assert.deepEqual(g.refusals, ['full']);
    assert.deepEqual(g.sources, ['127.0.0.2']);
    for (const c of [first[1]!, ...inGrace, fifth]) assert.equal(await request(c), 'HTTP/1.1 200 OK');
  });

  it('within their grace, the oldest goes whatever its source: a node’s two newcomers, their requests not sent yet, stay while tenants hold one each from many addresses', async () => {
    const g = await guarded({
      maxConnections: 2,
      maxPerSource: 10,
      firstRequestMs: LONG,
      graceMs: LONG,
      maxInGrace: 2,
    });
    const tenants = [];
    for (const from of ['127.0.0.3', '127.0.0.4', '127.0.0.5']) tenants.push(await open(g.port, from));
    await holds(g, 3);
    await staysOpen(tenants[0]!, 100, 'within its grace, with room for it');
    // The kubelet's liveness and readiness probes at once, mid-handshake as TLS keeps them.
    const probes = [await open(g.port, '127.0.0.9'), await open(g.port, '127.0.0.9')];
    await tenants[0]!.closed;
    await holds(g, 4);
    assert.deepEqual(g.sources, ['127.0.0.3']);
    for (const c of probes) assert.equal(await request(c), 'HTTP/1.1 200 OK');
  });

  it('within their grace, a crowd from one address goes first, its oldest: a probe mid-handshake outlives one address churning younger newcomers', async () => {
    const g = await guarded({
      maxConnections: 2,
      maxPerSource: 100,
      firstRequestMs: LONG,
      graceMs: LONG,
      maxInGrace: 8,
    });
    const probe = await open(g.port, '127.0.0.9');
    const crowd = [];
    for (let i = 0; i < 10; i++) crowd.push(await open(g.port, '127.0.0.3'));
    await crowd[0]!.closed;
    await holds(g, 10);
    assert.deepEqual(g.sources, ['127.0.0.3']);
    assert.equal(await request(probe), 'HTTP/1.1 200 OK');
  });

  it('when full of connections that have all sent a request, closes the newcomer once it has been read', async () => {
    const g = await guarded({ maxConnections: 2, maxPerSource: 10, firstRequestMs: LONG });
    const a = await open(g.port, '127.0.0.2');
    const b = await open(g.port, '127.0.0.3');
    assert.equal(await request(a), 'HTTP/1.1 200 OK');
    assert.equal(await request(b), 'HTTP/1.1 200 OK');
    const c = await open(g.port, '127.0.0.4');
    await c.closed;
    assert.deepEqual(g.refusals, ['full']);
    assert.equal(await request(a), 'HTTP/1.1 200 OK');
    assert.equal(await request(b), 'HTTP/1.1 200 OK');
  });

  it('closes a connection whose first request is not complete by the deadline, and no other', async () => {
    const firstRequestMs = 300;
    const g = await guarded({ maxConnections: 10, maxPerSource: 10, firstRequestMs });
    const silent = await open(g.port, '127.0.0.2');
    const partial = await open(g.port, '127.0.0.2');
    partial.socket.write('GET / HTTP/1.1\r\nhost: guard\r\n');
    const prompt = await open(g.port, '127.0.0.3');
    assert.equal(await request(prompt), 'HTTP/1.1 200 OK');
    await Promise.all([silent.closed, partial.closed]);
    assert.deepEqual(g.refusals, ['no-request', 'no-request']);
    // Past its own deadline several times over, the connection that sent a request is still served.
    await staysOpen(prompt, 3 * firstRequestMs, 'the connection that sent a request');
    assert.equal(await request(prompt), 'HTTP/1.1 200 OK');
    assert.deepEqual(g.refusals, ['no-request', 'no-request']);
  });

  it('releases every connection it held: the counts return to 0 and a source gets its full share back', async () => {
    const g = await guarded({ maxConnections: 4, maxPerSource: 2, firstRequestMs: LONG });
    const first = [await open(g.port, '127.0.0.2'), await open(g.port, '127.0.0.2')];
    await holds(g, 2);
    const third = await open(g.port, '127.0.0.2');
    await first[0]!.closed;
    const others = [await open(g.port, '127.0.0.3'), await open(g.port, '127.0.0.4')];
    assert.equal(await request(others[0]!), 'HTTP/1.1 200 OK');
    await holds(g, 4);
    // One closed for its own address (per-source), one for another's (full): both release what they held.
    const evictor = await open(g.port, '127.0.0.5');
    await first[1]!.closed;
    await holds(g, 4);

    for (const c of [third, ...others, evictor]) c.socket.destroy();
    await holds(g, 0);
    assert.deepEqual(g.refusals, ['per-source', 'full']);

    const again = [await open(g.port, '127.0.0.2'), await open(g.port, '127.0.0.2')];
    await holds(g, 2);
    for (const c of again) assert.equal(await request(c), 'HTTP/1.1 200 OK');
    assert.deepEqual(g.refusals, ['per-source', 'full']);
  });

  it('neither holds nor counts connections whose peer reset them before the server saw them', async () => {
    // Such a socket has no peer address any more: held under a shared placeholder, they were counted as
    // one source, refused as 'per-source' and leaked that source's count when they overwrote each other.
    const g = await guarded({ maxConnections: 10, maxPerSource: 2, firstRequestMs: LONG });
    for (let round = 0; round < 10; round++)
      await Promise.all(
        Array.from(
          { length: 50 },
          () =>
            new Promise<void>((resolve) => {
              const c = connect({ host: '127.0.0.1', port: g.port, localAddress: '127.0.0.2' });
              c.once('connect', () => {
                c.resetAndDestroy();
                resolve();
              });
              c.once('error', () => resolve());
            }),
        ),
      );
    await holds(g, 0);
    assert.deepEqual(g.refusals, []);
    const after = [await open(g.port, '127.0.0.2'), await open(g.port, '127.0.0.2')];
    await holds(g, 2);
    for (const c of after) assert.equal(await request(c), 'HTTP/1.1 200 OK');
    assert.deepEqual(g.refusals, []);
  });
});
