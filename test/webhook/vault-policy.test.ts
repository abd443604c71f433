import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseVaultSettings } from '../../agent/providers/vault/config.ts';
import {
  admitThroughWebhook,
  basicPod,
  containerEnv,
  decodePatch,
  injectionDefaults,
  mutate,
  validatePod,
} from './fixtures.ts';

/**
 * Issue 26 item 3: what a pod may choose of its Vault login. ALLOW_VAULT_AUTH_METHODS lists the methods
 * (and the mount of each) a pod may pick; VAULT_NAMESPACE_PINS pins a Kubernetes namespace to a Vault
 * namespace. A pod asking for something outside the policy is refused, naming the annotation, the
 * setting and the fix.
 */

const VAULT = { AGENT_VAULT_ADDR: 'https://vault.example:8200', AGENT_VAULT_ROLE: 'apps' };

function admit(annotations: Record<string, string>, env: Record<string, string>, namespace = 'apps') {
  const pod = basicPod({ 'secret-agent.io/secret-db': 'vault:secret/data/db', ...annotations });
  return {
    pod,
    result: admitThroughWebhook(pod, { ...VAULT, ...env }, { namespace }),
  };
}

/** The agent's env and what its Vault provider makes of it. */
function injected(annotations: Record<string, string>, env: Record<string, string>, namespace = 'apps') {
  const { pod, result } = admit(annotations, env, namespace);
  assert.equal(result.outcome, 'injected', result.review.response.status?.message);
  const patched = mutate(pod, decodePatch(result.review.response));
  validatePod(patched);
  const agentEnv = containerEnv(patched.spec.initContainers![0]!, patched);
  // In a pod the service-account token exists, which makes kubernetes the agent's default method.
  const inPod = { VAULT_AUTH_METHOD: 'kubernetes', ...agentEnv };
  return { env: agentEnv, settings: parseVaultSettings(inPod) };
}

function refusal(
  annotations: Record<string, string>,
  env: Record<string, string>,
  namespace = 'apps',
): string {
  const { result } = admit(annotations, env, namespace);
  assert.equal(result.outcome, 'denied');
  return result.review.response.status!.message;
}

