import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { Agent, request } from 'node:https';
import { after, before, describe, it } from 'node:test';
import { connect, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseWebhookConfig } from '../../webhook/config/parse-webhook-config.ts';
import { MAX_BODY_BYTES } from '../../webhook/body-budget.ts';
import { MAX_CONNECTIONS_PER_SOURCE } from '../../webhook/connection-limits.ts';
import { startWebhook, type RunningWebhook } from '../../webhook/start.ts';
import { assertNoCanary, canary } from '../support/canary.ts';
import { captureLog, type CapturedLog } from '../support/captured-log.ts';
import { AGENT_IMAGE, basicPod, decodePatch, review, type PodDoc } from './fixtures.ts';
import { call, type Reply } from './https-call.ts';
import { certDir, makeServingPair, SERVER_NAME, type ServingPair } from './tls-certs.ts';

async function start(
  dir: ReturnType<typeof certDir>,
  log: CapturedLog['log'],
  env: Record<string, string> = {},
): Promise<RunningWebhook> {
  const config = parseWebhookConfig({
    ...env,
    AGENT_IMAGE,
    WEBHOOK_PORT: '0',
    WEBHOOK_HOST: '127.0.0.1',
    TLS_CERT_FILE: dir.cert,
    TLS_KEY_FILE: dir.key,
    // gcp:SECRET and aws:NAME references are refused without them.
    AGENT_GCP_PROJECT: 'my-project',
    AGENT_AWS_REGION: 'eu-west-1',
  });
  return startWebhook(config, { log });
}

