import fc from 'fast-check';
import assert from 'node:assert/strict';
import { SDK_CONFIG_ENV } from '../../agent/contract/sdk-config-env.ts';
import { describe, it } from 'node:test';
import { POD_ANNOTATIONS, type PodAnnotationName } from '../../webhook/annotations/pod-annotations.ts';
import { PREFIX } from '../../webhook/annotations/annotation.ts';
import { selfSignedCertificate } from '../support/self-signed-cert.ts';
import { admitThroughWebhook, AGENT_IMAGE, basicPod, containerEnv, injectedPod } from './fixtures.ts';

/**
 * What a tenant's annotations can reach in the agent container's env (docs/security.md): the
 * settings declared for pods, and nothing that decides where the agent's credentials go or what
 * code it runs. Every other variable is the cluster's, or the webhook's own.
 */

const CA = selfSignedCertificate('vault.internal', 'DNS:vault.internal').cert;
const CLUSTER = {
  AGENT_AWS_REGION: 'eu-west-1',
  AGENT_VAULT_ADDR: 'https://vault.example:8200',
  AGENT_VAULT_CACERT: CA,
  AGENT_VAULT_TLS_SERVER_NAME: 'vault.internal',
  AGENT_VAULT_AUTH_MOUNT: 'kubernetes-prod',
  AGENT_VAULT_ROLE: 'apps',
  ALLOW_ROTATION_COMMAND: 'true',
};

/** What the cluster, not the pod, decides: each agent carries exactly the cluster's value, or none. */
const CLUSTER_ONLY: Readonly<Record<string, string | undefined>> = {
  VAULT_ADDR: CLUSTER.AGENT_VAULT_ADDR,
  VAULT_CACERT_BYTES: CA.trim(),
  VAULT_TLS_SERVER_NAME: CLUSTER.AGENT_VAULT_TLS_SERVER_NAME,
};

/** Agent variables a pod can set (declared per annotation, plus the provider settings it may choose). */
const POD_SETTABLE = new Set<string>([
  ...Object.values(POD_ANNOTATIONS).flatMap((a) => ('env' in a && a.env ? [a.env] : [])),
  'AWS_REGION',
  'GCP_PROJECT',
  'VAULT_NAMESPACE',
  'VAULT_AUTH_NAMESPACE',
  'VAULT_AUTH_METHOD',
  'VAULT_AUTH_MOUNT',
  'VAULT_ROLE',
  'VAULT_GCP_SERVICE_ACCOUNT',
  'VAULT_REVOKE_ON_SHUTDOWN',
  // Fixed paths where the webhook mounts vault-client-cert-secret: the pod names the Secret, not the path.
  'VAULT_CLIENT_CERT',
  'VAULT_CLIENT_KEY',
]);
/**
 * The webhook's own: the mode, the mount path, the references, the heap cap, the downward API, the
 * small sidecar's run deadline (the cluster's, raised to the pod's INIT_DEADLINE + 15 s).
 */
const WEBHOOK_OWN =
  /^(AGENT_MODE|SECRETS_DIR|SECRET_\d+_[A-Z_]+|NODE_OPTIONS|POD_NAME|POD_NAMESPACE|POD_UID|AGENT_RUN_DEADLINE)$/;
/** What would send the agent's credentials, or its code, elsewhere: never a pod's to set. */
const NEVER =
  /ENDPOINT|PROXY|SKIP_VERIFY|INSECURE|_TOKEN$|_TOKEN_FILE|ACCESS_KEY|SECRET_ACCESS|SESSION|CREDENTIALS|PROFILE|CONFIG_FILE|METADATA|NODE_|^VAULT_ADDR$/;

