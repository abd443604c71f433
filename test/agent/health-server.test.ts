import assert from 'node:assert/strict';
import { connect, type AddressInfo, type Socket } from 'node:net';
import type { Server } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { AGENT_PORT_LIMITS, startHealthServer } from '../../agent/serve/health-server.ts';
import { AgentMetrics } from '../../agent/serve/metrics.ts';
import { eventually } from '../support/run-agent.ts';

/** Sends `request` raw on a connection from `from` and resolves with all it got once the server closed it. */
function exchange(port: number, request: string, from = '127.0.0.1'): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port, localAddress: from });
    let got = '';
    socket.on('data', (d: Buffer) => (got += d.toString()));
    socket.on('error', () => {});
    socket.on('close', () => resolve(got));
    socket.on('connect', () => socket.write(request));
    setTimeout(() => reject(new Error(`still open after 5 s: ${JSON.stringify(got)}`)), 5000).unref();
  });
}

const refused = async (metrics: AgentMetrics) =>
  Object.fromEntries(
    (await metrics.refusedConnections.get()).values.map((v) => [String(v.labels.reason), v.value]),
  );

describe('the agent’s port (startHealthServer) and its limits', { timeout: 30_000 }, () => {
  let server: Server;
  let port: number;
  const metrics = new AgentMetrics();
  before(async () => {
    server = await startHealthServer(
      { host: '127.0.0.1', port: 0 },
      { ready: () => true, live: () => true },
      metrics,
    );
    port = (server.address() as AddressInfo).port;
  });
  after(
    () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  );

  it('answers one request per connection and closes it, a second request on it unanswered', async () => {
    const got = await exchange(
      port,
      'GET /healthz HTTP/1.1\r\nhost: a\r\n\r\nGET /readyz HTTP/1.1\r\nhost: a\r\n\r\n',
    );
    assert.match(got, /^HTTP\/1\.1 200 OK\r\n/);
    assert.match(got, /\r\nConnection: close\r\n/i);
    assert.equal(got.match(/HTTP\/1\.1 /g)?.length, 1, got);
  });

  it('reads no request after the first on a connection, however they are written: each connection is parsed once and closed, and the port still answers', async () => {
    let parsed = 0;
    const count = () => parsed++;
    server.on('request', count);
    try {
      const metricsGet = 'GET /metrics HTTP/1.1\r\nhost: a\r\n\r\n';
      for (const [connections, pipelined, split] of [
        [1, 1000, false],
        [16, 300, false],
        [8, 3600, true],
      ] as const) {
        parsed = 0;
        const got = await Promise.all(
          Array.from(
            { length: connections },
            (_, i) =>
              new Promise<string>((resolve) => {
                const socket = connect({ host: '127.0.0.1', port, localAddress: `127.0.0.${10 + i}` });
                let text = '';
                socket.on('data', (d: Buffer) => (text += d.toString('latin1')));
                socket.on('error', () => {});
                socket.on('close', () => resolve(text));
                socket.on('connect', () => {
                  const all = metricsGet.repeat(pipelined);
                  // Split: the first head's end comes with the pipelined ones, in a later write.
                  if (!split) return void socket.write(all);
                  socket.write(all.slice(0, 20), () => setTimeout(() => socket.write(all.slice(20)), 20));
                });
              }),
          ),
        );
        assert.equal(parsed, connections, `${connections} × ${pipelined} pipelined: requests parsed`);
        for (const text of got) assert.ok((text.match(/HTTP\/1\.1 /g) ?? []).length <= 1, text.slice(0, 200));
      }
    } finally {
      server.off('request', count);
    }
    assert.match(await exchange(port, 'GET /healthz HTTP/1.1\r\nhost: a\r\n\r\n'), /^HTTP\/1\.1 200 OK\r\n/);
  });

  it(`refuses headers over ${AGENT_PORT_LIMITS.maxHeaderBytes / 1024} KiB with 431`, async () => {
    const big = 'a'.repeat(AGENT_PORT_LIMITS.maxHeaderBytes + 1);
    const got = await exchange(port, `GET /healthz HTTP/1.1\r\nhost: a\r\nx-big: ${big}\r\n\r\n`);
    assert.match(got, /^HTTP\/1\.1 431 /);
  });

  it('counts refused connections by reason, every reason at 0 from the start, and keeps serving other addresses', async () => {
    const start = await refused(metrics);
    assert.deepEqual(Object.keys(start).sort(), ['full', 'no-request', 'per-source']);
    const held: Socket[] = [];
    try {
      for (let i = 0; i < AGENT_PORT_LIMITS.maxPerSource + 1; i++) {
        const socket = connect({ host: '127.0.0.1', port, localAddress: '127.0.0.2' });
        socket.on('error', () => {});
        held.push(socket);
      }
      await eventually(
        async () => ((await refused(metrics))['per-source']! > start['per-source']! ? true : undefined),
        'a per-source refusal',
        5000,
      );
      const got = await exchange(port, 'GET /healthz HTTP/1.1\r\nhost: a\r\n\r\n', '127.0.0.3');
      assert.match(got, /^HTTP\/1\.1 200 OK\r\n/);
    } finally {
      for (const s of held) s.destroy();
    }
  });

  it('connections reset after they were accepted, before they sent anything, leave it serving', async () => {
    const accepted = await Promise.all(
      Array.from(
        { length: 20 },
        () =>
          new Promise<Socket>((resolve) => {
            const socket = connect({ host: '127.0.0.1', port, localAddress: '127.0.0.5' });
            socket.on('error', () => {});
            socket.once('connect', () => resolve(socket));
          }),
      ),
    );
    // Answered after them: the server has accepted them, and waits for their first bytes.
    assert.match(await exchange(port, 'GET /healthz HTTP/1.1\r\nhost: a\r\n\r\n'), /^HTTP\/1\.1 200 OK\r\n/);
    for (const socket of accepted) socket.resetAndDestroy();
    // The server reads the resets within this: unhandled, one would end this process, and fail the file.
    await new Promise((r) => setTimeout(r, 300));
    assert.match(await exchange(port, 'GET /healthz HTTP/1.1\r\nhost: a\r\n\r\n'), /^HTTP\/1\.1 200 OK\r\n/);
  });

  it('when the agent stops it (closeAllConnections, close), the connections that sent nothing close too, uncounted', async () => {
    const own = new AgentMetrics();
    const stopping = await startHealthServer(
      { host: '127.0.0.1', port: 0 },
      { ready: () => true, live: () => true },
      own,
    );
    const at = (stopping.address() as AddressInfo).port;
    const silent = await Promise.all(
      Array.from(
        { length: 3 },
        () =>
          new Promise<Socket>((resolve) => {
            const socket = connect({ host: '127.0.0.1', port: at, localAddress: '127.0.0.4' });
            socket.on('error', () => {});
            socket.once('connect', () => resolve(socket));
          }),
      ),
    );
    // The server has accepted them: a request on another connection is answered after them.
    assert.match(await exchange(at, 'GET /healthz HTTP/1.1\r\nhost: a\r\n\r\n'), /^HTTP\/1\.1 200 OK\r\n/);
    const closed = Promise.all(silent.map((s) => new Promise((r) => s.once('close', r))));
    stopping.closeAllConnections();
    await new Promise<void>((r) => stopping.close(() => r()));
    await closed;
    // Closed by the stop, not at their first-request deadline.
    assert.deepEqual(await refused(own), { 'per-source': 0, full: 0, 'no-request': 0 });
  });
});
