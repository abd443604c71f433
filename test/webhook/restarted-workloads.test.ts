/**
 * restart-on-change, round trip: the agent's real restart notifier patches each kind of owner on the
 * Kubernetes API fake; the pod template read back from the fake becomes a pod as its controller
 * creates it, and that pod goes to the webhook's real HTTPS server. Issue 21: the webhook refused the
 * agent's own `secret-agent.io/restarted-for`, so a restarted workload could create no new pod.
 */
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import type { SidecarSettings } from '../../agent/contract/agent-config.ts';
import {
  RESTARTED_FOR_ANNOTATION,
  STATUS_ANNOTATION,
  STATUS_INJECTED,
} from '../../agent/contract/product-annotations.ts';
import { createNotifiers } from '../../agent/notify/create-notifiers.ts';
import type { RotationEvent } from '../../agent/notify/notifier.ts';
import { restartValue } from '../../agent/notify/restart-owner.ts';
import { parseWebhookConfig } from '../../webhook/config/parse-webhook-config.ts';
import { startWebhook, type RunningWebhook } from '../../webhook/start.ts';
import {
  startKubernetesWorkloadsFake,
  type KubernetesWorkloadsFake,
  type PodTemplate,
  type Resource,
} from '../fakes/kubernetes-workloads.ts';
import { AGENT_IMAGE, decodePatch, mutate, review, validatePod, type PodDoc } from './fixtures.ts';
import { call } from './https-call.ts';
import { certDir, makeServingPair, type ServingPair } from './tls-certs.ts';

const NS = 'shop';
const ROTATIONS: readonly RotationEvent[] = [
  { versions: { SECRET_0: 'v2' }, unnamed: [], changedFiles: ['db-password'] },
  { versions: { SECRET_0: 'v3' }, unnamed: [], changedFiles: ['db-password'] },
];

/** A workload's pod template as its manifest opts in: the label, the annotations, restart-on-change. */
const userTemplate = (): PodTemplate & { metadata: NonNullable<PodTemplate['metadata']> } => ({
  metadata: {
    labels: { 'secret-agent.io/inject': 'true' },
    annotations: {
      'secret-agent.io/inject': 'true',
      'secret-agent.io/secret-db-password': 'aws:prod/db#password',
      'secret-agent.io/restart-on-change': 'true',
    },
  },
  spec: {
    securityContext: { runAsUser: 1000, runAsNonRoot: true },
    containers: [{ name: 'app', image: 'registry.example/app:1' }],
  },
});

interface Template {
  readonly metadata: { labels?: Record<string, string>; annotations?: Record<string, string> };
  readonly spec: PodDoc['spec'];
}

/** The pod a controller creates from `template`: its metadata, the controller's labels, a name. */
function podFrom(
  template: Template,
  name: { name: string } | { generateName: string },
  labels: Record<string, string>,
): PodDoc {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      ...name,
      namespace: NS,
      labels: { ...template.metadata.labels, ...labels },
      ...(template.metadata.annotations ? { annotations: { ...template.metadata.annotations } } : {}),
    } as PodDoc['metadata'],
    spec: structuredClone(template.spec),
  };
}

