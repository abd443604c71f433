import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, request } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, beforeEach, describe, it } from 'node:test';
import { parseWebhookConfig } from '../../webhook/config/parse-webhook-config.ts';
import {
  inClusterApiOptions,
  KubernetesApi,
  parseVersionInfo,
  ServerVersionError,
  type KubernetesApiOptions,
} from '../../webhook/kubernetes-api.ts';
import { startWebhook, type RunningWebhook, type StartOptions } from '../../webhook/start.ts';
import { startFakeKubernetesApi, type FakeKubernetesApi, type FakeVersion } from '../fakes/kubernetes-api.ts';
import { captureLog, type LogLine } from '../support/captured-log.ts';
import { ROOT } from '../support/run-agent.ts';
import { AGENT_IMAGE, basicPod, decodePatch, mutate, review, validatePod } from './fixtures.ts';
import { call } from './https-call.ts';
import { certDir, makeServingPair, type ServingPair } from './tls-certs.ts';

const WARN = 40;
const INFO = 30;

/** How a pod that asks for init+sidecar comes out of the running webhook. */
async function injectedAs(webhook: RunningWebhook, ca: string): Promise<'native' | 'classic'> {
  const pod = basicPod({
    'secret-agent.io/secret-db': 'aws:prod/db',
    'secret-agent.io/aws-region': 'eu-west-1',
  });
  const reply = await call(webhook.port, ca, '/mutate', { body: JSON.stringify(review(pod)) });
  assert.equal(reply.status, 200, reply.body);
  const response = (JSON.parse(reply.body) as { response: { allowed: boolean; patch?: string } }).response;
  assert.equal(response.allowed, true, reply.body);
  const patched = mutate(pod, decodePatch(response));
  validatePod(patched);
  const agent = (c: Record<string, unknown>) => c.image === AGENT_IMAGE;
  const inits = (patched.spec.initContainers ?? []).filter(agent);
  const sidecars = patched.spec.containers.filter(agent);
  if (inits.length === 1 && inits[0]!.restartPolicy === 'Always' && sidecars.length === 0) return 'native';
  if (inits.length === 1 && inits[0]!.restartPolicy === undefined && sidecars.length === 1) return 'classic';
  return assert.fail(`neither native nor classic: ${JSON.stringify(patched.spec)}`);
}

async function nativeSidecarsMetric(webhook: RunningWebhook, ca: string): Promise<string> {
  const { body } = await call(webhook.port, ca, '/metrics');
  const lines = body.split('\n').filter((l) => l.startsWith('secret_agent_webhook_native_sidecars{'));
  assert.equal(lines.length, 1, body);
  return lines[0]!;
}