describe('the HTTPS server', () => {
  let pair: ServingPair;
  let dir: ReturnType<typeof certDir>;
  let webhook: RunningWebhook;
  const logs = captureLog();

  before(async () => {
    pair = await makeServingPair();
    dir = certDir();
    dir.write(pair);
    webhook = await start(dir, logs.log);
  });
  after(async () => {
    await webhook.close();
    dir[Symbol.dispose]();
    assertNoCanary(logs.text(), 'webhook logs');
  });

  it('answers probes', async () => {
    assert.equal((await call(webhook.port, pair.ca, '/healthz')).status, 200);
    assert.equal((await call(webhook.port, pair.ca, '/readyz')).status, 200);
    assert.equal((await call(webhook.port, pair.ca, '/nope')).status, 404);
  });

  it('mutates a pod over HTTPS end to end', async () => {
    const pod = basicPod(
      { 'secret-agent.io/secret-token': 'gcp:api-token' },
      { containers: [{ name: 'app', image: 'a', env: [{ name: 'PASSWORD', value: canary() }] }] },
    );
    const reply = await call(webhook.port, pair.ca, '/mutate', { body: JSON.stringify(review(pod)) });
    assert.equal(reply.status, 200);
    assert.equal(reply.headers['content-type'], 'application/json');
    assertNoCanary(reply.body, 'the /mutate response');
    const answer = JSON.parse(reply.body) as {
      apiVersion: string;
      kind: string;
      response: { uid: string; allowed: boolean; patch?: string };
    };
    assert.equal(answer.apiVersion, 'admission.k8s.io/v1');
    assert.equal(answer.kind, 'AdmissionReview');
    assert.equal(answer.response.uid, '705ab4f5-6393-11e8-b7cc-42010a800002');
    assert.equal(answer.response.allowed, true);
    assert.ok(decodePatch(answer.response).some((op) => op.path === '/spec/initContainers'));
  });

  it('denies with 400 inside a 200 AdmissionReview', async () => {
    const pod = basicPod({ 'secret-agent.io/secret-x': canary('pasted') });
    const reply = await call(webhook.port, pair.ca, '/mutate', { body: JSON.stringify(review(pod)) });
    assert.equal(reply.status, 200);
    assertNoCanary(reply.body, 'a denial');
    const answer = JSON.parse(reply.body) as {
      response: { allowed: boolean; status: { code: number; message: string } };
    };
    assert.equal(answer.response.allowed, false);
    assert.equal(answer.response.status.code, 400);
    assert.match(answer.response.status.message, /secret-agent\.io\/secret-x/);
  });

  it('gives garbage a clean HTTP error and keeps serving', async () => {
    const cases: [string, Parameters<typeof call>[3], number][] = [
      ['malformed JSON', { body: '{"kind": "AdmissionRev' }, 400],
      ['wrong kind', { body: JSON.stringify({ apiVersion: 'v1', kind: 'ConfigMap' }) }, 400],
      ['wrong content type', { body: '{}', contentType: 'text/plain' }, 415],
      ['GET /mutate', { method: 'GET' }, 405],
      ['empty body', { body: '' }, 400],
      ['oversized body', { body: Buffer.alloc(MAX_BODY_BYTES + 1, 0x20) }, 413],
      // Refused before JSON.parse builds them (webhook/admission/json-limits.ts).
      ['JSON nested a million deep', { body: `${'['.repeat(1e6)}${']'.repeat(1e6)}` }, 400],
      ['a million empty objects', { body: `[${Array(1e6).fill('{}').join(',')}]` }, 400],
    ];
    for (const [name, options, status] of cases) {
      const reply = await call(webhook.port, pair.ca, '/mutate', options);
      assert.equal(reply.status, status, name);
      if (status !== 405) assert.ok((JSON.parse(reply.body) as { error: string }).error, name);
    }
    // A body that only claims to be huge is refused before it is read.
    const claimed = await new Promise<number>((resolve, reject) => {
      const req = request(
        {
          host: '127.0.0.1',
          port: webhook.port,
          path: '/mutate',
          method: 'POST',
          ca: pair.ca,
          servername: SERVER_NAME,
          agent: false,
          headers: { 'content-type': 'application/json', 'content-length': String(MAX_BODY_BYTES * 4) },
        },
        (res) => {
          res.resume();
          resolve(res.statusCode!);
        },
      );
      req.on('error', reject);
      req.write('{');
    });
    assert.equal(claimed, 413);
    assert.equal((await call(webhook.port, pair.ca, '/healthz')).status, 200);
  });

  it('exposes Prometheus metrics: requests by outcome and a latency histogram', async () => {
    const reply = await call(webhook.port, pair.ca, '/metrics');
    assert.equal(reply.status, 200);
    assert.match(reply.headers['content-type'] as string, /^text\/plain/);
    const count = (outcome: string) =>
      Number(
        new RegExp(
          `^secret_agent_webhook_admission_requests_total\\{outcome="${outcome}"\\} (\\d+)$`,
          'm',
        ).exec(reply.body)?.[1],
      );
    assert.ok(count('injected') >= 1);
    assert.ok(count('denied') >= 1);
    assert.ok(count('invalid') >= 5);
    assert.match(
      reply.body,
      /^secret_agent_webhook_admission_duration_seconds_bucket\{le="0\.005",outcome="injected"\} \d+$/m,
    );
    assert.match(
      reply.body,
      /^secret_agent_webhook_admission_duration_seconds_count\{outcome="injected"\} \d+$/m,
    );
    assert.match(reply.body, /^secret_agent_webhook_certificate_expiry_timestamp_seconds \d/m);
    assertNoCanary(reply.body, 'metrics');
  });

  it('closes an address’s connections past its cap, counts them by reason, logs the address once, and answers other addresses', async () => {
    const sockets: Socket[] = [];
    try {
      const opened = (from: string) =>
        new Promise<Socket>((resolve, reject) => {
          const socket = connect({ host: '127.0.0.1', port: webhook.port, localAddress: from }, () =>
            resolve(socket),
          );
          sockets.push(socket);
          socket.on('error', reject);
        });
      for (let i = 0; i < MAX_CONNECTIONS_PER_SOURCE; i++) await opened('127.0.0.2');
      const closed = () =>
        Promise.all(
          [0, 1, 2].map(async () => {
            const socket = await opened('127.0.0.2').catch(() => undefined);
            if (socket && !socket.destroyed) await new Promise((resolve) => socket.once('close', resolve));
          }),
        );
      await closed();
      // 127.0.0.1 still gets in, and is answered.
      assert.equal((await call(webhook.port, pair.ca, '/healthz')).status, 200);
      const metrics = (await call(webhook.port, pair.ca, '/metrics')).body;
      assert.match(metrics, /^secret_agent_webhook_connections_closed_total\{reason="per-source"\} [3-9]/m);
      const lines = logs.lines().filter((l) => l.msg.startsWith('connections closed: the webhook holds'));
      // Three refusals, one line (the next is a minute away at most), naming the address.
      assert.equal(lines.length, 1, JSON.stringify(lines));
      assert.equal(lines[0]!.level, 40);
      assert.deepEqual(lines[0]!.sources, ['127.0.0.2']);
      assert.ok(((lines[0]!.closed as Record<string, number>)['per-source'] ?? 0) >= 1);
    } finally {
      for (const s of sockets) s.destroy();
    }
  });
});

