import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, afterEach, before, beforeEach, describe, it } from 'node:test';
import { Event } from 'kubernetes-models/v1';
import { Agent, request } from 'undici';
import { createKubernetesClient } from '../../agent/notify/kubernetes-client.ts';
import {
  createPodEventRecorder,
  podEventType,
  type PodEventReason,
  type PodEventRecorderOptions,
} from '../../agent/notify/pod-events.ts';
import { startKubernetesWorkloadsFake, type KubernetesWorkloadsFake } from '../fakes/kubernetes-workloads.ts';
import { assertNoCanary, canary } from '../support/canary.ts';
import { captureLog, type CapturedLog } from '../support/captured-log.ts';
import { TcpFaultProxy } from '../support/fault-injecting-proxy.ts';

const NS = 'shop';
const POD = 'web-7c9d8-x2x4q';
const WARN = 40; // pino's number for warn
type Json = Record<string, unknown>;

describe('KUBERNETES_EVENTS: Events on the agent’s own pod', () => {
  let fake: KubernetesWorkloadsFake;
  let saDir: string;
  let uid: string;
  const logs: CapturedLog[] = [];
  // What the writer holds: values stay there, only the file names reach an event.
  const secrets = { 'db-password': canary('db-password'), 'api/token': canary('api-token') };
  const files = Object.keys(secrets).join(', ');

  const writeServiceAccount = (dir = saDir) => {
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'token'), `${fake.token}\n`);
    writeFileSync(join(dir, 'ca.crt'), fake.caPem);
  };

  /** A recorder against the fake (or `apiUrl`), its captured log and every outcome it reported. */
  const recorder = (overrides: Partial<PodEventRecorderOptions> = {}) => {
    const captured = captureLog('debug');
    logs.push(captured);
    const outcomes: string[] = [];
    const events = createPodEventRecorder({
      apiUrl: fake.url,
      serviceAccountDir: saDir,
      pod: { namespace: NS, name: POD, uid },
      component: 'secret-agent',
      instance: `${POD}/secret-agent`,
      log: captured.log,
      onOutcome: (reason, outcome) => void outcomes.push(`${reason} ${outcome}`),
      timing: { retryDelayMs: 50, requestTimeoutMs: 2_000, flushTimeoutMs: 3_000 },
      ...overrides,
    });
    const warnings = () => captured.lines().filter((l) => l.level === WARN);
    return { events, outcomes, warnings, log: captured };
  };
  const posts = () => fake.requests.filter((r) => r.method === 'POST');
  const stored = () => fake.events(NS) as Json[];

  before(async () => {
    fake = await startKubernetesWorkloadsFake({ serviceAccount: { namespace: NS, name: 'shop-api' } });
    fake.token = canary('sa-token'); // a token must never reach a log or a body either
    fake.allowed.add('create events');
    uid = (fake.object('pods', NS, fake.addBarePod(NS, POD))!.metadata as { uid: string }).uid;
    saDir = mkdtempSync(join(tmpdir(), 'serviceaccount-'));
    writeServiceAccount();
  });
  after(async () => {
    await fake.stop();
    rmSync(saDir, { recursive: true, force: true });
    for (const captured of logs) assertNoCanary(captured.text(), 'pod event logs');
  });
  beforeEach(() => {
    (fake.requests as unknown[]).length = 0;
  });
  // Everything the API was sent or keeps: file names only, never a value.
  afterEach(() => {
    assertNoCanary(fake.requests.map((r) => r.body).join('\n'), 'request bodies');
    assertNoCanary(JSON.stringify(stored()), 'stored events');
  });

  it('SecretsDelivered and SecretsRotated become Normal core/v1 Events on the pod, in order', async () => {
    const before = stored().length;
    const { events, outcomes, log } = recorder();
    events.record('SecretsDelivered', `wrote 2 files: ${files}`);
    events.record('SecretsRotated', 'rotated db-password (SECRET_0)');
    await events.flush();
    assert.deepEqual(outcomes, ['SecretsDelivered ok', 'SecretsRotated ok']);
    assert.deepEqual(
      posts().map((r) => `${r.path} ${r.contentType} ${r.status}`),
      [
        `/api/v1/namespaces/${NS}/events application/json 201`,
        `/api/v1/namespaces/${NS}/events application/json 201`,
      ],
    );
    const [delivered, rotated] = stored().slice(before);
    for (const [event, reason, action] of [
      [delivered!, 'SecretsDelivered', 'Deliver'],
      [rotated!, 'SecretsRotated', 'Rotate'],
    ] as const) {
      new Event(event as ConstructorParameters<typeof Event>[0]).validate();
      const meta = event.metadata as Json;
      assert.match(meta.name as string, new RegExp(`^${POD}\\.[0-9a-f]{16}$`));
      assert.equal(meta.namespace, NS);
      assert.deepEqual(event.involvedObject, {
        apiVersion: 'v1',
        kind: 'Pod',
        name: POD,
        namespace: NS,
        uid,
      });
      assert.equal(event.reason, reason);
      assert.equal(event.type, 'Normal');
      assert.equal(event.action, action);
      assert.deepEqual(event.source, { component: 'secret-agent' });
      assert.equal(event.reportingComponent, 'secret-agent');
      assert.equal(event.reportingInstance, `${POD}/secret-agent`);
      assert.equal(event.count, 1);
      assert.match(event.firstTimestamp as string, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
      assert.equal(event.lastTimestamp, event.firstTimestamp);
      assert.equal(event.eventTime, undefined);
    }
    assert.notEqual((delivered!.metadata as Json).name, (rotated!.metadata as Json).name);
    assert.equal(delivered!.message, 'wrote 2 files: db-password, api/token');
    assert.match(rotated!.message as string, /db-password \(SECRET_0\)/);
    assert.ok(log.text().includes('api/token'), 'the message is logged at debug');
    await events.close();
  });

  it('SecretRefreshFailing is a Warning; a long message is capped at the API’s 1024 characters', async () => {
    assert.equal(podEventType('SecretRefreshFailing'), 'Warning');
    assert.equal(podEventType('SecretsRotated'), 'Normal');
    const before = stored().length;
    const { events, outcomes } = recorder();
    events.record(
      'SecretRefreshFailing',
      `refresh failed 3 times in a row for ${'x/'.repeat(900)}db-password`,
    );
    await events.flush();
    assert.deepEqual(outcomes, ['SecretRefreshFailing ok']);
    const [failing] = stored().slice(before);
    assert.equal(failing!.type, 'Warning');
    assert.equal(failing!.action, 'Refresh');
    assert.equal([...(failing!.message as string)].length, 1024);
    assert.match(failing!.message as string, /…$/);
    await events.close();
  });

  it('403: one warning naming the ClusterRole, outcome forbidden, nothing retried', async () => {
    fake.allowed.delete('create events');
    try {
      const { events, outcomes, warnings } = recorder();
      for (const reason of ['SecretsDelivered', 'SecretsRotated', 'SecretsRotated'] as PodEventReason[])
        events.record(reason, `files: ${files}`);
      await events.flush();
      assert.deepEqual(outcomes, [
        'SecretsDelivered forbidden',
        'SecretsRotated forbidden',
        'SecretsRotated forbidden',
      ]);
      assert.deepEqual(
        posts().map((r) => r.status),
        [403, 403, 403],
        'one request per event',
      );
      assert.equal(warnings().length, 1);
      const [warning] = warnings();
      assert.match(
        warning!.msg,
        /grant `create events` in the pod's namespace: bind the ClusterRole secret-agent-events \(deploy\/agent-rbac\)/,
      );
      assert.equal(warning!.status, 403);
      assert.match(
        warning!.apiMessage as string,
        /cannot create resource "events" in API group "" in the namespace "shop"/,
      );
      assert.ok(
        !JSON.stringify(warnings()).includes('db-password'),
        'the message text stays out of warnings',
      );
      await events.close();
    } finally {
      fake.allowed.add('create events');
    }
  });

  it('a 503 or a 429 is retried once after a short delay and the event lands; a 422 is not retried', async () => {
    const before = stored().length;
    const { events, outcomes, warnings } = recorder();
    fake.failNext(503);
    events.record('SecretsRotated', 'rotated db-password');
    await events.flush();
    fake.failNext(429);
    events.record('SecretsRotated', 'rotated api/token');
    await events.flush();
    assert.deepEqual(outcomes, ['SecretsRotated ok', 'SecretsRotated ok']);
    assert.deepEqual(
      posts().map((r) => r.status),
      [503, 201, 429, 201],
    );
    assert.equal(stored().length, before + 2);
    assert.equal(warnings().length, 0, 'a retry that worked is no warning');

    // Twice in a row: given up after the one retry.
    fake.failNext(500, 2);
    events.record('SecretsRotated', 'rotated db-password');
    await events.flush();
    assert.equal(outcomes.at(-1), 'SecretsRotated server-error');
    await events.close();

    // An invalid namespace is refused by validation (422): no retry.
    (fake.requests as unknown[]).length = 0;
    const invalid = recorder({ pod: { namespace: 'Not_A_Namespace', name: POD } });
    invalid.events.record('SecretsDelivered', 'wrote db-password');
    await invalid.events.flush();
    assert.deepEqual(invalid.outcomes, ['SecretsDelivered invalid']);
    assert.deepEqual(
      posts().map((r) => r.status),
      [422],
    );
    assert.equal(invalid.warnings().length, 1);
    await invalid.events.close();
  });

  it('API down (connections reset): flush() resolves in bounded time and the outcome is reported', async () => {
    const proxy = await TcpFaultProxy.start(Number(new URL(fake.url).port));
    try {
      proxy.setDown(true);
      const { events, outcomes, warnings } = recorder({ apiUrl: `https://127.0.0.1:${proxy.port}` });
      const started = performance.now();
      events.record('SecretsDelivered', 'wrote db-password');
      events.record('SecretsRotated', 'rotated db-password');
      await events.flush();
      assert.ok(performance.now() - started < 3_000, 'bounded');
      assert.deepEqual(outcomes, ['SecretsDelivered unreachable', 'SecretsRotated unreachable']);
      assert.equal(proxy.connections, 4, 'each event tried twice');
      assert.equal(warnings().length, 1, 'a down API is one warning, not one per event');
      assert.match(warnings()[0]!.msg, /SecretsDelivered event was not recorded \(unreachable\)/);

      // Back up: the next event goes through.
      proxy.setDown(false);
      events.record('SecretsRotated', 'rotated db-password');
      await events.flush();
      assert.equal(outcomes.at(-1), 'SecretsRotated ok');
      await events.close();
    } finally {
      await proxy.close();
    }
  });

  it('an API that accepts and never answers: record() never blocks, the queue keeps the newest 25, close() is bounded', async () => {
    const sockets = new Set<Socket>();
    const silent = createServer((s) => void sockets.add(s));
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    try {
      const port = (silent.address() as { port: number }).port;
      const { events, outcomes, warnings } = recorder({
        apiUrl: `https://127.0.0.1:${port}`,
        timing: { retryDelayMs: 50, requestTimeoutMs: 10_000, flushTimeoutMs: 300 },
      });
      const started = performance.now();
      for (let i = 0; i < 30; i++) events.record('SecretsRotated', `rotation ${i}: db-password`);
      assert.ok(performance.now() - started < 100, 'record() returns at once');
      // One in flight, 25 queued: the 4 oldest waiting ones are dropped, with one warning.
      assert.equal(outcomes.filter((o) => o.endsWith('dropped')).length, 4);
      assert.equal(warnings().filter((l) => /dropping the oldest/.test(l.msg)).length, 1);
      await events.close();
      assert.ok(performance.now() - started < 2_000, `close() bounded (${performance.now() - started} ms)`);
      assert.equal(outcomes.filter((o) => o.endsWith('aborted')).length, 26);
      assert.ok(warnings().some((l) => /gave up on events/.test(l.msg)));
      events.record('SecretsRotated', 'after close'); // ignored, never throws
      assert.equal(outcomes.length, 30);

      // Within flush's bound, a request that gets no answer ends at its timeout, retried once.
      const slow = recorder({
        apiUrl: `https://127.0.0.1:${port}`,
        timing: { retryDelayMs: 50, requestTimeoutMs: 200, flushTimeoutMs: 3_000 },
      });
      slow.events.record('SecretRefreshFailing', 'db-password');
      await slow.events.close();
      assert.deepEqual(slow.outcomes, ['SecretRefreshFailing timeout']);
    } finally {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => silent.close(() => r()));
    }
  });

  it('reads the token on every call (projected tokens rotate): a stale file is unauthorized until rewritten', async () => {
    const { events, outcomes } = recorder();
    events.record('SecretsDelivered', 'wrote db-password');
    await events.flush();
    fake.token = canary('sa-token-rotated');
    events.record('SecretsRotated', 'rotated db-password');
    await events.flush();
    writeServiceAccount();
    events.record('SecretsRotated', 'rotated db-password');
    await events.flush();
    assert.deepEqual(outcomes, ['SecretsDelivered ok', 'SecretsRotated unauthorized', 'SecretsRotated ok']);
    await events.close();
  });

  it('the fake answers event creates as the API server does: 401, 403, 415, 400, 422, 409, 201', async () => {
    const client = createKubernetesClient({ apiUrl: fake.url, serviceAccountDir: saDir });
    const signal = new AbortController().signal;
    const path = `/api/v1/namespaces/${NS}/events`;
    const event = (name: string, extra: Json = {}) => ({
      metadata: { name },
      involvedObject: { apiVersion: 'v1', kind: 'Pod', name: POD, namespace: NS },
      reason: 'Test',
      message: 'm',
      ...extra,
    });
    const answer = async (body: unknown) => {
      const res = await client.post(path, body, signal);
      return res.ok ? [res.status] : [res.status, res.failure.reason, res.failure.message];
    };
    try {
      const token = fake.token;
      fake.token = 'another';
      fake.allowed.delete('create events');
      try {
        assert.deepEqual(
          (await answer(event('a'))).slice(0, 2),
          [401, 'Unauthorized'],
          'authentication first',
        );
      } finally {
        fake.token = token;
      }
      try {
        assert.deepEqual((await answer(event('a'))).slice(0, 2), [403, 'Forbidden']);
      } finally {
        fake.allowed.add('create events');
      }
      const ca = new Agent({ connect: { ca: fake.caPem } });
      try {
        const yaml = await request(`${fake.url}${path}`, {
          method: 'POST',
          dispatcher: ca,
          headers: { authorization: `Bearer ${fake.token}`, 'content-type': 'text/plain' },
          body: 'reason: Test',
        });
        assert.equal(yaml.statusCode, 415);
        await yaml.body.dump();
      } finally {
        await ca.close();
      }
      assert.deepEqual(await answer(event('b', { metadata: { name: 'b', namespace: 'other' } })), [
        400,
        'BadRequest',
        'the namespace of the provided object does not match the namespace sent on the request',
      ]);
      assert.deepEqual(
        await answer(event('c', { involvedObject: { kind: 'Pod', name: POD, namespace: 'other' } })),
        [
          422,
          'Invalid',
          'Event "c" is invalid: involvedObject.namespace: Invalid value: "other": does not match event.namespace',
        ],
      );
      assert.deepEqual((await answer(event('d', { count: 'one' }))).slice(0, 2), [422, 'Invalid']);
      assert.deepEqual((await answer(event('e', { metadata: {} }))).slice(0, 2), [422, 'Invalid']);
      // eventTime set: the API wants reportingComponent, reportingInstance and action too.
      const strict = await answer(event('f', { eventTime: '2024-05-01T10:00:00.000000Z' }));
      assert.equal(strict[0], 422);
      assert.match(
        strict[2] as string,
        /reportingComponent: Required value, reportingInstance: Required value, action/,
      );
      assert.deepEqual(await answer(event('g')), [201]);
      assert.deepEqual(await answer(event('g')), [409, 'AlreadyExists', 'events "g" already exists']);
      const g = stored().find((e) => (e.metadata as Json).name === 'g')!;
      assert.match((g.metadata as Json).uid as string, /^[0-9a-f-]{36}$/);
      assert.equal((g.metadata as Json).namespace, NS);
    } finally {
      await client.close();
    }
  });
});
