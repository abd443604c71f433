import { nodeOptions } from '../../webhook/agent-sizing.ts';
import {
  AGENT_ENTRYPOINT,
  GCP_INIT_COMMAND,
  SIDECAR_COMMAND,
  smallSidecarCommand,
} from '../../webhook/render/agent-containers.ts';
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseAgentConfig } from '../../agent/config/parse-agent-config.ts';
import { BadReviewError } from '../../webhook/admission/bad-review-error.ts';
import { decodeAdmissionReview } from '../../webhook/admission/review.ts';
import { FILE_ANNOTATIONS } from '../../webhook/annotations/file-annotations.ts';
import { POD_ANNOTATIONS } from '../../webhook/annotations/pod-annotations.ts';
import { parseVaultSettings } from '../../agent/providers/vault/config.ts';
import { assertNoCanary, canary } from '../support/canary.ts';
import { selfSignedCertificate } from '../support/self-signed-cert.ts';
import {
  admitThroughWebhook,
  AGENT_IMAGE,
  basicPod,
  containerEnv,
  decodePatch,
  injectionDefaults,
  mutate,
  review,
  validatePod,
  type PodDoc,
} from './fixtures.ts';

const admit = admitThroughWebhook;

/** What a cluster's webhook sets so that aws:NAME and vault: references can work (else they are refused). */
const CLUSTER = {
  AGENT_AWS_REGION: 'eu-west-1',
  AGENT_VAULT_ADDR: 'https://vault.example:8200',
  AGENT_VAULT_ROLE: 'apps',
};