describe('certificate reload', () => {
  it('swaps to new files without failing a single request, in flight or new', async () => {
    const first = await makeServingPair();
    const second = await makeServingPair();
    using dir = certDir();
    dir.write(first);
    const logs = captureLog();
    const webhook = await start(dir, logs.log);
    const cas = [first.ca, second.ca];
    const fingerprint = (p: ServingPair) => new X509Certificate(p.cert).fingerprint256;
    const body = JSON.stringify(review(basicPod({ 'secret-agent.io/secret-a': 'aws:a' })));
    const keepAlive = new Agent({ keepAlive: true, maxSockets: 4 });
    let failures = 0;
    let requests = 0;
    let sawSecond = false;
    let stop = false;
    const worker = async (agent: Agent | false) => {
      while (!stop) {
        try {
          const reply = await call(webhook.port, cas, '/mutate', { body, agent });
          requests++;
          if (reply.status !== 200 || !reply.body.includes('"allowed":true')) failures++;
          if (reply.served === fingerprint(second)) sawSecond = true;
        } catch {
          failures++;
        }
      }
    };
    // A request whose body is still arriving when the certificate changes.
    let slowRequest: import('node:http').ClientRequest | undefined;
    const slow = new Promise<number>((resolve, reject) => {
      const req = request(
        {
          host: '127.0.0.1',
          port: webhook.port,
          path: '/mutate',
          method: 'POST',
          ca: cas,
          servername: SERVER_NAME,
          agent: false,
          headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
        },
        (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode!));
        },
      );
      req.on('error', reject);
      req.write(body.slice(0, 10));
      slowRequest = req;
    });
    const workers = [worker(false), worker(false), worker(keepAlive), worker(keepAlive)];
    let metrics: Reply;
    try {
      while (requests < 20) await sleep(5);
      // cert-first writes a mismatched pair for a moment; the server must keep the old one then.
      dir.write(second, 'cert-first');
      while (!sawSecond) await sleep(10);
      slowRequest!.end(body.slice(10));
      assert.equal(await slow, 200);
      const before = requests;
      while (requests < before + 20) await sleep(5);
    } finally {
      stop = true;
      await Promise.all(workers);
      keepAlive.destroy();
      metrics = await call(webhook.port, cas, '/metrics');
      await webhook.close();
    }
    assert.equal(failures, 0, `${failures} of ${requests} requests failed across the reload`);
    assert.match(metrics.body, /^secret_agent_webhook_tls_reloads_total\{result="ok"\} [1-9]/m);
    assert.match(logs.text(), /serving certificate reloaded/);
  });

  it('keeps serving the old pair when the new files are not a usable pair', async () => {
    const first = await makeServingPair();
    const second = await makeServingPair();
    using dir = certDir();
    dir.write(first);
    const logs = captureLog();
    const webhook = await start(dir, logs.log);
    try {
      // Only the certificate changes: it does not match the key on disk.
      dir.write({ ...second, key: first.key });
      let metrics = '';
      for (let i = 0; i < 400 && !/tls_reloads_total\{result="failed"\} [1-9]/.test(metrics); i++) {
        await sleep(10);
        metrics = (await call(webhook.port, first.ca, '/metrics')).body;
      }
      assert.match(metrics, /tls_reloads_total\{result="failed"\} [1-9]/);
      const reply = await call(webhook.port, [first.ca], '/healthz');
      assert.equal(reply.served, new X509Certificate(first.cert).fingerprint256);
    } finally {
      await webhook.close();
    }
  });
});

