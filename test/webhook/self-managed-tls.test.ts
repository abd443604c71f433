import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, beforeEach, describe, it } from 'node:test';
import { pino } from 'pino';
import { ConfigErrors } from '../../agent/contract/errors.ts';
import { parseWebhookConfig } from '../../webhook/config/parse-webhook-config.ts';
import { KubernetesApi } from '../../webhook/kubernetes-api.ts';
import { MissingPermissionError, type Permission } from '../../webhook/missing-permission.ts';
import { startWebhook } from '../../webhook/start.ts';
import { SelfManagedTls, type ServingMaterial } from '../../webhook/tls/self-managed.ts';
import { startFakeKubernetesApi, type FakeKubernetesApi } from '../fakes/kubernetes-api.ts';
import { AGENT_IMAGE } from './fixtures.ts';

const NAMESPACE = 'secret-agent';
const SECRET = 'secret-agent-webhook-tls';
const CONFIGURATION = 'secret-agent';
const SERVICE = 'secret-agent-webhook';
const HOUR = 3_600_000;
const silent = pino({ level: 'silent' });

function webhookConfiguration() {
  return {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'MutatingWebhookConfiguration',
    metadata: { name: CONFIGURATION },
    webhooks: [
      {
        name: 'inject.secret-agent.io',
        admissionReviewVersions: ['v1'],
        sideEffects: 'None',
        clientConfig: { service: { name: SERVICE, namespace: NAMESPACE, path: '/mutate', port: 443 } },
      },
    ],
  };
}

