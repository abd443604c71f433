import fc from 'fast-check';
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { AGENT_OWN_PATHS } from '../../webhook/parse/agent-container-policy.ts';
import { IRSA, POD_IDENTITY } from '../../webhook/eks-identity.ts';
import { HELPERS_MOUNT_PATH } from '../../webhook/exec-helpers-volume.ts';
import { AGENT_SECRETS_DIR } from '../../webhook/injected-names.ts';
import { normalPath } from '../../webhook/parse/mount-overlap.ts';
import {
  admitThroughWebhook,
  AGENT_IMAGE,
  basicPod,
  containerEnv,
  decodePatch,
  injectedPod,
  mutate,
  validatePod,
  type PodDoc,
} from './fixtures.ts';

/**
 * Issue 26 item 3 (and item 2's last rule): what a pod may put into the agent container, which holds
 * its backend credentials. A program of its own only where ALLOW_ROTATION_COMMAND allows it; a mount
 * over what the agent runs or reads, never.
 */

const CLUSTER = { AGENT_AWS_REGION: 'eu-west-1' };
const db = { 'secret-agent.io/secret-db': 'aws:prod/db' };

const admit = (pod: PodDoc, env: Record<string, string> = {}) =>
  admitThroughWebhook(pod, { ...CLUSTER, ...env });

const overlaps = (a: string, b: string) =>
  a === b || a.startsWith(`${b}/`) || b.startsWith(`${a}/`) || a === '/' || b === '/';

describe('secret-agent.io/rotation-command: tenant code in the agent container', () => {
  it('is refused unless the cluster allows it, naming the annotation, the setting and the fix', () => {
    const result = admit(basicPod({ ...db, 'secret-agent.io/rotation-command': 'node /scripts/reload.mjs' }));
    assert.equal(result.outcome, 'denied');
    const message = result.review.response.status!.message;
    assert.match(
      message,
      /secret-agent\.io\/rotation-command: runs a program of the pod’s in the agent container, next to the pod’s backend credentials, which this cluster does not allow \(ALLOW_ROTATION_COMMAND is false\)\. Fix: tell the app with secret-agent\.io\/rotation-http-url, rotation-signal or rotation-sentinel-file instead .*ALLOW_ROTATION_COMMAND=true/,
    );
    // Free text: the command is never shown.
    assert.ok(!message.includes('/scripts/reload.mjs'));
  });

  it('runs where ALLOW_ROTATION_COMMAND=true: the agent gets ROTATION_COMMAND', () => {
    const pod = basicPod({ ...db, 'secret-agent.io/rotation-command': 'node /scripts/reload.mjs' });
    const result = admit(pod, { ALLOW_ROTATION_COMMAND: 'true' });
    assert.equal(result.outcome, 'injected', result.review.response.status?.message);
    const patched = mutate(pod, decodePatch(result.review.response));
    const agent = patched.spec.initContainers!.find((c) => c.image === AGENT_IMAGE)!;
    assert.equal(containerEnv(agent, patched).ROTATION_COMMAND, 'node /scripts/reload.mjs');
  });

  it('the other notifiers need no setting: they run nothing of the pod’s in the agent container', () => {
    const notifiers: Record<string, string>[] = [
      { 'secret-agent.io/rotation-http-url': 'POST http://127.0.0.1:8080/-/reload' },
      { 'secret-agent.io/rotation-signal': 'SIGHUP', 'secret-agent.io/rotation-signal-process': 'nginx' },
      { 'secret-agent.io/rotation-sentinel-file': '.rotated' },
    ];
    for (const annotations of notifiers)
      assert.equal(
        admit(basicPod({ ...db, ...annotations })).outcome,
        'injected',
        JSON.stringify(annotations),
      );
  });
});