/** A port on loopback that nothing listens on: connections are refused. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

const version = (gitVersion: string, major: string, minor: string): FakeVersion => ({
  gitVersion,
  major,
  minor,
});

describe('NATIVE_SIDECARS=auto: decided once at start from GET /version', () => {
  let fake: FakeKubernetesApi;
  let pair: ServingPair;
  let tls: ReturnType<typeof certDir>;
  let tokenDir: string;
  let tokenFile: string;

  before(async () => {
    pair = await makeServingPair();
    tls = certDir();
    tls.write(pair);
    tokenDir = mkdtempSync(join(tmpdir(), 'sa-token-'));
    tokenFile = join(tokenDir, 'token');
  });
  after(async () => {
    await fake?.close();
    tls[Symbol.dispose]();
    rmSync(tokenDir, { recursive: true, force: true });
  });
  beforeEach(async () => {
    await fake?.close();
    fake = await startFakeKubernetesApi();
    writeFileSync(tokenFile, `${fake.token}\n`);
  });

  /**
   * Starts the webhook the way main.ts does, with the fake as the API server. `kubernetes` counts
   * how often the API settings were asked for; retries are immediate (no waiting in tests).
   */
  async function start(
    env: Record<string, string> = {},
    options: Partial<StartOptions> = {},
  ): Promise<{ webhook: RunningWebhook; logs: ReturnType<typeof captureLog>; apiCalls: () => number }> {
    const logs = captureLog();
    let apiCalls = 0;
    const kubernetes = options.kubernetes ?? (() => ({ baseUrl: fake.baseUrl, ca: fake.ca, tokenFile }));
    const config = parseWebhookConfig({
      AGENT_IMAGE,
      WEBHOOK_PORT: '0',
      WEBHOOK_HOST: '127.0.0.1',
      TLS_CERT_FILE: tls.cert,
      TLS_KEY_FILE: tls.key,
      ...env,
    });
    const webhook = await startWebhook(config, {
      log: logs.log,
      serverVersion: { retryDelaysMs: [0, 0] },
      ...options,
      kubernetes: (): KubernetesApiOptions => {
        apiCalls++;
        return kubernetes();
      },
    });
    return { webhook, logs, apiCalls: () => apiCalls };
  }

  const decisionLines = (logs: ReturnType<typeof captureLog>) =>
    logs.lines().filter((l) => l.msg.startsWith('native sidecars: '));

  for (const [v, text] of [
    [version('v1.29.0', '1', '29'), 'v1.29.0'],
    [version('v1.31.2-eks-7f9249a', '1', '31+'), 'v1.31.2-eks-7f9249a'],
    [version('v1.30.5-gke.1014001', '1', '30+'), 'v1.30.5-gke.1014001'],
    // A build whose gitVersion says nothing: major/minor decide, "+" and all.
    [version('v0.0.0-master+$Format:%H$', '1', '30+'), 'v1.30'],
  ] as const) {
    it(`auto → native on ${v.gitVersion} (minor ${JSON.stringify(v.minor)})`, async () => {
      fake.answerVersion({ version: v });
      const { webhook, logs } = await start();
      try {
        assert.deepEqual(webhook.nativeSidecars, {
          enabled: true,
          source: 'api-server',
          serverVersion: text,
        });
        assert.deepEqual(fake.log, ['GET /version'], 'asked once');
        const [decision, ...more] = decisionLines(logs);
        assert.equal(more.length, 0);
        assert.equal(decision!.msg, `native sidecars: true (auto: API server ${text})`);
        assert.equal(decision!.level, INFO);
        assert.equal(await injectedAs(webhook, pair.ca), 'native');
        assert.equal(
          await nativeSidecarsMetric(webhook, pair.ca),
          'secret_agent_webhook_native_sidecars{source="api-server"} 1',
        );
      } finally {
        await webhook.close();
      }
    });
  }

  for (const v of [version('v1.28.15', '1', '28'), version('v1.27.16-eks-a737599', '1', '27+')]) {
    it(`auto → classic on ${v.gitVersion}`, async () => {
      fake.answerVersion({ version: v });
      const { webhook, logs } = await start();
      try {
        assert.deepEqual(webhook.nativeSidecars, {
          enabled: false,
          source: 'api-server',
          serverVersion: v.gitVersion,
        });
        const [decision] = decisionLines(logs);
        assert.equal(
          decision!.msg,
          `native sidecars: false (auto: API server ${v.gitVersion} is older than 1.29)`,
        );
        assert.equal(decision!.level, INFO, 'an old cluster is no fault');
        assert.equal(await injectedAs(webhook, pair.ca), 'classic');
        assert.equal(
          await nativeSidecarsMetric(webhook, pair.ca),
          'secret_agent_webhook_native_sidecars{source="api-server"} 0',
        );
      } finally {
        await webhook.close();
      }
    });
  }

  for (const setting of ['true', 'false'] as const) {
    it(`NATIVE_SIDECARS=${setting} wins and never calls the API server`, async () => {
      fake.answerVersion({ version: version('v1.28.15', '1', '28') }); // would say false
      const { webhook, logs, apiCalls } = await start({ NATIVE_SIDECARS: setting });
      try {
        assert.equal(apiCalls(), 0, 'the API settings (service-account files) are not even read');
        assert.deepEqual(fake.log, []);
        assert.deepEqual(webhook.nativeSidecars, { enabled: setting === 'true', source: 'config' });
        assert.equal(decisionLines(logs)[0]!.msg, `native sidecars: ${setting} (NATIVE_SIDECARS=${setting})`);
        assert.equal(await injectedAs(webhook, pair.ca), setting === 'true' ? 'native' : 'classic');
        assert.equal(
          await nativeSidecarsMetric(webhook, pair.ca),
          `secret_agent_webhook_native_sidecars{source="config"} ${setting === 'true' ? 1 : 0}`,
        );
      } finally {
        await webhook.close();
      }
    });
  }

  it('retries a transient failure (503) and then decides', async () => {
    fake.answerVersion(
      {
        status: 503,
        reason: 'ServiceUnavailable',
        message: 'the server is currently unable to handle the request',
      },
      { version: version('v1.30.1', '1', '30') },
    );
    const { webhook } = await start();
    try {
      assert.deepEqual(fake.log, ['GET /version', 'GET /version']);
      assert.deepEqual(webhook.nativeSidecars, {
        enabled: true,
        source: 'api-server',
        serverVersion: 'v1.30.1',
      });
    } finally {
      await webhook.close();
    }
  });

  const failures: {
    name: string;
    arrange: () => Promise<Partial<StartOptions>> | Partial<StartOptions>;
    cause: RegExp;
    fix: RegExp;
    /** GET /version requests the fake saw (when the fake is the target). */
    requests?: number;
    /** Attempts that were retried. */
    retries: number;
  }[] = [
    {
      name: 'connection refused (retried, then given up)',
      arrange: async () => {
        const port = await closedPort();
        return { kubernetes: () => ({ baseUrl: `https://127.0.0.1:${port}`, ca: fake.ca, tokenFile }) };
      },
      cause: /the API server could not be reached \(connect ECONNREFUSED/,
      fix: /allow the webhook's egress to the API server/,
      retries: 2,
    },
    {
      name: '403 Forbidden Status',
      arrange: () => {
        fake.answerVersion({
          status: 403,
          reason: 'Forbidden',
          message:
            'forbidden: User "system:serviceaccount:secret-agent:secret-agent-webhook" cannot get path "/version"',
        });
        return {};
      },
      cause:
        /refused the request \(GET \/version: 403 Forbidden: forbidden: User .* cannot get path "\/version"\)/,
      fix: /system:public-info-viewer/,
      requests: 1,
      retries: 0,
    },
    {
      name: 'a body that is not JSON',
      arrange: () => {
        fake.answerVersion({ body: '<html><body>upstream connect error</body></html>' });
        return {};
      },
      cause: /GET \/version: 200 InvalidResponse: the body is not JSON/,
      fix: /^set NATIVE_SIDECARS=true/,
      requests: 1,
      retries: 0,
    },
    {
      name: 'JSON without a readable version',
      arrange: () => {
        fake.answerVersion({ body: JSON.stringify({ major: '', minor: '', gitVersion: 'unknown' }) });
        return {};
      },
      cause: /no version in the answer \(gitVersion "unknown", major "", minor ""\)/,
      fix: /^set NATIVE_SIDECARS=true/,
      requests: 1,
      retries: 0,
    },
    {
      name: 'a token the API server does not accept (401)',
      arrange: () => {
        writeFileSync(tokenFile, 'a-token-from-another-cluster\n');
        return {};
      },
      cause: /did not accept the service-account token \(GET \/version: 401 Unauthorized/,
      fix: /service-account token/,
      requests: 1,
      retries: 0,
    },
    {
      name: 'no answer (timeout: not retried, a dropping NetworkPolicy would only delay every start)',
      arrange: () => {
        fake.answerVersion({ hang: true });
        return { serverVersion: { timeoutMs: 100 } };
      },
      cause: /could not be reached \(GET \/version: timed out after 100 ms\)/,
      fix: /egress/,
      requests: 1,
      retries: 0,
    },
    {
      name: 'not in a cluster (KUBERNETES_SERVICE_HOST unset), as main.ts sees it',
      arrange: () => ({ kubernetes: () => inClusterApiOptions({}) }),
      cause: /KUBERNETES_SERVICE_HOST is not set: the webhook does not run in a Kubernetes pod/,
      fix: /^run it in a cluster, or set NATIVE_SIDECARS=true/,
      requests: 0,
      retries: 0,
    },
    {
      name: 'the service-account token not mounted',
      arrange: () => ({
        kubernetes: () => ({ baseUrl: fake.baseUrl, ca: fake.ca, tokenFile: join(tokenDir, 'missing') }),
      }),
      cause: /the service-account token is not mounted \(ENOENT/,
      fix: /automountServiceAccountToken: true/,
      requests: 0,
      retries: 0,
    },
  ];

  for (const f of failures) {
    it(`auto → classic with a warning when the version cannot be read: ${f.name}`, async () => {
      const options = await f.arrange();
      const { webhook, logs } = await start({}, options);
      try {
        assert.deepEqual(webhook.nativeSidecars, { enabled: false, source: 'fallback' });
        if (f.requests !== undefined)
          assert.equal(fake.log.filter((l) => l === 'GET /version').length, f.requests, fake.log.join(', '));
        const retried = logs.lines().filter((l) => l.msg === 'GET /version failed; retrying');
        assert.equal(retried.length, f.retries);
        const [decision, ...more] = decisionLines(logs);
        assert.equal(more.length, 0);
        assert.equal(decision!.level, WARN);
        assert.match(
          decision!.msg,
          /^native sidecars: false \(auto: .*; classic sidecars work on every version\)\. Fix: /,
        );
        assert.match(decision!.msg, f.cause);
        assert.match(String(decision!.fix), f.fix);
        assert.match(String(decision!.fix), /NATIVE_SIDECARS=true \(every node ≥ 1\.29\) or false/);
        assert.ok(!logs.text().includes(fake.token), 'the service-account token is never logged');
        // Serving, not crash-looping: ready, and injecting classic sidecars.
        assert.equal((await call(webhook.port, pair.ca, '/readyz')).status, 200);
        assert.equal(await injectedAs(webhook, pair.ca), 'classic');
        assert.equal(
          await nativeSidecarsMetric(webhook, pair.ca),
          'secret_agent_webhook_native_sidecars{source="fallback"} 0',
        );
      } finally {
        await webhook.close();
      }
    });
  }

  it('self-managed TLS and auto share one client: /version first, then the TLS calls', async () => {
    fake.putWebhookConfiguration({
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'MutatingWebhookConfiguration',
      metadata: { name: 'secret-agent' },
      webhooks: [
        {
          name: 'inject.secret-agent.io',
          admissionReviewVersions: ['v1'],
          sideEffects: 'None',
          clientConfig: {
            service: { name: 'secret-agent-webhook', namespace: 'secret-agent', path: '/mutate' },
          },
        },
      ],
    });
    const { webhook, apiCalls } = await start({ TLS_MODE: 'self-managed' });
    try {
      assert.equal(apiCalls(), 1, 'the API settings are read once');
      assert.equal(fake.log[0], 'GET /version');
      assert.ok(fake.log.includes('POST /api/v1/namespaces/secret-agent/secrets'), fake.log.join(', '));
      assert.equal(webhook.nativeSidecars.enabled, true);
    } finally {
      await webhook.close();
    }
  });

  it('the fake answers /version like kube-apiserver: anonymous allowed, a wrong token refused', async () => {
    const get = (authorization?: string) =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = request(
          `${fake.baseUrl}/version`,
          { ca: fake.ca, headers: authorization ? { authorization } : {}, agent: false },
          (res) => {
            let body = '';
            res.on('data', (c: Buffer) => (body += c.toString()));
            res.on('end', () => resolve({ status: res.statusCode!, body }));
          },
        );
        req.on('error', reject);
        req.end();
      });
    const anonymous = await get();
    assert.equal(anonymous.status, 200);
    assert.equal((JSON.parse(anonymous.body) as { gitVersion: string }).gitVersion, 'v1.31.2');
    assert.equal((await get('Bearer wrong')).status, 401);
    const api = new KubernetesApi({ baseUrl: fake.baseUrl, ca: fake.ca, tokenFile });
    assert.deepEqual(await api.serverVersion(), { major: 1, minor: 31, text: 'v1.31.2' });
  });
});

