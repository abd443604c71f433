/**
 * deploy/base/admission-policies.yaml: the ValidatingAdmissionPolicies the API server evaluates for
 * what the webhook (pod CREATE only) never sees: ephemeral containers (kubectl debug, the
 * pods/ephemeralcontainers subresource) and a pod UPDATE that changes the agent container's image.
 * The exact expressions of the shipped YAML are evaluated with a CEL implementation
 * (@marcbachmann/cel-js), as the API server does: each variable in order, then each validation, and
 * the messageExpression of the first that fails. The pods are real: injected through the webhook's
 * admission code, then given ephemeral containers as kubectl debug writes them, and schema-checked.
 */
import { evaluate, parse } from '@marcbachmann/cel-js';
import fc from 'fast-check';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { AGENT_CONTAINER, AGENT_INIT_CONTAINER, OWN_VOLUME_PREFIX } from '../../webhook/injected-names.ts';
import {
  admitThroughWebhook,
  AGENT_IMAGE,
  basicPod,
  injectedPod,
  validatePod,
  type PodDoc,
} from './fixtures.ts';
import {
  DEPLOY,
  kubectlKustomize,
  parseYaml,
  tempOverlay,
  validate,
  type KubeObject,
} from './kustomize-render.ts';
import { ROOT } from '../support/run-agent.ts';

const FILE = join(DEPLOY, 'base', 'admission-policies.yaml');

interface Policy {
  readonly name: string;
  readonly resources: readonly string[];
  readonly variables: readonly { readonly name: string; readonly expression: string }[];
  readonly validations: readonly {
    readonly expression: string;
    readonly message: string;
    readonly messageExpression: string;
    readonly reason: string;
  }[];
}

const objects = parseYaml(readFileSync(FILE, 'utf8'), FILE);
const policies = new Map<string, Policy>(
  objects
    .filter((o) => o.kind === 'ValidatingAdmissionPolicy')
    .map((o) => {
      const spec = o.spec as {
        matchConstraints: { resourceRules: { resources: string[] }[] };
        variables: Policy['variables'];
        validations: Policy['validations'];
      };
      return [
        o.metadata.name,
        {
          name: o.metadata.name,
          resources: spec.matchConstraints.resourceRules.flatMap((r) => r.resources),
          variables: spec.variables,
          validations: spec.validations,
        },
      ];
    }),
);
const EPHEMERAL = policies.get('secret-agent-ephemeral-containers')!;
const IMAGE = policies.get('secret-agent-agent-image')!;

type Verdict = { allowed: true } | { allowed: false; message: string; reason: string };

/**
 * The policy's verdict on an UPDATE of `oldObject` into `object`, as the API server reaches it: the
 * variables in order, each validation, the first that fails denies with its messageExpression's text.
 */
function decide(policy: Policy, object: PodDoc, oldObject: PodDoc, subResource: string): Verdict {
  const request = { operation: 'UPDATE', subResource, namespace: 'apps', name: object.metadata.name };
  const variables: Record<string, unknown> = {};
  const context = () => ({ object, oldObject, request, variables });
  for (const v of policy.variables) variables[v.name] = evaluate(v.expression, context());
  for (const v of policy.validations) {
    const ok = evaluate(v.expression, context());
    assert.equal(typeof ok, 'boolean', `${v.expression} is a boolean`);
    if (ok) continue;
    const message = evaluate(v.messageExpression, context());
    assert.equal(typeof message, 'string');
    return { allowed: false, message: message as string, reason: v.reason };
  }
  return { allowed: true };
}

const CLUSTER = { AGENT_AWS_REGION: 'eu-west-1', AGENT_VAULT_ADDR: 'https://vault.example:8200' };

