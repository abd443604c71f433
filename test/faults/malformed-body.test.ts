import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { after, before, beforeEach, describe, it } from 'node:test';
import { canary } from '../support/canary.ts';
import type { Fault } from '../support/fault-injecting-proxy.ts';
import { eventually, memoryDir, runAgent, startAgent } from '../support/run-agent.ts';
import { httpGet, httpPort, metric, readSecret, startBackend, waitReady, type Backend } from './backend.ts';
import { assertInitRetries } from './schedule.ts';

let backend: Backend;

const AWS_JSON = { 'content-type': 'application/x-amz-json-1.1' };

/** A GetSecretValue answer as Secrets Manager shapes it, carrying `value` (a canary). */
function getSecretValueBody(name: string, value: string | undefined): Record<string, unknown> {
  return {
    ARN: `arn:aws:secretsmanager:us-east-1:123456789012:secret:${name}-AbCdEf`,
    Name: name,
    VersionId: '01234567-89ab-cdef-0123-456789abcdef',
    ...(value === undefined ? {} : { SecretString: value }),
    VersionStages: ['AWSCURRENT'],
    CreatedDate: 1.7e9,
  };
}

const respond = (
  status: number,
  headers: Record<string, string>,
  body: string,
  truncateAt?: number,
): Fault => ({
  kind: 'respond',
  status,
  headers,
  body,
  ...(truncateAt === undefined ? {} : { truncateAt }),
});

const HTML_502 =
  '<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad Gateway</h1></center><hr><center>nginx</center></body></html>';