describe('nothing is mounted over the agent container’s own paths', () => {
  it('secret-agent.io/mount-path at, above or below one of the agent’s own paths reaches the app containers only: the agent mounts the secrets at its own fixed path', () => {
    for (const mountPath of [
      '/app',
      '/app/secrets',
      '/nodejs/lib',
      '/secret-agent',
      '/var/run/secrets/secret-agent/vault-client',
      '/var/run/secrets/secret-agent',
      '/home/nonroot/.aws',
      // The EKS token directories and /var/run are refused (reserved-mount-paths.ts, test/siege/paths-and-names.test.ts).
    ]) {
      // No app container mounts anything: only the agent's own paths could be in the way.
      const pod = basicPod(
        { ...db, 'secret-agent.io/mount-path': mountPath },
        { automountServiceAccountToken: false },
      );
      const patched = injectedPod(pod, admit(pod));
      const app = patched.spec.containers.find((c) => c.name === 'app')!;
      assert.deepEqual(app.volumeMounts, [{ name: 'secret-agent-secrets', mountPath, readOnly: true }]);
      assert.equal(containerEnv(app, patched).SECRETS_DIR, mountPath);
      const agent = patched.spec.initContainers!.find((c) => c.image === AGENT_IMAGE)!;
      assert.deepEqual(agent.volumeMounts, [{ name: 'secret-agent-secrets', mountPath: AGENT_SECRETS_DIR }]);
      assert.equal(containerEnv(agent, patched).SECRETS_DIR, AGENT_SECRETS_DIR);
    }
  });

  it('the agent’s fixed secrets path covers none of its other own paths, nor the exec: helpers', () => {
    assert.equal(AGENT_SECRETS_DIR, normalPath(AGENT_SECRETS_DIR));
    assert.ok(!overlaps(AGENT_SECRETS_DIR, HELPERS_MOUNT_PATH));
    for (const own of AGENT_OWN_PATHS)
      if (own.path !== '/secret-agent')
        assert.ok(!overlaps(AGENT_SECRETS_DIR, own.path), `${AGENT_SECRETS_DIR} over ${own.path}`);
  });

  it('whatever a pod asks for, every agent mount is the webhook’s, and none covers another', () => {
    const arbitrary = fc.record({
      mountPath: fc.constantFrom(
        '/etc/secrets',
        '/var/run/secret-agent',
        '/srv/config',
        '/app/config',
        '/nodejs',
      ),
      exec: fc.boolean(),
      clientCert: fc.boolean(),
      identity: fc.constantFrom('none', 'irsa', 'pod-identity', 'hostile'),
      native: fc.boolean(),
    });
    fc.assert(
      fc.property(arbitrary, (c) => {
        const annotations: Record<string, string> = {
          'secret-agent.io/secret-db': c.exec ? 'exec:helper/db' : 'vault:secret/data/db',
          'secret-agent.io/mount-path': c.mountPath,
          ...(c.clientCert ? { 'secret-agent.io/vault-client-cert-secret': 'web-tls' } : {}),
        };
        const env =
          c.identity === 'irsa'
            ? [
                { name: 'AWS_ROLE_ARN', value: 'arn:aws:iam::123456789012:role/web' },
                { name: 'AWS_WEB_IDENTITY_TOKEN_FILE', value: `${IRSA.dir}/token` },
              ]
            : c.identity === 'pod-identity'
              ? [
                  { name: 'AWS_CONTAINER_CREDENTIALS_FULL_URI', value: POD_IDENTITY.uris[1] },
                  {
                    name: 'AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE',
                    value: `${POD_IDENTITY.dir}/${POD_IDENTITY.tokenPath}`,
                  },
                ]
              : c.identity === 'hostile'
                ? [
                    { name: 'AWS_ROLE_ARN', value: 'arn:aws:iam::123456789012:role/web' },
                    { name: 'AWS_WEB_IDENTITY_TOKEN_FILE', value: '/nodejs/bin/node' },
                  ]
                : [];
        const volumes = [
          { name: IRSA.volume, projected: { sources: [{ serviceAccountToken: { path: IRSA.tokenPath } }] } },
          {
            name: POD_IDENTITY.volume,
            projected: { sources: [{ serviceAccountToken: { path: POD_IDENTITY.tokenPath } }] },
          },
          { name: 'code', emptyDir: {} },
        ];
        const pod = basicPod(annotations, {
          containers: [
            { name: 'app', image: 'app:1', env, volumeMounts: [{ name: 'code', mountPath: '/nodejs' }] },
          ],
          volumes,
        });
        const result = admit(pod, {
          AGENT_VAULT_ADDR: 'https://vault.example:8200',
          AGENT_VAULT_ROLE: 'apps',
          ALLOW_EXEC_REFERENCES: 'true',
          EXEC_HELPERS_VOLUME: '{"configMap":{"name":"secret-agent-helpers"}}',
          NATIVE_SIDECARS: String(c.native),
        });
        // The app's own mount at /nodejs is in the way in the app container; nothing in the agent's is.
        if (c.mountPath === '/nodejs') {
          assert.equal(result.outcome, 'denied');
          assert.match(
            result.review.response.status!.message,
            /secret-agent\.io\/mount-path: "\/nodejs" overlaps the mount "\/nodejs" of container "app"/,
          );
          return;
        }
        assert.equal(result.outcome, 'injected', result.review.response.status?.message);
        const patched = mutate(pod, decodePatch(result.review.response));
        validatePod(patched);
        for (const agent of [...(patched.spec.initContainers ?? []), ...patched.spec.containers].filter(
          (x) => x.image === AGENT_IMAGE,
        )) {
          const mounts = (agent.volumeMounts ?? []) as { name: string; mountPath: string }[];
          assert.ok(
            mounts.some((m) => m.name === 'secret-agent-secrets' && m.mountPath === AGENT_SECRETS_DIR),
          );
          for (const m of mounts) {
            assert.ok(
              [
                'secret-agent-secrets',
                'secret-agent-helpers',
                'secret-agent-vault-client',
                IRSA.volume,
                POD_IDENTITY.volume,
              ].includes(m.name),
              `the agent mounts the pod's ${m.name}`,
            );
            for (const other of mounts)
              if (other !== m)
                assert.ok(!overlaps(m.mountPath, other.mountPath), `${m.mountPath} / ${other.mountPath}`);
            for (const code of ['/app', '/nodejs'])
              assert.ok(!overlaps(m.mountPath, code), `${m.mountPath} over ${code}`);
          }
        }
      }),
      { numRuns: 200 },
    );
  });
});
