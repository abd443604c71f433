import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  AdmissionCache,
  MAX_CACHE_BYTES,
  MAX_CACHED_CHARS,
  type CachedAdmission,
} from '../../webhook/admission/admission-cache.ts';
import { admitPod, type AdmissionResult } from '../../webhook/admission/admit-pod.ts';
import { decodeAdmissionReview } from '../../webhook/admission/review.ts';
import type { PodShape } from '../../webhook/pod-shape.ts';
import { WEBHOOK_SETTINGS } from '../../webhook/config/settings.ts';
import type { InjectionDefaults } from '../../webhook/config/injection-defaults.ts';
import { admissionReview } from '../fuzz/arbitraries.ts';
import { basicPod, injectionDefaults, review, type PodDoc } from './fixtures.ts';

/** What a cluster's webhook sets so that aws:NAME and vault: references can work. */
const CLUSTER = {
  AGENT_AWS_REGION: 'eu-west-1',
  AGENT_VAULT_ADDR: 'https://vault.example:8200',
  AGENT_VAULT_ROLE: 'apps',
};

type ReviewOptions = NonNullable<Parameters<typeof review>[1]>;

interface Admission {
  readonly pod: unknown;
  readonly options?: ReviewOptions;
  readonly env?: Record<string, string>;
}

const defaultsByEnv = new Map<string, InjectionDefaults>();
/** One defaults object per env, as one server has: the cache keys them by content all the same. */
function defaultsFor(env: Record<string, string> = {}): InjectionDefaults {
  const key = JSON.stringify(env);
  let defaults = defaultsByEnv.get(key);
  if (!defaults) defaultsByEnv.set(key, (defaults = injectionDefaults({ ...CLUSTER, ...env })));
  return defaults;
}

function body(a: Admission): string {
  return JSON.stringify(review(a.pod, a.options));
}

/** admitPod over the pod as sent, every field of it: what the webhook answered before it had a cache. */
function uncached(a: Admission): AdmissionResult {
  const text = body(a);
  const raw = (JSON.parse(text) as { request: { object: unknown } }).request.object;
  return admitPod({ ...decodeAdmissionReview(text), pod: raw as PodShape }, defaultsFor(a.env));
}

function cached(cache: AdmissionCache, a: Admission) {
  return cache.admit(decodeAdmissionReview(body(a)), defaultsFor(a.env));
}

/** What the API server and the log get: the answer's JSON text, compared byte for byte. */
const visible = (r: AdmissionResult) => ({ outcome: r.outcome, log: r.log, text: JSON.stringify(r.review) });
const seen = (r: CachedAdmission) => ({ outcome: r.outcome, log: r.log, text: r.text });
const response = (r: CachedAdmission) =>
  (JSON.parse(r.text) as { response: { uid: string; patch?: string; warnings?: string[] } }).response;

/** A pod that reads every input: two containers, an init container, an IRSA identity, volumes, a user. */
function richPod(): PodDoc {
  return basicPod(
    {
      'secret-agent.io/secret-token': 'aws:prod/token',
      'secret-agent.io/secret-db': 'vault:secret/data/db#password',
    },
    {
      containers: [
        {
          name: 'app',
          image: 'registry.example/app:1.0',
          env: [
            { name: 'AWS_ROLE_ARN', value: 'arn:aws:iam::123456789012:role/app' },
            {
              name: 'AWS_WEB_IDENTITY_TOKEN_FILE',
              value: '/var/run/secrets/eks.amazonaws.com/serviceaccount/token',
            },
          ],
          volumeMounts: [
            { name: 'aws-iam-token', mountPath: '/var/run/secrets/eks.amazonaws.com/serviceaccount' },
          ],
          ports: [{ name: 'http', containerPort: 8080 }],
        },
        { name: 'worker', image: 'registry.example/worker:1.0' },
      ],
      initContainers: [{ name: 'migrate', image: 'registry.example/migrate:1.0' }],
      volumes: [
        {
          name: 'aws-iam-token',
          projected: {
            sources: [
              {
                serviceAccountToken: {
                  audience: 'sts.amazonaws.com',
                  expirationSeconds: 86400,
                  path: 'token',
                },
              },
            ],
          },
        },
      ],
      securityContext: { runAsUser: 1000, runAsGroup: 2000 },
    },
  );
}

/** richPod with `edit` applied to a copy. */
function rich(edit: (pod: PodDoc) => void = () => {}): PodDoc {
  const pod = richPod();
  edit(pod);
  return pod;
}

const app = (pod: PodDoc) =>
  pod.spec.containers[0]! as { env: { name: string; value: string }[] } & Record<string, unknown>;