describe('restart-on-change: the pods of a restarted workload are admitted and injected', () => {
  let fake: KubernetesWorkloadsFake;
  let saDir: string;
  let pair: ServingPair;
  let tls: ReturnType<typeof certDir>;
  let webhook: RunningWebhook;

  before(async () => {
    fake = await startKubernetesWorkloadsFake({ serviceAccount: { namespace: NS, name: 'shop-api' } });
    saDir = fake.serviceAccountDir(tmpdir(), NS);
    pair = await makeServingPair();
    tls = certDir();
    tls.write(pair);
    const config = parseWebhookConfig({
      AGENT_IMAGE,
      WEBHOOK_PORT: '0',
      WEBHOOK_HOST: '127.0.0.1',
      TLS_CERT_FILE: tls.cert,
      TLS_KEY_FILE: tls.key,
      AGENT_AWS_REGION: 'eu-west-1',
      NATIVE_SIDECARS: 'true',
    });
    webhook = await startWebhook(config, { log: pino({ level: 'silent' }) });
  });
  after(async () => {
    await webhook?.close();
    tls?.[Symbol.dispose]();
    await fake?.stop();
    rmSync(saDir, { recursive: true, force: true });
  });

  /** The agent's restart notifier in pod `pod`, as createNotifiers builds it from the settings. */
  const notify = async (pod: string, event: RotationEvent, deleteBarePod = false) => {
    const settings: SidecarSettings = {
      refreshIntervalMs: 60_000,
      httpAddr: { host: '127.0.0.1', port: 8099 },
      debounceMs: 100,
      restartOnChange: true,
      deleteBarePod,
    };
    const [notifier, ...others] = createNotifiers(settings, {
      log: pino({ level: 'silent' }),
      pod: { name: pod, namespace: NS },
      serviceAccountDir: saDir,
      kubernetesApiUrl: fake.url,
      secretsDir: '/nonexistent',
    });
    assert.equal(others.length, 0);
    assert.equal(notifier!.kind, 'restart');
    return notifier!.notify(event, new AbortController().signal);
  };

  /** The pod through the webhook's /mutate, as the API server sends it; the pod as it is stored after. */
  const admit = async (pod: PodDoc): Promise<PodDoc> => {
    const reply = await call(webhook.port, pair.ca, '/mutate', {
      body: JSON.stringify(review(pod, { namespace: NS })),
    });
    assert.equal(reply.status, 200, reply.body);
    const { response } = JSON.parse(reply.body) as {
      response: { allowed: boolean; patch?: string; status?: { message: string } };
    };
    assert.equal(response.allowed, true, response.status?.message);
    const patched = mutate(pod, decodePatch(response));
    validatePod(patched);
    return patched;
  };

  /** Injected, and every annotation it came with left as it was; the webhook added only its status. */
  const assertInjected = (sent: PodDoc, patched: PodDoc) => {
    assert.deepEqual(patched.metadata.annotations, {
      ...sent.metadata.annotations,
      [STATUS_ANNOTATION]: STATUS_INJECTED,
    });
    const agents = [...(patched.spec.initContainers ?? []), ...patched.spec.containers].filter(
      (c) => c.image === AGENT_IMAGE,
    );
    assert.deepEqual(
      agents.map((c) => c.name),
      ['secret-agent'],
      'the native sidecar, as for the workload’s first pods',
    );
  };

  const template = (resource: Resource, name: string): Template =>
    (fake.object(resource, NS, name)!.spec as { template: Template }).template;

  const owners: {
    kind: string;
    resource: Resource;
    add: (name: string) => string[];
    pod: (t: Template, name: string, i: number) => PodDoc;
  }[] = [
    {
      kind: 'Deployment',
      resource: 'deployments',
      add: (name) => fake.addDeployment(NS, name, 2, userTemplate()),
      // The Deployment makes a new ReplicaSet from its template, with a pod-template-hash label.
      pod: (t, name, i) =>
        podFrom(t, { generateName: `${name}-7d4b9c${i}-` }, { 'pod-template-hash': `7d4b9c${i}` }),
    },
    {
      kind: 'StatefulSet',
      resource: 'statefulsets',
      add: (name) => fake.addStatefulSet(NS, name, 2, userTemplate()),
      pod: (t, name, i) =>
        podFrom(
          t,
          { name: `${name}-0` },
          {
            'controller-revision-hash': `${name}-5c9f8${i}`,
            'statefulset.kubernetes.io/pod-name': `${name}-0`,
          },
        ),
    },
    {
      kind: 'DaemonSet',
      resource: 'daemonsets',
      add: (name) => fake.addDaemonSet(NS, name, 2, userTemplate()),
      pod: (t, name, i) =>
        podFrom(
          t,
          { generateName: `${name}-` },
          { 'controller-revision-hash': `6b8d7${i}`, 'pod-template-generation': String(i + 2) },
        ),
    },
  ];

  for (const owner of owners) {
    it(`${owner.kind}: the patched template's pods carry restarted-for, unchanged, and are injected`, async () => {
      const name = owner.kind.toLowerCase();
      const [agentPod] = owner.add(name);
      // Before any rotation: the workload's pods are injected (what the agent runs in).
      assertInjected(
        owner.pod(template(owner.resource, name), name, 0),
        await admit(owner.pod(template(owner.resource, name), name, 0)),
      );

      for (const [i, rotation] of ROTATIONS.entries()) {
        assert.deepEqual(await notify(agentPod!, rotation), { ok: true });
        assert.equal(fake.rollouts(owner.resource, NS, name), i + 1);
        const patchedTemplate = template(owner.resource, name);
        assert.equal(
          patchedTemplate.metadata.annotations?.[RESTARTED_FOR_ANNOTATION],
          restartValue(rotation.versions),
        );
        const next = owner.pod(patchedTemplate, name, i + 1);
        const stored = await admit(next);
        assertInjected(next, stored);
        assert.equal(
          stored.metadata.annotations?.[RESTARTED_FOR_ANNOTATION],
          restartValue(rotation.versions),
        );
      }
    });
  }

  it('a bare pod: the agent deletes it and writes nothing; the pod re-created from its manifest is injected', async () => {
    // What the user applied, and the pod the webhook made of it (what runs the agent).
    const manifest = podFrom(userTemplate() as Template, { name: 'one-off' }, {});
    const running = await admit(manifest);
    fake.addBarePod(NS, 'one-off', { metadata: running.metadata, spec: running.spec });
    fake.allowed.add('delete pods'); // the agent RBAC's opt-in rule for RESTART_DELETE_BARE_POD
    (fake.requests as unknown[]).length = 0;

    assert.deepEqual(await notify('one-off', ROTATIONS[0]!, true), { ok: true });
    assert.deepEqual(
      fake.requests.map((r) => `${r.method} ${r.path}`),
      [`GET /api/v1/namespaces/${NS}/pods/one-off`, `DELETE /api/v1/namespaces/${NS}/pods/one-off`],
      'deleted, and no object written: nothing of the agent’s comes back through admission',
    );
    assert.equal(fake.object('pods', NS, 'one-off'), undefined);
    // Nothing recreates a bare pod but whoever created it: the same manifest goes through admission again.
    assertInjected(manifest, await admit(manifest));
  });
});
