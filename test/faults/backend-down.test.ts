import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { after, before, beforeEach, describe, it } from 'node:test';
import { canary } from '../support/canary.ts';
import { eventually, memoryDir, runAgent, startAgent } from '../support/run-agent.ts';
import {
  exited,
  httpGet,
  httpPort,
  metric,
  readSecret,
  startBackend,
  waitReady,
  type Backend,
} from './backend.ts';
import {
  assertInitRetries,
  assertRefreshBackoff,
  ceiling,
  FIRST_FILL_SCHEDULE,
  gapsBetween,
  INIT_SCHEDULE,
  maxCallsWithin,
} from './schedule.ts';

let backend: Backend;

describe('fault: the backend is down (connection reset / refused)', () => {
  before(async () => {
    backend = await startBackend();
  });
  after(() => backend?.stop());
  beforeEach(() => backend.proxy.reset());

  it('init: connections reset for the whole deadline → exit 1, nothing written, retries on the 250 ms-doubling schedule', async () => {
    using dir = memoryDir();
    await backend.put('down/init', canary('down-init'));
    backend.proxy.always({ kind: 'reset' });
    const run = await runAgent(
      backend.env(dir.path, { SECRET_0_REF: 'aws:down/init', SECRET_0_FILENAME: 'db', INIT_DEADLINE: '3s' }),
    );
    assert.equal(run.code, 1, run.stderr);
    assert.deepEqual(readdirSync(dir.path), [], 'nothing is written');
    assert.match(run.stderr, /SECRET_0 \(aws:down\/init\): unavailable: /);
    assert.match(run.stderr, /fix: check that the backend endpoint is reachable/);
    assertInitRetries(run.logs, {
      deadlineMs: 3000,
      calls: backend.proxy.calls.length,
      reason: 'unavailable',
    });
  });

  it('init: connection refused, then the backend comes back → the agent recovers by itself and writes', async () => {
    using dir = memoryDir();
    const value = canary('refused-init');
    await backend.put('down/refused', value);
    await backend.proxy.refuse();
    let refusing = true;
    const agent = startAgent(
      backend.env(dir.path, {
        SECRET_0_REF: 'aws:down/refused',
        SECRET_0_FILENAME: 'db',
        INIT_DEADLINE: '20s',
      }),
    );
    try {
      await agent.waitForLog((l) => l.msg === 'transient backend errors; retrying' && l.attempt === 3);
      assert.deepEqual(readdirSync(dir.path), []);
      await backend.proxy.accept();
      refusing = false;
      await exited(agent, 'init to finish');
      const { code } = await agent.stop();
      assert.equal(code, 0, agent.output().stderr);
      assert.equal(readSecret(dir.path, 'db'), value);
      assertInitRetries(agent.output().logs, { deadlineMs: 20_000, reason: 'unavailable' });
      assert.equal(
        backend.proxy.calls.length,
        1,
        'refused attempts never reached the proxy; the good one did',
      );
    } finally {
      if (refusing) await backend.proxy.accept();
      await agent.stop();
    }
  });

  it('sidecar: connections reset after the first fill → last good files kept, still ready, refresh backs off (1 s doubling, capped at the interval), recovers', async () => {
    using dir = memoryDir();
    const before = canary('before');
    await backend.put('down/sidecar', before);
    const intervalMs = 2000;
    const agent = startAgent(
      backend.env(dir.path, {
        AGENT_MODE: 'sidecar',
        AGENT_HTTP_ADDR: '127.0.0.1:0',
        REFRESH_INTERVAL: '2s',
        SECRET_0_REF: 'aws:down/sidecar',
        SECRET_0_FILENAME: 'db',
      }),
    );
    try {
      const port = await httpPort(agent);
      await waitReady(port);
      backend.proxy.always({ kind: 'reset' });
      const failedFrom = backend.proxy.calls.length;
      // Five failed cycles: gaps of 0.5–1 s, then 1–2 s (capped at the 2 s interval) three times.
      await eventually(
        () => (backend.proxy.calls.length >= failedFrom + 5 ? true : undefined),
        'five failed refreshes',
      );
      const failed = backend.proxy.calls.slice(failedFrom).filter((c) => c.fault === 'reset');
      assertRefreshBackoff(gapsBetween(failed.map((c) => c.at)), intervalMs);
      // Failures 3 and 4 are past the cap: their gaps were held to ≤ the 2 s interval above.
      assert.ok(failed.length >= 5, `${failed.length} failed refreshes seen`);
      assert.equal(readSecret(dir.path, 'db'), before, 'the last good file stays');
      assert.equal(
        (await httpGet(port, '/readyz')).status,
        200,
        'an outage does not take the app out of service',
      );
      assert.equal((await httpGet(port, '/healthz')).status, 200, 'nor make the agent look dead');
      const metrics = (await httpGet(port, '/metrics')).body;
      assert.ok(
        metric(metrics, 'secret_agent_fetch_failures_total{provider="aws",reason="unavailable"}') >= 5,
      );

      const afterValue = canary('after');
      await backend.put('down/sidecar', afterValue);
      backend.proxy.always(undefined);
      await eventually(() => (readSecret(dir.path, 'db') === afterValue ? true : undefined), 'recovery');
    } finally {
      backend.proxy.always(undefined);
      assert.equal((await agent.stop()).code, 0);
    }
  });

  it('sidecar: connection refused → the failed refreshes back off (from its own log), then it recovers', async () => {
    using dir = memoryDir();
    const before = canary('before-refused');
    await backend.put('down/sidecar-refused', before);
    const agent = startAgent(
      backend.env(dir.path, {
        AGENT_MODE: 'sidecar',
        AGENT_HTTP_ADDR: '127.0.0.1:0',
        REFRESH_INTERVAL: '2s',
        SECRET_0_REF: 'aws:down/sidecar-refused',
        SECRET_0_FILENAME: 'db',
      }),
    );
    let refusing = false;
    try {
      const port = await httpPort(agent);
      await waitReady(port);
      await backend.proxy.refuse();
      refusing = true;
      const failures = () =>
        agent.output().logs.filter((l) => l.msg === 'refresh failed; keeping the last good files');
      await eventually(() => (failures().length >= 4 ? true : undefined), 'four failed refreshes');
      assert.ok(failures().every((l) => l.reason === 'unavailable' && /ECONNREFUSED/.test(String(l.detail))));
      assertRefreshBackoff(gapsBetween(failures().map((l) => Date.parse(String(l.time)))), 2000);
      assert.equal(readSecret(dir.path, 'db'), before);
      assert.equal((await httpGet(port, '/readyz')).status, 200);

      const afterValue = canary('after-refused');
      await backend.put('down/sidecar-refused', afterValue);
      await backend.proxy.accept();
      refusing = false;
      await eventually(() => (readSecret(dir.path, 'db') === afterValue ? true : undefined), 'recovery');
    } finally {
      if (refusing) await backend.proxy.accept();
      assert.equal((await agent.stop()).code, 0);
    }
  });

  it('sidecar: the backend down at start → not ready, first-fill rounds back off (1 s doubling), ready once it is back', async () => {
    using dir = memoryDir();
    const value = canary('late-backend');
    await backend.put('down/first-fill', value);
    backend.proxy.always({ kind: 'reset' });
    const agent = startAgent(
      backend.env(dir.path, {
        AGENT_MODE: 'sidecar',
        AGENT_HTTP_ADDR: '127.0.0.1:0',
        REFRESH_INTERVAL: '2s',
        INIT_DEADLINE: '1s',
        SECRET_0_REF: 'aws:down/first-fill',
        SECRET_0_FILENAME: 'db',
      }),
    );
    try {
      const port = await httpPort(agent);
      const rounds = () =>
        agent.output().logs.filter((l) => l.msg === 'not every secret could be delivered yet; retrying');
      await eventually(() => (rounds().length >= 2 ? true : undefined), 'two failed first-fill rounds');
      assert.equal((await httpGet(port, '/readyz')).status, 503, 'not ready without the files');
      assert.deepEqual(readdirSync(dir.path), []);
      rounds().forEach((l, i) => {
        const top = ceiling(i + 1, FIRST_FILL_SCHEDULE);
        assert.equal(l.attempt, i + 1);
        const delay = l.delayMs as number;
        assert.ok(delay >= top / 2 - 1 && delay <= top + 1, `round ${i + 1} waited ${delay} ms`);
      });
      // Within each 1 s round, the init schedule: at most 4 calls (at 0, ≥125, ≥375, ≥875 ms).
      const perRound = maxCallsWithin(1000, INIT_SCHEDULE);
      const calls = backend.proxy.calls.length;
      assert.ok(calls <= perRound * (rounds().length + 1), `${calls} calls in ${rounds().length + 1} rounds`);
      backend.proxy.always(undefined);
      await waitReady(port);
      assert.equal(readSecret(dir.path, 'db'), value);
    } finally {
      backend.proxy.always(undefined);
      assert.equal((await agent.stop()).code, 0);
    }
  });
});