const annotations = (pod: PodDoc) => pod.metadata.annotations!;
const signalled = (pod: PodDoc) => {
  annotations(pod)['secret-agent.io/rotation-signal'] = 'SIGHUP';
  annotations(pod)['secret-agent.io/rotation-signal-process'] = 'app';
};

/**
 * Pairs of admissions that differ in exactly one input of the decision, each of which changes the
 * answer: every field PodShape lists, the namespace, and the webhook's settings.
 */
const DECIDING: readonly [string, Admission, Admission][] = [
  [
    'an annotation value',
    { pod: rich() },
    { pod: rich((p) => (annotations(p)['secret-agent.io/secret-token'] = 'aws:prod/other')) },
  ],
  [
    'an annotation more',
    { pod: rich() },
    { pod: rich((p) => (annotations(p)['secret-agent.io/file-mode-token'] = '0440')) },
  ],
  [
    'an annotation less',
    { pod: rich() },
    { pod: rich((p) => delete annotations(p)['secret-agent.io/secret-db']) },
  ],
  [
    'the opt-in label (with inject "false")',
    { pod: rich((p) => (annotations(p)['secret-agent.io/inject'] = 'false')) },
    {
      pod: rich((p) => {
        annotations(p)['secret-agent.io/inject'] = 'false';
        delete p.metadata.labels!['secret-agent.io/inject'];
      }),
    },
  ],
  ['the request namespace', { pod: rich() }, { pod: rich(), options: { namespace: 'secret-agent' } }],
  [
    "the pod's own namespace (the request has none)",
    { pod: rich(), options: { namespace: '' } },
    { pod: rich((p) => (p.metadata.namespace = 'secret-agent')), options: { namespace: '' } },
  ],
  [
    'a container name',
    { pod: rich((p) => (annotations(p)['secret-agent.io/containers'] = 'app,worker')) },
    {
      pod: rich((p) => {
        annotations(p)['secret-agent.io/containers'] = 'app,worker';
        p.spec.containers[1]!.name = 'queue';
      }),
    },
  ],
  [
    'an env name (SECRETS_DIR)',
    { pod: rich() },
    { pod: rich((p) => app(p).env.push({ name: 'SECRETS_DIR', value: '/run/app' })) },
  ],
  [
    'an env value (the inherited role)',
    { pod: rich() },
    { pod: rich((p) => (app(p).env[0]!.value = 'arn:aws:iam::123456789012:role/other')) },
  ],
  ['an env list, empty or absent', { pod: rich() }, { pod: rich((p) => (p.spec.containers[1]!.env = [])) }],
  [
    'a mount path',
    { pod: rich() },
    {
      pod: rich((p) => {
        const mounts = app(p).volumeMounts as { mountPath: string }[];
        mounts[0]!.mountPath = '/etc/secrets/token';
      }),
    },
  ],
  [
    'a mount list, empty or absent',
    { pod: rich() },
    { pod: rich((p) => (p.spec.containers[1]!.volumeMounts = [])) },
  ],
  [
    'a container port',
    { pod: rich() },
    { pod: rich((p) => ((app(p).ports as { containerPort: number }[])[0]!.containerPort = 8099)) },
  ],
  [
    'a port name',
    { pod: rich() },
    { pod: rich((p) => ((app(p).ports as { name: string }[])[0]!.name = 'secret-agent')) },
  ],
  [
    'init containers, none or absent',
    { pod: rich((p) => (p.spec.initContainers = [])) },
    { pod: rich((p) => delete p.spec.initContainers) },
  ],
  [
    'a volume name',
    { pod: rich() },
    {
      pod: rich((p) => (p.spec.volumes as { name: string }[]).push({ name: 'secret-agent-secrets' })),
    },
  ],
  [
    'a projected volume’s sources (the IRSA token’s)',
    { pod: rich() },
    { pod: rich((p) => ((p.spec.volumes as Record<string, unknown>[])[0]!.projected = { sources: [{}] })) },
  ],
  [
    'a projected token’s path',
    { pod: rich() },
    {
      pod: rich(
        (p) =>
          ((p.spec.volumes as Record<string, unknown>[])[0]!.projected = {
            sources: [{ serviceAccountToken: { path: 'other' } }],
          }),
      ),
    },
  ],
  [
    'volumes, none or absent',
    { pod: rich((p) => (p.spec.volumes = [])) },
    { pod: rich((p) => delete p.spec.volumes) },
  ],
  [
    'shareProcessNamespace',
    { pod: rich(signalled) },
    {
      pod: rich((p) => {
        signalled(p);
        p.spec.shareProcessNamespace = true;
      }),
    },
  ],
  [
    'restartPolicy',
    { pod: rich(), env: { NATIVE_SIDECARS: 'false' } },
    { pod: rich((p) => (p.spec.restartPolicy = 'Never')), env: { NATIVE_SIDECARS: 'false' } },
  ],
  [
    'automountServiceAccountToken',
    { pod: rich() },
    { pod: rich((p) => (p.spec.automountServiceAccountToken = false)) },
  ],
  [
    'runAsUser',
    { pod: rich() },
    { pod: rich((p) => ((p.spec.securityContext as { runAsUser: number }).runAsUser = 1001)) },
  ],
  [
    'runAsGroup',
    { pod: rich() },
    { pod: rich((p) => ((p.spec.securityContext as { runAsGroup: number }).runAsGroup = 2001)) },
  ],
  [
    'a container’s runAsUser',
    { pod: rich() },
    { pod: rich((p) => (app(p).securityContext = { runAsUser: 1001 })) },
  ],
  [
    'a container’s runAsGroup',
    { pod: rich((p) => (app(p).securityContext = { runAsUser: 1001 })) },
    { pod: rich((p) => (app(p).securityContext = { runAsUser: 1001, runAsGroup: 2001 })) },
  ],
  [
    'fsGroup (containers of two uids share by group)',
    { pod: rich((p) => (app(p).securityContext = { runAsUser: 1001 })) },
    {
      pod: rich((p) => {
        app(p).securityContext = { runAsUser: 1001 };
        (p.spec.securityContext as Record<string, unknown>).fsGroup = 3000;
      }),
    },
  ],
  [
    'supplementalGroups (containers of unknown uids share by group)',
    { pod: rich((p) => (p.spec.securityContext = {})) },
    { pod: rich((p) => (p.spec.securityContext = { supplementalGroups: [65532] })) },
  ],
  ['NATIVE_SIDECARS', { pod: rich() }, { pod: rich(), env: { NATIVE_SIDECARS: 'false' } }],
  ['AGENT_IMAGE', { pod: rich() }, { pod: rich(), env: { AGENT_IMAGE: 'registry.example/agent:2.0' } }],
  ['AGENT_VAULT_ROLE', { pod: rich() }, { pod: rich(), env: { AGENT_VAULT_ROLE: 'other' } }],
  ['AGENT_MEMORY_LIMIT', { pod: rich() }, { pod: rich(), env: { AGENT_MEMORY_LIMIT: '256Mi' } }],
  [
    'ALLOW_ROTATION_COMMAND',
    { pod: rich((p) => (annotations(p)['secret-agent.io/rotation-command'] = 'node /reload.mjs')) },
    {
      pod: rich((p) => (annotations(p)['secret-agent.io/rotation-command'] = 'node /reload.mjs')),
      env: { ALLOW_ROTATION_COMMAND: 'true' },
    },
  ],
  [
    'ALLOW_VAULT_AUTH_METHODS',
    { pod: rich() },
    { pod: rich(), env: { ALLOW_VAULT_AUTH_METHODS: 'kubernetes=kubernetes-prod' } },
  ],
  ['VAULT_NAMESPACE_PINS', { pod: rich() }, { pod: rich(), env: { VAULT_NAMESPACE_PINS: 'apps=teams/a' } }],
];