/** Every pod annotation at a valid value, together: as much as one pod can reach. */
const EVERYTHING: Partial<Record<PodAnnotationName, string>> = {
  mode: 'sidecar',
  // node: vault-revoke-on-shutdown below does not suit the small sidecar; SMALL_EVERYTHING has small.
  'sidecar-process': 'node',
  'mount-path': '/var/run/secrets/app',
  containers: 'app',
  'file-mode': '0440',
  'refresh-interval': '1m',
  'init-deadline': '2m',
  'log-level': 'debug',
  'rotation-signal': 'SIGHUP',
  'rotation-signal-process': 'nginx',
  'rotation-http-url': 'POST http://127.0.0.1:8080/-/reload',
  'rotation-command': 'node /scripts/reload.mjs',
  'rotation-debounce': '5s',
  'rotation-sentinel-file': '.rotated',
  'rotation-sentinel-hold': '30s',
  'kubernetes-events': 'true',
  'kubernetes-events-failing-after': '3',
  'restart-on-change': 'true',
  'restart-delete-bare-pod': 'true',
  'agent-http-addr': '0.0.0.0:8199',
  'agent-cpu-request': '20m',
  'agent-cpu-limit': '1',
  'agent-memory-request': '100Mi',
  'agent-memory-limit': '256Mi',
  'agent-run-as-user': '1000',
  'volume-size-limit': '1Mi',
  'aws-region': 'us-east-2',
  'gcp-project': 'my-project',
  'vault-role': 'web',
  'vault-auth-method': 'cert',
  'vault-namespace': 'teams/a',
  'vault-auth-namespace': 'teams',
  'vault-client-cert-secret': 'web-tls',
  'vault-gcp-service-account': 'web@my-project.iam.gserviceaccount.com',
  'vault-revoke-on-shutdown': 'true',
};
/** Left out of EVERYTHING, each for a reason a test can state. */
const NOT_IN_EVERYTHING: Partial<Record<PodAnnotationName, string>> = {
  inject: 'set by every pod (basicPod)',
  'rotation-signal-pidfile': 'an alternative to rotation-signal-process',
  'exit-with-process': 'dropped where native sidecars run, as here',
};

const REFERENCES = {
  'secret-agent.io/secret-db': 'aws:prod/db',
  'secret-agent.io/secret-api': 'vault:secret/data/api',
  'secret-agent.io/secret-key': 'gcp:api-key',
};

/** Each agent container's env, when the pod is admitted. */
function agentEnvs(annotations: Record<string, string>): Record<string, string | undefined>[] | undefined {
  const pod = basicPod(annotations);
  const result = admitThroughWebhook(pod, CLUSTER);
  if (result.outcome !== 'injected') return undefined;
  const patched = injectedPod(pod, result);
  return [...(patched.spec.initContainers ?? []), ...patched.spec.containers]
    .filter((c) => c.image === AGENT_IMAGE)
    .map((c) => containerEnv(c, patched));
}

function checkReach(env: Record<string, string | undefined>): void {
  for (const [name, value] of Object.entries(env)) {
    // HOME and the SDKs' config files point nowhere, whatever the pod says: the webhook's fixed values.
    if (Object.hasOwn(SDK_CONFIG_ENV, name)) {
      assert.equal(value, SDK_CONFIG_ENV[name], `${name} is the webhook's`);
      continue;
    }
    if (name in CLUSTER_ONLY) assert.equal(value, CLUSTER_ONLY[name], `${name} is the cluster's`);
    else assert.ok(POD_SETTABLE.has(name) || WEBHOOK_OWN.test(name), `${name} reached the agent`);
    if (NEVER.test(name) && name !== 'NODE_OPTIONS' && !(name in CLUSTER_ONLY))
      assert.fail(`${name} is set in the agent container`);
  }
  // Only /app/resident sets it, for each run: with it a process makes one refresh and exits.
  assert.equal(env.AGENT_HANDOFF_FDS, undefined);
  // The heap cap is the only NODE_OPTIONS, whatever memory limit the pod asks for.
  assert.match(env.NODE_OPTIONS ?? '', /^--max-old-space-size=\d+ --max-semi-space-size=1$/);
  if (env.VAULT_AUTH_MOUNT !== undefined) assert.equal(env.VAULT_AUTH_MOUNT, CLUSTER.AGENT_VAULT_AUTH_MOUNT);
}