/** Injected pods of every shape that gives the agent volumes: each `secret-agent…` volume appears in one. */
function injectedPods(): { shape: string; pod: PodDoc }[] {
  const app = (extra: Record<string, unknown> = {}) => ({
    securityContext: { runAsUser: 1000 },
    containers: [
      { name: 'app', image: 'registry.example/app:1', command: ['/app/server'], ...extra },
      { name: 'worker', image: 'registry.example/worker:1', command: ['/worker'] },
    ],
    volumes: [{ name: 'data', emptyDir: {} }],
  });
  const shapes: [string, Record<string, string>, Record<string, string>][] = [
    ['files, native sidecar', { 'secret-agent.io/secret-db': 'aws:prod/db' }, {}],
    ['files, classic sidecar', { 'secret-agent.io/secret-db': 'aws:prod/db' }, { NATIVE_SIDECARS: 'false' }],
    ['init only', { 'secret-agent.io/secret-db': 'aws:prod/db', 'secret-agent.io/mode': 'init' }, {}],
    [
      'env vars (the exec volume)',
      { 'secret-agent.io/env-DATABASE_URL': 'aws:prod/db#url', 'secret-agent.io/restart-on-change': 'true' },
      {},
    ],
    [
      'Vault client certificate',
      {
        'secret-agent.io/secret-db': 'vault:secret/data/db#pw',
        'secret-agent.io/vault-auth-method': 'cert',
        'secret-agent.io/vault-client-cert-secret': 'web-vault-client',
      },
      {},
    ],
    [
      'exec: helpers',
      { 'secret-agent.io/secret-db': 'exec:az-keyvault/prod-vault/db-password' },
      { ALLOW_EXEC_REFERENCES: 'true', EXEC_HELPERS_VOLUME: '{"configMap":{"name":"secret-agent-helpers"}}' },
    ],
    [
      'shared process namespace (rotation-signal)',
      {
        'secret-agent.io/secret-db': 'aws:prod/db',
        'secret-agent.io/rotation-signal': 'SIGHUP',
        'secret-agent.io/rotation-signal-process': 'server',
      },
      {},
    ],
  ];
  return shapes.map(([shape, annotations, cluster]) => {
    const pod = basicPod(annotations, app());
    return { shape, pod: injectedPod(pod, admitThroughWebhook(pod, { ...CLUSTER, ...cluster })) };
  });
}

const PODS = injectedPods();
const podOf = (shape: string) => PODS.find((p) => p.shape.startsWith(shape))!.pod;

/** An ephemeral container as `kubectl debug -it POD --image=busybox [--target=…]` writes it. */
function debugContainer(name: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    name,
    image: 'busybox:1.36',
    stdin: true,
    tty: true,
    terminationMessagePolicy: 'File',
    imagePullPolicy: 'IfNotPresent',
    ...extra,
  };
}

/** The pod after `kubectl debug` added `containers`, schema-checked, and the ephemeral policy's verdict. */
function debug(pod: PodDoc, containers: Record<string, unknown>[]): Verdict {
  const after = structuredClone(pod);
  after.spec.ephemeralContainers = [...((pod.spec.ephemeralContainers as unknown[]) ?? []), ...containers];
  validatePod(after);
  return decide(EPHEMERAL, after, pod, 'ephemeralcontainers');
}

function assertDenied(verdict: Verdict, parts: readonly (string | RegExp)[]): void {
  assert.equal(verdict.allowed, false, 'denied');
  const { message, reason } = verdict as Extract<Verdict, { allowed: false }>;
  assert.equal(reason, 'Forbidden');
  for (const part of parts)
    if (typeof part === 'string') assert.ok(message.includes(part), `${message}\n  lacks ${part}`);
    else assert.match(message, part);
  assert.match(message, / Fix: /);
  assert.doesNotMatch(message, /\n/, 'one line, as the API server requires');
}