/** richPod as the API server sends it: the ServiceAccount plugin's token volume, named anew per pod. */
const withServiceAccountVolume = (suffix: string) => (pod: PodDoc) => {
  (pod.spec.volumes as Record<string, unknown>[]).push({
    name: `kube-api-access-${suffix}`,
    projected: { sources: [{ serviceAccountToken: { expirationSeconds: 3607, path: 'token' } }] },
  });
  app(pod).volumeMounts = [
    ...(app(pod).volumeMounts as object[]),
    { name: `kube-api-access-${suffix}`, mountPath: '/var/run/secrets/kubernetes.io/serviceaccount' },
  ];
};

/** Pairs that differ only in what admission never reads: the second is answered from the cache. */
const IGNORED: readonly [string, Admission, Admission][] = [
  [
    'the service account’s token volume, named kube-api-access-<random> for each pod',
    { pod: rich(withServiceAccountVolume('7xk2p')) },
    { pod: rich(withServiceAccountVolume('q9zt4')) },
  ],
  ['the uid', { pod: rich() }, { pod: rich(), options: { uid: 'c9a0e0d2-4c55-4b8e-8f5e-0b6f4d1f2a33' } }],
  [
    'the name (a StatefulSet)',
    { pod: rich((p) => (p.metadata.name = 'db-0')) },
    { pod: rich((p) => (p.metadata.name = 'db-1')) },
  ],
  [
    'name and generateName (a Deployment)',
    { pod: rich() },
    {
      pod: rich((p) => {
        delete p.metadata.name;
        (p.metadata as Record<string, unknown>).generateName = 'web-7d4b9c-';
      }),
    },
  ],
  [
    'another label',
    { pod: rich() },
    { pod: rich((p) => (p.metadata.labels!['statefulset.kubernetes.io/pod-name'] = 'db-1')) },
  ],
  [
    'another annotation',
    { pod: rich() },
    { pod: rich((p) => (annotations(p)['kubectl.kubernetes.io/restartedAt'] = '2026-11-20T09:12:44Z')) },
  ],
  [
    'a mount’s name (the identity is EKS’s volume, found by its own name)',
    { pod: rich() },
    { pod: rich((p) => ((app(p).volumeMounts as { name: string }[])[0]!.name = 'token')) },
  ],
  ['a container image', { pod: rich() }, { pod: rich((p) => (app(p).image = 'registry.example/app:2.0')) }],
  [
    'container resources and probes',
    { pod: rich() },
    {
      pod: rich((p) => {
        app(p).resources = { limits: { memory: '1Gi' } };
        app(p).readinessProbe = { httpGet: { path: '/ready', port: 8080 } };
      }),
    },
  ],
  [
    'a token’s audience and expiry, what another volume holds',
    { pod: rich((p) => (p.spec.volumes as Record<string, unknown>[]).push({ name: 'data', emptyDir: {} })) },
    {
      pod: rich((p) => {
        const volumes = p.spec.volumes as Record<string, unknown>[];
        volumes[0]!.projected = {
          sources: [{ serviceAccountToken: { audience: 'other', expirationSeconds: 3600, path: 'token' } }],
        };
        volumes.push({ name: 'data', emptyDir: { medium: 'Memory' } });
      }),
    },
  ],
  [
    'tolerations, a seccomp profile, the service account',
    { pod: rich() },
    {
      pod: rich((p) => {
        p.spec.tolerations = [{ key: 'spot', operator: 'Exists' }];
        (p.spec.securityContext as Record<string, unknown>).seccompProfile = { type: 'RuntimeDefault' };
        p.spec.serviceAccountName = 'web';
      }),
    },
  ],
];

