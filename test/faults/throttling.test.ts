import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, it } from 'node:test';
import { canary } from '../support/canary.ts';
import { awsError } from '../support/fault-injecting-proxy.ts';
import { eventually, memoryDir, startAgent } from '../support/run-agent.ts';
import { httpGet, httpPort, metric, readSecret, startBackend, waitReady, type Backend } from './backend.ts';
import { assertRefreshBackoff, gapsBetween } from './schedule.ts';

let backend: Backend;

// Init-mode throttling (retries on the 250 ms schedule, giving up at the deadline) is in test/agent/aws.test.ts.
describe('fault: the backend throttles the sidecar', () => {
  before(async () => {
    backend = await startBackend();
  });
  after(() => backend?.stop());
  beforeEach(() => backend.proxy.reset());

  it('ThrottlingException on every refresh → backs off to the interval, keeps files and readiness, recovers when it stops', async () => {
    using dir = memoryDir();
    const before = canary('throttle-before');
    await backend.put('throttle/sidecar', before);
    await backend.put('throttle/other', canary('throttle-other'));
    const agent = startAgent(
      backend.env(dir.path, {
        AGENT_MODE: 'sidecar',
        AGENT_HTTP_ADDR: '127.0.0.1:0',
        REFRESH_INTERVAL: '2s',
        // Two secrets: one BatchGetSecretValue call per cycle, so one throttled call per failed cycle.
        SECRET_0_REF: 'aws:throttle/sidecar',
        SECRET_0_FILENAME: 'db',
        SECRET_1_REF: 'aws:throttle/other',
        SECRET_1_FILENAME: 'other',
      }),
    );
    try {
      const port = await httpPort(agent);
      await waitReady(port);
      const from = backend.proxy.calls.length;
      backend.proxy.always(awsError(400, 'ThrottlingException', 'Rate exceeded'));
      await eventually(
        () => (backend.proxy.calls.length >= from + 5 ? true : undefined),
        'five throttled cycles',
      );
      const throttled = backend.proxy.calls.slice(from).filter((c) => c.fault === 'respond');
      assert.ok(throttled.every((c) => c.target === 'secretsmanager.BatchGetSecretValue'));
      assertRefreshBackoff(gapsBetween(throttled.map((c) => c.at)), 2000);

      const failures = agent
        .output()
        .logs.filter((l) => l.msg === 'refresh failed; keeping the last good files');
      assert.ok(
        failures.length >= 8 && failures.every((l) => l.reason === 'throttled'),
        'both secrets, each cycle',
      );
      assert.match(String(failures[0]!.detail), /^ThrottlingException: Rate exceeded$/);
      assert.equal(readSecret(dir.path, 'db'), before);
      assert.equal((await httpGet(port, '/readyz')).status, 200);
      const metrics = (await httpGet(port, '/metrics')).body;
      assert.ok(metric(metrics, 'secret_agent_fetch_failures_total{provider="aws",reason="throttled"}') >= 8);

      const afterValue = canary('throttle-after');
      await backend.put('throttle/sidecar', afterValue);
      backend.proxy.always(undefined);
      await eventually(() => (readSecret(dir.path, 'db') === afterValue ? true : undefined), 'recovery');
    } finally {
      backend.proxy.always(undefined);
      assert.equal((await agent.stop()).code, 0);
    }
  });
});