describe('deploy/base/admission-policies.yaml: the objects', () => {
  it('parse as CEL, validate against the Kubernetes schema (admissionregistration.k8s.io/v1), and each policy has its binding', async () => {
    for (const object of objects) await validate(object, FILE);
    assert.deepEqual([...policies.keys()].sort(), [
      'secret-agent-agent-image',
      'secret-agent-ephemeral-containers',
    ]);
    for (const policy of policies.values()) {
      const binding = objects.find(
        (o) =>
          o.kind === 'ValidatingAdmissionPolicyBinding' &&
          (o.spec as { policyName: string }).policyName === policy.name,
      );
      assert.deepEqual((binding?.spec as { validationActions: string[] }).validationActions, ['Deny']);
      for (const expression of [
        ...policy.variables.map((v) => v.expression),
        ...policy.validations.flatMap((v) => [v.expression, v.messageExpression]),
      ])
        assert.doesNotThrow(() => parse(expression), expression);
      // The API server refuses a message with a line break; folded YAML must leave none.
      for (const v of policy.validations) assert.doesNotMatch(v.message, /\n/, v.message);
    }
    assert.deepEqual(EPHEMERAL.resources, ['pods/ephemeralcontainers']);
    assert.deepEqual(IMAGE.resources, ['pods']);
  });

  it('are in the default install and both TLS overlays, cluster-scoped under an overlay’s own namespace, bound to every pod, and fail closed', () => {
    // The example overlay sets a namespace of its own: deploy/transformers keeps it off these cluster-scoped kinds.
    for (const dir of [
      '.',
      'overlays/cert-manager',
      'overlays/self-managed',
      '../docs/install/example-overlay',
    ]) {
      const rendered = kubectlKustomize(join(DEPLOY, dir));
      const shipped = (kind: string) =>
        rendered.filter((o: KubeObject) => o.kind === kind && o.metadata.name.startsWith('secret-agent-'));
      assert.equal(shipped('ValidatingAdmissionPolicy').length, 2, dir);
      assert.equal(shipped('ValidatingAdmissionPolicyBinding').length, 2, dir);
      for (const policy of shipped('ValidatingAdmissionPolicy')) {
        assert.equal((policy.spec as { failurePolicy: string }).failurePolicy, 'Fail');
        assert.equal(policy.metadata.namespace, undefined, `${dir}: cluster-scoped`);
      }
      for (const binding of shipped('ValidatingAdmissionPolicyBinding')) {
        assert.equal(binding.metadata.namespace, undefined, `${dir}: cluster-scoped`);
        // No label or namespace to escape by: the binding matches every pod.
        assert.equal((binding.spec as Record<string, unknown>).matchResources, undefined);
      }
    }
  });

  it('the overlay docs/webhook.md gives clusters before 1.30 drops the four objects and nothing else', () => {
    const text = readFileSync(join(ROOT, 'docs', 'webhook.md'), 'utf8');
    const section = text.slice(text.indexOf('**Kubernetes ≥ 1.30.**'));
    const block = /```yaml\n([\s\S]*?)```/.exec(section)![1]!;
    const { patches } = parseYaml(block, 'docs/webhook.md')[0] as unknown as { patches: unknown[] };
    using overlay = tempOverlay({ resources: [DEPLOY], transformers: [], patches });
    const kinds = (objects: KubeObject[]) => objects.map((o) => `${o.kind}/${o.metadata.name}`).sort();
    const full = kinds(kubectlKustomize(DEPLOY));
    const dropped = kinds(kubectlKustomize(overlay.path));
    assert.deepEqual(
      full.filter((k) => !dropped.includes(k)),
      [
        'ValidatingAdmissionPolicy/secret-agent-agent-image',
        'ValidatingAdmissionPolicy/secret-agent-ephemeral-containers',
        'ValidatingAdmissionPolicyBinding/secret-agent-agent-image',
        'ValidatingAdmissionPolicyBinding/secret-agent-ephemeral-containers',
      ],
    );
    assert.equal(dropped.length, full.length - 4);
  });

  it('name the agent containers and volumes the webhook adds', () => {
    for (const policy of policies.values())
      assert.equal(policy.variables[0]!.expression, `['${AGENT_CONTAINER}', '${AGENT_INIT_CONTAINER}']`);
    assert.ok(EPHEMERAL.variables.some((v) => v.expression.includes(`startsWith('${OWN_VOLUME_PREFIX}')`)));
    // Every volume the webhook gave these pods starts with it, and only the agent's volumes do.
    const own = PODS.flatMap(({ pod }) =>
      ((pod.spec.volumes ?? []) as { name: string }[])
        .map((v) => v.name)
        .filter((n) => n.startsWith(OWN_VOLUME_PREFIX)),
    );
    assert.deepEqual([...new Set(own)].sort(), [
      'secret-agent-exec',
      'secret-agent-helpers',
      'secret-agent-secrets',
      'secret-agent-vault-client',
    ]);
  });
});