describe('the admission cache', () => {
  it('answers a replica with the decision made for the first, under its own uid and name', () => {
    const cache = new AdmissionCache(8);
    const first = { pod: rich() };
    const second = {
      pod: rich((p) => (p.metadata.name = 'web-7d4b9c-zz9q1')),
      options: { uid: '0b9d1e5c-5f0a-4a43-9a51-3c1f2f0d7e10' },
    };
    const a = cached(cache, first);
    const b = cached(cache, second);
    assert.equal(a.lookup, 'miss');
    assert.equal(b.lookup, 'hit');
    assert.equal(b.outcome, 'injected');
    assert.deepEqual(seen(b), visible(uncached(second)));
    assert.equal(response(b).uid, '0b9d1e5c-5f0a-4a43-9a51-3c1f2f0d7e10');
    assert.equal(b.log.pod, 'web-7d4b9c-zz9q1');
    assert.equal(response(a).patch, response(b).patch);
  });

  it('gives two pods that differ in any input of the decision each its own answer', () => {
    // One cache for every case as well: an entry made for one input must never answer another.
    const shared = new AdmissionCache(256);
    for (const [name, a, b] of DECIDING) {
      const own = new AdmissionCache(8);
      assert.equal(cached(own, a).lookup, 'miss', name);
      assert.equal(cached(own, b).lookup, 'miss', `${name}: the second pod was answered from the cache`);
      const [ra, rb] = [cached(shared, a), cached(shared, b)];
      assert.deepEqual(seen(ra), visible(uncached(a)), `${name}: first`);
      assert.deepEqual(seen(rb), visible(uncached(b)), `${name}: second`);
      const [ta, tb] = [ra.text, rb.text];
      assert.notEqual(ta, tb, `${name}: the case does not change the answer`);
    }
    // Again, in reverse: now every admission is a hit, and each still gets its own answer.
    for (const [name, a, b] of [...DECIDING].reverse())
      for (const x of [b, a]) {
        const r = cached(shared, x);
        assert.equal(r.lookup, 'hit', name);
        assert.deepEqual(seen(r), visible(uncached(x)), name);
      }
  });

  it('answers pods that differ only in what admission never reads from the cache', () => {
    const cache = new AdmissionCache(256);
    for (const [name, a, b] of IGNORED) {
      const ra = cached(cache, a);
      const rb = cached(cache, b);
      assert.equal(rb.lookup, 'hit', name);
      assert.deepEqual(seen(ra), visible(uncached(a)), `${name}: first`);
      assert.deepEqual(seen(rb), visible(uncached(b)), `${name}: second`);
    }
  });

  it('keeps refusals and skips too, each answer under its own uid', () => {
    const cache = new AdmissionCache(8);
    const refused = { pod: basicPod({ 'secret-agent.io/secret-x': 'not a reference' }) };
    const skipped = { pod: rich((p) => (annotations(p)['secret-agent.io/inject'] = 'false')) };
    for (const a of [refused, skipped]) {
      assert.equal(cached(cache, a).lookup, 'miss');
      const again = { ...a, options: { uid: 'f1e2d3c4-b5a6-4798-8a7b-6c5d4e3f2a1b' } };
      const r = cached(cache, again);
      assert.equal(r.lookup, 'hit');
      assert.deepEqual(seen(r), visible(uncached(again)));
    }
    assert.equal(cached(cache, refused).outcome, 'denied');
    assert.equal(cached(cache, skipped).outcome, 'skipped');
  });

  it('drops the least recently used decision beyond its size', () => {
    const cache = new AdmissionCache(2);
    const pod = (ref: string) => ({ pod: basicPod({ 'secret-agent.io/secret-x': `aws:${ref}` }) });
    const lookups = ['a', 'b', 'a', 'c', 'b', 'a', 'c'].map((ref) => cached(cache, pod(ref)).lookup);
    // c evicts b (a was used after it); b evicts a; a evicts c.
    assert.deepEqual(lookups, ['miss', 'miss', 'hit', 'miss', 'miss', 'miss', 'miss']);
    assert.equal(cache.size, 2);
  });

  it('is off at size 0, and asks nothing for what is not a Pod CREATE', () => {
    const off = new AdmissionCache(0);
    const r = cached(off, { pod: rich() });
    assert.equal(r.lookup, undefined);
    assert.deepEqual(seen(r), visible(uncached({ pod: rich() })));
    assert.equal(off.size, 0);
    const on = new AdmissionCache(8);
    assert.equal(cached(on, { pod: rich(), options: { operation: 'UPDATE' } }).lookup, undefined);
    assert.equal(on.size, 0);
  });

  it('does not keep an answer over 64 KiB', () => {
    const cache = new AdmissionCache(8);
    // Two templates, each under its own limit, whose patch is over the cache's.
    const text = `{{password}}${'.'.repeat(MAX_CACHED_CHARS / 2)}`;
    const big = {
      pod: basicPod({
        'secret-agent.io/secret-x': 'aws:prod/x',
        'secret-agent.io/template-x': text,
        'secret-agent.io/secret-y': 'aws:prod/y',
        'secret-agent.io/template-y': text,
      }),
    };
    for (let i = 0; i < 2; i++) {
      const r = cached(cache, big);
      assert.equal(r.lookup, 'miss');
      assert.equal(r.outcome, 'injected');
    }
    assert.equal(cache.size, 0);
  });

  it('holds no more than its bytes, whatever its size: the least recently used go first, decisions and body shapes alike', () => {
    const budget = 40_000;
    const cache = new AdmissionCache(10_000, budget);
    const body = (i: number) =>
      JSON.stringify(
        review(basicPod({ 'secret-agent.io/secret-x': `aws:prod/x-${i}` }), { uid: `uid-${i}` }),
      );
    let largest = 0;
    for (let i = 0; i < 200; i++) {
      cache.admitBody(body(i), defaultsFor());
      largest = Math.max(largest, cache.bytes);
      assert.ok(cache.bytes <= budget, `${cache.bytes} bytes after ${i + 1} pods`);
    }
    assert.ok(largest > budget / 2, 'it fills up to its budget');
    assert.ok(cache.size > 1 && cache.size < 200, `${cache.size} decisions kept`);
    // The newest is kept, the oldest is gone.
    const again = (i: number) =>
      cache.admitBody(
        JSON.stringify(
          review(basicPod({ 'secret-agent.io/secret-x': `aws:prod/x-${i}` }), { uid: `again-${i}` }),
        ),
        defaultsFor(),
      ).lookup;
    assert.equal(again(199), 'hit');
    assert.equal(again(0), 'miss');
    // The default budget is the one ADMISSION_CACHE_SIZE's doc states.
    assert.match(
      WEBHOOK_SETTINGS.ADMISSION_CACHE_SIZE.doc,
      new RegExp(`${MAX_CACHE_BYTES / 2 ** 20} MiB in all`),
    );
  });

  it('shares nothing a caller could change: what a cached decision logs is frozen', () => {
    const cache = new AdmissionCache(8);
    const a = { pod: rich() };
    cached(cache, a);
    const hit = cached(cache, a);
    assert.equal(hit.lookup, 'hit');
    assert.throws(() => (hit.log.files as string[]).push('changed'), TypeError);
    assert.deepEqual(seen(cached(cache, a)), visible(uncached(a)));
  });
});