describe('parseVersionInfo', () => {
  it('reads gitVersion first, then major/minor with a vendor "+"', () => {
    const cases: [unknown, { major: number; minor: number; text: string }][] = [
      [
        { gitVersion: 'v1.29.0', major: '1', minor: '29' },
        { major: 1, minor: 29, text: 'v1.29.0' },
      ],
      [
        { gitVersion: 'v1.29.3-eks-adc7111', major: '1', minor: '29+' },
        { major: 1, minor: 29, text: 'v1.29.3-eks-adc7111' },
      ],
      [
        { gitVersion: 'v1.28.9+k3s1', major: '1', minor: '28' },
        { major: 1, minor: 28, text: 'v1.28.9+k3s1' },
      ],
      [
        { gitVersion: 'v1.30', major: '1', minor: '30' },
        { major: 1, minor: 30, text: 'v1.30' },
      ],
      // gitVersion unusable: major/minor decide.
      [
        { gitVersion: 'v0.0.0-master+$Format:%H$', major: '1', minor: '31+' },
        { major: 1, minor: 31, text: 'v1.31' },
      ],
      [
        { major: '1', minor: '29+' },
        { major: 1, minor: 29, text: 'v1.29' },
      ],
      [
        { gitVersion: 42, major: '1', minor: '32' },
        { major: 1, minor: 32, text: 'v1.32' },
      ],
    ];
    for (const [info, expected] of cases)
      assert.deepEqual(parseVersionInfo(info), expected, JSON.stringify(info));
  });

  it('refuses answers without a version, naming what it got', () => {
    for (const info of [
      null,
      [],
      'v1.29.0',
      {},
      { major: '1', minor: 'x' },
      { major: '1' },
      { gitVersion: 'latest' },
    ])
      assert.throws(() => parseVersionInfo(info), ServerVersionError, JSON.stringify(info));
    assert.throws(() => parseVersionInfo({ gitVersion: 'x'.repeat(500) }), /gitVersion "x{40}…"/);
  });
});

