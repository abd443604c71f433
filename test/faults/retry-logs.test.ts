import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, it } from 'node:test';
import { awsError, type Fault } from '../support/fault-injecting-proxy.ts';
import { canary } from '../support/canary.ts';
import { memoryDir, runAgent, startAgent } from '../support/run-agent.ts';
import { httpPort, readSecret, startBackend, waitReady, type Backend } from './backend.ts';

/**
 * Issue 10, item 9: every retry line says which secrets are missing (SECRET_<N> id, the reference
 * as written, the file), where the provider asked (here the fault proxy standing in for
 * secretsmanager.<region>.amazonaws.com), and what the backend answered (reason and its message),
 * so a stuck init container explains itself in `kubectl logs`. runAgent and stop() scan every byte
 * of output for the canary values stored in moto.
 */
type Log = Record<string, unknown>;
interface Described {
  id: string;
  ref: string;
  file: string;
  reason: string;
  detail: string;
  endpoint: string;
}

const INTERNAL: Fault = awsError(500, 'InternalServiceError', 'An error occurred on the server side.');

let backend: Backend;

/** The entries of a retry line's `secrets`, by id. */
function secretsOf(line: Log): Map<string, Described> {
  const list = line.secrets as Described[] | undefined;
  assert.ok(Array.isArray(list), `the line names its secrets: ${JSON.stringify(line)}`);
  return new Map(list.map((s) => [s.id, s]));
}

describe('item 9: retry lines name the secrets, the endpoint and the backend’s error', () => {
  before(async () => {
    backend = await startBackend();
  });
  after(() => backend?.stop());
  beforeEach(() => backend.proxy.reset());

  it('init: "transient backend errors; retrying" carries id, ref, file, endpoint, reason and the backend message', async () => {
    using dir = memoryDir();
    const db = canary('retry-db');
    const api = canary('retry-api');
    await backend.put('retry/db', JSON.stringify({ username: 'app', password: db }));
    await backend.put('retry/api', api);
    // Both secrets go out in one BatchGetSecretValue; the first two calls fail on the server side.
    backend.proxy.next(INTERNAL, 2);
    const run = await runAgent(
      backend.env(dir.path, {
        SECRET_0_REF: 'aws:retry/db#password',
        SECRET_0_FILENAME: 'db/password',
        SECRET_1_REF: 'aws:retry/api',
        SECRET_1_FILENAME: 'api-key',
        INIT_DEADLINE: '20s',
      }),
    );
    assert.equal(run.code, 0, run.stderr);
    assert.equal(readSecret(dir.path, 'db/password'), db);
    const retries = run.logs.filter((l) => l.msg === 'transient backend errors; retrying');
    assert.equal(retries.length, 2);
    for (const line of retries) {
      assert.equal(line.level, 'warn');
      const secrets = secretsOf(line);
      assert.deepEqual(secrets.get('SECRET_0'), {
        id: 'SECRET_0',
        ref: 'aws:retry/db#password',
        file: 'db/password',
        reason: 'unavailable',
        detail: 'InternalServiceError: An error occurred on the server side.',
        endpoint: backend.proxy.endpoint,
      });
      assert.deepEqual(
        [secrets.get('SECRET_1')?.ref, secrets.get('SECRET_1')?.file, secrets.get('SECRET_1')?.endpoint],
        ['aws:retry/api', 'api-key', backend.proxy.endpoint],
      );
    }
  });

  it('init, given up: "secret not delivered" and the stderr summary name the endpoint too', async () => {
    using dir = memoryDir();
    await backend.put('retry/down', canary('retry-down'));
    backend.proxy.always(awsError(503, 'ServiceUnavailable', 'Service is down for maintenance.'));
    const run = await runAgent(
      backend.env(dir.path, {
        SECRET_0_REF: 'aws:retry/down',
        SECRET_0_FILENAME: 'down',
        INIT_DEADLINE: '1s',
      }),
    );
    assert.equal(run.code, 1);
    const failed = run.logs.find((l) => l.msg === 'secret not delivered')!;
    assert.deepEqual(
      [failed.id, failed.ref, failed.reason, failed.detail, failed.endpoint],
      [
        'SECRET_0',
        'aws:retry/down',
        'unavailable',
        'ServiceUnavailable: Service is down for maintenance.',
        backend.proxy.endpoint,
      ],
    );
    assert.match(
      run.stderr,
      new RegExp(
        `SECRET_0 \\(aws:retry/down\\): unavailable: .*\\n\\s+fix: .*\\n\\s+endpoint: ${backend.proxy.endpoint}\\n`,
      ),
    );
  });

  it('sidecar: the first fill’s and the refresh’s retry lines name id, ref, file, endpoint, reason and message', async () => {
    using dir = memoryDir();
    const first = canary('retry-sidecar-1');
    await backend.put('retry/sidecar', first);
    backend.proxy.always(awsError(400, 'ThrottlingException', 'Rate exceeded'));
    const agent = startAgent(
      backend.env(dir.path, {
        AGENT_MODE: 'sidecar',
        AGENT_HTTP_ADDR: '127.0.0.1:0',
        INIT_DEADLINE: '1s',
        REFRESH_INTERVAL: '1s',
        SECRET_0_REF: 'aws:retry/sidecar',
        SECRET_0_FILENAME: 'token',
      }),
    );
    try {
      const port = await httpPort(agent);
      const round = await agent.waitForLog(
        (l) => l.msg === 'not every secret could be delivered yet; retrying',
      );
      assert.deepEqual(secretsOf(round).get('SECRET_0'), {
        id: 'SECRET_0',
        ref: 'aws:retry/sidecar',
        file: 'token',
        reason: 'throttled',
        detail: 'ThrottlingException: Rate exceeded',
        endpoint: backend.proxy.endpoint,
      });
      const notDelivered = agent.output().logs.find((l) => l.msg === 'secret not delivered')!;
      assert.deepEqual(
        [notDelivered.id, notDelivered.file, notDelivered.endpoint, notDelivered.reason],
        ['SECRET_0', 'token', backend.proxy.endpoint, 'throttled'],
      );

      backend.proxy.always(undefined);
      await waitReady(port);
      assert.equal(readSecret(dir.path, 'token'), first);

      backend.proxy.always(INTERNAL);
      const refresh = await agent.waitForLog((l) => l.msg === 'refresh failed; keeping the last good files');
      assert.deepEqual(
        [refresh.id, refresh.ref, refresh.file, refresh.endpoint, refresh.reason, refresh.detail],
        [
          'SECRET_0',
          'aws:retry/sidecar',
          'token',
          backend.proxy.endpoint,
          'unavailable',
          'InternalServiceError: An error occurred on the server side.',
        ],
      );
      assert.equal(readSecret(dir.path, 'token'), first, 'the last good file stays');
    } finally {
      backend.proxy.always(undefined);
      assert.equal((await agent.stop()).code, 0);
    }
  });
});