/** Edits of a generated pod: of every input of the decision, and of fields it never reads. */
type Edit = (pod: Record<string, unknown>, options: ReviewOptions) => void;

const containerEdit = (edit: (c: Record<string, unknown>) => void) =>
  fc.nat().map((i): Edit => (pod) => {
    const all = [
      ...((pod.spec as PodDoc['spec']).containers ?? []),
      ...((pod.spec as PodDoc['spec']).initContainers ?? []),
    ];
    edit(all[i % all.length]!);
  });

const edits: fc.Arbitrary<Edit> = fc.oneof(
  fc
    .tuple(
      fc.constantFrom(
        'secret-agent.io/secret-db',
        'secret-agent.io/secret-token',
        'secret-agent.io/mode',
        'secret-agent.io/format-db',
        'secret-agent.io/path-db',
        'secret-agent.io/file-mode',
        'secret-agent.io/mount-path',
        'secret-agent.io/containers',
        'secret-agent.io/inject',
        'secret-agent.io/exit-with-process',
        'secret-agent.io/rotation-signal',
        'example.com/other',
      ),
      fc.option(
        fc.constantFrom(
          'aws:prod/db',
          'vault:secret/data/db#password',
          'true',
          'false',
          'init',
          'sidecar',
          'json',
          'split',
          '0440',
          '0444',
          '/etc/secrets',
          '/data',
          'app',
          'app,worker',
          'SIGHUP',
          'db/password',
        ),
        { nil: undefined },
      ),
    )
    .map(([key, value]): Edit => (pod) => {
      const meta = pod.metadata as { annotations: Record<string, string> };
      if (value === undefined) Reflect.deleteProperty(meta.annotations, key);
      else meta.annotations[key] = value;
    }),
  fc.constantFrom(undefined, 'true', 'false').map((value): Edit => (pod) => {
    const labels = (pod.metadata as { labels: Record<string, string> }).labels;
    if (value === undefined) delete labels['secret-agent.io/inject'];
    else labels['secret-agent.io/inject'] = value;
  }),
  fc.constantFrom('apps', 'secret-agent', '', 'other').map(
    (ns): Edit =>
      (_pod, options) =>
        (options.namespace = ns),
  ),
  fc.constantFrom(undefined, 'apps', 'secret-agent').map(
    (ns): Edit =>
      (pod) =>
        ((pod.metadata as Record<string, unknown>).namespace = ns),
  ),
  containerEdit((c) => (c.name = c.name === 'app' ? 'worker' : 'app')),
  fc
    .tuple(
      fc.constantFrom('SECRETS_DIR', 'AWS_ROLE_ARN', 'AWS_WEB_IDENTITY_TOKEN_FILE', 'AWS_REGION', 'OTHER'),
      fc.constantFrom('arn:aws:iam::1:role/a', 'arn:aws:iam::1:role/b', '/var/run/token/t', 'eu-west-2'),
      fc.nat(),
    )
    .chain(([name, value, i]) =>
      containerEdit((c) => {
        const env = ((c.env as unknown[] | undefined) ?? []).slice();
        if (i % 3 === 0) c.env = env.slice(1);
        else c.env = [...env, { name, value }];
      }),
    ),
  containerEdit((c) => (c.env = c.env === undefined ? [] : undefined)),
  fc
    .tuple(
      fc.constantFrom('data', 'token', 'secret-agent-secrets'),
      fc.constantFrom('/data', '/etc/secrets', '/var/run/token'),
    )
    .chain(([name, mountPath]) =>
      containerEdit(
        (c) => (c.volumeMounts = [...((c.volumeMounts as unknown[]) ?? []), { name, mountPath }]),
      ),
    ),
  fc
    .tuple(fc.constantFrom('http', 'secret-agent'), fc.constantFrom(8080, 8099, 8199))
    .chain(([name, containerPort]) =>
      containerEdit((c) => (c.ports = [...((c.ports as unknown[]) ?? []), { name, containerPort }])),
    ),
  containerEdit((c) => (c.image = 'registry.example/app:2.0')),
  fc.constantFrom('initContainers', 'volumes').map((field): Edit => (pod) => {
    const spec = pod.spec as Record<string, unknown>;
    spec[field] = spec[field] === undefined ? [] : undefined;
  }),
  fc.constantFrom('data', 'secret-agent-secrets', 'secret-agent-secrets-1').map((name): Edit => (pod) => {
    const spec = pod.spec as { volumes?: unknown[] };
    spec.volumes = [...(spec.volumes ?? []), { name, emptyDir: {} }];
  }),
  fc
    .tuple(
      fc.constantFrom('shareProcessNamespace', 'restartPolicy', 'automountServiceAccountToken'),
      fc.constantFrom(undefined, true, false, 'Never', 'OnFailure', 'Always'),
    )
    .map(
      ([field, value]): Edit =>
        (pod) =>
          ((pod.spec as Record<string, unknown>)[field] = value),
    ),
  fc
    .tuple(
      fc.constantFrom('runAsUser', 'runAsGroup', 'fsGroup', 'supplementalGroups'),
      fc.constantFrom(0, 1000, 1001),
    )
    .map(([field, value]): Edit => (pod) => {
      const spec = pod.spec as { securityContext?: Record<string, unknown> };
      spec.securityContext = {
        ...spec.securityContext,
        [field]: field === 'supplementalGroups' ? [value] : value,
      };
    }),
  fc
    .tuple(fc.constantFrom('runAsUser', 'runAsGroup'), fc.constantFrom(0, 1000, 1001), fc.nat(1))
    .map(([field, value, index]): Edit => (pod) => {
      const spec = pod.spec as { containers: Record<string, unknown>[] };
      const container = spec.containers[index];
      if (container) container.securityContext = { ...(container.securityContext as object), [field]: value };
    }),
  fc.constantFrom('db-0', 'db-1').map(
    (name): Edit =>
      (pod) =>
        ((pod.metadata as Record<string, unknown>).name = name),
  ),
  fc.uuid().map(
    (uid): Edit =>
      (_pod, options) =>
        (options.uid = uid),
  ),
);