describe('webhook/main.ts outside a cluster with the default NATIVE_SIDECARS', () => {
  it('starts, warns once with the fix, and serves classic sidecars (no crash loop)', async () => {
    const pair = await makeServingPair();
    using dir = certDir();
    dir.write(pair);
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? '',
      AGENT_IMAGE,
      WEBHOOK_PORT: '0',
      WEBHOOK_HOST: '127.0.0.1',
      TLS_CERT_FILE: dir.cert,
      TLS_KEY_FILE: dir.key,
    };
    const child = spawn(process.execPath, [join(ROOT, 'webhook/main.ts')], {
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    try {
      const port = await new Promise<number>((resolve, reject) => {
        child.stdout.on('data', (c: Buffer) => {
          stdout += c.toString();
          const listening = stdout
            .split('\n')
            .filter((l) => l.startsWith('{'))
            .map((l) => JSON.parse(l) as LogLine)
            .find((l) => l.msg === 'webhook listening');
          if (listening) resolve(listening.port as number);
        });
        void exited.then((code) => reject(new Error(`exited ${code}: ${stderr}${stdout}`)));
      });
      const lines = stdout
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as LogLine);
      const warnings = lines.filter((l) => l.level === 'warn');
      assert.equal(warnings.length, 1, stdout);
      assert.match(warnings[0]!.msg, /^native sidecars: false \(auto: KUBERNETES_SERVICE_HOST is not set/);
      assert.match(warnings[0]!.msg, /Fix: .*set NATIVE_SIDECARS=true \(every node ≥ 1\.29\) or false/);
      assert.equal(stderr, '');
      assert.equal((await call(port, pair.ca, '/readyz')).status, 200);
    } finally {
      child.kill('SIGTERM');
      assert.equal(await exited, 0, stderr);
    }
  });
});
