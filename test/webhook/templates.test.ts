import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { Pod } from 'kubernetes-models/v1';
import { ClusterRole, RoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1';
import { parseAllDocuments } from 'yaml';
import { parseAgentConfig } from '../../agent/config/parse-agent-config.ts';
import type { AgentConfig } from '../../agent/contract/agent-config.ts';
import { sourceKey } from '../../agent/contract/reference.ts';
import { loadFormats } from '../../agent/format/load-formats.ts';
import { renderFiles } from '../../agent/format/render-files.ts';
import { assertNoCanary, canary } from '../support/canary.ts';
import {
  admitThroughWebhook,
  basicPod,
  containerEnv,
  decodePatch,
  mutate,
  validatePod,
  type PodDoc,
} from './fixtures.ts';

/**
 * Template and notification annotations at admission: what the webhook renders for the agent (and
 * that the agent reads it back the same), and what it refuses, naming the annotation, the line and
 * the column, without showing the template's text.
 */

/** What a cluster's webhook sets so that aws:NAME references are admitted. */
const CLUSTER = { AGENT_AWS_REGION: 'eu-west-1' };
const P = 'secret-agent.io/';

const admit = (pod: PodDoc, env: Record<string, string> = {}) =>
  admitThroughWebhook(pod, { ...CLUSTER, ...env });

/** The mutated pod, checked against the v1 Pod schema, and every agent container's env. */
function inject(pod: PodDoc, env: Record<string, string> = {}) {
  const result = admit(pod, env);
  assert.equal(result.outcome, 'injected', JSON.stringify(result.review.response.status));
  const mutated = mutate(pod, decodePatch(result.review.response));
  validatePod(mutated);
  const containers = [...(mutated.spec.initContainers ?? []), ...mutated.spec.containers];
  const agents = containers.filter((c) => String(c.name).startsWith('secret-agent'));
  assert.ok(agents.length > 0, 'an agent container was added');
  return { mutated, containers, agents, envs: agents.map((a) => containerEnv(a, mutated)), result };
}

/** The one refusal of a denied pod, with the response checked: 400, no patch, the fix given. */
function refusal(pod: PodDoc, env: Record<string, string> = {}): string {
  const result = admit(pod, env);
  assert.equal(result.outcome, 'denied', JSON.stringify(result.review.response));
  const response = result.review.response;
  assert.equal(response.allowed, false);
  assert.equal(response.patch, undefined);
  assert.equal(response.status?.code, 400);
  assert.match(response.status!.message, /Fix: /);
  assertNoCanary(JSON.stringify(result.review), 'the AdmissionReview response');
  assertNoCanary(JSON.stringify(result.log), 'the decision log');
  return response.status!.message;
}

// Text kept exactly: newlines, indentation, a tab, a comment, non-ASCII and the final newline.
const TEMPLATE = [
  '{{! the app reads this at start }}',
  'url = postgres://{{username}}:{{password}}@{{host}}:{{#port}}{{port}}{{/port}}{{^port}}5432{{/port}}/app',
  '\tapi_key = {{secrets.api.token}}',
  '  région = {{secrets.api.region}}',
  '',
].join('\n');

const TEMPLATED = {
  [`${P}secret-dburl`]: 'aws:prod/db',
  [`${P}template-dburl`]: TEMPLATE,
  [`${P}secret-api`]: 'aws:prod/api',
};

describe('template annotations', () => {
  for (const [label, env, mode] of [
    ['a native sidecar', {}, undefined],
    ['an init container and a classic sidecar', { NATIVE_SIDECARS: 'false' }, undefined],
    ['an init container only', {}, 'init'],
  ] as const) {
    it(`give every agent container (${label}) the template, its format and a name per secret`, async () => {
      const annotations = { ...TEMPLATED, ...(mode ? { [`${P}mode`]: mode } : {}) };
      const { containers, agents, envs } = inject(basicPod(annotations), env);
      assert.equal(agents.length, label === 'an init container and a classic sidecar' ? 2 : 1);
      for (const e of envs) {
        // Secrets are numbered by file name: api, then dburl.
        assert.equal(e.SECRET_0_REF, 'aws:prod/api');
        assert.equal(e.SECRET_0_FILENAME, 'api');
        assert.equal(e.SECRET_0_NAME, 'api');
        assert.equal(e.SECRET_0_FORMAT, undefined, 'raw, the default, is not rendered');
        assert.equal(e.SECRET_0_TEMPLATE, undefined);
        assert.equal(e.SECRET_1_REF, 'aws:prod/db');
        assert.equal(e.SECRET_1_FILENAME, 'dburl');
        assert.equal(e.SECRET_1_NAME, 'dburl');
        assert.equal(e.SECRET_1_FORMAT, 'template');
        assert.equal(e.SECRET_1_TEMPLATE, TEMPLATE, 'the text, byte for byte');

        // Round trip: the agent's own parser reads what the webhook rendered…
        const config = parseAgentConfig(e);
        assert.deepEqual(
          config.secrets.map((s) => [s.id, s.name, s.format, s.filename, s.template]),
          [
            ['SECRET_0', 'api', 'raw', 'api', undefined],
            ['SECRET_1', 'dburl', 'template', 'dburl', TEMPLATE],
          ],
        );
        // …compiles the template at start-up, and the names it reads are the secrets' names.
        assert.equal(await render(config, VALUES), EXPECTED);
      }
      // The template goes to the agent only: the app's containers get the mount and SECRETS_DIR.
      for (const c of containers.filter((x) => !agents.includes(x)))
        assert.ok(!JSON.stringify(c).includes('{{'), `${String(c.name)} got no template`);
    });
  }

  it('names no secret when the pod has no template, so other pods render as before', () => {
    const { envs } = inject(
      basicPod({ [`${P}secret-db`]: 'aws:prod/db', [`${P}format-db`]: 'yaml', [`${P}secret-api`]: 'aws:a' }),
    );
    for (const e of envs) {
      assert.equal(e.SECRET_1_FORMAT, 'yaml');
      assert.deepEqual(
        Object.keys(e).filter((k) => /^SECRET_\d+_(NAME|TEMPLATE)$/.test(k)),
        [],
      );
    }
  });

  it('take a multi-line YAML block as written, and a template that reads only other secrets', async () => {
    const { envs } = inject(
      basicPod({
        [`${P}secret-bundle.pem`]: 'aws:prod/web-key',
        [`${P}template-bundle.pem`]: '{{secrets.cert.tls.crt}}{{.}}',
        [`${P}secret-cert`]: 'aws:prod/web-cert',
        [`${P}format-cert`]: 'split',
      }),
    );
    const config = parseAgentConfig(envs[0]!);
    const files = await renderAll(config, {
      'aws:prod/web-key': '-----BEGIN PRIVATE KEY-----\nk\n-----END PRIVATE KEY-----\n',
      'aws:prod/web-cert': JSON.stringify({
        'tls.crt': '-----BEGIN CERTIFICATE-----\nc\n-----END CERTIFICATE-----\n',
      }),
    });
    assert.equal(
      files.get('bundle.pem'),
      '-----BEGIN CERTIFICATE-----\nc\n-----END CERTIFICATE-----\n-----BEGIN PRIVATE KEY-----\nk\n-----END PRIVATE KEY-----\n',
    );
    assert.equal(files.get('cert/tls.crt'), '-----BEGIN CERTIFICATE-----\nc\n-----END CERTIFICATE-----\n');
  });
});

const VALUES = {
  'aws:prod/db': JSON.stringify({ username: 'app', password: 'pw', host: 'db.internal' }),
  'aws:prod/api': JSON.stringify({ token: 'tok', region: 'eu-west-1' }),
};
const EXPECTED = 'url = postgres://app:pw@db.internal:5432/app\n\tapi_key = tok\n  région = eu-west-1\n';

/** Every file the agent would write for `values` (by reference, without #key). */
async function renderAll(config: AgentConfig, values: Record<string, string>): Promise<Map<string, string>> {
  const formats = await loadFormats(config.secrets);
  const bytes = (spec: AgentConfig['secrets'][number]) => {
    const value = values[sourceKey(spec.ref)];
    assert.ok(value !== undefined, sourceKey(spec.ref));
    return Buffer.from(value);
  };
  const byName = new Map(config.secrets.flatMap((s) => (s.name ? [[s.name, s] as const] : [])));
  const files = new Map<string, string>();
  for (const spec of config.secrets)
    for (const f of renderFiles(spec, bytes(spec), formats, (name) => {
      const other = byName.get(name);
      return other && bytes(other);
    }))
      files.set(f.path, Buffer.from(f.bytes).toString('utf8'));
  return files;
}

async function render(config: AgentConfig, values: Record<string, string>): Promise<string | undefined> {
  return (await renderAll(config, values)).get('dburl');
}

describe('template annotations that are refused', () => {
  const key = `${P}template-dburl`;
  const base = { [`${P}secret-dburl`]: 'aws:prod/db', [`${P}secret-api`]: 'aws:prod/api' };

  it('a syntax error: the annotation, the line and the column, and none of the template’s text', () => {
    const text = canary('in-the-template-text');
    const cases: [string, string, RegExp][] = [
      [`${text}\n  {{/db}}\n`, 'line 2, column 3', /unopened section/],
      // Where the section left open starts: that is where the fix goes.
      [
        `${text}\nuser={{username}}\n{{#tls}}\nsslmode=require\n{{/tsl}}\n`,
        'line 3, column 1',
        /unclosed section/,
      ],
      // Where the tag left open starts, not where mustache gave up (the end of the text).
      [`${text}\n\npassword = {{password`, 'line 3, column 12', /a tag is not closed with \}\}/],
      [`${text} {{}}`, `line 1, column ${text.length + 2}`, /a tag names nothing/],
    ];
    for (const [template, where, what] of cases) {
      const message = refusal(basicPod({ ...base, [key]: template }));
      assert.ok(message.startsWith(`secret-agent cannot inject this pod: ${key}: ${where}: `), message);
      assert.match(message, what);
      assertNoCanary(message, 'the refusal');
      // Nothing of the text outside the tags: not its lines, not its words.
      for (const line of template.split('\n').filter((l) => l.length > 3 && !l.includes('{{')))
        assert.ok(!message.includes(line), `the refusal shows ${JSON.stringify(line)}`);
    }
  });

  it('a {{secrets.NAME}} that is no file of the pod, with the names there are', () => {
    const message = refusal(basicPod({ ...base, [key]: 'url={{username}}\nkey={{secrets.nope.x}}' }));
    assert.equal(
      message,
      `secret-agent cannot inject this pod: ${key}: line 2, column 5: {{secrets.nope.x}} names no secret the agent fetches (names: "api", "dburl"). Fix: use the <file> part of one of this pod's ${P}secret-<file> annotations after secrets.`,
    );
  });

  it('a partial', () => {
    const message = refusal(basicPod({ ...base, [key]: '# config\n{{> header}}' }));
    assert.ok(message.includes(`${key}: line 2, column 1: {{> header}} includes a partial`), message);
    assert.match(message, /Fix: write the text in place/);
  });

  it('format-<file> set to another format beside template-<file>', () => {
    const message = refusal(basicPod({ ...base, [key]: '{{username}}', [`${P}format-dburl`]: 'yaml' }));
    assert.ok(message.includes(`${P}format-dburl: is "yaml", but ${key} makes the file a template`), message);
    assert.ok(message.includes(`Fix: remove ${P}format-dburl, or remove ${key}`), message);
  });

  it('format-<file>: template set explicitly beside template-<file> is admitted (it is what the template implies)', () => {
    const { envs } = inject(basicPod({ ...base, [key]: '{{username}}', [`${P}format-dburl`]: 'template' }));
    assert.equal(envs[0]!.SECRET_1_FORMAT, 'template');
  });

  it('format-<file>: template without template-<file>', () => {
    const message = refusal(basicPod({ ...base, [`${P}format-dburl`]: 'template' }));
    assert.ok(message.includes(`${P}format-dburl: is "template", but ${key} is not set`), message);
    assert.ok(message.includes(`Fix: add ${key} with the file's text`), message);
  });

  it('template-<file> without secret-<file>', () => {
    const message = refusal(basicPod({ [`${P}secret-api`]: 'aws:prod/api', [key]: '{{username}}' }));
    assert.ok(message.includes(`${key}: configures file "dburl", but ${P}secret-dburl is not set`), message);
    assert.ok(message.includes(`Fix: add ${P}secret-dburl: <reference>, or remove this annotation`), message);
  });

  it('lists a bad template beside the pod’s other problems', () => {
    const message = refusal(basicPod({ ...base, [key]: '{{#a}}', [`${P}mode`]: 'both' }));
    assert.match(message, /\(2 problems\)/);
    assert.ok(message.includes(`${key}: line 1, column 1: unclosed section`), message);
    assert.ok(message.includes(`${P}mode: "both" is not an injection mode`), message);
  });
});

