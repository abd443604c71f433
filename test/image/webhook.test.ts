import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { startFakeKubernetesApi } from '../fakes/kubernetes-api.ts';
import { freePort } from '../support/moto.ts';
import { assertNoCanary, canary } from '../support/canary.ts';
import { ROOT } from '../support/run-agent.ts';
import { basicPod, decodePatch, mutate, review, validatePod } from '../webhook/fixtures.ts';
import { call } from '../webhook/https-call.ts';
import { certDir, makeServingPair } from '../webhook/tls-certs.ts';
import { builtImages, runContainer } from './podman.ts';
import { startWebhookImage } from './webhook-image.ts';

interface Answer {
  readonly response: {
    readonly allowed: boolean;
    readonly patch?: string;
    readonly status?: { readonly code: number; readonly message: string };
  };
}

describe('the webhook image, run by podman (read-only root, no capabilities, no new privileges)', () => {
  it('serves TLS from certificate files mounted read-only, admits and refuses pods, and stops on SIGTERM', async () => {
    const { manifest } = builtImages();
    const pair = await makeServingPair();
    using tls = certDir();
    tls.write(pair);
    const { port, container: webhook } = await startWebhookImage({}, pair, tls.dir);
    try {
      const pod = basicPod(
        { 'secret-agent.io/secret-db': 'aws:prod/db', 'secret-agent.io/aws-region': 'eu-west-1' },
        {
          containers: [
            { name: 'app', image: 'app:1', env: [{ name: 'PASSWORD', value: canary('pod-env') }] },
          ],
        },
      );
      const admitted = await call(port, pair.ca, '/mutate', { body: JSON.stringify(review(pod)) });
      assert.equal(admitted.status, 200);
      assertNoCanary(admitted.body, 'the /mutate response');
      const answer = JSON.parse(admitted.body) as Answer;
      assert.equal(answer.response.allowed, true);
      const patched = mutate(pod, decodePatch(answer.response));
      validatePod(patched);
      const agents = [...(patched.spec.initContainers ?? []), ...patched.spec.containers].filter(
        (c) => c.image === manifest.images.agent.ref,
      );
      assert.ok(agents.length > 0, 'the agent image the webhook was given is injected');

      const bad = basicPod({
        'secret-agent.io/secret-db': 'aws:prod/db',
        'secret-agent.io/mode': 'sometimes',
      });
      const refused = JSON.parse(
        (await call(port, pair.ca, '/mutate', { body: JSON.stringify(review(bad)) })).body,
      ) as Answer;
      assert.equal(refused.response.allowed, false);
      assert.match(refused.response.status!.message, /secret-agent\.io\/mode: .*Fix: /);

      const metrics = await call(port, pair.ca, '/metrics');
      assert.match(metrics.body, /^secret_agent_webhook_admission_requests_total\{outcome="injected"\} 1$/m);
      assert.match(metrics.body, /^secret_agent_webhook_admission_requests_total\{outcome="denied"\} 1$/m);

      await webhook.kill('SIGTERM');
      assert.equal(await webhook.exited, 0, webhook.output().stderr);
      assert.equal(webhook.output().stderr, '');
      assert.ok(webhook.logs().some((l) => l.msg === 'webhook listening'));
    } finally {
      await webhook.kill('SIGKILL');
      await webhook.exited.catch(() => undefined);
    }
  });

  it('--version prints the version, with no env', async () => {
    const { manifest } = builtImages();
    const run = await runContainer({
      image: manifest.images.webhook.ref,
      entrypoint: ['/nodejs/bin/node', '/app/webhook.js', '--version'],
    });
    assert.equal(run.code, 0, run.stderr);
    assert.equal(run.stdout, `secret-agent-webhook ${manifest.version}\n`);
  });

  it('render --check -f - reads manifests on stdin: silent when all is well, else exit 1 as the bundle', async () => {
    const { manifest } = builtImages();
    const deployment = (name: string, reference: string) =>
      [
        'apiVersion: apps/v1',
        'kind: Deployment',
        `metadata: { name: ${name}, namespace: apps }`,
        'spec:',
        `  selector: { matchLabels: { app: ${name} } }`,
        '  template:',
        '    metadata:',
        `      labels: { app: ${name}, secret-agent.io/inject: "true" }`,
        `      annotations: { secret-agent.io/inject: "true", secret-agent.io/secret-db: "${reference}" }`,
        '    spec:',
        // The app's uid is named: no group-sharing warning on stderr.
        '      securityContext: { runAsUser: 1000 }',
        '      containers: [{ name: app, image: registry.example/app:1.0 }]',
        '',
      ].join('\n');
    const good = deployment('good', 'aws:prod/db');
    // A secret pasted where a reference belongs: refused, and never echoed.
    const both = `${good}---\n${deployment('bad', canary('pasted-secret'))}`;
    const env = { AGENT_IMAGE: manifest.images.agent.ref, AGENT_AWS_REGION: 'eu-west-1' };
    const args = ['render', '--check', '-f', '-'];
    const image = manifest.images.webhook.ref;

    const clean = await runContainer({ image, env, args, stdin: good });
    assert.deepEqual([clean.code, clean.stdout, clean.stderr], [0, '', '']);

    const refused = await runContainer({ image, env, args, stdin: both });
    assert.equal(refused.code, 1, refused.stderr);
    assert.equal(refused.stdout, '');
    assert.match(
      refused.stderr,
      /^Deployment\/apps\/bad: secret-agent cannot inject this pod: secret-agent\.io\/secret-db: .+ Fix: .+\n$/,
    );
    const bundle = spawnSync(process.execPath, [join(ROOT, 'dist/webhook.js'), ...args], {
      env: { PATH: '/usr/bin:/bin', ...env },
      input: both,
      encoding: 'utf8',
      timeout: 30_000,
    });
    assertNoCanary(bundle.stderr, 'the bundle’s render stderr');
    assert.equal(refused.stderr, bundle.stderr);
    assert.equal(bundle.status, 1);
  });

  describe('bad input: the same errors and exit codes as the bundle', () => {
    const cases: [string, Record<string, string>][] = [
      ['no env at all', {}],
      ['a setting out of its range', { AGENT_IMAGE: 'registry.example/agent:1', TLS_MODE: 'nope' }],
    ];
    for (const [name, env] of cases)
      it(name, async () => {
        const { manifest } = builtImages();
        const inImage = await runContainer({ image: manifest.images.webhook.ref, env });
        const bundle = spawnSync(process.execPath, [join(ROOT, 'dist/webhook.js')], {
          env: { PATH: '/usr/bin:/bin', ...env },
          encoding: 'utf8',
          timeout: 30_000,
        });
        assert.equal(bundle.status, 2, bundle.stderr);
        assert.equal(inImage.code, bundle.status);
        assert.equal(inImage.stderr, bundle.stderr);
        assert.match(
          inImage.stderr,
          /^secret-agent-webhook: invalid configuration\n( {2}\S+: .+ Fix: .+\n)+$/,
        );
      });
  });

  it('self-managed TLS without its RBAC: exit 77 naming the permission and the manifest, no stack', async () => {
    const { manifest } = builtImages();
    const api = await startFakeKubernetesApi();
    api.allowed.delete('get secrets');
    // The service-account files, where the kubelet mounts them, readable by the image's user.
    const account = mkdtempSync(join(tmpdir(), 'serviceaccount-'));
    chmodSync(account, 0o755);
    for (const [file, text] of [
      ['token', api.token],
      ['ca.crt', api.ca],
      ['namespace', 'secret-agent'],
    ] as const)
      writeFileSync(join(account, file), text, { mode: 0o644 });
    try {
      const run = await runContainer({
        image: manifest.images.webhook.ref,
        network: 'host',
        env: {
          AGENT_IMAGE: manifest.images.agent.ref,
          TLS_MODE: 'self-managed',
          WEBHOOK_NAMESPACE: 'secret-agent',
          WEBHOOK_PORT: String(await freePort()),
          WEBHOOK_HOST: '127.0.0.1',
          NATIVE_SIDECARS: 'true',
          KUBERNETES_SERVICE_HOST: '127.0.0.1',
          KUBERNETES_SERVICE_PORT: new URL(api.baseUrl).port,
        },
        mounts: [
          { host: account, container: '/var/run/secrets/kubernetes.io/serviceaccount', readOnly: true },
        ],
      });
      assert.equal(run.code, 77, run.stderr);
      assert.match(
        run.stderr,
        /^secret-agent-webhook: missing permission\n {2}the webhook's service account may not get secrets "secret-agent-webhook-tls" in namespace "secret-agent", which self-managed TLS needs \(GET \S+: 403 Forbidden: secrets "secret-agent-webhook-tls" is forbidden: User "system:serviceaccount:secret-agent:secret-agent-webhook" cannot get resource "secrets" in API group "" in the namespace "secret-agent"\)\. Fix: apply the Role secret-agent-webhook-tls and its RoleBinding from deploy\/overlays\/self-managed\/rbac\.yaml .+; its resourceNames must include "secret-agent-webhook-tls"\n$/,
      );
      assert.doesNotMatch(run.stderr, /\n\s+at /, 'no stack trace');
      const line = run.logs.find((l) => l.msg === 'missing permission');
      assert.deepEqual(
        line && [line.level, line.verb, line.resource, line.group, line.name, line.namespace],
        ['error', 'get', 'secrets', '', 'secret-agent-webhook-tls', 'secret-agent'],
      );
      assert.ok(api.log.includes('GET /api/v1/namespaces/secret-agent/secrets/secret-agent-webhook-tls'));
    } finally {
      await api.close();
      rmSync(account, { recursive: true, force: true });
    }
  });
});