describe('admission decisions are logged at info, one line each, without values', () => {
  it('says injected, skipped and why, refused and why: names of annotations and containers, never their values', async () => {
    const pair = await makeServingPair();
    using dir = certDir();
    dir.write(pair);
    const logs = captureLog('info');
    const webhook = await start(dir, logs.log);
    const secret = canary('pasted');
    const arn = 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:prod/db-AbCdEf';
    const pods: [string, PodDoc][] = [
      [
        'injected',
        basicPod(
          {
            'secret-agent.io/secret-db': arn,
            'secret-agent.io/containers': 'web',
            'secret-agent.io/file-mode-db': '0644',
          },
          {
            securityContext: { runAsUser: 1000 },
            containers: [
              { name: 'web', image: 'a' },
              { name: 'proxy', image: 'b' },
            ],
          },
        ),
      ],
      [
        'refused',
        basicPod({
          'secret-agent.io/secret-db': secret,
          'secret-agent.io/mode': 'sometimes-typo',
          'secret-agent.io/containers': 'web,wrkr',
        }),
      ],
      [
        'label only',
        { ...basicPod({}), metadata: { name: 'web-1', labels: { 'secret-agent.io/inject': 'true' } } },
      ],
    ];
    try {
      for (const [, pod] of pods)
        assert.equal(
          (await call(webhook.port, pair.ca, '/mutate', { body: JSON.stringify(review(pod)) })).status,
          200,
        );
      assert.equal((await call(webhook.port, pair.ca, '/mutate', { body: '{' })).status, 400);
    } finally {
      await webhook.close();
    }
    const text = logs.text();
    assertNoCanary(text, 'webhook logs');
    for (const value of ['sometimes-typo', arn, '0644'])
      assert.ok(!text.includes(value), `${value} is in the log`);
    const lines = logs.lines().filter((l) => l.uid !== undefined || l.outcome !== undefined);
    assert.equal(lines.length, 4, text);
    for (const l of lines) assert.equal(l.level, 30, JSON.stringify(l));
    const [injected, refused, skipped, invalid] = lines;
    assert.equal(injected!.outcome, 'injected');
    assert.deepEqual(injected!.files, ['db']);
    assert.deepEqual(injected!.containers, ['web']);
    assert.equal(injected!.warnings, 1);
    assert.equal(refused!.outcome, 'denied');
    assert.deepEqual([...(refused!.annotations as string[])].sort(), [
      'secret-agent.io/containers',
      'secret-agent.io/mode',
      'secret-agent.io/secret-db',
    ]);
    assert.ok((refused!.problems as string[]).some((p) => p.includes('which the pod does not have')));
    assert.equal(skipped!.outcome, 'skipped');
    assert.equal(skipped!.reason, 'not-opted-in');
    assert.equal(skipped!.warnings, 1);
    assert.equal(skipped!.pod, 'web-1');
    assert.equal(invalid!.outcome, 'invalid');
  });
});