describe('what a pod’s annotations reach in the agent container', () => {
  it('every pod annotation at once: only declared settings, never an address, endpoint, proxy, CA, credential or Node flag', () => {
    const declared = Object.keys(POD_ANNOTATIONS) as PodAnnotationName[];
    assert.deepEqual(
      declared.filter((name) => !(name in EVERYTHING) && !(name in NOT_IN_EVERYTHING)),
      [],
      'a new annotation: add it to EVERYTHING (or say why not)',
    );
    const annotations = Object.fromEntries(Object.entries(EVERYTHING).map(([k, v]) => [PREFIX + k, v!]));
    const envs = agentEnvs({ ...REFERENCES, ...annotations });
    assert.ok(envs, 'the pod with every annotation is admitted');
    for (const env of envs) {
      checkReach(env);
      assert.equal(env.VAULT_ADDR, CLUSTER.AGENT_VAULT_ADDR);
      // The pod picked cert: the cluster's mount is the kubernetes method's, not cert's.
      assert.equal(env.VAULT_AUTH_MOUNT, undefined);
    }
  });

  it('every annotation the small sidecar suits, at once: the same reach, the resident’s run deadline, never the handoff', () => {
    const small: Partial<Record<PodAnnotationName, string>> = {
      ...EVERYTHING,
      'sidecar-process': 'small',
      'vault-revoke-on-shutdown': 'false',
    };
    const annotations = Object.fromEntries(Object.entries(small).map(([k, v]) => [PREFIX + k, v!]));
    const envs = agentEnvs({ ...REFERENCES, ...annotations });
    assert.ok(envs, 'the pod is admitted');
    assert.equal(envs.length, 1);
    for (const env of envs) {
      checkReach(env);
      // init-deadline 2m + 15 s, over the cluster's 2m.
      assert.equal(env.AGENT_RUN_DEADLINE, '2m15s');
    }
    // No annotation is the handoff under another name.
    assert.deepEqual(
      Object.entries(POD_ANNOTATIONS).filter(([, a]) => 'env' in a && a.env === 'AGENT_HANDOFF_FDS'),
      [],
    );
  });

  it('hostile values in any annotation: refused, or admitted with the same reach', () => {
    const names = Object.keys(EVERYTHING) as PodAnnotationName[];
    const hostile = fc.constantFrom(
      'https://attacker.example:8200',
      '--require=/tmp/evil.js',
      '0.0.0.0:8099 --inspect=0.0.0.0:9229',
      'http://169.254.169.254/latest/meta-data/',
      'a\nVAULT_ADDR=https://attacker.example',
      '/app',
      'root',
      '0',
    );
    let admitted = 0;
    fc.assert(
      fc.property(
        fc.subarray(names, { minLength: 1, maxLength: 2 }),
        fc.array(hostile, { minLength: 4, maxLength: 4 }),
        (picked, values) => {
          const annotations = Object.fromEntries(
            Object.entries(EVERYTHING).map(([k, v]) => [PREFIX + k, v!]),
          );
          picked.forEach((name, i) => (annotations[PREFIX + name] = values[i]!));
          const envs = agentEnvs({ ...REFERENCES, ...annotations });
          if (envs) admitted++;
          for (const env of envs ?? []) checkReach(env);
        },
      ),
      // Seeded: the count below must not depend on the draw.
      { numRuns: 200, seed: 0x26b },
    );
    // Not every hostile value is refused (free text, a path, a name): those admitted were checked.
    assert.ok(admitted >= 10, `${admitted} of 200 admitted`);
  });

  it('an annotation for what is the cluster’s (the Vault address, an endpoint, NODE_OPTIONS) is no annotation: refused', () => {
    for (const name of [
      'vault-addr',
      'vault-cacert',
      'vault-auth-mount',
      'aws-endpoint-url',
      'node-options',
      'https-proxy',
    ]) {
      const pod = basicPod({ ...REFERENCES, [PREFIX + name]: 'https://attacker.example' });
      const result = admitThroughWebhook(pod, CLUSTER);
      assert.equal(result.outcome, 'denied', name);
      assert.match(
        result.review.response.status!.message,
        new RegExp(`secret-agent\\.io/${name}: is not a secret-agent annotation`),
      );
    }
  });
});