describe('ephemeral containers of an injected pod (pods/ephemeralcontainers UPDATE)', () => {
  it('no ephemeral container, and an ordinary debug container (targeting an app container or none): allowed', () => {
    for (const { shape, pod } of PODS) {
      assert.deepEqual(decide(EPHEMERAL, pod, pod, 'ephemeralcontainers'), { allowed: true }, shape);
      assert.deepEqual(debug(pod, [debugContainer('debugger-x7k2p')]), { allowed: true }, shape);
      assert.deepEqual(
        debug(pod, [debugContainer('debugger-q9w4z', { targetContainerName: 'app' })]),
        { allowed: true },
        shape,
      );
      // A volume of the app's own, read-only or not.
      assert.deepEqual(
        debug(pod, [
          debugContainer('debugger-d4t4', { volumeMounts: [{ name: 'data', mountPath: '/data' }] }),
        ]),
        { allowed: true },
        shape,
      );
    }
  });

  it('mounting secret-agent-secrets, read-only or read-write: denied naming the container, the volume and the fix', () => {
    for (const { shape, pod } of PODS)
      for (const readOnly of [true, false, undefined]) {
        const verdict = debug(pod, [
          debugContainer('debugger-s3cr', {
            volumeMounts: [
              {
                name: 'secret-agent-secrets',
                mountPath: '/peek',
                ...(readOnly === undefined ? {} : { readOnly }),
              },
            ],
          }),
        ]);
        assertDenied(verdict, [
          'ephemeral container "debugger-s3cr" mounts "secret-agent-secrets", one of secret-agent’s volumes',
          'Fix: leave that mount out; to read the files, kubectl exec into an app container that mounts them',
        ]);
        assert.ok(shape);
      }
  });

  it('every secret-agent… volume of every injected shape (exec, helpers, Vault client certificate), with a subPath too: denied', () => {
    let checked = 0;
    for (const { shape, pod } of PODS)
      for (const { name } of (pod.spec.volumes ?? []) as { name: string }[]) {
        if (!name.startsWith(OWN_VOLUME_PREFIX)) continue;
        for (const mount of [{ mountPath: '/x' }, { mountPath: '/x', subPath: 'env-exec', readOnly: true }]) {
          const verdict = debug(pod, [
            debugContainer('debugger-vol', { volumeMounts: [{ name, ...mount }] }),
          ]);
          assertDenied(verdict, [`ephemeral container "debugger-vol" mounts "${name}"`]);
          checked++;
        }
        assert.ok(shape);
      }
    assert.ok(checked >= 2 * PODS.length + 6, `${checked} mounts checked`);
  });

  it('targeting an agent container (native sidecar, classic sidecar, init container): denied naming both and the fix', () => {
    for (const [shape, target] of [
      ['files, native sidecar', AGENT_CONTAINER],
      ['files, classic sidecar', AGENT_CONTAINER],
      ['files, classic sidecar', AGENT_INIT_CONTAINER],
      ['init only', AGENT_INIT_CONTAINER],
    ] as const) {
      const verdict = debug(podOf(shape), [debugContainer('debugger-tgt', { targetContainerName: target })]);
      assertDenied(verdict, [
        `ephemeral container "debugger-tgt" targets "${target}", secret-agent’s container`,
        'Fix: target an app container (kubectl debug --target=APP), or none',
      ]);
    }
  });

  it('several ephemeral containers, only one bad, before or after good ones: denied naming the bad one', () => {
    const pod = podOf('env vars');
    const good = (n: number) => debugContainer(`debugger-good${n}`);
    const bad = debugContainer('debugger-bad', {
      volumeMounts: [
        { name: 'data', mountPath: '/data' },
        { name: 'secret-agent-exec', mountPath: '/exec' },
      ],
    });
    for (const list of [
      [bad, good(1), good(2)],
      [good(1), bad, good(2)],
      [good(1), good(2), bad],
    ])
      assertDenied(debug(pod, list), ['ephemeral container "debugger-bad" mounts "secret-agent-exec"']);
    // Added one at a time, as kubectl debug does: the earlier good ones stay, the bad one is refused.
    let current = pod;
    for (const n of [1, 2, 3]) {
      assert.deepEqual(debug(current, [good(n)]), { allowed: true });
      current = structuredClone(current);
      current.spec.ephemeralContainers = [
        ...((current.spec.ephemeralContainers as unknown[]) ?? []),
        good(n),
      ];
    }
    assertDenied(debug(current, [bad]), ['"debugger-bad"']);
  });

  it('privileged, or adding a capability beyond a container’s defaults and NET_ADMIN (SYS_PTRACE, SYS_ADMIN, PERFMON, BPF, ALL, in any spelling): denied naming it, whether or not the pod shares its processes', () => {
    const shared = podOf('shared process namespace');
    assert.equal(shared.spec.shareProcessNamespace, true, 'rotation-signal shares the process namespace');
    const unshared = podOf('files, native sidecar');
    assert.equal(unshared.spec.shareProcessNamespace, undefined);
    const tracing: [Record<string, unknown>, string][] = [
      [{ capabilities: { add: ['SYS_PTRACE'] } }, 'adds "SYS_PTRACE"'],
      [{ capabilities: { add: ['sys_ptrace'] } }, 'adds "sys_ptrace"'],
      [{ capabilities: { add: ['CAP_SYS_PTRACE'] } }, 'adds "CAP_SYS_PTRACE"'],
      // System-wide perf and BPF sampling reads any process's stack, across PID namespaces.
      [{ capabilities: { add: ['PERFMON'] } }, 'adds "PERFMON"'],
      [{ capabilities: { add: ['cap_perfmon'] } }, 'adds "cap_perfmon"'],
      [{ capabilities: { add: ['BPF'] } }, 'adds "BPF"'],
      [{ capabilities: { add: ['Cap_Bpf'] } }, 'adds "Cap_Bpf"'],
      [{ capabilities: { add: ['SYS_ADMIN'] } }, 'adds "SYS_ADMIN"'],
      [{ capabilities: { add: ['CAP_SYS_ADMIN'] } }, 'adds "CAP_SYS_ADMIN"'],
      // What no list of the above names: the kernel, the node's files, anything unknown.
      [{ capabilities: { add: ['SYS_MODULE'] } }, 'adds "SYS_MODULE"'],
      [{ capabilities: { add: ['DAC_READ_SEARCH'] } }, 'adds "DAC_READ_SEARCH"'],
      [{ capabilities: { add: ['SYS_RAWIO'] } }, 'adds "SYS_RAWIO"'],
      [{ capabilities: { add: ['CHECKPOINT_RESTORE'] } }, 'adds "CHECKPOINT_RESTORE"'],
      [{ capabilities: { add: ['NET_ADMIN', 'ALL'] } }, 'adds "ALL"'],
      [{ capabilities: { add: ['all'] } }, 'adds "all"'],
      [{ capabilities: { add: ['CHOWN', 'SYS_PTRACEX'] } }, 'adds "SYS_PTRACEX"'],
      [{ privileged: true }, 'is privileged'],
      [{ privileged: true, capabilities: { add: ['BPF'] } }, 'adds "BPF"'],
    ];
    for (const [securityContext, how] of tracing)
      for (const pod of [shared, unshared]) {
        const verdict = debug(pod, [debugContainer('debugger-pt', { securityContext })]);
        assertDenied(verdict, [
          `ephemeral container "debugger-pt" ${how} in a pod secret-agent injected`,
          'Fix: debug without it (kubectl debug --profile=baseline, --profile=restricted or --profile=netadmin)',
        ]);
        // Targeting an app container changes nothing: the capability is the container's own.
        assert.equal(
          debug(pod, [debugContainer('debugger-pt', { securityContext, targetContainerName: 'app' })])
            .allowed,
          false,
        );
      }
    // A container's defaults under containerd and CRI-O, and NET_ADMIN (the netadmin profile), in any spelling.
    for (const securityContext of [
      { capabilities: { add: ['NET_ADMIN', 'NET_RAW'] } },
      { capabilities: { add: ['cap_net_admin'] } },
      { capabilities: { add: ['CHOWN', 'DAC_OVERRIDE', 'FOWNER', 'FSETID', 'KILL', 'SETGID', 'SETUID'] } },
      { capabilities: { add: ['CAP_SETPCAP', 'cap_setfcap', 'MKNOD', 'AUDIT_WRITE', 'SYS_CHROOT'] } },
      { capabilities: { add: ['NET_BIND_SERVICE'] } },
      { privileged: false, runAsUser: 0 },
      { capabilities: { drop: ['ALL'] } },
      { capabilities: { drop: ['ALL'], add: [] } },
    ])
      for (const pod of [shared, unshared])
        assert.deepEqual(debug(pod, [debugContainer('debugger-ok', { securityContext })]), { allowed: true });
    // A pod the webhook never injected, sharing or not: not secret-agent's concern.
    for (const spec of [{ shareProcessNamespace: true }, {}]) {
      const plain = basicPod({}, spec);
      for (const securityContext of [{ privileged: true }, { capabilities: { add: ['SYS_ADMIN', 'BPF'] } }])
        assert.deepEqual(debug(plain, [debugContainer('d', { securityContext })]), { allowed: true });
    }
  });

  it('property: the verdict is exactly the rules’, for any mix of ephemeral containers, mounts, targets and capabilities', () => {
    const volumes = [
      'secret-agent-secrets',
      'secret-agent-exec',
      'secret-agent-x',
      'data',
      'secretagent',
      'agent-secret-agent',
    ];
    const targets = [undefined, 'app', 'worker', AGENT_CONTAINER, AGENT_INIT_CONTAINER];
    const caps = [
      'NET_ADMIN',
      'net_raw',
      'CAP_CHOWN',
      'Kill',
      'SYS_PTRACE',
      'sys_ptrace',
      'CAP_SYS_PTRACE',
      'ALL',
      'SYS_ADMIN',
      'cap_perfmon',
      'BPF',
      'SYS_MODULE',
      'SYS_PTRACEX',
    ];
    const harmless = new Set(
      [
        'AUDIT_WRITE',
        'CHOWN',
        'DAC_OVERRIDE',
        'FOWNER',
        'FSETID',
        'KILL',
        'MKNOD',
        'NET_BIND_SERVICE',
        'NET_RAW',
        'SETFCAP',
        'SETGID',
        'SETPCAP',
        'SETUID',
        'SYS_CHROOT',
        'NET_ADMIN',
      ].flatMap((c) => [c, `CAP_${c}`]),
    );
    const container = fc.record({
      mounts: fc.uniqueArray(fc.constantFrom(...volumes), { maxLength: 3 }),
      target: fc.constantFrom(...targets),
      add: fc.uniqueArray(fc.constantFrom(...caps), { maxLength: 2 }),
      privileged: fc.boolean(),
    });
    fc.assert(
      fc.property(
        fc.array(container, { minLength: 1, maxLength: 5 }),
        fc.constantFrom(...PODS),
        (list, { shape, pod }) => {
          const containers = list.map((c, i) =>
            debugContainer(`debugger-${i}`, {
              ...(c.mounts.length
                ? { volumeMounts: c.mounts.map((name, j) => ({ name, mountPath: `/m${j}` })) }
                : {}),
              ...(c.target ? { targetContainerName: c.target } : {}),
              securityContext: {
                privileged: c.privileged,
                ...(c.add.length ? { capabilities: { add: c.add } } : {}),
              },
            }),
          );
          // A target must be a container the pod has (the API server's own validation).
          const names = [...pod.spec.containers, ...(pod.spec.initContainers ?? [])].map((c) => c.name);
          fc.pre(list.every((c) => c.target === undefined || names.includes(c.target)));
          const mounts = list.some((c) => c.mounts.some((m) => m.startsWith('secret-agent')));
          const targets = list.some((c) => c.target === AGENT_CONTAINER || c.target === AGENT_INIT_CONTAINER);
          // Every pod here is injected: sharing its processes or not changes nothing.
          const traces = list.some((c) => c.privileged || c.add.some((a) => !harmless.has(a.toUpperCase())));
          const verdict = debug(pod, containers);
          assert.equal(verdict.allowed, !(mounts || targets || traces), `${shape}: ${JSON.stringify(list)}`);
          if (mounts || targets || !traces) return;
          // Only the capability rule broken: its message names the first such container and what it adds.
          const i = list.findIndex((c) => c.privileged || c.add.some((a) => !harmless.has(a.toUpperCase())));
          const added = list[i]!.add.find((a) => !harmless.has(a.toUpperCase()));
          const how = added === undefined ? 'is privileged' : `adds ${JSON.stringify(added)}`;
          assertDenied(verdict, [
            `ephemeral container "debugger-${i}" ${how} in a pod secret-agent injected`,
          ]);
        },
      ),
      { numRuns: 400 },
    );
  });
});