describe('fault: the backend answers with malformed bodies', () => {
  before(async () => {
    backend = await startBackend();
    await backend.put('malformed/one', canary('malformed-one'));
  });
  after(() => backend?.stop());
  beforeEach(() => backend.proxy.reset());

  const init = (dir: string, extra: Record<string, string> = {}) =>
    runAgent(
      backend.env(dir, {
        SECRET_0_REF: 'aws:malformed/one',
        SECRET_0_FILENAME: 'db',
        INIT_DEADLINE: '3s',
        ...extra,
      }),
    );

  // Permanent: the answer cannot be read, so retrying cannot help; init stops after one call.
  const permanent: [string, Fault, RegExp][] = [
    [
      'HTTP 200 with invalid JSON (a value inside)',
      respond(
        200,
        AWS_JSON,
        JSON.stringify(getSecretValueBody('malformed/one', canary('in-bad-json'))).slice(0, -9),
      ),
      /SECRET_0 \(aws:malformed\/one\): internal: SyntaxError: the backend's answer could not be parsed \(HTTP 200\)\n\s+fix: /,
    ],
    [
      'HTTP 200 with an HTML page',
      respond(200, { 'content-type': 'text/html' }, HTML_502),
      /SECRET_0 \(aws:malformed\/one\): internal: SyntaxError: the backend's answer could not be parsed \(HTTP 200\)\n\s+fix: /,
    ],
    [
      'HTTP 200 with JSON missing SecretString and SecretBinary',
      respond(200, AWS_JSON, JSON.stringify(getSecretValueBody('malformed/one', undefined))),
      /SECRET_0 \(aws:malformed\/one\): invalid: the secret version has neither SecretString nor SecretBinary\n\s+fix: store a value in the secret/,
    ],
  ];
  for (const [name, fault, message] of permanent) {
    it(`init: ${name} → exit 1 with a clear error, nothing written, no retry`, async () => {
      using dir = memoryDir();
      backend.proxy.always(fault);
      const run = await init(dir.path);
      assert.equal(run.code, 1, run.stderr);
      assert.match(run.stderr, message);
      assert.doesNotMatch(run.stderr, /internal error/, 'a handled failure, not a crash');
      assert.deepEqual(readdirSync(dir.path), [], 'nothing is written');
      assert.equal(backend.proxy.calls.length, 1);
    });
  }

  it('init: HTTP 200 whose body is the bare value (a misrouted endpoint) → the JSON parser’s message must not quote it', async () => {
    using dir = memoryDir();
    backend.proxy.always(respond(200, AWS_JSON, canary('bare')));
    const run = await init(dir.path); // rejects: the canary reaches stderr and the log
    assert.equal(run.code, 1, run.stderr);
  });

  it('init: a body cut short (Content-Length promised, connection closed) is transient → retried, then written', async () => {
    using dir = memoryDir();
    const body = JSON.stringify(getSecretValueBody('malformed/one', canary('truncated')));
    backend.proxy.next(respond(200, AWS_JSON, body, Math.floor(body.length / 2)), 2);
    const run = await init(dir.path);
    assert.equal(run.code, 0, run.stderr);
    assert.ok(readSecret(dir.path, 'db')?.includes('malformed-one'), 'the real value, not the cut-short one');
    assertInitRetries(run.logs, {
      deadlineMs: 3000,
      calls: backend.proxy.calls.length,
      reason: 'unavailable',
    });
  });

  it('init: an HTML 502 page from a proxy in between is transient → retried, then written', async () => {
    using dir = memoryDir();
    backend.proxy.next(respond(502, { 'content-type': 'text/html' }, HTML_502), 2);
    const run = await init(dir.path);
    assert.equal(run.code, 0, run.stderr);
    assert.ok(readSecret(dir.path, 'db')?.includes('malformed-one'));
    assertInitRetries(run.logs, {
      deadlineMs: 3000,
      calls: backend.proxy.calls.length,
      reason: 'unavailable',
    });
  });

  it('init: a well-formed answer with a wrong Content-Type is read as the protocol says (the type is not what decides)', async () => {
    using dir = memoryDir();
    const value = canary('wrong-type');
    backend.proxy.always(
      respond(
        200,
        { 'content-type': 'text/plain' },
        JSON.stringify(getSecretValueBody('malformed/one', value)),
      ),
    );
    const run = await init(dir.path);
    assert.equal(run.code, 0, run.stderr);
    assert.equal(readSecret(dir.path, 'db'), value);
  });

  it('init, batch: BatchGetSecretValue answering 200 with neither the values nor errors → exit 1 naming both secrets', async () => {
    using dir = memoryDir();
    await backend.put('malformed/two', canary('malformed-two'));
    backend.proxy.always(respond(200, AWS_JSON, JSON.stringify({ SecretValues: [], Errors: [] })));
    const run = await init(dir.path, { SECRET_1_REF: 'aws:malformed/two', SECRET_1_FILENAME: 'two' });
    assert.equal(run.code, 1, run.stderr);
    assert.match(run.stderr, /2 of 2 secrets could not be delivered/);
    assert.match(
      run.stderr,
      /SECRET_1 \(aws:malformed\/two\): internal: missing from the BatchGetSecretValue response/,
    );
    assert.deepEqual(readdirSync(dir.path), []);
    assert.deepEqual(
      backend.proxy.calls.map((c) => c.target),
      ['secretsmanager.BatchGetSecretValue'],
    );
  });

  it('sidecar: malformed refresh answers keep the last good files, the agent keeps running, and recovers', async () => {
    using dir = memoryDir();
    const before = canary('sidecar-before');
    await backend.put('malformed/sidecar', before);
    const agent = startAgent(
      backend.env(dir.path, {
        AGENT_MODE: 'sidecar',
        AGENT_HTTP_ADDR: '127.0.0.1:0',
        REFRESH_INTERVAL: '1s',
        SECRET_0_REF: 'aws:malformed/sidecar',
        SECRET_0_FILENAME: 'db',
      }),
    );
    try {
      const port = await httpPort(agent);
      await waitReady(port);
      const bad = [
        respond(200, AWS_JSON, '{"ARN": "arn:aws:secretsmanager:us-east-1:1:secret:x", "SecretStr'),
        respond(200, { 'content-type': 'text/html' }, HTML_502),
        respond(200, AWS_JSON, JSON.stringify(getSecretValueBody('malformed/sidecar', undefined))),
        respond(200, AWS_JSON, JSON.stringify(getSecretValueBody('malformed/sidecar', canary('cut'))), 40),
      ];
      for (const fault of bad) backend.proxy.next(fault);
      const failures = await eventually(() => {
        const lines = agent
          .output()
          .logs.filter((l) => l.msg === 'refresh failed; keeping the last good files');
        return lines.length >= bad.length ? lines : undefined;
      }, 'a failed refresh for every malformed answer');
      assert.deepEqual(
        failures.map((l) => l.reason),
        ['internal', 'internal', 'invalid', 'unavailable'],
      );
      assert.equal(readSecret(dir.path, 'db'), before, 'the last good file stays');
      assert.equal((await httpGet(port, '/readyz')).status, 200);
      const metrics = (await httpGet(port, '/metrics')).body;
      assert.equal(metric(metrics, 'secret_agent_fetch_failures_total{provider="aws",reason="internal"}'), 2);
      assert.equal(metric(metrics, 'secret_agent_fetch_failures_total{provider="aws",reason="invalid"}'), 1);

      const afterValue = canary('sidecar-after');
      await backend.put('malformed/sidecar', afterValue);
      await eventually(() => (readSecret(dir.path, 'db') === afterValue ? true : undefined), 'recovery');
    } finally {
      assert.equal((await agent.stop()).code, 0);
    }
  });
});