describe('the admission cache, property', () => {
  it('answers every generated pod and its near twins exactly as admission without a cache does', () => {
    // Shared by every run: small, so entries are evicted and made again, and twins meet each other's.
    const cache = new AdmissionCache(8);
    let hits = 0;
    fc.assert(
      fc.property(
        admissionReview,
        fc.array(fc.array(edits, { minLength: 1, maxLength: 3 }), { minLength: 1, maxLength: 5 }),
        fc.boolean(),
        (generated, twins, classic) => {
          const sent = JSON.parse(generated.body) as { request: { object: Record<string, unknown> } };
          const base = sent.request.object;
          const env: Record<string, string> = classic ? { NATIVE_SIDECARS: 'false' } : {};
          const admissions: Admission[] = [{ pod: base, env }];
          for (const twin of twins) {
            const pod = structuredClone(base);
            const options: ReviewOptions = {};
            for (const edit of twin) edit(pod, options);
            admissions.push({ pod, options, env });
          }
          // Each one twice: the second time is a hit unless a twin in between evicted it.
          for (const a of [...admissions, ...admissions]) {
            const r = cached(cache, a);
            if (r.lookup === 'hit') hits++;
            assert.deepEqual(seen(r), visible(uncached(a)));
          }
        },
      ),
      { numRuns: 150 },
    );
    assert.ok(hits > 100, `only ${hits} hits: the property hardly reached the cache`);
  });
});