describe('ALLOW_VAULT_AUTH_METHODS: the methods a pod may pick, and their mounts', () => {
  it('by default, every method the webhook can set up', () => {
    for (const method of ['kubernetes', 'jwt', 'cert', 'aws', 'gcp']) {
      const annotations: Record<string, string> =
        method === 'cert'
          ? { 'secret-agent.io/vault-client-cert-secret': 'web-vault-client' }
          : method === 'gcp'
            ? { 'secret-agent.io/vault-gcp-service-account': 'web@p.iam.gserviceaccount.com' }
            : {};
      assert.equal(
        injected({ 'secret-agent.io/vault-auth-method': method, ...annotations }, {}).settings.auth.method,
        method,
      );
    }
  });

  it('refuses a method the cluster does not list, naming the annotation, the setting and the fix', () => {
    const message = refusal(
      { 'secret-agent.io/vault-auth-method': 'jwt' },
      { ALLOW_VAULT_AUTH_METHODS: 'kubernetes,aws' },
    );
    assert.match(
      message,
      /secret-agent\.io\/vault-auth-method: "jwt" is not a Vault auth method this cluster lets pods use \(ALLOW_VAULT_AUTH_METHODS: kubernetes, aws\)\. Fix: use one of kubernetes, aws, or remove it to log in with the cluster's kubernetes/,
    );
    assert.equal(
      injected({ 'secret-agent.io/vault-auth-method': 'aws' }, { ALLOW_VAULT_AUTH_METHODS: 'kubernetes,aws' })
        .settings.auth.method,
      'aws',
    );
    assert.equal(
      injected({}, { ALLOW_VAULT_AUTH_METHODS: 'kubernetes,aws' }).settings.auth.method,
      'kubernetes',
    );
  });

  it('logs in at the mount the cluster gives a method, also when the pod picks it', () => {
    const policy = { ALLOW_VAULT_AUTH_METHODS: 'kubernetes, jwt=jwt-k8s, aws=auth/aws-eks' };
    const jwt = injected({ 'secret-agent.io/vault-auth-method': 'jwt' }, policy).settings.auth;
    assert.ok(jwt.method === 'jwt' && jwt.mount === 'jwt-k8s', JSON.stringify(jwt));
    const aws = injected({ 'secret-agent.io/vault-auth-method': 'aws' }, policy).settings.auth;
    assert.ok(aws.method === 'aws' && aws.mount === 'aws-eks', JSON.stringify(aws));
    // The cluster's own method keeps AGENT_VAULT_AUTH_MOUNT, picked or not.
    const cluster = { ...policy, AGENT_VAULT_AUTH_MOUNT: 'kubernetes-prod' };
    for (const annotations of [{}, { 'secret-agent.io/vault-auth-method': 'kubernetes' }] as Record<
      string,
      string
    >[]) {
      const own = injected(annotations, cluster).settings.auth;
      assert.ok(own.method === 'kubernetes' && own.mount === 'kubernetes-prod', JSON.stringify(own));
    }
  });

  it('a mount given for the cluster’s method is every pod’s', () => {
    const auth = injected({}, { AGENT_VAULT_AUTH_METHOD: 'jwt', ALLOW_VAULT_AUTH_METHODS: 'jwt=jwt-k8s' })
      .settings.auth;
    assert.ok(auth.method === 'jwt' && auth.mount === 'jwt-k8s', JSON.stringify(auth));
  });

  it('a mount is read as the agent reads VAULT_AUTH_MOUNT: slashes and auth/ around it do not matter', () => {
    for (const written of ['/jwt-k8s', 'jwt-k8s/', 'auth/jwt-k8s', '/auth/jwt-k8s/']) {
      const auth = injected(
        {},
        {
          AGENT_VAULT_AUTH_METHOD: 'jwt',
          AGENT_VAULT_AUTH_MOUNT: 'jwt-k8s',
          ALLOW_VAULT_AUTH_METHODS: `jwt=${written}`,
        },
      ).settings.auth;
      assert.ok(auth.method === 'jwt' && auth.mount === 'jwt-k8s', `${written}: ${JSON.stringify(auth)}`);
    }
  });

  it('refuses an unusable policy at webhook start, naming the setting', () => {
    const bad: [Record<string, string>, RegExp][] = [
      [{ ALLOW_VAULT_AUTH_METHODS: '' }, /ALLOW_VAULT_AUTH_METHODS: names no auth method/],
      [
        { ALLOW_VAULT_AUTH_METHODS: 'kubernetes,approle' },
        /"approle" is not a Vault auth method the webhook can set up/,
      ],
      [{ ALLOW_VAULT_AUTH_METHODS: 'kubernetes,jwt=a b' }, /"jwt=a b" does not name a mount path after =/],
      [{ ALLOW_VAULT_AUTH_METHODS: 'kubernetes,kubernetes' }, /lists "kubernetes" twice/],
      [
        { ALLOW_VAULT_AUTH_METHODS: 'jwt,aws' },
        /ALLOW_VAULT_AUTH_METHODS: does not list "kubernetes", the method of pods that name none .*Fix: add kubernetes to it, or set AGENT_VAULT_AUTH_METHOD/,
      ],
      [
        { ALLOW_VAULT_AUTH_METHODS: 'kubernetes=k8s-a', AGENT_VAULT_AUTH_MOUNT: 'k8s-b' },
        /gives "kubernetes" the mount "k8s-a", but AGENT_VAULT_AUTH_MOUNT says "k8s-b"/,
      ],
    ];
    for (const [env, message] of bad)
      assert.throws(
        () => injectionDefaults(env),
        (e: Error) => message.test(e.message),
        JSON.stringify(env),
      );
  });
});