describe('self-managed TLS against the fake Kubernetes API', () => {
  let fake: FakeKubernetesApi;
  let tokenDir: string;
  let tokenFile: string;
  let clock: Date;

  before(() => {
    tokenDir = mkdtempSync(join(tmpdir(), 'sa-token-'));
    tokenFile = join(tokenDir, 'token');
  });
  after(() => rmSync(tokenDir, { recursive: true, force: true }));
  beforeEach(async () => {
    await fake?.close();
    fake = await startFakeKubernetesApi();
    writeFileSync(tokenFile, `${fake.token}\n`);
    fake.putWebhookConfiguration(webhookConfiguration());
    clock = new Date();
  });
  after(() => fake?.close());

  const replica = (options: { certValidityMs?: number; caValidityMs?: number } = {}) =>
    new SelfManagedTls({
      api: new KubernetesApi({ baseUrl: fake.baseUrl, ca: fake.ca, tokenFile }),
      namespace: NAMESPACE,
      secretName: SECRET,
      serviceName: SERVICE,
      webhookConfigurationName: CONFIGURATION,
      certValidityMs: options.certValidityMs ?? 168 * HOUR,
      caValidityMs: options.caValidityMs ?? 8760 * HOUR,
      log: silent,
      now: () => clock,
    });

  /** What a replica's reconcile rejects with; `why` names what must have made it fail. */
  const reconcileError = (why: string): Promise<unknown> =>
    replica()
      .reconcile()
      .then(
        () => assert.fail(`reconciled ${why}`),
        (e: unknown) => e,
      );

  const stored = () => {
    const data = fake.secret(NAMESPACE, SECRET)!.data as Record<string, string>;
    return Object.fromEntries(Object.entries(data).map(([k, v]) => [k, Buffer.from(v, 'base64').toString()]));
  };
  const caBundle = () => {
    const config = fake.webhookConfiguration(CONFIGURATION) as unknown as {
      webhooks: { clientConfig: { caBundle?: string } }[];
    };
    return Buffer.from(config.webhooks[0]!.clientConfig.caBundle ?? '', 'base64').toString();
  };
  const writes = () => fake.log.filter((l) => !l.startsWith('GET '));
  const issuerOf = (m: ServingMaterial) => new X509Certificate(m.cert).issuer;

  it('creates the CA and serving cert, stores them in a Secret and patches the caBundle', async () => {
    const material = await replica().reconcile();
    const secret = fake.secret(NAMESPACE, SECRET)!;
    assert.equal(secret.type, 'kubernetes.io/tls');
    const data = stored();
    assert.deepEqual(Object.keys(data).sort(), ['ca-bundle.crt', 'ca.crt', 'ca.key', 'tls.crt', 'tls.key']);
    assert.equal(data['tls.crt'], material.cert);
    assert.equal(caBundle(), data['ca.crt']);
    assert.equal(material.caBundle, caBundle());
    const leaf = new X509Certificate(material.cert);
    const ca = new X509Certificate(data['ca.crt']!);
    assert.ok(leaf.verify(ca.publicKey), 'the serving cert is signed by the CA in the caBundle');
    assert.equal(leaf.checkHost(`${SERVICE}.${NAMESPACE}.svc`), `${SERVICE}.${NAMESPACE}.svc`);
    assert.ok(ca.ca);
    assert.equal(leaf.ca, false);
    assert.match(leaf.publicKey.asymmetricKeyType ?? '', /^ec$/);
    assert.deepEqual(writes(), [
      'POST /api/v1/namespaces/secret-agent/secrets',
      'PATCH /apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/secret-agent',
    ]);
    // Nothing due: a second pass reads and writes nothing.
    fake.log.length = 0;
    const again = await replica().reconcile();
    assert.equal(again.cert, material.cert);
    assert.deepEqual(writes(), []);
  });

  it('two replicas racing to create: one write wins, both serve the winner’s cert', async () => {
    fake.holdSecretReads(2);
    const [a, b] = await Promise.all([replica().reconcile(), replica().reconcile()]);
    assert.equal(a.cert, b.cert);
    assert.equal(a.key, b.key);
    assert.equal(stored()['tls.crt'], a.cert);
    assert.equal(caBundle(), a.caBundle);
    assert.equal(fake.log.filter((l) => l.startsWith('POST ')).length, 2, 'both tried to create');
    assert.ok(new X509Certificate(a.cert).verify(new X509Certificate(caBundle()).publicKey));
  });

  it('renews the serving cert before expiry; racing replicas converge through 409 Conflict', async () => {
    const first = await replica().reconcile();
    clock = new Date(clock.getTime() + 120 * HOUR); // less than a third of 168h left
    fake.log.length = 0;
    fake.holdSecretReads(2);
    const [a, b] = await Promise.all([replica().reconcile(), replica().reconcile()]);
    assert.notEqual(a.cert, first.cert);
    assert.equal(a.cert, b.cert);
    assert.equal(fake.log.filter((l) => l.startsWith('PUT ')).length, 2, 'both tried to replace');
    assert.equal(issuerOf(a), issuerOf(first), 'same CA');
    assert.equal(a.caBundle, first.caBundle);
    assert.equal(fake.log.filter((l) => l.startsWith('PATCH ')).length, 0, 'the caBundle did not change');
  });

  it('rotates the CA in two steps: trusted first, signing later, the old one kept until it expires', async () => {
    const options = { certValidityMs: 24 * HOUR, caValidityMs: 90 * HOUR };
    const first = await replica(options).reconcile();
    const firstCa = stored()['ca.crt']!;

    clock = new Date(clock.getTime() + 61 * HOUR); // CA has < 30h left; the leaf (capped at 24h) was renewed before
    const step1 = await replica(options).reconcile();
    const next = stored()['ca-next.crt'];
    assert.ok(next, 'a next CA is created');
    assert.ok(caBundle().includes(firstCa) && caBundle().includes(next!), 'both CAs trusted');
    assert.ok(
      new X509Certificate(step1.cert).verify(new X509Certificate(firstCa).publicKey),
      'still signed by the old CA',
    );
    assert.notEqual(step1.cert, first.cert);

    clock = new Date(clock.getTime() + 17 * HOUR); // the leaf is due again
    const step2 = await replica(options).reconcile();
    assert.ok(
      new X509Certificate(step2.cert).verify(new X509Certificate(next!).publicKey),
      'now signed by the new CA',
    );
    assert.equal(stored()['ca.crt'], next);
    assert.equal(stored()['ca-next.crt'], undefined);
    assert.ok(caBundle().includes(firstCa), 'the old CA stays trusted until it expires');

    clock = new Date(clock.getTime() + 13 * HOUR); // past the old CA's notAfter
    await replica(options).reconcile();
    assert.ok(!caBundle().includes(firstCa), 'an expired CA leaves the bundle');
    assert.ok(caBundle().includes(next!));
  });

  it('a token the API server refuses (401) is a setting to fix, naming TLS_MODE and the token mount', async () => {
    writeFileSync(tokenFile, 'wrong-token\n');
    const error = await reconcileError('with a refused token');
    assert.ok(error instanceof ConfigErrors, String(error));
    const [only, ...rest] = error.errors;
    assert.deepEqual(rest, []);
    assert.equal(only!.field, 'TLS_MODE');
    assert.match(
      only!.problem,
      /did not accept the webhook's service-account token \(GET \S+: 401 Unauthorized/,
    );
    assert.match(only!.fix, /automountServiceAccountToken must not be false.*or use TLS_MODE=file$/);
    assert.doesNotMatch(error.message, /wrong-token/, 'never the token');
  });

  it('a namespace that does not exist (404 on create) names WEBHOOK_NAMESPACE and where deploy/ sets it', async () => {
    fake.namespaces.delete(NAMESPACE);
    const error = await reconcileError('into a namespace that does not exist');
    assert.ok(error instanceof ConfigErrors, String(error));
    const [only] = error.errors;
    assert.equal(only!.field, 'WEBHOOK_NAMESPACE');
    assert.match(
      only!.problem,
      /^self-managed TLS keeps its Secret in the webhook's namespace, but "secret-agent" does not exist \(POST \S+: 404 NotFound: namespaces "secret-agent" not found\)$/,
    );
    assert.match(only!.fix, /fieldRef metadata\.namespace/);
  });

  it('a webhook configuration that does not exist (404) names WEBHOOK_CONFIGURATION_NAME and how to apply it', async () => {
    fake.deleteWebhookConfiguration(CONFIGURATION);
    const error = await reconcileError('without a webhook configuration');
    assert.ok(error instanceof ConfigErrors, String(error));
    const [only] = error.errors;
    assert.equal(only!.field, 'WEBHOOK_CONFIGURATION_NAME');
    assert.match(
      only!.problem,
      /^the MutatingWebhookConfiguration "secret-agent", whose caBundle self-managed TLS keeps, does not exist \(GET \S+: 404 NotFound: mutatingwebhookconfigurations\.admissionregistration\.k8s\.io "secret-agent" not found\)$/,
    );
    assert.match(
      only!.fix,
      /kubectl apply -k deploy\/overlays\/self-managed\).*kubectl get mutatingwebhookconfigurations/,
    );
    // The Secret is a good certificate all the same: kept for the next start.
    assert.ok(fake.secret(NAMESPACE, SECRET));
  });

  describe('a permission the installation lacks: MissingPermissionError naming it and its manifest', () => {
    const secret = { resource: 'secrets', group: '', namespace: NAMESPACE } as const;
    const configuration = {
      resource: 'mutatingwebhookconfigurations',
      group: 'admissionregistration.k8s.io',
      name: CONFIGURATION,
    } as const;
    const ROLE =
      /^apply the Role secret-agent-webhook-tls and its RoleBinding from deploy\/overlays\/self-managed\/rbac\.yaml /;
    const CLUSTER_ROLE =
      /^apply the ClusterRole secret-agent-webhook-cabundle and its ClusterRoleBinding from deploy\/overlays\/self-managed\/rbac\.yaml /;
    const cases: {
      rule: string;
      /** Makes the call that needs the rule happen: a Secret to renew, for update. */
      setup?: () => Promise<void>;
      permission: Permission;
      problem: RegExp;
      fix: RegExp;
    }[] = [
      {
        rule: 'get secrets',
        permission: { ...secret, verb: 'get', name: SECRET },
        problem:
          /^the webhook's service account may not get secrets "secret-agent-webhook-tls" in namespace "secret-agent", which self-managed TLS needs \(GET \S+: 403 Forbidden: secrets "secret-agent-webhook-tls" is forbidden: User "system:serviceaccount:secret-agent:secret-agent-webhook" cannot get resource "secrets" in API group "" in the namespace "secret-agent"\)$/,
        fix: new RegExp(`${ROLE.source}.*; its resourceNames must include "secret-agent-webhook-tls"$`),
      },
      {
        rule: 'create secrets',
        permission: { ...secret, verb: 'create' },
        problem:
          /may not create secrets in namespace "secret-agent", .*: secrets is forbidden: User .* cannot create resource "secrets"/,
        fix: new RegExp(`${ROLE.source}.*namespace$`),
      },
      {
        rule: 'update secrets',
        setup: async () => {
          await replica().reconcile();
          clock = new Date(clock.getTime() + 120 * HOUR); // the serving cert is due
        },
        permission: { ...secret, verb: 'update', name: SECRET },
        problem: /may not update secrets "secret-agent-webhook-tls" in namespace "secret-agent", /,
        fix: ROLE,
      },
      {
        rule: 'get mutatingwebhookconfigurations',
        permission: { ...configuration, verb: 'get' },
        problem:
          /may not get mutatingwebhookconfigurations\.admissionregistration\.k8s\.io "secret-agent" \(cluster-scoped\), .* at the cluster scope\)$/,
        fix: new RegExp(`${CLUSTER_ROLE.source}.*; its resourceNames must include "secret-agent"$`),
      },
      {
        rule: 'patch mutatingwebhookconfigurations',
        permission: { ...configuration, verb: 'patch' },
        problem: /may not patch mutatingwebhookconfigurations\.admissionregistration\.k8s\.io "secret-agent"/,
        fix: CLUSTER_ROLE,
      },
    ];
    for (const c of cases)
      it(`without ${c.rule}`, async () => {
        await c.setup?.();
        fake.allowed.delete(c.rule);
        const error = await reconcileError('without the permission');
        assert.ok(error instanceof MissingPermissionError, String(error));
        assert.deepEqual(error.permission, c.permission);
        assert.match(error.problem, c.problem);
        assert.match(error.fix, c.fix);
        assert.equal(error.message, `${error.problem}. Fix: ${error.fix}`);
      });

    it('startWebhook rejects with it before serving', async () => {
      fake.allowed.delete('get secrets');
      const config = parseWebhookConfig({
        AGENT_IMAGE,
        WEBHOOK_PORT: '0',
        WEBHOOK_HOST: '127.0.0.1',
        TLS_MODE: 'self-managed',
        WEBHOOK_NAMESPACE: NAMESPACE,
      });
      await assert.rejects(
        startWebhook(config, {
          log: silent,
          kubernetes: () => ({ baseUrl: fake.baseUrl, ca: fake.ca, tokenFile }),
        }),
        (e: unknown) => e instanceof MissingPermissionError && e.permission.verb === 'get',
      );
      assert.equal(fake.secret(NAMESPACE, SECRET), undefined);
    });
  });

  it('serves HTTPS end to end with the cert it stored, trusted through the patched caBundle', async () => {
    const config = parseWebhookConfig({
      AGENT_IMAGE,
      WEBHOOK_PORT: '0',
      WEBHOOK_HOST: '127.0.0.1',
      TLS_MODE: 'self-managed',
      WEBHOOK_NAMESPACE: NAMESPACE,
    });
    const webhook = await startWebhook(config, {
      log: silent,
      kubernetes: () => ({ baseUrl: fake.baseUrl, ca: fake.ca, tokenFile }),
    });
    try {
      const status = await new Promise<number>((resolve, reject) => {
        const req = request(
          {
            host: '127.0.0.1',
            port: webhook.port,
            path: '/readyz',
            ca: caBundle(),
            servername: `${SERVICE}.${NAMESPACE}.svc`,
            agent: false,
          },
          (res) => {
            res.resume();
            resolve(res.statusCode!);
          },
        );
        req.on('error', reject);
        req.end();
      });
      assert.equal(status, 200);
    } finally {
      await webhook.close();
    }
  });
});
