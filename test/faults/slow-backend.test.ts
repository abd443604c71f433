import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { after, before, beforeEach, describe, it } from 'node:test';
import { canary } from '../support/canary.ts';
import { eventually, memoryDir, runAgent, startAgent } from '../support/run-agent.ts';
import { httpGet, httpPort, metric, readSecret, startBackend, waitReady, type Backend } from './backend.ts';
import { ceiling, FIRST_FILL_SCHEDULE } from './schedule.ts';

let backend: Backend;

/**
 * A backend that takes the request and never answers. Each attempt gets a third of INIT_DEADLINE
 * (at least 1 s, at most 15 s; the last one all that is left), and the AWS SDK's request timeout
 * follows it (attemptBudgetMs in agent/fetch/fetch-secrets.ts). These tests bound themselves with
 * INIT_DEADLINE, except the one refresh, a single attempt that must outlast its 15 s.
 */
describe('fault: the backend is slower than the timeouts', () => {
  before(async () => {
    backend = await startBackend();
  });
  after(() => backend?.stop());
  beforeEach(() => backend.proxy.reset());

  it('init: a slow answer within the deadline is waited for, not retried', async () => {
    using dir = memoryDir();
    const value = canary('slow-ok');
    await backend.put('slow/ok', value);
    backend.proxy.always({ kind: 'delay', ms: 1500 });
    const run = await runAgent(
      backend.env(dir.path, { SECRET_0_REF: 'aws:slow/ok', SECRET_0_FILENAME: 'db', INIT_DEADLINE: '10s' }),
    );
    assert.equal(run.code, 0, run.stderr);
    assert.equal(readSecret(dir.path, 'db'), value);
    assert.equal(backend.proxy.calls.length, 1, 'one call: a slow backend is not hammered');
  });

  it('init: a backend that never answers → each attempt is cut in time for a retry, exit 1 with "timeout" at INIT_DEADLINE, nothing written', async () => {
    using dir = memoryDir();
    await backend.put('slow/hang', canary('slow-hang'));
    backend.proxy.always({ kind: 'hang' });
    const run = await runAgent(
      backend.env(dir.path, { SECRET_0_REF: 'aws:slow/hang', SECRET_0_FILENAME: 'db', INIT_DEADLINE: '6s' }),
    );
    assert.equal(run.code, 1, run.stderr);
    assert.match(run.stderr, /SECRET_0 \(aws:slow\/hang\): timeout: the request timed out/);
    assert.match(run.stderr, /nothing was written/);
    assert.deepEqual(readdirSync(dir.path), []);
    // A 6 s deadline: each attempt is cut after 2 s, so a retry happens, however slow the start
    // (on a loaded machine a 2 s deadline could be spent before the second attempt).
    const retries = run.logs.filter((l) => l.msg === 'transient backend errors; retrying');
    assert.ok(retries.length >= 1, 'at least one retry within the deadline');
    for (const retry of retries) assert.deepEqual(retry.reasons, ['timeout']);
    assert.equal(
      backend.proxy.calls.length,
      retries.length + 1,
      'one call per attempt, no hidden SDK retries',
    );
  });

  it('sidecar first fill: hung rounds are cut at INIT_DEADLINE and retried with backoff; ready once the backend answers', async () => {
    using dir = memoryDir();
    const value = canary('slow-first-fill');
    await backend.put('slow/first-fill', value);
    backend.proxy.always({ kind: 'hang' });
    const agent = startAgent(
      backend.env(dir.path, {
        AGENT_MODE: 'sidecar',
        AGENT_HTTP_ADDR: '127.0.0.1:0',
        INIT_DEADLINE: '1s',
        SECRET_0_REF: 'aws:slow/first-fill',
        SECRET_0_FILENAME: 'db',
      }),
    );
    try {
      const port = await httpPort(agent);
      const rounds = () =>
        agent.output().logs.filter((l) => l.msg === 'not every secret could be delivered yet; retrying');
      await eventually(() => (rounds().length >= 2 ? true : undefined), 'two hung first-fill rounds');
      assert.equal((await httpGet(port, '/readyz')).status, 503);
      assert.deepEqual(readdirSync(dir.path), []);
      const notDelivered = agent.output().logs.filter((l) => l.msg === 'secret not delivered');
      assert.ok(notDelivered.length >= 2 && notDelivered.every((l) => l.reason === 'timeout'));
      rounds().forEach((l, i) => {
        const top = ceiling(i + 1, FIRST_FILL_SCHEDULE);
        const delay = l.delayMs as number;
        assert.ok(delay >= top / 2 - 1 && delay <= top + 1, `round ${i + 1} waited ${delay} ms`);
      });
      // A hung call takes its round's whole deadline: one call per round, never a pile of them.
      assert.equal(backend.proxy.calls.length, rounds().length);
      backend.proxy.always(undefined);
      await waitReady(port);
      assert.equal(readSecret(dir.path, 'db'), value);
    } finally {
      backend.proxy.always(undefined);
      assert.equal((await agent.stop()).code, 0);
    }
  });

  it('sidecar refresh: a hung refresh is given up after its 15 s attempt budget; files kept, still ready, recovers', async () => {
    using dir = memoryDir();
    const before = canary('slow-before');
    await backend.put('slow/refresh', before);
    const agent = startAgent(
      backend.env(dir.path, {
        AGENT_MODE: 'sidecar',
        AGENT_HTTP_ADDR: '127.0.0.1:0',
        REFRESH_INTERVAL: '1s',
        SECRET_0_REF: 'aws:slow/refresh',
        SECRET_0_FILENAME: 'db',
      }),
    );
    try {
      const port = await httpPort(agent);
      await waitReady(port);
      const hungFrom = backend.proxy.calls.length;
      backend.proxy.next({ kind: 'hang' });
      const failure = await agent.waitForLog(
        (l) => l.msg === 'refresh failed; keeping the last good files',
        25_000,
      );
      assert.ok(
        ['timeout', 'unavailable'].includes(String(failure.reason)),
        `reason ${String(failure.reason)}`,
      );
      assert.equal(
        backend.proxy.calls.length,
        hungFrom + 1,
        'while one refresh hangs, no other call is started (refreshes do not pile up)',
      );
      assert.equal(readSecret(dir.path, 'db'), before);
      assert.equal((await httpGet(port, '/readyz')).status, 200);
      assert.equal((await httpGet(port, '/healthz')).status, 200, 'a 15 s hang is not a dead agent');
      const afterValue = canary('slow-after');
      await backend.put('slow/refresh', afterValue);
      await eventually(() => (readSecret(dir.path, 'db') === afterValue ? true : undefined), 'recovery');
      const metrics = (await httpGet(port, '/metrics')).body;
      assert.equal(
        metric(
          metrics,
          `secret_agent_fetch_failures_total{provider="aws",reason="${String(failure.reason)}"}`,
        ),
        1,
      );
    } finally {
      assert.equal((await agent.stop()).code, 0);
    }
  });
});
