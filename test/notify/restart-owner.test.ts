import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, beforeEach, describe, it } from 'node:test';
import { Role, RoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1';
import { pino } from 'pino';
import { parseAllDocuments } from 'yaml';
import { ConfigErrors } from '../../agent/contract/errors.ts';
import type { SidecarSettings } from '../../agent/contract/agent-config.ts';
import { createNotifiers } from '../../agent/notify/create-notifiers.ts';
import type { Notifier, RotationEvent } from '../../agent/notify/notifier.ts';
import { createKubernetesClient, type PatchType } from '../../agent/notify/kubernetes-client.ts';
import { RESTARTED_FOR_ANNOTATION } from '../../agent/contract/product-annotations.ts';
import { restartValue } from '../../agent/notify/restart-owner.ts';
import { assertNoCanary, canary } from '../support/canary.ts';
import {
  startKubernetesWorkloadsFake,
  type KubernetesWorkloadsFake,
  type Resource,
} from '../fakes/kubernetes-workloads.ts';

const NS = 'shop';
const EVENT: RotationEvent = {
  versions: { SECRET_0: 'v2', SECRET_1: 'AWSCURRENT-9a' },
  unnamed: [],
  changedFiles: ['db-password'],
};
const NEXT: RotationEvent = {
  versions: { SECRET_0: 'v3', SECRET_1: 'AWSCURRENT-9a' },
  unnamed: [],
  changedFiles: ['db-password'],
};

function captureLog() {
  const lines: string[] = [];
  const log = pino({ level: 'trace' }, { write: (line: string) => void lines.push(line) });
  return { log, text: () => lines.join('') };
}

const settings = (deleteBarePod = false): SidecarSettings => ({
  refreshIntervalMs: 60_000,
  httpAddr: { host: '127.0.0.1', port: 8099 },
  debounceMs: 100,
  restartOnChange: true,
  deleteBarePod,
});

describe('RESTART_ON_CHANGE: restarts the pod’s owner through the Kubernetes API', () => {
  let fake: KubernetesWorkloadsFake;
  let saDir: string;
  const logs: (() => string)[] = [];

  const writeServiceAccount = (dir: string, ca = fake.caPem) => {
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'token'), `${fake.token}\n`);
    writeFileSync(join(dir, 'ca.crt'), ca);
    writeFileSync(join(dir, 'namespace'), NS);
  };

  /** The restart notifier of the pod named `pod`, as createNotifiers builds it from the settings. */
  const restarter = (
    pod: string,
    options: { deleteBarePod?: boolean; namespace?: string | null; dir?: string } = {},
  ) => {
    const { log, text } = captureLog();
    logs.push(text);
    const notifiers = createNotifiers(settings(options.deleteBarePod), {
      log,
      pod: { name: pod, ...(options.namespace === null ? {} : { namespace: options.namespace ?? NS }) },
      serviceAccountDir: options.dir ?? saDir,
      kubernetesApiUrl: fake.url,
      secretsDir: '/nonexistent',
    });
    assert.equal(notifiers.length, 1);
    assert.equal(notifiers[0]!.kind, 'restart');
    return { notifier: notifiers[0]!, log: text };
  };
  const notify = (n: Notifier, event = EVENT) => n.notify(event, new AbortController().signal);
  const annotation = (resource: Resource, name: string) =>
    ((
      fake.object(resource, NS, name)?.spec as {
        template: { metadata: { annotations?: Record<string, string> } };
      }
    ).template.metadata.annotations ?? {})[RESTARTED_FOR_ANNOTATION];
  const patches = () => fake.requests.filter((r) => r.method === 'PATCH');

  before(async () => {
    fake = await startKubernetesWorkloadsFake({ serviceAccount: { namespace: NS, name: 'shop-api' } });
    fake.token = canary('sa-token'); // a token must never reach a log either
    saDir = mkdtempSync(join(tmpdir(), 'serviceaccount-'));
    writeServiceAccount(saDir);
  });
  after(async () => {
    await fake.stop();
    rmSync(saDir, { recursive: true, force: true });
    for (const text of logs) assertNoCanary(text(), 'restart notifier logs');
  });
  beforeEach(() => {
    (fake.requests as unknown[]).length = 0;
  });

  it('a secret whose backend names no version: refused as unversioned, naming it and the fix, before any API call; no annotation derived from a value', async () => {
    const [pod] = fake.addDeployment(NS, 'plain', 2);
    const { notifier, log } = restarter(pod!);
    const unnamed: RotationEvent = {
      versions: { SECRET_1: 'AWSCURRENT-9a' },
      unnamed: ['SECRET_0'],
      changedFiles: ['db-password'],
    };
    assert.deepEqual(await notify(notifier, unnamed), { ok: false, reason: 'unversioned' });
    assert.deepEqual(fake.requests, [], 'no call to the Kubernetes API');
    assert.equal(fake.rollouts('deployments', NS, 'plain'), 0);
    assert.equal(annotation('deployments', 'plain'), undefined);
    assert.match(log(), /"secrets":\["SECRET_0"\]/);
    assert.match(log(), /secret-agent-version:/);
  });

  it('Deployment: pod → ReplicaSet → Deployment, one strategic-merge patch of the template annotation', async () => {
    const [pod] = fake.addDeployment(NS, 'web', 2);
    const { notifier, log } = restarter(pod!);
    assert.deepEqual(await notify(notifier), { ok: true });
    assert.equal(fake.rollouts('deployments', NS, 'web'), 1);
    assert.equal(annotation('deployments', 'web'), restartValue(EVENT.versions));
    assert.match(annotation('deployments', 'web')!, /^[0-9a-f]{16}$/);
    assert.equal((fake.object('deployments', NS, 'web')!.metadata as { generation: number }).generation, 2);
    assert.deepEqual(
      fake.requests.map((r) => `${r.method} ${r.path} ${r.status}`),
      [
        `GET /api/v1/namespaces/${NS}/pods/${pod} 200`,
        `GET /apis/apps/v1/namespaces/${NS}/replicasets/${pod!.split('-').slice(0, 2).join('-')} 200`,
        `GET /apis/apps/v1/namespaces/${NS}/deployments/web 200`,
        `PATCH /apis/apps/v1/namespaces/${NS}/deployments/web 200`,
      ],
    );
    assert.equal(patches()[0]!.contentType, 'application/strategic-merge-patch+json');
    assert.equal(patches()[0]!.query, '?fieldManager=secret-agent');
    assert.match(log(), /annotated the pod template of Deployment web/);

    // The same versions again (another replica, or a repeat): read, no write, no second rollout.
    (fake.requests as unknown[]).length = 0;
    assert.deepEqual(await notify(notifier), { ok: true });
    assert.equal(patches().length, 0);
    assert.equal(fake.rollouts('deployments', NS, 'web'), 1);
  });

  it('StatefulSet and DaemonSet are patched directly', async () => {
    const [setPod] = fake.addStatefulSet(NS, 'db', 3);
    const [daemonPod] = fake.addDaemonSet(NS, 'agent', 2);
    assert.deepEqual(await notify(restarter(setPod!).notifier), { ok: true });
    assert.deepEqual(await notify(restarter(daemonPod!).notifier), { ok: true });
    assert.equal(fake.rollouts('statefulsets', NS, 'db'), 1);
    assert.equal(fake.rollouts('daemonsets', NS, 'agent'), 1);
    assert.equal(annotation('statefulsets', 'db'), restartValue(EVENT.versions));
    assert.equal(annotation('daemonsets', 'agent'), restartValue(EVENT.versions));
    assert.ok(!fake.requests.some((r) => r.path.includes('/replicasets/')));
  });

  it('5 replicas told at once about the same rotation cause exactly one rollout; the next rotation one more', async (t) => {
    const pods = fake.addDeployment(NS, 'api', 5);
    const replicas = pods.map((pod) => restarter(pod).notifier);
    const first = await Promise.all(replicas.map((n) => notify(n, EVENT)));
    assert.deepEqual(
      first,
      pods.map(() => ({ ok: true })),
    );
    assert.equal(fake.rollouts('deployments', NS, 'api'), 1);
    assert.equal(annotation('deployments', 'api'), restartValue(EVENT.versions));
    t.diagnostic(`PATCH writes from 5 concurrent replicas: ${patches().length} (template changed once)`);

    const second = await Promise.all(replicas.map((n) => notify(n, NEXT)));
    assert.deepEqual(
      second,
      pods.map(() => ({ ok: true })),
    );
    assert.equal(fake.rollouts('deployments', NS, 'api'), 2);
    assert.equal(annotation('deployments', 'api'), restartValue(NEXT.versions));
    assert.notEqual(restartValue(NEXT.versions), restartValue(EVENT.versions));
  });

  it('the annotation value depends on the id=version pairs only, not on their order', () => {
    assert.equal(restartValue({ A: '1', B: '2' }), restartValue({ B: '2', A: '1' }));
    assert.notEqual(restartValue({ A: '1', B: '2' }), restartValue({ A: '1', B: '3' }));
    assert.notEqual(restartValue({ A: '1=B' }), restartValue({ 'A=1': 'B' }));
  });

  it('a bare pod is left alone (bare-pod) unless RESTART_DELETE_BARE_POD opts in', async () => {
    const pod = fake.addBarePod(NS, 'debug-shell');
    const kept = restarter(pod);
    assert.deepEqual(await notify(kept.notifier), { ok: false, reason: 'bare-pod' });
    assert.ok(fake.object('pods', NS, pod));
    assert.match(kept.log(), /RESTART_DELETE_BARE_POD=true/);

    // Opted in, but the Role lacks `delete pods`: forbidden, and the log names the rule.
    const denied = restarter(pod, { deleteBarePod: true });
    assert.deepEqual(await notify(denied.notifier), { ok: false, reason: 'forbidden' });
    assert.match(denied.log(), /may not delete pods in namespace shop/);
    assert.match(
      denied.log(),
      /cannot delete resource \\"pods\\" in API group \\"\\" in the namespace \\"shop\\"/,
    );

    fake.allowed.add('delete pods');
    try {
      const deleting = restarter(pod, { deleteBarePod: true });
      assert.deepEqual(await notify(deleting.notifier), { ok: true });
      assert.equal(fake.object('pods', NS, pod), undefined);
      assert.ok(fake.requests.some((r) => r.method === 'DELETE' && r.path.endsWith(`/pods/${pod}`)));
    } finally {
      fake.allowed.delete('delete pods');
    }
  });

  it('a Job’s pod, or a ReplicaSet without a Deployment, is not restarted: unsupported-owner', async () => {
    const jobPod = fake.addJobPod(NS, 'migrate');
    const job = restarter(jobPod);
    assert.deepEqual(await notify(job.notifier), { ok: false, reason: 'unsupported-owner' });
    assert.match(job.log(), /controlled by Job migrate/);
    const rsPod = fake.addReplicaSetPod(NS, 'legacy');
    assert.deepEqual(await notify(restarter(rsPod).notifier), { ok: false, reason: 'unsupported-owner' });
    assert.equal(patches().length, 0);
  });

  it('403 on the patch is forbidden, and the log says which verb on which resource is missing', async () => {
    const [pod] = fake.addDeployment(NS, 'locked', 1);
    fake.allowed.delete('patch deployments');
    try {
      const { notifier, log } = restarter(pod!);
      assert.deepEqual(await notify(notifier), { ok: false, reason: 'forbidden' });
      assert.equal(fake.rollouts('deployments', NS, 'locked'), 0);
      assert.match(
        log(),
        /"verb":"patch","resource":"deployments.apps","name":"locked","namespace":"shop","status":403/,
      );
      assert.match(
        log(),
        /may not patch deployments.apps in namespace shop; grant it with the Role in docs\/rotation.md/,
      );
      assert.match(
        log(),
        /deployments.apps \\"locked\\" is forbidden: User \\"system:serviceaccount:shop:shop-api\\" cannot patch resource \\"deployments\\" in API group \\"apps\\"/,
      );
    } finally {
      fake.allowed.add('patch deployments');
    }
    fake.allowed.delete('get replicasets');
    try {
      const { notifier, log } = restarter(pod!);
      assert.deepEqual(await notify(notifier), { ok: false, reason: 'forbidden' });
      assert.match(log(), /may not get replicasets.apps/);
    } finally {
      fake.allowed.add('get replicasets');
    }
  });

  it('reads the token on every call (projected tokens rotate); a stale token is unauthorized', async () => {
    const [pod] = fake.addStatefulSet(NS, 'cache', 1);
    const { notifier } = restarter(pod!);
    fake.token = canary('sa-token-rotated');
    assert.deepEqual(await notify(notifier), { ok: false, reason: 'unauthorized' });
    writeServiceAccount(saDir);
    assert.deepEqual(await notify(notifier), { ok: true });
    assert.equal(fake.rollouts('statefulsets', NS, 'cache'), 1);
  });

  it('takes the namespace from the service-account directory when POD_NAMESPACE is not set', async () => {
    const [pod] = fake.addStatefulSet(NS, 'queue', 1);
    assert.deepEqual(await notify(restarter(pod!, { namespace: null }).notifier), { ok: true });
    assert.equal(fake.rollouts('statefulsets', NS, 'queue'), 1);
  });

  it('a pod the API does not know is not-found; missing service-account files are no-service-account', async () => {
    assert.deepEqual(await notify(restarter('no-such-pod').notifier), { ok: false, reason: 'not-found' });
    const { notifier, log } = restarter('web-x', { dir: join(saDir, 'absent') });
    assert.deepEqual(await notify(notifier), { ok: false, reason: 'no-service-account' });
    assert.match(log(), /automountServiceAccountToken/);
  });

  it('an API server whose certificate the pod’s ca.crt does not vouch for is refused: tls', async () => {
    const other = await startKubernetesWorkloadsFake();
    const dir = join(saDir, 'other-ca');
    try {
      writeServiceAccount(dir, other.caPem);
      const [pod] = fake.addStatefulSet(NS, 'tls-check', 1);
      assert.deepEqual(await notify(restarter(pod!, { dir }).notifier), { ok: false, reason: 'tls' });
      assert.equal(fake.requests.length, 0);
    } finally {
      await other.stop();
    }
  });

  it('the caller aborting stops the walk: aborted', async () => {
    const [pod] = fake.addStatefulSet(NS, 'abort', 1);
    const abort = new AbortController();
    abort.abort();
    assert.deepEqual(await restarter(pod!).notifier.notify(EVENT, abort.signal), {
      ok: false,
      reason: 'aborted',
    });
    assert.equal(fake.rollouts('statefulsets', NS, 'abort'), 0);
  });

  it('refuses to start without an API address or a pod name (ConfigErrors naming both)', () => {
    const { log } = captureLog();
    assert.throws(
      () =>
        createNotifiers(settings(), {
          log,
          pod: {},
          serviceAccountDir: saDir,
          kubernetesApiUrl: undefined,
          secretsDir: '/nonexistent',
        }),
      (e: unknown) =>
        e instanceof ConfigErrors &&
        e.errors.map((x) => x.field).join() === 'RESTART_ON_CHANGE,POD_NAME' &&
        /fieldRef metadata.name/.test(e.message),
    );
  });

  it('the Role in docs/rotation.md is valid and grants exactly what a Deployment restart needs', async () => {
    const doc = readFileSync(new URL('../../docs/rotation.md', import.meta.url), 'utf8');
    const block = [...doc.matchAll(/```yaml\n([\s\S]*?)```/g)]
      .map((m) => m[1]!)
      .find((y) => y.includes('kind: Role'));
    assert.ok(block, 'docs/rotation.md has the Role snippet');
    const objects = parseAllDocuments(block).map((d) => d.toJS() as { kind: string });
    const role = objects.find((o) => o.kind === 'Role') as unknown as ConstructorParameters<typeof Role>[0];
    const binding = objects.find((o) => o.kind === 'RoleBinding') as unknown as ConstructorParameters<
      typeof RoleBinding
    >[0];
    assert.ok(role && binding, 'the snippet has a Role and a RoleBinding');
    new Role(role).validate();
    new RoleBinding(binding).validate();
    assert.equal(binding.roleRef.name, role.metadata?.name);
    const granted = new Set(
      (role.rules ?? []).flatMap((r) =>
        r.verbs.flatMap((verb) => (r.resources ?? []).map((res) => `${verb} ${res}`)),
      ),
    );
    const defaults = new Set(fake.allowed);
    assert.deepEqual([...granted].sort(), [...defaults].sort());

    // With exactly those rules, the walk and the patch go through.
    fake.allowed.clear();
    for (const rule of granted) fake.allowed.add(rule);
    try {
      const [pod] = fake.addDeployment(NS, 'documented', 2);
      assert.deepEqual(await notify(restarter(pod!).notifier), { ok: true });
      assert.equal(fake.rollouts('deployments', NS, 'documented'), 1);
    } finally {
      fake.allowed.clear();
      for (const rule of defaults) fake.allowed.add(rule);
    }
  });

  it('the fake answers as the API server does: generation, resourceVersion, 415, 422, 401', async () => {
    const client = createKubernetesClient({ apiUrl: fake.url, serviceAccountDir: saDir });
    const signal = new AbortController().signal;
    const path = `/apis/apps/v1/namespaces/${NS}/deployments/fidelity`;
    try {
      fake.addDeployment(NS, 'fidelity', 1);
      const before = fake.object('deployments', NS, 'fidelity')!.metadata as Record<string, unknown>;
      // A metadata-only change: new resourceVersion, same generation, no rollout.
      const labelled = await client.patch(
        path,
        { metadata: { labels: { tier: 'web' } } },
        'application/merge-patch+json',
        signal,
      );
      assert.ok(labelled.ok);
      const after = (labelled.body as { metadata: Record<string, unknown> }).metadata;
      assert.notEqual(after.resourceVersion, before.resourceVersion);
      assert.equal(after.generation, before.generation);
      assert.equal(fake.rollouts('deployments', NS, 'fidelity'), 0);
      // The same patch again changes nothing, not even the resourceVersion.
      const again = await client.patch(
        path,
        { metadata: { labels: { tier: 'web' } } },
        'application/merge-patch+json',
        signal,
      );
      assert.ok(again.ok);
      assert.equal(
        (again.body as { metadata: Record<string, unknown> }).metadata.resourceVersion,
        after.resourceVersion,
      );

      const invalid = await client.patch(
        path,
        { spec: { template: { metadata: { annotations: { [RESTARTED_FOR_ANNOTATION]: 5 } } } } },
        'application/merge-patch+json',
        signal,
      );
      assert.deepEqual(invalid.ok ? undefined : [invalid.status, invalid.failure.reason], [422, 'Invalid']);
      const jsonPatch = await client.patch(path, [], 'application/json-patch+json' as PatchType, signal);
      assert.deepEqual(jsonPatch.ok ? undefined : [jsonPatch.status, jsonPatch.failure.reason], [
        415,
        'UnsupportedMediaType',
      ]);
      assert.equal(fake.rollouts('deployments', NS, 'fidelity'), 0);

      const token = fake.token;
      fake.token = 'another';
      try {
        const denied = await client.get(path, signal);
        assert.deepEqual(denied.ok ? undefined : [denied.status, denied.failure], [
          401,
          { code: 401, reason: 'Unauthorized', message: 'Unauthorized' },
        ]);
      } finally {
        fake.token = token;
      }
    } finally {
      await client.close();
    }
  });
});