describe('an UPDATE of an injected pod (pods)', () => {
  const update = (pod: PodDoc, change: (p: PodDoc) => void) => {
    const after = structuredClone(pod);
    change(after);
    validatePod(after);
    return decide(IMAGE, after, pod, '');
  };
  const agentOf = (pod: PodDoc) =>
    [...(pod.spec.initContainers ?? []), ...pod.spec.containers].filter((c) => c.image === AGENT_IMAGE);

  it('changing an agent container’s image: denied naming the container and the fix, in every shape', () => {
    for (const { shape, pod } of PODS)
      for (const agent of agentOf(pod)) {
        const verdict = update(pod, (p) => {
          const all = [...(p.spec.initContainers ?? []), ...p.spec.containers];
          all.find((c) => c.name === agent.name)!.image = 'registry.example/tenant/anything:1';
        });
        assertDenied(verdict, [
          `the update changes the image of container "${String(agent.name)}", secret-agent’s`,
          'Fix: roll out the workload',
        ]);
        assert.ok(shape);
      }
  });

  it('changing an app container’s image, a label or an annotation: allowed', () => {
    for (const { shape, pod } of PODS) {
      assert.deepEqual(
        update(pod, (p) => (p.spec.containers[0]!.image = 'registry.example/app:2')),
        { allowed: true },
        shape,
      );
      assert.deepEqual(
        update(pod, (p) => delete p.metadata.labels!['secret-agent.io/inject']),
        { allowed: true },
        shape,
      );
      assert.deepEqual(
        update(pod, (p) => (p.metadata.annotations!.note = 'x')),
        { allowed: true },
        shape,
      );
    }
  });
});