/** decodeAdmissionReview and admitPod over the body as sent: the answer admitBody must give, or its error. */
function uncachedBody(text: string, env: Record<string, string> = {}) {
  const request = decodeAdmissionReview(text);
  const raw = (JSON.parse(text) as { request: { object: unknown } }).request.object;
  const result = admitPod(request.pod ? { ...request, pod: raw as PodShape } : request, defaultsFor(env));
  return { uid: request.uid, namespace: request.namespace, dryRun: request.dryRun, ...visible(result) };
}

/** admitBody's answer, checked against the body decoded in full (errors included). */
function admittedBody(cache: AdmissionCache, text: string, env: Record<string, string> = {}) {
  let expected: ReturnType<typeof uncachedBody> | Error;
  try {
    expected = uncachedBody(text, env);
  } catch (e) {
    expected = e as Error;
  }
  if (expected instanceof Error) {
    assert.throws(() => cache.admitBody(text, defaultsFor(env)), { message: expected.message });
    return undefined;
  }
  const r = cache.admitBody(text, defaultsFor(env));
  const { uid, namespace, dryRun } = r.request;
  assert.deepEqual({ uid, namespace, dryRun, ...seen(r) }, expected);
  return r;
}

/** The body with the value of its n-th `"uid":"…"` replaced (n counts from 0). */
function withUid(text: string, uid: string, n = 0): string {
  let at = -1;
  for (let i = 0; i <= n; i++) {
    at = text.indexOf('"uid":"', at + 1);
    if (at < 0) return text;
  }
  const start = at + '"uid":"'.length;
  return text.slice(0, start) + uid + text.slice(text.indexOf('"', start));
}

const uidN = (i: number) => `0f8fad5b-d9cb-469f-a165-70867728${String(i).padStart(4, '0')}`;