describe('VAULT_NAMESPACE_PINS: a Kubernetes namespace pinned to a Vault namespace', () => {
  const PINS = { VAULT_NAMESPACE_PINS: 'apps=teams/a, shop=teams/shop' };

  it('the pin is the pod’s Vault namespace when it names none, over the cluster’s default', () => {
    const { settings } = injected({}, { ...PINS, AGENT_VAULT_NAMESPACE: 'admin' });
    assert.equal(settings.namespace, 'teams/a');
    assert.equal(settings.authNamespace, 'teams/a');
  });

  it('a namespace inside the pin is the pod’s to choose; one outside is refused, naming the fix', () => {
    assert.equal(
      injected({ 'secret-agent.io/vault-namespace': 'teams/a/payments' }, PINS).settings.namespace,
      'teams/a/payments',
    );
    assert.match(
      refusal({ 'secret-agent.io/vault-namespace': 'teams/shop' }, PINS),
      /secret-agent\.io\/vault-namespace: "teams\/shop" is outside "teams\/a", the Vault namespace this pod's Kubernetes namespace "apps" is pinned to\. Fix: use "teams\/a" or a namespace inside it, or remove it .*VAULT_NAMESPACE_PINS/,
    );
    // A sibling that shares the pin's prefix is outside it.
    assert.match(refusal({ 'secret-agent.io/vault-namespace': 'teams/ab' }, PINS), /is outside "teams\/a"/);
  });

  it('each reference’s ?namespace= must be inside the pin too', () => {
    const inside = injected(
      { 'secret-agent.io/secret-tls': 'vault:shared/data/tls?namespace=teams/a/shared' },
      PINS,
    );
    assert.ok(Object.values(inside.env).includes('vault:shared/data/tls?namespace=teams/a/shared'));
    assert.match(
      refusal({ 'secret-agent.io/secret-tls': 'vault:shared/data/tls?namespace=platform' }, PINS),
      /secret-agent\.io\/secret-tls: reads in a Vault namespace outside "teams\/a", the one this pod's Kubernetes namespace "apps" is pinned to\. Fix: .*drop \?namespace= from the reference/,
    );
  });

  it('the auth namespace: inside the pin, or the cluster’s own; nothing else', () => {
    const cluster = { ...PINS, AGENT_VAULT_AUTH_NAMESPACE: 'admin' };
    assert.equal(injected({}, cluster).settings.authNamespace, 'admin');
    assert.equal(
      injected({ 'secret-agent.io/vault-auth-namespace': 'admin/' }, cluster).settings.authNamespace,
      'admin',
    );
    assert.equal(
      injected({ 'secret-agent.io/vault-auth-namespace': 'teams/a' }, cluster).settings.authNamespace,
      'teams/a',
    );
    assert.match(
      refusal({ 'secret-agent.io/vault-auth-namespace': 'teams/shop' }, cluster),
      /secret-agent\.io\/vault-auth-namespace: "teams\/shop" is outside "teams\/a".*AGENT_VAULT_AUTH_NAMESPACE/,
    );
  });

  it('`*` pins every other namespace, `{namespace}` naming it; `root` allows any', () => {
    const pins = { VAULT_NAMESPACE_PINS: 'shop=teams/shop,platform=root,*=tenants/{namespace}' };
    assert.equal(injected({}, pins, 'web').settings.namespace, 'tenants/web');
    assert.equal(injected({}, pins, 'shop').settings.namespace, 'teams/shop');
    assert.match(
      refusal({ 'secret-agent.io/vault-namespace': 'tenants/shop' }, pins, 'web'),
      /outside "tenants\/web"/,
    );
    assert.equal(
      injected({ 'secret-agent.io/vault-namespace': 'anything/at/all' }, pins, 'platform').settings.namespace,
      'anything/at/all',
    );
  });

  it('a pod in a namespace with no pin may not read Vault; a pod that does not read Vault is not bound', () => {
    assert.match(
      refusal({}, PINS, 'other'),
      /secret-agent\.io\/secret-db: reads Vault, but VAULT_NAMESPACE_PINS pins no Vault namespace for this pod's Kubernetes namespace "other".*Fix: ask the cluster admin to pin "other"/,
    );
    const pod = basicPod({ 'secret-agent.io/secret-db': 'aws:prod/db' });
    const result = admitThroughWebhook(
      pod,
      { ...PINS, AGENT_AWS_REGION: 'eu-west-1' },
      { namespace: 'other' },
    );
    assert.equal(result.outcome, 'injected');
  });

  it('a template that makes no Vault namespace of a Kubernetes one refuses that namespace’s pods', () => {
    assert.match(
      refusal({}, { VAULT_NAMESPACE_PINS: '*={namespace}' }, 'sys'),
      /VAULT_NAMESPACE_PINS pins this pod's Kubernetes namespace "sys" to "sys", which is not a Vault namespace/,
    );
  });

  it('refuses unusable pins at webhook start, naming the setting', () => {
    const bad: [string, RegExp][] = [
      ['', /VAULT_NAMESPACE_PINS: pins no namespace/],
      ['apps', /"apps" does not pin "apps" to a Vault namespace/],
      ['Apps=teams/a', /"Apps" is not a Kubernetes namespace or \*/],
      [
        'apps=teams//a',
        /"apps=teams\/\/a" does not pin "apps" to a Vault namespace: it is empty or has a doubled \//,
      ],
      ['apps=a,apps=b', /pins "apps" twice/],
    ];
    for (const [text, message] of bad)
      assert.throws(
        () => injectionDefaults({ VAULT_NAMESPACE_PINS: text }),
        (e: Error) => message.test(e.message),
        text,
      );
  });
});
