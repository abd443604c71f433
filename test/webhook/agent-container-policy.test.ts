import fc from 'fast-check';
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { AGENT_OWN_PATHS } from '../../webhook/parse/agent-container-policy.ts';
import { IRSA, POD_IDENTITY } from '../../webhook/eks-identity.ts';
import {
  admitThroughWebhook,
  AGENT_IMAGE,
  basicPod,
  containerEnv,
  decodePatch,
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
  it('secret-agent.io/mount-path at, above or below one of the agent’s own paths is refused, naming what it would cover', () => {
    for (const mountPath of [
      '/app',
      '/app/secrets',
      '/nodejs/lib',
      '/secret-agent',
      '/var/run/secrets/secret-agent/vault-client',
      IRSA.dir,
      `${POD_IDENTITY.dir}/x`,
      '/var/run',
    ]) {
      // No app container mounts anything: only the agent's own paths are in the way.
      const pod = basicPod(
        { ...db, 'secret-agent.io/mount-path': mountPath },
        { automountServiceAccountToken: false },
      );
      const result = admit(pod);
      assert.equal(result.outcome, 'denied', mountPath);
      const own = AGENT_OWN_PATHS.find((p) => overlaps(p.path, mountPath))!;
      const message = result.review.response.status!.message;
      assert.ok(
        message.includes(
          `secret-agent.io/mount-path: ${JSON.stringify(mountPath)} overlaps ${JSON.stringify(own.path)}, where the agent container has ${own.holds}`,
        ),
        message,
      );
      assert.match(message, /Fix: choose another mount path/);
    }
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
        const coversOwn = c.mountPath === '/nodejs' || c.mountPath.startsWith('/app');
        if (coversOwn) {
          assert.equal(result.outcome, 'denied');
          assert.match(result.review.response.status!.message, /secret-agent\.io\/mount-path: .* overlaps/);
          return;
        }
        assert.equal(result.outcome, 'injected', result.review.response.status?.message);
        const patched = mutate(pod, decodePatch(result.review.response));
        validatePod(patched);
        for (const agent of [...(patched.spec.initContainers ?? []), ...patched.spec.containers].filter(
          (x) => x.image === AGENT_IMAGE,
        )) {
          const mounts = (agent.volumeMounts ?? []) as { name: string; mountPath: string }[];
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