const AGENT_SECURITY = {
  runAsNonRoot: true,
  runAsUser: 65532,
  readOnlyRootFilesystem: true,
  allowPrivilegeEscalation: false,
  capabilities: { drop: ['ALL'] },
  seccompProfile: { type: 'RuntimeDefault' },
};
const RESOURCES = { requests: { cpu: '15m', memory: '40Mi' }, limits: { memory: '128Mi' } };
/** The small sidecar's: the resident's request, and the same limit, since a run peaks as an init run does. */
const SMALL_RESOURCES = { requests: { cpu: '15m', memory: '4Mi' }, limits: { memory: '128Mi' } };
/** The default 128Mi limit, less the 8Mi volume and the reserve outside the heap (webhook/agent-sizing.ts). */
const NODE_OPTIONS_ENV = { name: 'NODE_OPTIONS', value: '--max-old-space-size=44 --max-semi-space-size=1' };
/** HOME and the SDKs' config files, away from anything a pod could mount or write (agent/contract/sdk-config-env.ts). */
const SDK_CONFIG_ENV = [
  { name: 'HOME', value: '/nonexistent' },
  { name: 'AWS_CONFIG_FILE', value: '/nonexistent/.aws/config' },
  { name: 'AWS_SHARED_CREDENTIALS_FILE', value: '/nonexistent/.aws/credentials' },
  { name: 'CLOUDSDK_CONFIG', value: '/nonexistent/.config/gcloud' },
];
/** What the small sidecar runs, written out: the resident, which runs the image's entrypoint for each refresh. */
const SMALL_SIDECAR_ARGV = [
  '/app/resident',
  '--',
  '/nodejs/bin/node',
  '--disable-sigusr1',
  '--snapshot-blob',
  '/app/agent.blob',
  '--',
];
/** What the Node sidecar runs, written out: the plain bundle, with the V8 flags that keep it small. */
const SIDECAR_ARGV = [
  '/nodejs/bin/node',
  '--disable-sigusr1',
  '--no-turbofan',
  '--no-maglev',
  '--no-sparkplug',
  '--optimize-for-size',
  '--no-wasm-tier-up',
  '--no-wasm-dynamic-tiering',
  '/app/agent.js',
];
const DOWNWARD_ENV = [
  { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
  { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
  { name: 'POD_UID', valueFrom: { fieldRef: { fieldPath: 'metadata.uid' } } },
];

describe('exact patches', () => {
  it('init+sidecar on a cluster with native sidecars: one agent, first in initContainers, gated by /readyz', () => {
    // No securityContext: the image's USER decides the app's uid, so the files are shared by group.
    const result = admit(basicPod({ 'secret-agent.io/secret-db-password': 'aws:prod/db#password' }), {
      AGENT_AWS_REGION: 'eu-west-1',
    });
    assert.equal(result.outcome, 'injected');
    assert.equal(result.review.response.patchType, 'JSONPatch');
    const warning =
      'secret-agent: container "app" sets no runAsUser (the image’s USER decides, which the webhook cannot see): the files are shared through group 65532 (which the webhook added to the pod’s supplementalGroups), mode 0440. To make them readable by one user alone (0400), run every container that mounts them as one non-root uid (securityContext.runAsUser).';
    assert.deepEqual(result.review.response.warnings, [warning]);
    assert.deepEqual(decodePatch(result.review.response), [
      {
        op: 'add',
        path: '/spec/volumes',
        value: [{ name: 'secret-agent-secrets', emptyDir: { medium: 'Memory', sizeLimit: '8Mi' } }],
      },
      {
        op: 'add',
        path: '/spec/containers/0/volumeMounts',
        value: [{ name: 'secret-agent-secrets', mountPath: '/etc/secrets', readOnly: true }],
      },
      { op: 'add', path: '/spec/containers/0/env', value: [{ name: 'SECRETS_DIR', value: '/etc/secrets' }] },
      {
        op: 'add',
        path: '/spec/initContainers',
        value: [
          {
            name: 'secret-agent',
            image: AGENT_IMAGE,
            imagePullPolicy: 'IfNotPresent',
            env: [
              { name: 'AGENT_MODE', value: 'sidecar' },
              { name: 'SECRETS_DIR', value: '/secret-agent/secrets' },
              // For the resident: the cluster's AGENT_RUN_DEADLINE (2m), over INIT_DEADLINE + 15 s.
              { name: 'AGENT_RUN_DEADLINE', value: '2m' },
              { name: 'FILE_MODE', value: '0440' },
              { name: 'SECRET_0_REF', value: 'aws:prod/db#password' },
              { name: 'SECRET_0_FILENAME', value: 'db-password' },
              { name: 'AWS_REGION', value: 'eu-west-1' },
              ...SDK_CONFIG_ENV,
              // What each run gets from the resident: the heap cap, as an init container's.
              NODE_OPTIONS_ENV,
              ...DOWNWARD_ENV,
            ],
            volumeMounts: [{ name: 'secret-agent-secrets', mountPath: '/secret-agent/secrets' }],
            // Between refreshes only the resident stays (4Mi); a run peaks as an init run, within the limit.
            resources: SMALL_RESOURCES,
            securityContext: { ...AGENT_SECURITY, runAsGroup: 65532 },
            // The small sidecar (the default): the resident, which runs the image's entrypoint, the
            // start-up snapshot, for each refresh.
            command: SMALL_SIDECAR_ARGV,
            restartPolicy: 'Always',
            // Holds the app until /readyz answers 200, for INIT_DEADLINE (60 s) + 15 s at most: the
            // 75 s (failureThreshold × periodSeconds) the startupProbe it replaced allowed.
            lifecycle: {
              postStart: {
                exec: {
                  command: [
                    '/nodejs/bin/node',
                    '--disable-sigusr1',
                    '/app/wait-ready.cjs',
                    '--url=http://127.0.0.1:8099/readyz',
                    '--deadline=75s',
                  ],
                },
              },
            },
          },
        ],
      },
      { op: 'add', path: '/spec/securityContext', value: { supplementalGroups: [65532] } },
      { op: 'add', path: '/metadata/annotations/secret-agent.io~1status', value: 'injected' },
      { op: 'add', path: '/metadata/annotations/secret-agent.io~1warnings', value: warning },
    ]);
  });

  it('sidecar-process: node, and a cluster whose AGENT_SIDECAR_PROCESS is node: the Node sidecar, as before the small one', () => {
    const annotations = { 'secret-agent.io/secret-db-password': 'aws:prod/db#password' };
    const asked = admit(basicPod({ ...annotations, 'secret-agent.io/sidecar-process': 'node' }), {
      AGENT_AWS_REGION: 'eu-west-1',
    });
    const clusterNode = admit(basicPod(annotations), {
      AGENT_AWS_REGION: 'eu-west-1',
      AGENT_SIDECAR_PROCESS: 'node',
    });
    assert.equal(asked.outcome, 'injected');
    const patch = decodePatch(asked.review.response);
    // The same patch either way: the annotation is the pod's, never part of what is added.
    assert.deepEqual(decodePatch(clusterNode.review.response), patch);
    assert.deepEqual(asked.review.response.warnings, clusterNode.review.response.warnings);
    const agent = patch.find((op) => op.path === '/spec/initContainers');
    assert.deepEqual(agent?.value, [
      {
        name: 'secret-agent',
        image: AGENT_IMAGE,
        imagePullPolicy: 'IfNotPresent',
        env: [
          { name: 'AGENT_MODE', value: 'sidecar' },
          { name: 'SECRETS_DIR', value: '/secret-agent/secrets' },
          { name: 'FILE_MODE', value: '0440' },
          { name: 'SECRET_0_REF', value: 'aws:prod/db#password' },
          { name: 'SECRET_0_FILENAME', value: 'db-password' },
          { name: 'AWS_REGION', value: 'eu-west-1' },
          ...SDK_CONFIG_ENV,
          NODE_OPTIONS_ENV,
          ...DOWNWARD_ENV,
        ],
        volumeMounts: [{ name: 'secret-agent-secrets', mountPath: '/secret-agent/secrets' }],
        resources: RESOURCES,
        securityContext: { ...AGENT_SECURITY, runAsGroup: 65532 },
        // A long-running agent runs the plain bundle, not the image's start-up snapshot, and V8 set for memory.
        command: SIDECAR_ARGV,
        restartPolicy: 'Always',
        lifecycle: {
          postStart: {
            exec: {
              command: [
                '/nodejs/bin/node',
                '--disable-sigusr1',
                '/app/wait-ready.cjs',
                '--url=http://127.0.0.1:8099/readyz',
                '--deadline=75s',
              ],
            },
          },
        },
      },
    ]);
  });

  it('init+sidecar without native sidecars, into a pod with init containers, volumes, env and a pod runAsUser', () => {
    const pod = basicPod(
      {
        'secret-agent.io/secret-api': 'vault:secret/data/app#token',
        'secret-agent.io/file-mode-api': '0440',
        'secret-agent.io/refresh-interval': '1m',
        'secret-agent.io/containers': 'app,migrate',
        'secret-agent.io/aws-region': 'eu-west-1',
      },
      {
        securityContext: { runAsUser: 1000, runAsGroup: 3000 },
        initContainers: [{ name: 'migrate', image: 'migrate:1', env: [{ name: 'A', value: '1' }] }],
        containers: [
          { name: 'app', image: 'app:1', volumeMounts: [{ name: 'data', mountPath: '/data' }] },
          { name: 'proxy', image: 'envoy:1' },
        ],
        volumes: [{ name: 'data', emptyDir: {} }],
      },
    );
    const result = admit(pod, {
      NATIVE_SIDECARS: 'false',
      AGENT_VAULT_ADDR: 'https://vault.example:8200',
      AGENT_VAULT_ROLE: 'apps',
    });
    assert.equal(result.outcome, 'injected');
    const security = { ...AGENT_SECURITY, runAsUser: 1000, runAsGroup: 3000 };
    const agentEnv = (mode: string) => [
      { name: 'AGENT_MODE', value: mode },
      { name: 'SECRETS_DIR', value: '/secret-agent/secrets' },
      // The classic sidecar is small (a 1m interval is at the floor); the init container has no resident.
      ...(mode === 'sidecar' ? [{ name: 'AGENT_RUN_DEADLINE', value: '2m' }] : []),
      { name: 'REFRESH_INTERVAL', value: '1m' },
      { name: 'SECRET_0_REF', value: 'vault:secret/data/app#token' },
      { name: 'SECRET_0_FILENAME', value: 'api' },
      { name: 'SECRET_0_MODE', value: '0440' },
      { name: 'AWS_REGION', value: 'eu-west-1' },
      { name: 'VAULT_ADDR', value: 'https://vault.example:8200' },
      { name: 'VAULT_ROLE', value: 'apps' },
      ...SDK_CONFIG_ENV,
      NODE_OPTIONS_ENV,
      ...DOWNWARD_ENV,
    ];
    const common = {
      image: AGENT_IMAGE,
      imagePullPolicy: 'IfNotPresent',
      volumeMounts: [{ name: 'secret-agent-secrets', mountPath: '/secret-agent/secrets' }],
      resources: RESOURCES,
      securityContext: security,
    };
    assert.deepEqual(decodePatch(result.review.response), [
      {
        op: 'add',
        path: '/spec/volumes/-',
        value: { name: 'secret-agent-secrets', emptyDir: { medium: 'Memory', sizeLimit: '8Mi' } },
      },
      {
        op: 'add',
        path: '/spec/initContainers/0/volumeMounts',
        value: [{ name: 'secret-agent-secrets', mountPath: '/etc/secrets', readOnly: true }],
      },
      {
        op: 'add',
        path: '/spec/initContainers/0/env/-',
        value: { name: 'SECRETS_DIR', value: '/etc/secrets' },
      },
      {
        op: 'add',
        path: '/spec/containers/0/volumeMounts/-',
        value: { name: 'secret-agent-secrets', mountPath: '/etc/secrets', readOnly: true },
      },
      { op: 'add', path: '/spec/containers/0/env', value: [{ name: 'SECRETS_DIR', value: '/etc/secrets' }] },
      {
        op: 'add',
        path: '/spec/initContainers/0',
        value: { name: 'secret-agent-init', ...common, env: agentEnv('init') },
      },
      {
        op: 'add',
        path: '/spec/containers/-',
        value: {
          name: 'secret-agent',
          ...common,
          resources: SMALL_RESOURCES,
          command: SMALL_SIDECAR_ARGV,
          env: agentEnv('sidecar'),
        },
      },
      { op: 'add', path: '/metadata/annotations/secret-agent.io~1status', value: 'injected' },
    ]);
  });
});

/** Pod shapes the patch must apply to. */
function podShapes(): { name: string; pod: PodDoc }[] {
  const secrets = {
    'secret-agent.io/secret-db': 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:prod/db-AbCdEf',
    'secret-agent.io/secret-config': 'projects/my-project/secrets/config/versions/3',
    'secret-agent.io/path-config': 'app/config.json',
    'secret-agent.io/secret-env': 'vault:secret/data/app',
    'secret-agent.io/format-env': 'dotenv',
  };
  const base = () => basicPod(secrets);
  const shapes: { name: string; pod: PodDoc }[] = [];
  shapes.push({ name: 'minimal', pod: base() });
  const noAnnotationsButOurs = base();
  shapes.push({ name: 'only our annotations', pod: noAnnotationsButOurs });
  shapes.push({
    name: 'existing init containers',
    pod: { ...base(), spec: { ...base().spec, initContainers: [{ name: 'setup', image: 'busybox:1.36' }] } },
  });
  shapes.push({
    name: 'volumes of its own, one mounted',
    pod: {
      ...base(),
      spec: {
        ...base().spec,
        volumes: [
          { name: 'cache', emptyDir: {} },
          { name: 'secrets', emptyDir: {} },
        ],
        containers: [{ name: 'app', image: 'app:1', volumeMounts: [{ name: 'cache', mountPath: '/cache' }] }],
      },
    },
  });
  shapes.push({
    name: 'shareProcessNamespace true with signal rotation',
    pod: {
      ...basicPod({
        ...secrets,
        'secret-agent.io/rotation-signal': 'SIGHUP',
        'secret-agent.io/rotation-signal-process': 'nginx',
      }),
      spec: { containers: [{ name: 'app', image: 'nginx:1.27' }], shareProcessNamespace: true },
    },
  });
  shapes.push({
    name: 'shareProcessNamespace unset with signal rotation',
    pod: basicPod({
      ...secrets,
      'secret-agent.io/rotation-signal': 'HUP',
      'secret-agent.io/rotation-signal-pidfile': '/run/app.pid',
    }),
  });
  shapes.push({
    name: 'several containers with env and ports, one selected',
    pod: {
      ...basicPod({
        ...secrets,
        'secret-agent.io/containers': 'web',
        'secret-agent.io/mount-path': '/var/run/secrets/app',
      }),
      spec: {
        containers: [
          { name: 'web', image: 'web:1', env: [{ name: 'X', value: 'y' }], ports: [{ containerPort: 8080 }] },
          { name: 'worker', image: 'worker:1', env: [{ name: 'SECRETS_DIR', value: '/elsewhere' }] },
        ],
      },
    },
  });
  shapes.push({
    name: 'no metadata annotations except opt-in, split at top level, restart on change',
    pod: basicPod({
      'secret-agent.io/secret-keys': 'aws:app/keys',
      'secret-agent.io/format-keys': 'split',
      'secret-agent.io/path-keys': '.',
      'secret-agent.io/restart-on-change': 'true',
      'secret-agent.io/agent-http-addr': '0.0.0.0:9100',
      'secret-agent.io/agent-memory-limit': '96Mi',
      'secret-agent.io/agent-run-as-user': '2000',
    }),
  });
  shapes.push({
    name: 'pod runs as root: agent still non-root',
    pod: { ...base(), spec: { ...base().spec, securityContext: { runAsUser: 0 } } },
  });
  shapes.push({
    name: 'no namespace in the object (taken from the request)',
    pod: { ...base(), metadata: { ...base().metadata, namespace: undefined, name: undefined } },
  });
  return shapes;
}

describe('the patch applies to many pod shapes, in every mode', () => {
  for (const native of ['true', 'false']) {
    for (const mode of ['init', 'sidecar', 'init+sidecar']) {
      for (const { name, pod: shape } of podShapes()) {
        it(`${name} (mode ${mode}, native sidecars ${native})`, () => {
          const pod: PodDoc = structuredClone(shape);
          pod.metadata.annotations!['secret-agent.io/mode'] = mode;
          const result = admit(pod, { ...CLUSTER, NATIVE_SIDECARS: native });
          assert.equal(result.outcome, 'injected', JSON.stringify(result.review.response.status));
          const mutated = mutate(pod, decodePatch(result.review.response));
          validatePod(mutated);
          assert.equal(mutated.metadata.annotations!['secret-agent.io/status'], 'injected');

          const inits = mutated.spec.initContainers ?? [];
          const agents = [...inits, ...mutated.spec.containers].filter((c) =>
            String(c.name).startsWith('secret-agent'),
          );
          const expected =
            mode === 'init'
              ? [['secret-agent-init', 'init', 'init']]
              : native === 'true'
                ? [['secret-agent', 'init', 'sidecar']]
                : mode === 'sidecar'
                  ? [['secret-agent', 'app', 'sidecar']]
                  : [
                      ['secret-agent-init', 'init', 'init'],
                      ['secret-agent', 'app', 'sidecar'],
                    ];
          assert.deepEqual(
            agents.map((c) => [
              c.name,
              inits.includes(c) ? 'init' : 'app',
              containerEnv(c, mutated).AGENT_MODE,
            ]),
            expected,
          );
          // Whatever runs in initContainers runs first, before any init container of the pod's own.
          if (expected[0]![1] === 'init') assert.equal(inits[0]!.name, expected[0]![0]);
          const nativeSidecar = agents.find((c) => c.restartPolicy === 'Always');
          assert.equal(nativeSidecar !== undefined, native === 'true' && mode !== 'init');
          if (nativeSidecar) assert.equal(inits.indexOf(nativeSidecar), 0);
          assert.equal(
            (nativeSidecar?.lifecycle as { postStart?: unknown } | undefined)?.postStart !== undefined,
            native === 'true' && mode === 'init+sidecar',
            'only the init+sidecar native sidecar holds the app until /readyz answers',
          );
          // A startupProbe beside the hook would hold the app until its next period all the same.
          assert.equal(nativeSidecar?.startupProbe, undefined);

          const volumes = mutated.spec.volumes as {
            name: string;
            emptyDir?: { medium?: string; sizeLimit?: string };
          }[];
          const volume = volumes.find((v) => v.emptyDir?.medium === 'Memory')!;
          assert.ok(volume.emptyDir!.sizeLimit);
          assert.equal(new Set(volumes.map((v) => v.name)).size, volumes.length, 'volume names stay unique');

          for (const agent of agents) {
            const env = containerEnv(agent, mutated);
            // Round trip: the agent's own parser accepts exactly what we rendered.
            const config = parseAgentConfig(env);
            assert.equal(config.mode, env.AGENT_MODE);
            const mount = (
              agent.volumeMounts as { name: string; mountPath: string; readOnly?: boolean }[]
            )[0]!;
            assert.equal(mount.name, volume.name);
            assert.equal(mount.readOnly, undefined);
            assert.equal(config.secretsDir, mount.mountPath);
            const annotations = pod.metadata.annotations!;
            const files = Object.keys(annotations)
              .filter((k) => k.startsWith('secret-agent.io/secret-'))
              .map((k) => k.slice('secret-agent.io/secret-'.length))
              .sort();
            assert.deepEqual(
              config.secrets.map((s) => [s.ref.text, s.filename, s.format]),
              files.map((f) => {
                const path = annotations[`secret-agent.io/path-${f}`];
                return [
                  annotations[`secret-agent.io/secret-${f}`],
                  path === '.' ? '' : (path ?? f),
                  annotations[`secret-agent.io/format-${f}`] ?? 'raw',
                ];
              }),
            );
            assert.deepEqual(config.pod, {
              name: mutated.metadata.name ?? 'generated-name',
              namespace: mutated.metadata.namespace ?? 'apps',
              uid: '6d1f0c5e-27a1-4a1e-9b55-0d6e8c0f2a11',
            });
            const sc = agent.securityContext as Record<string, unknown>;
            assert.equal(sc.runAsNonRoot, true);
            assert.equal(sc.readOnlyRootFilesystem, true);
            assert.equal(sc.allowPrivilegeEscalation, false);
            assert.ok((sc.runAsUser as number) > 0);
            assert.ok(!JSON.stringify(agent).includes('"value":"' + 'CANARY'));
          }

          const selected = annotationsSelect(pod);
          for (const c of [...inits, ...mutated.spec.containers]) {
            if (String(c.name).startsWith('secret-agent')) continue;
            const mounts = (c.volumeMounts ?? []) as {
              name: string;
              mountPath: string;
              readOnly?: boolean;
            }[];
            const ours = mounts.find((m) => m.name === volume.name);
            if (!selected(String(c.name))) {
              assert.equal(ours, undefined, `${String(c.name)} was not selected`);
              continue;
            }
            assert.equal(ours?.readOnly, true);
            assert.ok(containerEnv(c, mutated).SECRETS_DIR, `${String(c.name)} knows the secrets directory`);
          }
          if (pod.metadata.annotations!['secret-agent.io/rotation-signal'])
            assert.equal(mutated.spec.shareProcessNamespace, true);
          else assert.equal(mutated.spec.shareProcessNamespace, pod.spec.shareProcessNamespace);

          // Reinvocation (reinvocationPolicy IfNeeded) and re-admission leave an injected pod alone.
          const again = admit(mutated, { ...CLUSTER, NATIVE_SIDECARS: native });
          assert.equal(again.outcome, 'skipped');
          assert.equal(again.review.response.patch, undefined);
        });
      }
    }
  }
});

function annotationsSelect(pod: PodDoc): (name: string) => boolean {
  const list = pod.metadata.annotations!['secret-agent.io/containers'];
  return list === undefined ? () => true : (name) => list.split(',').includes(name);
}

describe('runAsUser', () => {
  it('is the pod’s runAsUser when set (so 0400 files are readable by the app), else 65532, never root', () => {
    const user = (spec: Partial<PodDoc['spec']>, annotations: Record<string, string> = {}) => {
      const pod = basicPod(
        { 'secret-agent.io/secret-a': 'aws:a', 'secret-agent.io/mode': 'init', ...annotations },
        spec,
      );
      const mutated = mutate(pod, decodePatch(admit(pod, CLUSTER).review.response));
      return (mutated.spec.initContainers![0]!.securityContext as { runAsUser: number }).runAsUser;
    };
    assert.equal(user({}), 65532);
    assert.equal(user({ securityContext: { runAsUser: 1001 } }), 1001);
    assert.equal(user({ securityContext: { runAsUser: 0 } }), 65532);
    assert.equal(
      user({ securityContext: { runAsUser: 1001 } }, { 'secret-agent.io/agent-run-as-user': '4242' }),
      4242,
    );
  });
});

describe('skips', () => {
  const secret = { 'secret-agent.io/secret-a': 'aws:a' };
  const cases: [string, unknown, Record<string, string>, Parameters<typeof review>[1], string][] = [
    ['own namespace', basicPod(secret), {}, { namespace: 'secret-agent' }, 'own-namespace'],
    [
      'own namespace from config',
      basicPod(secret),
      { WEBHOOK_NAMESPACE: 'platform' },
      { namespace: 'platform' },
      'own-namespace',
    ],
    ['not opted in', { ...basicPod(secret), metadata: { annotations: secret } }, {}, {}, 'not-opted-in'],
    ['opted out', basicPod({ ...secret, 'secret-agent.io/inject': 'false' }), {}, {}, 'not-opted-in'],
    ['UPDATE', basicPod(secret), {}, { operation: 'UPDATE' }, 'not-a-pod-create'],
    ['not a pod', { metadata: {}, spec: {} }, {}, { kind: 'Deployment' }, 'not-a-pod-create'],
    [
      'already injected',
      basicPod({ ...secret, 'secret-agent.io/status': 'injected' }),
      {},
      {},
      'already-injected',
    ],
  ];
  for (const [name, pod, env, options, reason] of cases) {
    it(name, () => {
      const result = admit(pod, env, options);
      assert.equal(result.outcome, 'skipped');
      assert.equal(result.outcome === 'skipped' && result.reason, reason);
      assert.equal(result.review.response.allowed, true);
      assert.equal(result.review.response.patch, undefined);
    });
  }
});

describe('denials name the annotation and the fix', () => {
  const ok = { 'secret-agent.io/secret-a': 'aws:a' };
  const cases: [string, Record<string, string>, Partial<PodDoc['spec']>, string, RegExp][] = [
    [
      'unknown key under our prefix',
      { ...ok, 'secret-agent.io/refresh-intervall': '1m' },
      {},
      'secret-agent.io/refresh-intervall',
      /did you mean secret-agent\.io\/refresh-interval\?/,
    ],
    [
      'bad reference',
      { 'secret-agent.io/secret-a': 'aws-sm:a' },
      {},
      'secret-agent.io/secret-a',
      /use one of: arn:aws:secretsmanager/,
    ],
    [
      'GCP regional secret in a location that is no region',
      { 'secret-agent.io/secret-a': 'projects/my-project/locations/us-east-1/secrets/db' },
      {},
      'secret-agent.io/secret-a',
      /the location \(a value of 9 characters\) is not a GCP region: .*Fix: use the region the regional secret was created in, e\.g\. us-central1/,
    ],
    [
      'GCP global secret written with locations/global',
      { 'secret-agent.io/secret-a': 'projects/my-project/locations/global/secrets/db' },
      {},
      'secret-agent.io/secret-a',
      /Fix: write a global secret as projects\/PROJECT\/secrets\/SECRET/,
    ],
    [
      'bad mode',
      { ...ok, 'secret-agent.io/mode': 'both' },
      {},
      'secret-agent.io/mode',
      /init, sidecar, init\+sidecar/,
    ],
    [
      'bad interval',
      { ...ok, 'secret-agent.io/refresh-interval': '5 minutes' },
      {},
      'secret-agent.io/refresh-interval',
      /30s, 1m30s/,
    ],
    [
      'interval out of range',
      { ...ok, 'secret-agent.io/refresh-interval-a': '100ms' },
      {},
      'secret-agent.io/refresh-interval-a',
      /between 1s/,
    ],
    [
      'escaping path',
      { ...ok, 'secret-agent.io/path-a': '../etc/passwd' },
      {},
      'secret-agent.io/path-a',
      /without \. or \.\./,
    ],
    [
      'absolute path',
      { ...ok, 'secret-agent.io/path-a': '/etc/passwd' },
      {},
      'secret-agent.io/path-a',
      /relative to the secrets directory/,
    ],
    [
      'duplicate file',
      { ...ok, 'secret-agent.io/secret-b': 'aws:b', 'secret-agent.io/path-b': 'a' },
      {},
      'secret-agent.io/path-b',
      /own path/,
    ],
    [
      'file under another file',
      { ...ok, 'secret-agent.io/secret-b': 'aws:b', 'secret-agent.io/path-b': 'a/x' },
      {},
      'secret-agent.io/path-b',
      /as a directory/,
    ],
    [
      'setting for a file with no reference',
      { ...ok, 'secret-agent.io/format-c': 'raw' },
      {},
      'secret-agent.io/format-c',
      /secret-agent\.io\/secret-c/,
    ],
    [
      'top level outside split',
      { ...ok, 'secret-agent.io/path-a': '.' },
      {},
      'secret-agent.io/path-a',
      /only for format split/,
    ],
    [
      'bad file mode',
      { ...ok, 'secret-agent.io/file-mode-a': '0999' },
      {},
      'secret-agent.io/file-mode-a',
      /octal/,
    ],
    ['no secrets', {}, {}, 'secret-agent.io/inject', /secret-agent\.io\/secret-<file>/],
    [
      'inject not a boolean',
      { ...ok, 'secret-agent.io/inject': 'yes' },
      {},
      'secret-agent.io/inject',
      /"true"/,
    ],
    [
      'unknown container',
      { ...ok, 'secret-agent.io/containers': 'app,sidecar' },
      {},
      'secret-agent.io/containers',
      /use names from: app/,
    ],
    [
      'mount path taken',
      { ...ok, 'secret-agent.io/mount-path': '/srv' },
      { containers: [{ name: 'app', image: 'a', volumeMounts: [{ name: 'c', mountPath: '/srv/config' }] }] },
      'secret-agent.io/mount-path',
      /another mount path/,
    ],
    [
      'agent port taken',
      ok,
      { containers: [{ name: 'app', image: 'a', ports: [{ containerPort: 8099 }] }] },
      'secret-agent.io/agent-http-addr',
      /127\.0\.0\.1:8199/,
    ],
    [
      'agent port name taken',
      ok,
      { containers: [{ name: 'app', image: 'a', ports: [{ name: 'secret-agent', containerPort: 9000 }] }] },
      'secret-agent.io/inject',
      /"app" declares a port named "secret-agent".*rename that port/,
    ],
    [
      'agent bound to an address the postStart hook cannot reach over the loopback',
      { ...ok, 'secret-agent.io/agent-http-addr': '10.1.2.3:8099' },
      {},
      'secret-agent.io/agent-http-addr',
      /binds "10\.1\.2\.3".*bind the loopback \(127\.0\.0\.1:8099, the default\) or, for Prometheus, every address/,
    ],
    [
      'signal without shared process namespace',
      {
        ...ok,
        'secret-agent.io/rotation-signal': 'SIGHUP',
        'secret-agent.io/rotation-signal-process': 'app',
      },
      { shareProcessNamespace: false },
      'secret-agent.io/rotation-signal',
      /rotation-http-url/,
    ],
    [
      'signal with nothing to signal (checked by the agent’s parser)',
      { ...ok, 'secret-agent.io/rotation-signal': 'SIGHUP' },
      {},
      'secret-agent.io/rotation-signal',
      /ROTATION_SIGNAL_PROCESS/,
    ],
    [
      'root agent',
      { ...ok, 'secret-agent.io/agent-run-as-user': '0' },
      {},
      'secret-agent.io/agent-run-as-user',
      /never runs as root/,
    ],
    [
      'a Secret name with an empty label (the rule the API server applies)',
      { ...ok, 'secret-agent.io/vault-client-cert-secret': 'web..client' },
      {},
      'secret-agent.io/vault-client-cert-secret',
      /web-vault-client/,
    ],
    [
      'bad quantity',
      { ...ok, 'secret-agent.io/agent-memory-limit': 'lots' },
      {},
      'secret-agent.io/agent-memory-limit',
      /64Mi/,
    ],
    [
      'container name taken',
      ok,
      { containers: [{ name: 'secret-agent', image: 'a' }] },
      'secret-agent.io/inject',
      /rename that container/,
    ],
  ];
  for (const [name, annotations, spec, field, fix] of cases) {
    it(name, () => {
      const result = admit(basicPod(annotations, spec), CLUSTER);
      assert.equal(result.outcome, 'denied');
      const r = result.review.response;
      assert.equal(r.allowed, false);
      assert.equal(r.patch, undefined);
      assert.equal(r.status?.code, 400);
      assert.ok(r.status!.message.includes(`${field}:`), r.status!.message);
      assert.match(r.status!.message, fix);
      assert.match(r.status!.message, /Fix: /);
    });
  }

  it('collects every problem in one response', () => {
    const result = admit(
      basicPod({
        'secret-agent.io/secret-a': 'nope',
        'secret-agent.io/mode': 'x',
        'secret-agent.io/bogus': '1',
      }),
    );
    const message = result.review.response.status!.message;
    assert.match(message, /3 problems/);
    for (const f of ['secret-agent.io/secret-a:', 'secret-agent.io/mode:', 'secret-agent.io/bogus:'])
      assert.ok(message.includes(f));
  });
});

describe('canaries', () => {
  it('never appear in a response, whether the pod is injected or denied', () => {
    const value = canary('pasted-instead-of-a-reference');
    const db = { 'secret-agent.io/secret-db': 'aws:db' };
    // A canary goes wherever a value could be: annotations whose declared echo hides it, unknown
    // annotations, the pod's env and other annotations. (Names, enums, paths… are shown by design.)
    const pods = [
      basicPod({ 'secret-agent.io/secret-db': value }),
      basicPod({ 'secret-agent.io/secret-db': ` ${value}` }),
      basicPod({ 'secret-agent.io/secret-db': `aws:${value}?stage=${value}` }),
      basicPod({ 'secret-agent.io/secret-db': `projects/${value}/secrets/x` }),
      basicPod({ 'secret-agent.io/secret-db': `vault:a/../${value}` }),
      basicPod({ ...db, 'secret-agent.io/rotation-command': value, 'secret-agent.io/mode': 'x' }),
      basicPod({ ...db, 'secret-agent.io/rotation-http-url': value }),
      basicPod({
        ...db,
        'secret-agent.io/rotation-http-url': `get https://u:${value}@h/${value}?t=${value}#${value}`,
      }),
      basicPod({ ...db, 'secret-agent.io/rotation-http-url': `arn:aws:${value}` }),
      basicPod({ ...db, 'secret-agent.io/status': value, 'secret-agent.io/mode': 'x' }),
      basicPod({ ...db, 'secret-agent.io/restarted-for': value, 'secret-agent.io/mode': 'x' }),
      basicPod({ ...db, 'secret-agent.io/token': value }),
      basicPod({ ...db, 'secret-agent.io/secret-a b': value }),
      basicPod({ ...db, 'secret-agent.io/format-c': value }),
      // Values the app already has: env, other annotations, labels. The patch never copies them.
      basicPod(
        { ...db, 'example.com/config': value },
        { containers: [{ name: 'app', image: 'a', env: [{ name: 'PASSWORD', value }] }] },
      ),
    ];
    let denied = 0;
    for (const pod of pods) {
      const result = admit(pod, CLUSTER);
      if (result.outcome === 'denied') denied++;
      const text = JSON.stringify(result.review);
      assertNoCanary(text, 'an AdmissionReview response');
      assertNoCanary(JSON.stringify(result.log), 'the decision log');
      assertNoCanary(JSON.stringify(decodePatch(result.review.response)), 'a JSON patch');
    }
    assert.equal(
      denied,
      pods.length - 1,
      'the pasted values were rejected, so their error messages were checked',
    );
  });
});

describe('garbage', () => {
  const bodies: [string, string][] = [
    ['not JSON', '{"apiVersion":'],
    ['JSON null', 'null'],
    ['an array', '[]'],
    ['another kind', JSON.stringify({ apiVersion: 'v1', kind: 'Pod' })],
    ['no request', JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview' })],
    [
      'no uid',
      JSON.stringify({
        ...review(basicPod({})),
        request: { kind: { group: '', version: 'v1', kind: 'Pod' }, operation: 'CREATE' },
      }),
    ],
    ['object not an object', JSON.stringify(review('pod'))],
    ['containers not a list', JSON.stringify(review({ metadata: {}, spec: { containers: {} } }))],
    [
      'annotations not strings',
      JSON.stringify(review({ metadata: { annotations: { a: 1 } }, spec: { containers: [{ name: 'a' }] } })),
    ],
    [
      'env not a list',
      JSON.stringify(review({ metadata: {}, spec: { containers: [{ name: 'a', env: 'x' }] } })),
    ],
  ];
  for (const [name, body] of bodies) {
    it(`${name}: a BadReviewError, not a crash`, () => {
      assert.throws(() => decodeAdmissionReview(body), BadReviewError);
    });
  }
});

describe('agent heap cap', () => {
  it('follows the pod’s own memory limit and volume size: what is left once the volume and the reserve are taken out', () => {
    const env = (annotations: Record<string, string>) => {
      const pod = basicPod({ 'secret-agent.io/secret-db': 'aws:prod/db#password', ...annotations });
      const result = admit(pod, CLUSTER);
      assert.equal(result.outcome, 'injected', JSON.stringify(result.review.response.status));
      const mutated = mutate(pod, decodePatch(result.review.response));
      validatePod(mutated);
      const agent = mutated.spec.initContainers!.find((c) => c.name === 'secret-agent')!;
      return (agent.env as { name: string; value?: string }[]).find((e) => e.name === 'NODE_OPTIONS')!.value;
    };
    assert.equal(env({}), nodeOptions('128Mi', '8Mi'));
    assert.equal(
      env({ 'secret-agent.io/agent-memory-limit': '256Mi', 'secret-agent.io/volume-size-limit': '16Mi' }),
      '--max-old-space-size=164 --max-semi-space-size=1',
    );
    assert.equal(
      env({ 'secret-agent.io/agent-memory-limit': '64Mi' }),
      '--max-old-space-size=32 --max-semi-space-size=1',
      'never below the floor',
    );
  });
});

describe('which start-up snapshot the init container runs', () => {
  const initContainer = (annotations: Record<string, string>, env: Record<string, string> = {}) => {
    const result = admit(basicPod(annotations), { ...CLUSTER, ...env });
    assert.equal(result.outcome, 'injected', JSON.stringify(result.review.response.status));
    const pod = mutate(basicPod(annotations), decodePatch(result.review.response));
    validatePod(pod);
    return pod.spec.initContainers!.find((c) => c.name === 'secret-agent-init' || c.name === 'secret-agent')!;
  };

  it('the image’s entrypoint (the default snapshot) for AWS and Vault pods', () => {
    const c = initContainer(
      {
        'secret-agent.io/mode': 'init',
        'secret-agent.io/secret-db': 'aws:prod/db#password',
        'secret-agent.io/secret-token': 'vault:secret/data/app#token',
      },
      {},
    );
    assert.equal(c.command, undefined);
  });

  for (const mode of ['init', 'init+sidecar'])
    it(`GCP_INIT_COMMAND (the snapshot that holds GCP) when any reference is GCP's, mode ${mode} without native sidecars`, () => {
      const c = initContainer(
        {
          'secret-agent.io/mode': mode,
          'secret-agent.io/secret-db': 'aws:prod/db#password',
          'secret-agent.io/secret-key': 'projects/my-project/secrets/api-key',
        },
        { NATIVE_SIDECARS: 'false' },
      );
      assert.equal(c.name, 'secret-agent-init');
      assert.deepEqual(c.command, [...GCP_INIT_COMMAND]);
    });

  it('a Node sidecar runs the plain bundle, GCP or not: it stays, so its memory counts', () => {
    const c = initContainer({
      'secret-agent.io/secret-key': 'projects/my-project/secrets/api-key',
      'secret-agent.io/sidecar-process': 'node',
    });
    assert.deepEqual(c.command, [...SIDECAR_COMMAND]);
  });

  it('a small sidecar’s runs start from a snapshot as an init run does: GCP’s where the pod reads GCP', () => {
    const gcp = initContainer({ 'secret-agent.io/secret-key': 'projects/my-project/secrets/api-key' });
    assert.deepEqual(gcp.command, ['/app/resident', '--', ...GCP_INIT_COMMAND]);
    assert.deepEqual(gcp.command, [...smallSidecarCommand(true)]);
    const aws = initContainer({ 'secret-agent.io/secret-db': 'aws:prod/db#password' });
    assert.deepEqual(aws.command, ['/app/resident', '--', ...AGENT_ENTRYPOINT]);
  });
});

describe('the native sidecar holds the app with a postStart hook, not a startupProbe', () => {
  const hook = (annotations: Record<string, string>, spec: Partial<PodDoc['spec']> = {}) => {
    const pod = basicPod({ 'secret-agent.io/secret-db': 'aws:prod/db#password', ...annotations }, spec);
    const result = admit(pod, CLUSTER);
    assert.equal(result.outcome, 'injected', JSON.stringify(result.review.response.status));
    const patched = mutate(pod, decodePatch(result.review.response));
    validatePod(patched);
    const agent = patched.spec.initContainers!.find((c) => c.name === 'secret-agent')!;
    assert.equal(agent.startupProbe, undefined);
    return (agent.lifecycle as { postStart: { exec: { command: string[] } } }).postStart.exec.command;
  };

  it('asks the port agent-http-addr names, over the loopback of the family it binds', () => {
    assert.deepEqual(
      hook({ 'secret-agent.io/agent-http-addr': '0.0.0.0:8199' }).filter((a) => a.startsWith('--url=')),
      ['--url=http://127.0.0.1:8199/readyz'],
    );
    assert.deepEqual(
      hook({ 'secret-agent.io/agent-http-addr': ':8299' }).filter((a) => a.startsWith('--url=')),
      ['--url=http://127.0.0.1:8299/readyz'],
    );
    assert.deepEqual(
      hook({ 'secret-agent.io/agent-http-addr': '[::]:8399' }).filter((a) => a.startsWith('--url=')),
      ['--url=http://[::1]:8399/readyz'],
    );
  });

  it('gives up INIT_DEADLINE + 15 s after the start, as the startupProbe did (periodSeconds 1 × failureThreshold)', () => {
    assert.deepEqual(
      hook({}).filter((a) => a.startsWith('--deadline=')),
      ['--deadline=75s'],
    );
    assert.deepEqual(
      hook({ 'secret-agent.io/init-deadline': '2m' }).filter((a) => a.startsWith('--deadline=')),
      ['--deadline=135s'],
    );
    assert.deepEqual(
      hook({ 'secret-agent.io/init-deadline': '1500ms' }).filter((a) => a.startsWith('--deadline=')),
      ['--deadline=17s'],
    );
  });

  it('in a Job’s pod too: the kubelet runs the hook whatever the pod’s restartPolicy', () => {
    assert.deepEqual(hook({}, { restartPolicy: 'Never' }), [
      '/nodejs/bin/node',
      '--disable-sigusr1',
      '/app/wait-ready.cjs',
      '--url=http://127.0.0.1:8099/readyz',
      '--deadline=75s',
    ]);
  });
});

describe('file: references', () => {
  const pod = () =>
    basicPod({ 'secret-agent.io/inject': 'true', 'secret-agent.io/secret-cfg': 'file:/etc/passwd' });

  it('are denied on a cluster, naming the annotation and the fix', () => {
    const result = admit(pod());
    assert.equal(result.outcome, 'denied');
    assert.equal(result.review.response.status?.code, 400);
    assert.match(
      result.review.response.status!.message,
      /secret-agent\.io\/secret-cfg: file: references are turned off/,
    );
    assert.match(result.review.response.status!.message, /ALLOW_FILE_REFERENCES/);
  });

  it('are allowed where the webhook is configured for local runs', () => {
    assert.equal(admit(pod(), { ALLOW_FILE_REFERENCES: 'true' }).outcome, 'injected');
  });
});

describe('exec: references', () => {
  const HELPERS = '{"configMap":{"name":"secret-agent-helpers"}}';
  const ALLOWED = { ALLOW_EXEC_REFERENCES: 'true', EXEC_HELPERS_VOLUME: HELPERS };
  const pod = (annotations: Record<string, string> = {}, spec: Partial<PodDoc['spec']> = {}) =>
    basicPod(
      { 'secret-agent.io/secret-db': 'exec:az-keyvault/prod-vault/db-password', ...annotations },
      spec,
    );
  type Mount = { name: string; mountPath: string; readOnly?: boolean };
  const injected = (p: PodDoc, env: Record<string, string>) => {
    const result = admit(p, env);
    assert.equal(result.outcome, 'injected', result.review.response.status?.message);
    const patched = mutate(p, decodePatch(result.review.response));
    validatePod(patched);
    const all = [...(patched.spec.initContainers ?? []), ...patched.spec.containers];
    return {
      patched,
      agents: all.filter((c) => c.image === AGENT_IMAGE),
      apps: all.filter((c) => c.image !== AGENT_IMAGE),
    };
  };
  const mounts = (c: Record<string, unknown>) => (c.volumeMounts ?? []) as Mount[];

  it('are denied unless the cluster allows them, naming the annotation and the fix', () => {
    const result = admit(pod());
    assert.equal(result.outcome, 'denied');
    const message = result.review.response.status!.message;
    assert.match(message, /secret-agent\.io\/secret-db: exec: references are turned off on this cluster/);
    assert.match(message, /ALLOW_EXEC_REFERENCES and EXEC_HELPERS_VOLUME/);
  });

  for (const native of ['true', 'false'])
    it(`mount the cluster's helpers read-only into every agent container, never the app's (native sidecars ${native})`, () => {
      const { patched, agents, apps } = injected(pod(), { ...ALLOWED, NATIVE_SIDECARS: native });
      assert.deepEqual(
        (patched.spec.volumes as Record<string, unknown>[]).find((v) => v.name === 'secret-agent-helpers'),
        { name: 'secret-agent-helpers', configMap: { name: 'secret-agent-helpers', defaultMode: 0o555 } },
      );
      assert.equal(agents.length, native === 'true' ? 1 : 2);
      for (const agent of agents) {
        assert.deepEqual(
          mounts(agent).filter((m) => m.name === 'secret-agent-helpers'),
          [{ name: 'secret-agent-helpers', mountPath: '/secret-agent/helpers', readOnly: true }],
        );
        // The agent's own parser takes the env it gets; the mount is its default EXEC_HELPERS_DIR.
        const config = parseAgentConfig(containerEnv(agent, patched));
        assert.equal(config.secrets[0]!.ref.provider, 'exec');
      }
      for (const app of apps) assert.ok(!mounts(app).some((m) => m.name === 'secret-agent-helpers'));
    });

  it('an exact patch: the helpers volume follows the secrets volume', () => {
    const result = admit(pod(), ALLOWED);
    const ops = decodePatch(result.review.response);
    assert.deepEqual(ops.slice(0, 2), [
      {
        op: 'add',
        path: '/spec/volumes',
        value: [{ name: 'secret-agent-secrets', emptyDir: { medium: 'Memory', sizeLimit: '8Mi' } }],
      },
      {
        op: 'add',
        path: '/spec/volumes/-',
        value: {
          name: 'secret-agent-helpers',
          configMap: { name: 'secret-agent-helpers', defaultMode: 365 },
        },
      },
    ]);
    const agent = ops.find((o) => o.path === '/spec/initContainers')!.value as Record<string, unknown>[];
    assert.deepEqual(agent[0]!.volumeMounts, [
      { name: 'secret-agent-secrets', mountPath: '/secret-agent/secrets' },
      { name: 'secret-agent-helpers', mountPath: '/secret-agent/helpers', readOnly: true },
    ]);
  });

  it('a claim the admin names: the helpers volume, read-only, in the agent only', () => {
    const { patched, agents } = injected(pod(), {
      ALLOW_EXEC_REFERENCES: 'true',
      EXEC_HELPERS_VOLUME: '{"persistentVolumeClaim":{"claimName":"platform-helpers"}}',
    });
    assert.deepEqual((patched.spec.volumes as Record<string, unknown>[])[1], {
      name: 'secret-agent-helpers',
      persistentVolumeClaim: { claimName: 'platform-helpers', readOnly: true },
    });
    assert.deepEqual(
      mounts(agents[0]!).map((m) => m.name),
      ['secret-agent-secrets', 'secret-agent-helpers'],
    );
  });

  it('a pod whose volume takes a name of the webhook’s is refused, naming the volume and the fix', () => {
    const result = admit(pod({}, { volumes: [{ name: 'secret-agent-helpers', emptyDir: {} }] }), ALLOWED);
    assert.equal(result.outcome, 'denied');
    assert.match(
      result.review.response.status!.message,
      /secret-agent\.io\/inject: the pod’s volume spec\.volumes\[0\] is named "secret-agent-helpers", a name of the webhook’s volumes .*Fix: rename the volume and its mounts/,
    );
  });

  it('pods without an exec: reference get no helpers, even where the cluster allows them', () => {
    const { patched, agents } = injected(basicPod({ 'secret-agent.io/secret-db': 'vault:secret/data/db' }), {
      ...CLUSTER,
      ...ALLOWED,
    });
    assert.ok(!JSON.stringify(patched.spec.volumes).includes('helpers'));
    for (const agent of agents)
      assert.ok(!mounts(agent).some((m) => m.mountPath === '/secret-agent/helpers'));
  });

  it('a mount path at the helpers stays in the app containers: the agent’s secrets and helpers keep their own paths', () => {
    const { agents, apps } = injected(pod({ 'secret-agent.io/mount-path': '/secret-agent' }), ALLOWED);
    for (const agent of agents)
      assert.deepEqual(mounts(agent), [
        { name: 'secret-agent-secrets', mountPath: '/secret-agent/secrets' },
        { name: 'secret-agent-helpers', mountPath: '/secret-agent/helpers', readOnly: true },
      ]);
    for (const app of apps)
      assert.deepEqual(mounts(app), [
        { name: 'secret-agent-secrets', mountPath: '/secret-agent', readOnly: true },
      ]);
  });

  it('a reference that names a path is described by its shape, never quoted', () => {
    const pasted = canary('exec-ref');
    const result = admit(pod({ 'secret-agent.io/secret-db': `exec:${pasted}!/x` }), ALLOWED);
    assert.equal(result.outcome, 'denied');
    assert.match(
      result.review.response.status!.message,
      /secret-agent\.io\/secret-db: the helper name after exec: \(a value of \d+ characters\)/,
    );
    assertNoCanary(JSON.stringify(result.review), 'the admission response');
  });
});

describe('run-to-completion pods (restartPolicy Never or OnFailure, e.g. a Job’s)', () => {
  const job = (annotations: Record<string, string> = {}, spec: Partial<PodDoc['spec']> = {}) =>
    basicPod(
      {
        'secret-agent.io/secret-db': 'aws:prod/db',
        'secret-agent.io/aws-region': 'eu-west-1',
        ...annotations,
      },
      // The app's uid is named, so the only warnings are the ones these tests are about.
      { restartPolicy: 'Never', securityContext: { runAsUser: 1000 }, ...spec },
    );
  const classic = { NATIVE_SIDECARS: 'false' };
  const injected = (pod: PodDoc, env: Record<string, string>) => {
    const result = admit(pod, env);
    assert.equal(result.outcome, 'injected', result.review.response.status?.message);
    const patched = mutate(pod, decodePatch(result.review.response));
    validatePod(patched);
    const agents = [...(patched.spec.initContainers ?? []), ...patched.spec.containers].filter(
      (c) => c.image === AGENT_IMAGE,
    );
    return { patched, agents, warnings: result.review.response.warnings ?? [] };
  };

  it('without native sidecars, the default mode becomes init (no sidecar to hold the pod), with a warning', () => {
    for (const restartPolicy of ['Never', 'OnFailure']) {
      const { agents, warnings } = injected(job({}, { restartPolicy }), classic);
      assert.deepEqual(
        agents.map((c) => c.name),
        ['secret-agent-init'],
      );
      assert.deepEqual(warnings, [
        `secret-agent: this pod runs to completion (restartPolicy ${restartPolicy}) on a cluster without native sidecars, so its secrets are written once, by an init container. To keep them fresh, set secret-agent.io/exit-with-process to the app’s process name.`,
      ]);
    }
  });

  it('without native sidecars, a sidecar asked for by mode is refused, naming mode and both fixes', () => {
    for (const mode of ['sidecar', 'init+sidecar']) {
      const result = admit(job({ 'secret-agent.io/mode': mode }), classic);
      assert.equal(result.outcome, 'denied');
      assert.equal(
        result.review.response.status!.message,
        `secret-agent cannot inject this pod: secret-agent.io/mode: ${mode} runs a sidecar, which would keep this pod (restartPolicy Never) from ever completing: the cluster has no native sidecars to stop it. Fix: set secret-agent.io/exit-with-process to the app’s process name (the sidecar then exits with it), or use secret-agent.io/mode: init`,
      );
    }
  });

  it('exit-with-process: the classic sidecar exits with the app, which it sees in a shared process namespace', () => {
    const { patched, agents, warnings } = injected(
      job({ 'secret-agent.io/exit-with-process': 'python3' }),
      classic,
    );
    assert.deepEqual(warnings, []);
    assert.deepEqual(
      agents.map((c) => c.name),
      ['secret-agent-init', 'secret-agent'],
    );
    assert.equal(patched.spec.shareProcessNamespace, true);
    const sidecar = agents.find((c) => c.name === 'secret-agent')!;
    const config = parseAgentConfig(containerEnv(sidecar, patched));
    assert.equal(config.sidecar?.exitWithProcess, 'python3');
  });

  it('exit-with-process needs the shared process namespace the pod refuses', () => {
    const result = admit(
      job({ 'secret-agent.io/exit-with-process': 'python3' }, { shareProcessNamespace: false }),
      classic,
    );
    assert.equal(result.outcome, 'denied');
    assert.match(
      result.review.response.status!.message,
      /secret-agent\.io\/exit-with-process: needs a shared process namespace to see the app end, but the pod sets shareProcessNamespace: false\. Fix: /,
    );
  });

  it('exit-with-process is dropped, with a warning, where no classic sidecar runs', () => {
    const cases: [string, PodDoc, Record<string, string>, string][] = [
      [
        'native sidecars',
        job({ 'secret-agent.io/exit-with-process': 'python3' }),
        {},
        'the kubelet stops native sidecars when the app ends',
      ],
      [
        'mode init',
        job({ 'secret-agent.io/exit-with-process': 'python3', 'secret-agent.io/mode': 'init' }),
        classic,
        'mode init runs no sidecar',
      ],
      [
        'a Deployment’s pod',
        basicPod(
          {
            'secret-agent.io/secret-db': 'aws:prod/db',
            'secret-agent.io/aws-region': 'eu-west-1',
            'secret-agent.io/exit-with-process': 'python3',
          },
          { securityContext: { runAsUser: 1000 } },
        ),
        classic,
        'the pod does not run to completion (restartPolicy Always)',
      ],
    ];
    for (const [name, pod, env, why] of cases) {
      const { patched, agents, warnings } = injected(pod, env);
      assert.deepEqual(
        warnings,
        [`secret-agent: secret-agent.io/exit-with-process is ignored: ${why}.`],
        name,
      );
      assert.notEqual(patched.spec.shareProcessNamespace, true, name);
      for (const agent of agents)
        assert.ok(!JSON.stringify(agent.env).includes('EXIT_WITH_PROCESS'), `${name}: ${agent.name}`);
    }
  });

  it('with native sidecars, nothing changes: the kubelet stops the sidecar when the app ends', () => {
    const { agents, warnings } = injected(job(), {});
    assert.deepEqual(warnings, []);
    assert.deepEqual(
      agents.map((c) => [c.name, c.restartPolicy]),
      [['secret-agent', 'Always']],
    );
  });
});

/** The one refusal message of a denied pod. */
function refusal(pod: PodDoc, env: Record<string, string> = {}): string {
  const result = admit(pod, env);
  assert.equal(result.outcome, 'denied', JSON.stringify(result.review.response));
  return result.review.response.status!.message;
}

describe('what a refusal shows of a bad value (each annotation declares it)', () => {
  const ok = { 'secret-agent.io/secret-a': 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:a-AbCdEf' };

  it('quotes names, enums, booleans, durations, paths and container names, so the message is readable', () => {
    const shown: [string, Record<string, string>, string][] = [
      ['inject', { ...ok, 'secret-agent.io/inject': 'yes' }, '"yes" is not a boolean'],
      [
        'inject, in a message of ours',
        { 'secret-agent.io/inject': 'true' },
        'is "true" but no secret is named',
      ],
      ['mode', { ...ok, 'secret-agent.io/mode': 'both' }, '"both" is not an injection mode'],
      [
        'duration',
        { ...ok, 'secret-agent.io/refresh-interval': '5 minutes' },
        '"5 minutes" is not a duration',
      ],
      ['relative path', { ...ok, 'secret-agent.io/path-a': 'x/../y' }, 'contains a ".." segment'],
      [
        'absolute path',
        { ...ok, 'secret-agent.io/mount-path': 'etc/secrets' },
        '"etc/secrets" is not an absolute path',
      ],
      [
        'container name',
        { ...ok, 'secret-agent.io/containers': 'app,worker' },
        'names "worker", which the pod does not have',
      ],
      [
        'quantity',
        { ...ok, 'secret-agent.io/agent-memory-limit': 'lots' },
        '"lots" is not a resource quantity',
      ],
      [
        'format',
        { ...ok, 'secret-agent.io/format-a': 'xml' },
        '"xml" is not one of raw, split, dotenv, env, json, yaml, properties, template',
      ],
    ];
    for (const [name, annotations, text] of shown)
      assert.ok(refusal(basicPod(annotations)).includes(text), name);
  });

  it('describes a reference that does not parse, and other free text, by its shape only', () => {
    const value = canary('pasted-secret');
    const hidden: [string, Record<string, string>, RegExp][] = [
      [
        'a pasted secret as a reference',
        { 'secret-agent.io/secret-db': value },
        /secret-agent\.io\/secret-db: \(a value of \d+ characters\)/,
      ],
      [
        'a secret with white space',
        { 'secret-agent.io/secret-db': `aws:db ${value}` },
        /\(a value of \d+ characters\) contains white space/,
      ],
      [
        'an ARN that is not one',
        { 'secret-agent.io/secret-db': `arn:aws:${value}` },
        /secret-agent\.io\/secret-db: /,
      ],
      [
        'credentials in a rotation URL',
        {
          ...ok,
          'secret-agent.io/rotation-http-url': `post http://app:${value}@127.0.0.1:8080/-/reload?token=${value}`,
        },
        /secret-agent\.io\/rotation-http-url: "post http:\/\/…@127\.0\.0\.1:8080\/…" is not \[METHOD\] URL/,
      ],
      [
        'a rotation URL that is no URL',
        { ...ok, 'secret-agent.io/rotation-http-url': value },
        /secret-agent\.io\/rotation-http-url: \(a value of \d+ characters\) is not \[METHOD\] URL/,
      ],
      [
        'a command beside another problem',
        { ...ok, 'secret-agent.io/rotation-command': value, 'secret-agent.io/mode': 'both' },
        /"both" is not an injection mode/,
      ],
      [
        'an unknown annotation',
        { ...ok, 'secret-agent.io/pasword': value },
        /secret-agent\.io\/pasword: is not a secret-agent annotation/,
      ],
      ['a bad file name', { ...ok, 'secret-agent.io/secret-a b': value }, /"a b" is not a file name/],
    ];
    for (const [name, annotations, shape] of hidden) {
      const message = refusal(basicPod(annotations));
      assertNoCanary(message, `the refusal of ${name}`);
      assert.match(message, shape, name);
    }
  });

  it('is declared for every annotation: only references, free text and URLs are hidden', () => {
    const echo = (table: Record<string, { echo: string }>) =>
      Object.fromEntries(
        Object.entries(table)
          .filter(([, a]) => a.echo !== 'quote')
          .map(([n, a]) => [n, a.echo]),
      );
    assert.deepEqual(echo(POD_ANNOTATIONS), {
      'rotation-http-url': 'url',
      'rotation-command': 'shape',
    });
    assert.deepEqual(echo(FILE_ANNOTATIONS), { secret: 'shape' });
    for (const a of [...Object.values(POD_ANNOTATIONS), ...Object.values(FILE_ANNOTATIONS)])
      assert.ok(['quote', 'shape', 'url'].includes(a.echo));
  });
});

describe('pods that cannot work are refused at admission', () => {
  const cases: [string, Record<string, string>, Record<string, string>, string, RegExp][] = [
    [
      'aws:NAME without a region',
      { 'secret-agent.io/secret-db': 'aws:prod/db' },
      {},
      'secret-agent.io/aws-region',
      /AGENT_AWS_REGION.*Fix: set secret-agent\.io\/aws-region/,
    ],
    [
      'gcp:SECRET without a project',
      { 'secret-agent.io/secret-db': 'gcp:db' },
      {},
      'secret-agent.io/gcp-project',
      /AGENT_GCP_PROJECT.*Fix: set secret-agent\.io\/gcp-project/,
    ],
    [
      'vault: without a Vault address',
      { 'secret-agent.io/secret-db': 'vault:secret/data/db', 'secret-agent.io/vault-role': 'db' },
      {},
      'secret-agent.io/secret-db',
      /AGENT_VAULT_ADDR/,
    ],
    [
      'vault: without a role',
      { 'secret-agent.io/secret-db': 'vault:secret/data/db' },
      { AGENT_VAULT_ADDR: 'https://vault.example:8200' },
      'secret-agent.io/vault-role',
      /AGENT_VAULT_ROLE.*Fix: set secret-agent\.io\/vault-role/,
    ],
  ];
  for (const [name, annotations, env, field, detail] of cases) {
    it(name, () => {
      const message = refusal(basicPod(annotations), env);
      assert.ok(message.includes(`${field}:`), message);
      assert.match(message, detail);
    });
  }

  it('vault: in a pod without a service-account token', () => {
    const pod = basicPod(
      { 'secret-agent.io/secret-db': 'vault:secret/data/db', 'secret-agent.io/vault-role': 'db' },
      { automountServiceAccountToken: false },
    );
    assert.match(
      refusal(pod, { AGENT_VAULT_ADDR: 'https://vault.example:8200' }),
      /secret-agent\.io\/secret-db: .*automountServiceAccountToken: false/,
    );
  });

  it('admits them once the pod, the cluster or the reference supplies what is missing', () => {
    const vault = { AGENT_VAULT_ADDR: 'https://vault.example:8200' };
    const fine: [Record<string, string>, Record<string, string>][] = [
      [{ 'secret-agent.io/secret-db': 'aws:prod/db', 'secret-agent.io/aws-region': 'eu-west-1' }, {}],
      [{ 'secret-agent.io/secret-db': 'aws:prod/db' }, { AGENT_AWS_REGION: 'eu-west-1' }],
      [
        {
          'secret-agent.io/secret-db': 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:prod/db-AbCdEf',
        },
        {},
      ],
      [{ 'secret-agent.io/secret-db': 'gcp:db', 'secret-agent.io/gcp-project': 'my-project' }, {}],
      [{ 'secret-agent.io/secret-db': 'gcp:db' }, { AGENT_GCP_PROJECT: 'my-project' }],
      [{ 'secret-agent.io/secret-db': 'projects/my-project/secrets/db' }, {}],
      // A regional secret names its project and region: nothing else is needed.
      [
        { 'secret-agent.io/secret-db': 'projects/my-project/locations/europe-west4/secrets/db/versions/2' },
        {},
      ],
      [{ 'secret-agent.io/secret-db': 'vault:secret/data/db', 'secret-agent.io/vault-role': 'db' }, vault],
      [{ 'secret-agent.io/secret-db': 'vault:secret/data/db' }, { ...vault, AGENT_VAULT_ROLE: 'apps' }],
    ];
    for (const [annotations, env] of fine) {
      const result = admit(basicPod(annotations), env);
      assert.equal(
        result.outcome,
        'injected',
        JSON.stringify([annotations, env, result.review.response.status]),
      );
    }
  });
});

describe('allowed but risky: AdmissionReview warnings', () => {
  const arn = 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:a-AbCdEf';
  const warnings = (annotations: Record<string, string>) => {
    // The app's uid is named, so no file-sharing fallback adds its own warning.
    const result = admit(
      basicPod({ 'secret-agent.io/secret-a': arn, ...annotations }, { securityContext: { runAsUser: 1000 } }),
    );
    assert.equal(result.outcome, 'injected', JSON.stringify(result.review.response.status));
    return result.review.response.warnings ?? [];
  };

  it('a file readable by others', () => {
    const [perFile] = warnings({ 'secret-agent.io/file-mode-a': '0644' });
    assert.match(perFile!, /secret-agent\.io\/file-mode-a is 0644: .*readable by/);
    const [podWide] = warnings({ 'secret-agent.io/file-mode': '0444' });
    assert.match(podWide!, /secret-agent\.io\/file-mode is 0444/);
    assert.deepEqual(warnings({ 'secret-agent.io/file-mode-a': '0440' }), []);
    assert.deepEqual(warnings({}), []);
  });

  it('a refresh interval under 30 s, where a sidecar refreshes', () => {
    assert.match(
      warnings({ 'secret-agent.io/refresh-interval': '10s' })[0]!,
      /secret-agent\.io\/refresh-interval is 10s/,
    );
    assert.match(
      warnings({ 'secret-agent.io/refresh-interval-a': '5s' })[0]!,
      /secret-agent\.io\/refresh-interval-a is 5s/,
    );
    assert.deepEqual(warnings({ 'secret-agent.io/refresh-interval': '30s' }), []);
    assert.deepEqual(
      warnings({ 'secret-agent.io/refresh-interval': '10s', 'secret-agent.io/mode': 'init' }),
      [],
    );
  });
});

describe('an unknown annotation suggests the closest one', () => {
  const ok = { 'secret-agent.io/secret-a': 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:a-AbCdEf' };
  const cases: [string, string][] = [
    ['secrets-api', 'secret-api'],
    ['secrets-db', 'secret-db'],
    ['file-mod-db', 'file-mode-db'],
    ['refresh-intervall-db', 'refresh-interval-db'],
    ['fromat-db', 'format-db'],
    ['moed', 'mode'],
    ['refresh-intervall', 'refresh-interval'],
    // Two swapped neighbours are two slips, as the agent counts them in its env names.
    ['lgo-elvel', 'log-level'],
  ];
  for (const [typo, meant] of cases) {
    it(`${typo} → ${meant}`, () => {
      const message = refusal(basicPod({ ...ok, [`secret-agent.io/${typo}`]: 'x' }));
      assert.ok(
        message.includes(
          `secret-agent.io/${typo}: is not a secret-agent annotation. Fix: did you mean secret-agent.io/${meant}?`,
        ),
        message,
      );
    });
  }
  it('suggests nothing when nothing is close', () => {
    assert.doesNotMatch(refusal(basicPod({ ...ok, 'secret-agent.io/colour': 'x' })), /did you mean/);
  });
});

describe('a pod with the opt-in label but not the annotation', () => {
  const labelled = (annotations: Record<string, string>) => ({
    ...basicPod({}),
    metadata: { name: 'web', namespace: 'apps', labels: { 'secret-agent.io/inject': 'true' }, annotations },
  });

  it('is allowed unchanged, with a warning naming the annotation and the fix', () => {
    const cases: Record<string, string>[] = [
      { 'secret-agent.io/secret-a': 'aws:a' },
      { 'secret-agent.io/inject': 'false' },
    ];
    for (const annotations of cases) {
      const result = admit(labelled(annotations));
      assert.equal(result.outcome, 'skipped');
      assert.equal(result.review.response.allowed, true);
      assert.equal(result.review.response.patch, undefined);
      const warnings = result.review.response.warnings ?? [];
      assert.equal(warnings.length, 1, JSON.stringify(annotations));
      assert.match(warnings[0]!, /label secret-agent\.io\/inject: "true"/);
      assert.match(warnings[0]!, /annotation secret-agent\.io\/inject: "true"/);
    }
  });

  it('gets no warning without the label', () => {
    const result = admit({
      ...basicPod({}),
      metadata: { annotations: { 'secret-agent.io/secret-a': 'aws:a' } },
    });
    assert.equal(result.outcome, 'skipped');
    assert.equal(result.review.response.warnings, undefined);
  });
});

describe('the AWS identity EKS gave the app (IRSA, Pod Identity) reaches the agent', () => {
  // What EKS's pod-identity-webhook leaves on a pod when it ran before ours and is not called again.
  const IRSA_TOKEN_DIR = '/var/run/secrets/eks.amazonaws.com/serviceaccount';
  const POD_IDENTITY_TOKEN_DIR = '/var/run/secrets/pods.eks.amazonaws.com/serviceaccount';
  const projected = (name: string, audience: string, path = 'token') => ({
    name,
    projected: { sources: [{ serviceAccountToken: { audience, expirationSeconds: 86400, path } }] },
  });
  const irsaPod = (annotations: Record<string, string>) =>
    basicPod(annotations, {
      containers: [
        {
          name: 'app',
          image: 'app:1',
          env: [
            { name: 'AWS_STS_REGIONAL_ENDPOINTS', value: 'regional' },
            { name: 'AWS_DEFAULT_REGION', value: 'eu-central-1' },
            { name: 'AWS_REGION', value: 'eu-central-1' },
            { name: 'AWS_ROLE_ARN', value: 'arn:aws:iam::123456789012:role/web' },
            { name: 'AWS_WEB_IDENTITY_TOKEN_FILE', value: `${IRSA_TOKEN_DIR}/token` },
          ],
          volumeMounts: [{ name: 'aws-iam-token', mountPath: IRSA_TOKEN_DIR, readOnly: true }],
        },
      ],
      volumes: [projected('aws-iam-token', 'sts.amazonaws.com')],
    });
  const podIdentityPod = (annotations: Record<string, string>) =>
    basicPod(annotations, {
      containers: [
        {
          name: 'app',
          image: 'app:1',
          env: [
            { name: 'AWS_CONTAINER_CREDENTIALS_FULL_URI', value: 'http://169.254.170.23/v1/credentials' },
            {
              name: 'AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE',
              value: `${POD_IDENTITY_TOKEN_DIR}/eks-pod-identity-token`,
            },
          ],
          volumeMounts: [
            { name: 'eks-pod-identity-token', mountPath: POD_IDENTITY_TOKEN_DIR, readOnly: true },
          ],
        },
      ],
      volumes: [projected('eks-pod-identity-token', 'pods.eks.amazonaws.com', 'eks-pod-identity-token')],
    });
  type Mount = { name: string; mountPath: string; readOnly?: boolean };
  /** Each agent container with its env (downward API resolved) and its mounts. */
  const agentsOf = (pod: PodDoc, env: Record<string, string>) => {
    const result = admit(pod, env);
    assert.equal(result.outcome, 'injected', result.review.response.status?.message);
    const patched = mutate(pod, decodePatch(result.review.response));
    validatePod(patched);
    return [...(patched.spec.initContainers ?? []), ...patched.spec.containers]
      .filter((c) => c.image === AGENT_IMAGE)
      .map((c) => ({
        env: containerEnv(c, patched),
        envNames: ((c.env ?? []) as { name: string }[]).map((e) => e.name),
        mounts: (c.volumeMounts ?? []) as Mount[],
      }));
  };

  for (const native of ['true', 'false'])
    it(`IRSA: the role, the token file and its volume, read-only, in every agent container (native sidecars ${native})`, () => {
      // No aws-region annotation and no AGENT_AWS_REGION: the region EKS set is the agent's too.
      const agents = agentsOf(irsaPod({ 'secret-agent.io/secret-db': 'aws:prod/db' }), {
        NATIVE_SIDECARS: native,
      });
      assert.equal(agents.length, native === 'true' ? 1 : 2);
      for (const agent of agents) {
        const { env } = agent;
        assert.equal(env.AWS_ROLE_ARN, 'arn:aws:iam::123456789012:role/web');
        assert.equal(env.AWS_WEB_IDENTITY_TOKEN_FILE, `${IRSA_TOKEN_DIR}/token`);
        assert.equal(env.AWS_STS_REGIONAL_ENDPOINTS, 'regional');
        assert.equal(env.AWS_REGION, 'eu-central-1');
        assert.deepEqual(
          agent.mounts.filter((m) => m.name === 'aws-iam-token'),
          [{ name: 'aws-iam-token', mountPath: IRSA_TOKEN_DIR, readOnly: true }],
        );
      }
    });

  it('the webhook’s own region wins over the one EKS set; the pod’s annotation over both', () => {
    const [fromWebhook] = agentsOf(irsaPod({ 'secret-agent.io/secret-db': 'aws:prod/db' }), CLUSTER);
    assert.equal(fromWebhook!.env.AWS_REGION, 'eu-west-1');
    const [fromPod] = agentsOf(
      irsaPod({ 'secret-agent.io/secret-db': 'aws:prod/db', 'secret-agent.io/aws-region': 'us-east-2' }),
      CLUSTER,
    );
    assert.equal(fromPod!.env.AWS_REGION, 'us-east-2');
    assert.equal(
      fromPod!.envNames.filter((name) => name === 'AWS_REGION').length,
      1,
      'one AWS_REGION, not a second one inherited',
    );
  });

  it('EKS Pod Identity: the agent endpoint, the token file and its volume', () => {
    const [agent] = agentsOf(podIdentityPod({ 'secret-agent.io/secret-db': 'aws:prod/db' }), CLUSTER);
    const { env } = agent!;
    assert.equal(env.AWS_CONTAINER_CREDENTIALS_FULL_URI, 'http://169.254.170.23/v1/credentials');
    assert.equal(
      env.AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE,
      `${POD_IDENTITY_TOKEN_DIR}/eks-pod-identity-token`,
    );
    assert.deepEqual(
      agent!.mounts.filter((m) => m.name === 'eks-pod-identity-token'),
      [{ name: 'eks-pod-identity-token', mountPath: POD_IDENTITY_TOKEN_DIR, readOnly: true }],
    );
  });

  it('a pod EKS gave no identity: the agent gets no AWS identity env and no extra mount', () => {
    const [agent] = agentsOf(basicPod({ 'secret-agent.io/secret-db': 'aws:prod/db' }), CLUSTER);
    const { env } = agent!;
    for (const name of ['AWS_ROLE_ARN', 'AWS_WEB_IDENTITY_TOKEN_FILE', 'AWS_CONTAINER_CREDENTIALS_FULL_URI'])
      assert.equal(env[name], undefined, name);
    assert.deepEqual(
      agent!.mounts.map((m) => m.name),
      ['secret-agent-secrets'],
    );
  });
});

describe('Vault settings through annotations and cluster settings', () => {
  const ADDR = { AGENT_VAULT_ADDR: 'https://vault.example:8200' };
  const vaultCa = selfSignedCertificate('vault.internal', 'DNS:vault.internal').cert;

  /** The injected pod, schema-checked, and what its agent container's Vault provider would make of its env. */
  const injected = (annotations: Record<string, string>, env: Record<string, string>) => {
    const pod = basicPod({ 'secret-agent.io/secret-db': 'vault:secret/data/db', ...annotations });
    const result = admit(pod, env);
    assert.equal(result.outcome, 'injected', JSON.stringify(result.review.response.status));
    const mutated = mutate(pod, decodePatch(result.review.response));
    validatePod(mutated);
    const agent = mutated.spec.initContainers!.find((c) => c.name === 'secret-agent')!;
    const agentEnv = containerEnv(agent, mutated);
    return { mutated, agent, agentEnv, settings: parseVaultSettings(agentEnv) };
  };

  it('passes the pod’s method, namespaces and revocation, and the cluster’s CA and AWS settings, to the agent', () => {
    const { agentEnv, settings } = injected(
      {
        'secret-agent.io/vault-auth-method': 'aws',
        'secret-agent.io/vault-namespace': 'admin/team-a',
        'secret-agent.io/vault-auth-namespace': 'admin',
        'secret-agent.io/vault-revoke-on-shutdown': 'true',
      },
      {
        ...ADDR,
        AGENT_VAULT_CACERT: vaultCa,
        AGENT_VAULT_TLS_SERVER_NAME: 'vault.internal',
        AGENT_VAULT_AWS_REGION: 'eu-west-1',
        AGENT_VAULT_AWS_IAM_SERVER_ID: 'vault.example',
      },
    );
    assert.equal(agentEnv.VAULT_CACERT_BYTES, vaultCa.trim());
    assert.deepEqual(
      {
        namespace: settings.namespace,
        authNamespace: settings.authNamespace,
        method: settings.auth.method,
        revoke: settings.revokeOnShutdown,
        serverName: settings.tlsServerName,
      },
      {
        namespace: 'admin/team-a',
        authNamespace: 'admin',
        method: 'aws',
        revoke: true,
        serverName: 'vault.internal',
      },
    );
    assert.ok(settings.auth.method === 'aws' && settings.auth.region === 'eu-west-1');
    assert.ok(settings.auth.method === 'aws' && settings.auth.serverId === 'vault.example');
  });

  it('cert: mounts the TLS Secret into the agent container only and points VAULT_CLIENT_CERT/KEY at it', () => {
    const { mutated, agent, settings } = injected(
      {
        'secret-agent.io/vault-auth-method': 'cert',
        'secret-agent.io/vault-client-cert-secret': 'web-vault-client',
      },
      ADDR,
    );
    assert.deepEqual(
      (mutated.spec.volumes as { name: string; secret?: unknown }[]).find((v) => v.secret),
      { name: 'secret-agent-vault-client', secret: { secretName: 'web-vault-client' } },
    );
    assert.deepEqual(
      (agent.volumeMounts as { name: string }[]).find((m) => m.name === 'secret-agent-vault-client'),
      {
        name: 'secret-agent-vault-client',
        mountPath: '/var/run/secrets/secret-agent/vault-client',
        readOnly: true,
      },
    );
    const app = mutated.spec.containers.find((c) => c.name === 'app')!;
    assert.ok(
      !(app.volumeMounts as { name: string }[]).some((m) => m.name === 'secret-agent-vault-client'),
      'the key never reaches the app container',
    );
    assert.deepEqual(settings.clientCert, {
      certFile: '/var/run/secrets/secret-agent/vault-client/tls.crt',
      keyFile: '/var/run/secrets/secret-agent/vault-client/tls.key',
    });
    assert.equal(settings.auth.method, 'cert');
  });

  it('gcp: needs a role; passes the service account; cluster defaults apply where the pod says nothing', () => {
    const { settings } = injected(
      {
        'secret-agent.io/vault-role': 'web',
        'secret-agent.io/vault-gcp-service-account': 'web@my-project.iam.gserviceaccount.com',
      },
      {
        ...ADDR,
        AGENT_VAULT_AUTH_METHOD: 'gcp',
        AGENT_VAULT_NAMESPACE: 'apps',
        AGENT_VAULT_REVOKE_ON_SHUTDOWN: 'true',
      },
    );
    assert.ok(
      settings.auth.method === 'gcp' &&
        settings.auth.serviceAccount === 'web@my-project.iam.gserviceaccount.com',
    );
    assert.equal(settings.namespace, 'apps');
    assert.equal(settings.authNamespace, 'apps');
    assert.equal(settings.revokeOnShutdown, true);
    assert.match(
      refusal(basicPod({ 'secret-agent.io/secret-db': 'vault:secret/data/db' }), {
        ...ADDR,
        AGENT_VAULT_AUTH_METHOD: 'gcp',
      }),
      /secret-agent\.io\/vault-role: .*logs in with gcp auth, which needs a role.*Google service account/,
    );
  });

  it('passes the cluster’s auth mount with the cluster’s method only, not to a pod that picks another', () => {
    const cluster = {
      ...ADDR,
      AGENT_VAULT_ROLE: 'apps',
      AGENT_VAULT_AUTH_METHOD: 'kubernetes',
      AGENT_VAULT_AUTH_MOUNT: 'kubernetes-prod',
    };
    const own = injected({}, cluster).settings.auth;
    assert.ok(own.method === 'kubernetes' && own.mount === 'kubernetes-prod');
    const aws = injected({ 'secret-agent.io/vault-auth-method': 'aws' }, cluster).settings.auth;
    assert.ok(aws.method === 'aws' && aws.mount === 'aws');
  });

  it('aws needs no role and no service-account token', () => {
    const { settings } = injected({ 'secret-agent.io/vault-auth-method': 'aws' }, ADDR);
    assert.ok(settings.auth.method === 'aws' && settings.auth.role === undefined);
    const pod = basicPod(
      { 'secret-agent.io/secret-db': 'vault:secret/data/db', 'secret-agent.io/vault-auth-method': 'aws' },
      { automountServiceAccountToken: false },
    );
    assert.equal(admit(pod, ADDR).outcome, 'injected');
  });

  const refusals: [string, Record<string, string>, Record<string, string>, RegExp][] = [
    [
      'cert without a certificate Secret',
      { 'secret-agent.io/vault-auth-method': 'cert' },
      ADDR,
      /secret-agent\.io\/vault-auth-method: is cert, but secret-agent\.io\/vault-client-cert-secret is not set.*Fix: set secret-agent\.io\/vault-client-cert-secret/,
    ],
    [
      'a client certificate for a plain-http Vault',
      { 'secret-agent.io/vault-client-cert-secret': 'web-vault-client', 'secret-agent.io/vault-role': 'web' },
      { AGENT_VAULT_ADDR: 'http://vault.example:8200' },
      /secret-agent\.io\/vault-client-cert-secret: is set, but the cluster’s AGENT_VAULT_ADDR is not https/,
    ],
    [
      'approle, which needs a secret no annotation may carry',
      { 'secret-agent.io/vault-auth-method': 'approle' },
      ADDR,
      /secret-agent\.io\/vault-auth-method: "approle" is not a Vault auth method the webhook can set up.*Fix: use one of kubernetes, jwt, cert, aws, gcp/,
    ],
    [
      'a namespace with a reserved segment',
      { 'secret-agent.io/vault-namespace': 'admin/sys', 'secret-agent.io/vault-role': 'web' },
      ADDR,
      /secret-agent\.io\/vault-namespace: "admin\/sys" is not a Vault namespace: a segment is a name Vault reserves/,
    ],
    [
      'a reference whose ?namespace= is no namespace',
      { 'secret-agent.io/secret-ns': 'vault:secret/app?namespace=a//b', 'secret-agent.io/vault-role': 'web' },
      ADDR,
      /secret-agent\.io\/secret-ns: namespace \(a value of 4 characters\) is not a Vault namespace/,
    ],
    [
      'jwt in a pod without a service-account token',
      { 'secret-agent.io/vault-auth-method': 'jwt' },
      ADDR,
      /automountServiceAccountToken: false, so the agent has no service-account token to log in with \(jwt auth\)/,
    ],
  ];
  for (const [name, annotations, env, problem] of refusals)
    it(`refuses ${name}, naming the annotation and the fix`, () => {
      const pod = basicPod(
        { 'secret-agent.io/secret-db': 'vault:secret/data/db', ...annotations },
        name.startsWith('jwt') ? { automountServiceAccountToken: false } : {},
      );
      assert.match(refusal(pod, env), problem);
    });

  it('refuses unusable cluster Vault settings at webhook start, naming the setting', () => {
    const bad: [Record<string, string>, RegExp][] = [
      [{ AGENT_VAULT_CACERT: 'not a certificate' }, /AGENT_VAULT_CACERT: holds no PEM certificate/],
      [{ AGENT_VAULT_NAMESPACE: 'a//b' }, /AGENT_VAULT_NAMESPACE: "a\/\/b" is not a Vault namespace/],
      [{ AGENT_VAULT_AUTH_METHOD: 'token' }, /AGENT_VAULT_AUTH_METHOD: "token" is not a Vault auth method/],
      [
        { AGENT_VAULT_AWS_STS_ENDPOINT: 'http://sts.internal' },
        /AGENT_VAULT_AWS_STS_ENDPOINT: .* is not an https URL/,
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

describe('the agent’s port: the pod’s loopback unless the cluster scrapes it, and no probe of it', () => {
  const sidecarOf = (annotations: Record<string, string>, env: Record<string, string> = {}) => {
    const pod = basicPod({ 'secret-agent.io/secret-db': 'aws:prod/db#password', ...annotations });
    const result = admit(pod, { ...CLUSTER, ...env });
    assert.equal(result.outcome, 'injected', JSON.stringify(result.review.response.status));
    const patched = mutate(pod, decodePatch(result.review.response));
    validatePod(patched);
    const agent = [...(patched.spec.initContainers ?? []), ...patched.spec.containers].find(
      (c) => c.name === 'secret-agent',
    )!;
    const env_ = Object.fromEntries(
      (agent.env as { name: string; value?: string }[]).map((e) => [e.name, e.value]),
    );
    const hook = (agent.lifecycle as { postStart: { exec: { command: string[] } } } | undefined)?.postStart
      .exec.command;
    return { agent, env: env_, url: hook?.find((a) => a.startsWith('--url=')) };
  };

  for (const process_ of ['small', 'node'])
    for (const native of ['true', 'false'])
      it(`${process_} sidecar, native ${native}: no readiness or liveness probe, by default on the loopback with no declared port`, () => {
        const { agent, env, url } = sidecarOf(
          { 'secret-agent.io/sidecar-process': process_, 'secret-agent.io/mode': 'init+sidecar' },
          { NATIVE_SIDECARS: native },
        );
        assert.equal(agent.readinessProbe, undefined);
        assert.equal(agent.livenessProbe, undefined);
        assert.equal(agent.startupProbe, undefined);
        assert.equal(agent.ports, undefined, 'nothing for Prometheus to find on the loopback');
        assert.equal(env.AGENT_HTTP_ADDR, undefined, 'the agent’s own default, the loopback');
        if (native === 'true') assert.equal(url, '--url=http://127.0.0.1:8099/readyz');
      });

  it('a cluster that scrapes agents (AGENT_HTTP_ADDR 0.0.0.0:8099): every address, the port declared by name', () => {
    const { agent, env, url } = sidecarOf({}, { AGENT_HTTP_ADDR: '0.0.0.0:8099' });
    assert.equal(env.AGENT_HTTP_ADDR, '0.0.0.0:8099');
    assert.deepEqual(agent.ports, [{ name: 'secret-agent', containerPort: 8099, protocol: 'TCP' }]);
    assert.equal(url, '--url=http://127.0.0.1:8099/readyz');
    assert.equal(agent.readinessProbe, undefined);
    // The pod's own choice wins over the cluster's.
    const own = sidecarOf(
      { 'secret-agent.io/agent-http-addr': '[::1]:8199' },
      { AGENT_HTTP_ADDR: '0.0.0.0:8099' },
    );
    assert.equal(own.env.AGENT_HTTP_ADDR, '[::1]:8199');
    assert.equal(own.agent.ports, undefined);
    assert.equal(own.url, '--url=http://[::1]:8199/readyz');
  });

  it('a sidecar in a hostNetwork pod, whose loopback is the node’s, or on a port the agent picks, is refused naming the fix; init alone is admitted', () => {
    const refusal = (annotations: Record<string, string>, spec: Partial<PodDoc['spec']> = {}) => {
      const pod = basicPod({ 'secret-agent.io/secret-db': 'aws:prod/db#password', ...annotations }, spec);
      const result = admit(pod, CLUSTER);
      return result.outcome === 'injected' ? undefined : result.review.response.status?.message;
    };
    for (const mode of ['init+sidecar', 'sidecar'])
      assert.match(
        refusal({ 'secret-agent.io/mode': mode }, { hostNetwork: true }) ?? '',
        /secret-agent\.io\/mode: the pod sets hostNetwork: true, .*Fix: use secret-agent\.io\/mode: init/,
        mode,
      );
    assert.equal(refusal({ 'secret-agent.io/mode': 'init' }, { hostNetwork: true }), undefined);
    assert.equal(refusal({}, { hostNetwork: false }), undefined);
    assert.match(
      refusal({ 'secret-agent.io/agent-http-addr': '127.0.0.1:0' }) ?? '',
      /secret-agent\.io\/agent-http-addr: "127\.0\.0\.1:0" lets the agent pick its port.*Fix: name the port/,
    );
  });

  it('a cluster setting that binds neither the loopback nor every address is refused at start, naming it', () => {
    assert.throws(
      () => injectionDefaults({ AGENT_HTTP_ADDR: '10.0.0.1:8099' }),
      /AGENT_HTTP_ADDR: "10\.0\.0\.1:8099" binds "10\.0\.0\.1".*Fix: bind the loopback/,
    );
  });
});