describe('the admission cache over HTTPS', () => {
  const lookups = (metrics: string) =>
    Object.fromEntries(
      [
        ...metrics.matchAll(/^secret_agent_webhook_admission_cache_lookups_total\{result="(\w+)"\} (\d+)$/gm),
      ].map((m) => [m[1]!, Number(m[2])]),
    );

  it('answers replicas from the cache, each under its own uid and name, counts hits and misses, logs no content', async () => {
    const pair = await makeServingPair();
    using dir = certDir();
    dir.write(pair);
    const logs = captureLog('info');
    const webhook = await start(dir, logs.log);
    const replica = (i: number) =>
      review(
        {
          ...basicPod(
            { 'secret-agent.io/secret-token': 'gcp:api-token' },
            { containers: [{ name: 'app', image: 'a', env: [{ name: 'PASSWORD', value: canary('env') }] }] },
          ),
          metadata: {
            generateName: 'web-7d4b9c-',
            namespace: 'apps',
            labels: { 'secret-agent.io/inject': 'true', 'pod-template-hash': '7d4b9c' },
            annotations: {
              'secret-agent.io/inject': 'true',
              'secret-agent.io/secret-token': 'gcp:api-token',
            },
          },
        },
        { uid: `00000000-0000-4000-8000-00000000000${i}` },
      );
    const pasted = canary('pasted');
    const refused = (i: number) =>
      review(basicPod({ 'secret-agent.io/secret-db': pasted }), {
        uid: `00000000-0000-4000-9000-00000000000${i}`,
      });
    let metrics: string;
    const answers: { uid: string; allowed: boolean; patch?: string }[] = [];
    try {
      // The env value differs per replica here (a canary each), and is an input: every replica misses.
      for (const body of [replica(1), replica(2)]) {
        const reply = await call(webhook.port, pair.ca, '/mutate', { body: JSON.stringify(body) });
        answers.push((JSON.parse(reply.body) as { response: (typeof answers)[number] }).response);
      }
      const same = JSON.stringify(replica(3));
      for (const i of [3, 4, 5]) {
        const body = same.replace(
          '00000000-0000-4000-8000-000000000003',
          `00000000-0000-4000-8000-00000000000${i}`,
        );
        const reply = await call(webhook.port, pair.ca, '/mutate', { body });
        answers.push((JSON.parse(reply.body) as { response: (typeof answers)[number] }).response);
      }
      for (const i of [6, 7]) {
        const reply = await call(webhook.port, pair.ca, '/mutate', { body: JSON.stringify(refused(i)) });
        assertNoCanary(reply.body, 'a cached denial');
        answers.push((JSON.parse(reply.body) as { response: (typeof answers)[number] }).response);
      }
      metrics = (await call(webhook.port, pair.ca, '/metrics')).body;
    } finally {
      await webhook.close();
    }
    assert.deepEqual(
      answers.map((a) => a.uid),
      [1, 2, 3, 4, 5]
        .map((i) => `00000000-0000-4000-8000-00000000000${i}`)
        .concat([6, 7].map((i) => `00000000-0000-4000-9000-00000000000${i}`)),
    );
    assert.deepEqual(
      answers.map((a) => a.allowed),
      [true, true, true, true, true, false, false],
    );
    assert.equal(new Set(answers.slice(0, 5).map((a) => a.patch)).size, 1);
    assert.deepEqual(lookups(metrics), { hit: 3, miss: 4 });
    assertNoCanary(metrics, 'metrics');
    assertNoCanary(logs.text(), 'webhook logs');
    const decisions = logs.lines().filter((l) => l.outcome !== undefined);
    assert.equal(decisions.length, 7);
    assert.deepEqual(
      decisions.map((l) => [l.uid, l.pod, l.outcome]),
      answers.map((a, i) => [
        a.uid,
        i < 5 ? 'web-7d4b9c-' : 'web-7d4b9c-xk2p9',
        i < 5 ? 'injected' : 'denied',
      ]),
    );
  });

  it('is off at ADMISSION_CACHE_SIZE=0: nothing is looked up', async () => {
    const pair = await makeServingPair();
    using dir = certDir();
    dir.write(pair);
    const logs = captureLog('info');
    const webhook = await start(dir, logs.log, { ADMISSION_CACHE_SIZE: '0' });
    let metrics: string;
    try {
      const body = JSON.stringify(review(basicPod({ 'secret-agent.io/secret-token': 'gcp:api-token' })));
      for (let i = 0; i < 2; i++) {
        const reply = await call(webhook.port, pair.ca, '/mutate', { body });
        assert.equal((JSON.parse(reply.body) as { response: { allowed: boolean } }).response.allowed, true);
      }
      metrics = (await call(webhook.port, pair.ca, '/metrics')).body;
    } finally {
      await webhook.close();
    }
    assert.deepEqual(lookups(metrics), {});
    assert.match(metrics, /^secret_agent_webhook_admission_requests_total\{outcome="injected"\} 2$/m);
  });
});