describe('the admission cache, answering a body without parsing it', () => {
  it('answers bodies that differ in their uid alone without JSON.parse, once two decodes agreed', () => {
    const cache = new AdmissionCache(8);
    const text = body({ pod: rich() });
    const unparsed: number[] = [];
    for (let i = 0; i < 5; i++) {
      assert.equal(admittedBody(cache, withUid(text, uidN(i)))!.request.uid, uidN(i));
      unparsed.push(cache.unparsed);
    }
    assert.deepEqual(unparsed, [0, 0, 1, 2, 3]);
    // A body the cache has not seen the shape of is decoded, like any other.
    admittedBody(cache, withUid(body({ pod: rich((p) => (p.metadata.name = 'other')) }), uidN(9)));
    assert.equal(cache.unparsed, 3);
  });

  it('decodes every body whose first "uid" is not request.uid, or not plain text', () => {
    const reviewText = (request: string) =>
      `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":${request}}`;
    const object = JSON.stringify(rich((p) => ((p.metadata as Record<string, unknown>).uid = 'M')));
    const rest = `"kind":{"group":"","version":"v1","kind":"Pod"},"namespace":"apps","operation":"CREATE"`;
    const shapes: [string, (uid: string) => string][] = [
      [
        'the object (its metadata.uid) first',
        (uid) => reviewText(`{"object":${object},"uid":"${uid}",${rest}}`),
      ],
      [
        'request.uid twice, the last one wins',
        (uid) => reviewText(`{"uid":"${uid}",${rest},"uid":"U","object":${object}}`),
      ],
      [
        'request.uid twice, alike',
        (uid) => reviewText(`{"uid":"${uid}",${rest},"uid":"${uidN(1)}","object":${object}}`),
      ],
      ['a uid with an escape', (uid) => reviewText(`{"uid":"${uid}\\u0041",${rest},"object":${object}}`)],
      [
        'a uid over 128 characters',
        (uid) => reviewText(`{"uid":"${uid.repeat(4)}",${rest},"object":${object}}`),
      ],
      ['an empty uid', () => reviewText(`{"uid":"",${rest},"object":${object}}`)],
    ];
    for (const [name, shape] of shapes) {
      const cache = new AdmissionCache(8);
      for (let i = 0; i < 4; i++) admittedBody(cache, shape(uidN(i % 2 === 0 ? 1 : i)));
      assert.equal(cache.unparsed, 0, name);
    }
  });

  it('keeps a shape per set of settings', () => {
    const cache = new AdmissionCache(8);
    const text = body({ pod: rich() });
    for (let i = 0; i < 3; i++) admittedBody(cache, withUid(text, uidN(i)));
    const classic = { NATIVE_SIDECARS: 'false' };
    const r = admittedBody(cache, withUid(text, uidN(3)), classic)!;
    assert.equal(r.lookup, 'miss');
    assert.equal(cache.unparsed, 1);
  });
});

describe('the admission cache, answering bodies, property', () => {
  it('answers generated bodies, their uids changed anywhere and their keys reordered, as a full decode does', () => {
    const cache = new AdmissionCache(8);
    const reordered = (text: string, objectFirst: boolean, extraUids: number) => {
      const doc = JSON.parse(text) as {
        request: Record<string, unknown> & { object: Record<string, unknown> };
      };
      const { object, ...rest } = doc.request;
      const metadata = (object.metadata ?? {}) as Record<string, unknown>;
      const pod = {
        ...object,
        metadata: {
          ...(extraUids > 0 ? { uid: 'a1b2' } : {}),
          ...metadata,
          ...(extraUids > 1
            ? { ownerReferences: [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web', uid: 'c3d4' }] }
            : {}),
        },
      };
      const request = objectFirst ? { object: pod, ...rest } : { ...rest, object: pod };
      return JSON.stringify({ ...doc, request });
    };
    let unparsed = 0;
    fc.assert(
      fc.property(
        admissionReview,
        fc.boolean(),
        fc.nat({ max: 2 }),
        fc.array(fc.tuple(fc.nat({ max: 3 }), fc.nat({ max: 3 }), fc.constantFrom('', 'x', '"', '\\\\')), {
          minLength: 1,
          maxLength: 8,
        }),
        (generated, objectFirst, extraUids, sends) => {
          const text = reordered(generated.body, objectFirst, extraUids);
          for (const [which, n, odd] of sends) {
            // Mostly another uid where request.uid is; sometimes at another "uid", or not plain text.
            const sent = withUid(text, `${uidN(which)}${odd}`, n % 2 === 0 ? 0 : n);
            try {
              JSON.parse(sent);
            } catch {
              continue;
            }
            admittedBody(cache, sent);
          }
          unparsed = cache.unparsed;
        },
      ),
      { numRuns: 200 },
    );
    assert.ok(
      unparsed > 50,
      `only ${unparsed} bodies answered without parsing: the property hardly reached that`,
    );
  });
});