/** The fenced YAML blocks of a doc, parsed, with the objects of the given kind. */
function docObjects(doc: string, kind: string): Record<string, unknown>[] {
  const text = readFileSync(new URL(`../../${doc}`, import.meta.url), 'utf8');
  return [...text.matchAll(/```yaml\n([\s\S]*?)```/g)]
    .flatMap((m) => parseAllDocuments(m[1]!).map((d) => d.toJS() as Record<string, unknown>))
    .filter((o) => o?.kind === kind);
}

describe('rotation annotations', () => {
  it('the sentinel-file pod of docs/rotation.md: admitted, its env read back, and its probe fits the hold', () => {
    const pods = docObjects('docs/rotation.md', 'Pod').filter((p) =>
      JSON.stringify(p).includes('rotation-sentinel-file'),
    );
    assert.equal(pods.length, 1, 'docs/rotation.md has one sentinel example pod');
    const pod = pods[0] as unknown as PodDoc;
    new Pod(pod as unknown as ConstructorParameters<typeof Pod>[0]).validate();
    const { mutated, envs } = inject(structuredClone(pod));
    const annotations = pod.metadata.annotations!;
    for (const e of envs) {
      assert.equal(e.ROTATION_SENTINEL_FILE, annotations[`${P}rotation-sentinel-file`]);
      assert.equal(e.ROTATION_SENTINEL_HOLD, annotations[`${P}rotation-sentinel-hold`]);
      const config = parseAgentConfig(e);
      const sentinel = config.sidecar.sentinel;
      assert.ok(sentinel, 'the agent reads the sentinel settings');
      // The rule docs/rotation.md states, with the documented probe.
      const app = mutated.spec.containers.find((c) => c.name === 'app')!;
      const probe = app.livenessProbe as {
        exec: { command: string[] };
        initialDelaySeconds: number;
        periodSeconds: number;
        failureThreshold: number;
      };
      assert.deepEqual(app.livenessProbe, pod.spec.containers[0]!.livenessProbe, 'the app’s probe is kept');
      const holdSeconds = sentinel.holdMs / 1000;
      assert.ok(probe.periodSeconds * probe.failureThreshold < holdSeconds, 'fails while the file is there');
      assert.ok(probe.initialDelaySeconds > holdSeconds, 'first probed after the file is gone');
      // The probe looks where the app sees the file: its mount of the secrets volume (the agent
      // writes the same volume at its own path), then the sentinel path.
      const mount = (app.volumeMounts as { name: string; mountPath: string; readOnly?: boolean }[]).find(
        (m) => m.name === 'secret-agent-secrets',
      )!;
      assert.equal(mount.mountPath, annotations[`${P}mount-path`] ?? '/etc/secrets');
      assert.ok(probe.exec.command.join(' ').includes(`${mount.mountPath}/${sentinel.path}`));
      assert.equal(mount.readOnly, true, 'the app cannot remove the file: the agent does');
    }
  });

  it('debounce and Kubernetes Events: the env, read back, and the pod identity the events need', () => {
    const { envs, agents } = inject(
      basicPod({
        [`${P}secret-db`]: 'aws:prod/db',
        [`${P}rotation-debounce`]: '2s',
        [`${P}kubernetes-events`]: 'true',
        [`${P}kubernetes-events-failing-after`]: '5',
      }),
    );
    for (const e of envs) {
      assert.equal(e.ROTATION_DEBOUNCE, '2s');
      assert.equal(e.KUBERNETES_EVENTS, 'true');
      assert.equal(e.KUBERNETES_EVENTS_FAILING_AFTER, '5');
      const config = parseAgentConfig(e);
      assert.equal(config.sidecar.debounceMs, 2000);
      assert.deepEqual(config.events, { failingAfter: 5 });
      assert.equal(config.pod.name, 'web-7d4b9c-xk2p9');
      assert.equal(config.pod.namespace, 'apps');
    }
    // From the downward API, so a pod made from a template (generateName) names itself.
    for (const agent of agents) {
      const env = agent.env as { name: string; valueFrom?: { fieldRef?: { fieldPath: string } } }[];
      assert.equal(env.find((x) => x.name === 'POD_NAME')?.valueFrom?.fieldRef?.fieldPath, 'metadata.name');
      assert.equal(
        env.find((x) => x.name === 'POD_NAMESPACE')?.valueFrom?.fieldRef?.fieldPath,
        'metadata.namespace',
      );
    }
  });

  it('the RoleBinding in docs/rotation.md binds the ClusterRole in deploy/agent-rbac that grants create events', () => {
    const [binding] = docObjects('docs/rotation.md', 'RoleBinding').filter(
      (b) => (b as { roleRef?: { name?: string } }).roleRef?.name === 'secret-agent-events',
    );
    assert.ok(binding, 'docs/rotation.md binds secret-agent-events');
    new RoleBinding(binding as unknown as ConstructorParameters<typeof RoleBinding>[0]).validate();
    const roles = parseAllDocuments(
      readFileSync(new URL('../../deploy/agent-rbac/clusterroles.yaml', import.meta.url), 'utf8'),
    ).map((d) => d.toJS() as NonNullable<ConstructorParameters<typeof ClusterRole>[0]>);
    const role = roles.find((r) => r.metadata?.name === 'secret-agent-events');
    assert.ok(role, 'deploy/agent-rbac has the ClusterRole secret-agent-events');
    new ClusterRole(role).validate();
    assert.equal((binding as { roleRef: { kind: string } }).roleRef.kind, 'ClusterRole');
    assert.deepEqual(
      (role.rules ?? []).flatMap((r) =>
        r.verbs.flatMap((v) => (r.resources ?? []).map((res) => `${v} ${(r.apiGroups ?? []).join()}/${res}`)),
      ),
      ['create /events'],
    );
  });

  const ok = { [`${P}secret-db-password`]: 'aws:prod/db#password' };
  const refused: [string, Record<string, string>, string, RegExp][] = [
    [
      'a sentinel path that is a secret’s file',
      { ...ok, [`${P}rotation-sentinel-file`]: 'db-password' },
      `${P}rotation-sentinel-file`,
      /"db-password" is where SECRET_0 writes its files .*Fix: name a file no secret writes, e.g\. \.rotated/,
    ],
    [
      'a sentinel path inside a split secret’s directory',
      {
        ...ok,
        [`${P}secret-tls`]: 'aws:prod/tls',
        [`${P}format-tls`]: 'split',
        [`${P}rotation-sentinel-file`]: 'tls/.rotated',
      },
      `${P}rotation-sentinel-file`,
      /"tls\/\.rotated" is where SECRET_1 writes its files/,
    ],
    [
      'a sentinel path that needs a secret’s file as its directory',
      { ...ok, [`${P}rotation-sentinel-file`]: 'db-password/.rotated' },
      `${P}rotation-sentinel-file`,
      /is where SECRET_0 writes its files/,
    ],
    [
      'a sentinel path outside the volume',
      { ...ok, [`${P}rotation-sentinel-file`]: '../.rotated' },
      `${P}rotation-sentinel-file`,
      /"\.\." segment/,
    ],
    [
      'a hold without a sentinel file',
      { ...ok, [`${P}rotation-sentinel-hold`]: '30s' },
      `${P}rotation-sentinel-hold`,
      /is set without ROTATION_SENTINEL_FILE/,
    ],
    [
      'a debounce that is not a duration',
      { ...ok, [`${P}rotation-debounce`]: 'soon' },
      `${P}rotation-debounce`,
      /"soon" is not a duration/,
    ],
    [
      'kubernetes-events that is not a boolean',
      { ...ok, [`${P}kubernetes-events`]: 'yes' },
      `${P}kubernetes-events`,
      /"yes"/,
    ],
    [
      'a failing-after that is not a count',
      { ...ok, [`${P}kubernetes-events-failing-after`]: '0' },
      `${P}kubernetes-events-failing-after`,
      /"0" is not a whole number from 1 to 1000/,
    ],
  ];
  for (const [name, annotations, field, detail] of refused) {
    it(`refuses ${name}, naming ${field}`, () => {
      const message = refusal(basicPod(annotations));
      assert.ok(message.includes(`${field}: `), message);
      assert.match(message, detail);
    });
  }

  it('admits a sentinel file beside the secrets, in a directory of its own', () => {
    for (const path of ['.rotated', 'state/rotated', 'db-password.rotated']) {
      const { envs } = inject(basicPod({ ...ok, [`${P}rotation-sentinel-file`]: path }));
      assert.equal(parseAgentConfig(envs[0]!).sidecar.sentinel?.path, path);
    }
  });
});
