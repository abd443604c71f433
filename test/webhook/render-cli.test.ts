/**
 * `node dist/webhook.js render`: the built bundle, run as a child process with nothing of this
 * machine's env but PATH, as CI and a laptop run it. Every output is checked for canaries.
 *
 * Golden files: test/webhook/golden/render/<kind>.input.yaml is rendered into <kind>.output.yaml, with
 * <kind>.stderr.txt, with the cluster defaults below (CLUSTER_DEFAULTS). After an intended change to what the webhook injects, regenerate them and review
 * the diff like code:
 *
 *   node_modules/.bin/node images/build.ts webhook
 *   UPDATE_GOLDEN=1 node_modules/.bin/node --test test/webhook/render-cli.test.ts
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { DaemonSet, Deployment, ReplicaSet, StatefulSet } from 'kubernetes-models/apps/v1';
import { CronJob, Job } from 'kubernetes-models/batch/v1';
import { Pod } from 'kubernetes-models/v1';
import { pino } from 'pino';
import { parseAllDocuments, stringify } from 'yaml';
import { parseWebhookConfig } from '../../webhook/config/parse-webhook-config.ts';
import { WEBHOOK_SETTINGS } from '../../webhook/config/settings.ts';
import { YAML_OPTIONS } from '../../webhook/cli/manifest-input.ts';
import { startWebhook, type RunningWebhook } from '../../webhook/start.ts';
import { assertNoCanary, canary } from '../support/canary.ts';
import { ROOT } from '../support/run-agent.ts';
import { AGENT_IMAGE, decodePatch, mutate, review, validatePod, type PodDoc } from './fixtures.ts';
import { call } from './https-call.ts';
import { certDir, makeServingPair, type ServingPair } from './tls-certs.ts';

const WEBHOOK_JS = join(ROOT, 'dist/webhook.js');
const GOLDEN = join(ROOT, 'test/webhook/golden/render');
const UPDATE = process.env.UPDATE_GOLDEN === '1';
const STATUS = 'secret-agent.io/status';

interface Run {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** `node dist/webhook.js ARGS`, stdin given or empty; outputs canary-checked. */
function webhookJs(args: readonly string[], options: { stdin?: string; env?: Record<string, string> } = {}) {
  return new Promise<Run>((resolve, reject) => {
    const child = spawn(process.execPath, [WEBHOOK_JS, ...args], {
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...options.env },
      stdio: ['pipe', 'pipe', 'pipe'],
      timeout: 60_000,
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => {
      try {
        assertNoCanary(stdout, 'render stdout');
        assertNoCanary(stderr, 'render stderr');
        resolve({ code, stdout, stderr });
      } catch (e) {
        reject(e as Error);
      }
    });
    child.stdin.end(options.stdin ?? '');
  });
}

/** The webhook's cluster defaults, from env as in a CI job: AWS names and Vault paths need them. */
const CLUSTER_DEFAULTS = { AGENT_AWS_REGION: 'eu-west-1', AGENT_VAULT_ADDR: 'https://vault.example:8200' };

const render = (args: readonly string[], options: { stdin?: string; env?: Record<string, string> } = {}) =>
  webhookJs(['render', ...args], { ...options, env: { AGENT_IMAGE, ...CLUSTER_DEFAULTS, ...options.env } });

type Obj = Record<string, unknown> & { kind: string; metadata?: { name?: string; namespace?: string } };

/** The documents of a YAML stream as Kubernetes reads them. */
function yamlDocs(text: string): Obj[] {
  return parseAllDocuments(text, YAML_OPTIONS)
    .filter((d) => d.contents !== null)
    .map((d) => {
      assert.deepEqual(d.errors, [], 'the output is valid YAML');
      return d.toJS() as Obj;
    });
}

const MODELS: Record<string, new (o: never) => { validate(): void }> = {
  Pod,
  Deployment,
  StatefulSet,
  DaemonSet,
  ReplicaSet,
  Job,
  CronJob,
};

/** The pod an object's controller would create (the Pod itself for a Pod). */
function podOf(object: Obj): PodDoc {
  if (object.kind === 'Pod') return object as unknown as PodDoc;
  const spec = object.spec as Record<string, Record<string, Record<string, unknown>>>;
  const template = (
    object.kind === 'CronJob' ? (spec.jobTemplate!.spec as Record<string, unknown>).template : spec.template
  ) as { metadata: PodDoc['metadata']; spec: PodDoc['spec'] };
  return { apiVersion: 'v1', kind: 'Pod', metadata: template.metadata, spec: template.spec };
}

/** Both the object and its pod pass the Kubernetes schema. */
function validateRendered(object: Obj): void {
  const Model = MODELS[object.kind];
  assert.ok(Model, `no model for ${object.kind}`);
  new Model(object as never).validate();
  validatePod(podOf(object));
}

function agentsOf(pod: PodDoc): Record<string, unknown>[] {
  return [...(pod.spec.initContainers ?? []), ...pod.spec.containers].filter((c) => c.image === AGENT_IMAGE);
}

function tempDir() {
  const dir = mkdtempSync(join(tmpdir(), 'render-cli-'));
  return { dir, [Symbol.dispose]: () => rmSync(dir, { recursive: true, force: true }) };
}

/** A Deployment whose pods opt in; `labelled: false` leaves out the label the objectSelector matches. */
function deployment(
  name: string,
  annotations: Record<string, string>,
  options: { labelled?: boolean; namespace?: string } = {},
): Obj {
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name, ...(options.namespace ? { namespace: options.namespace } : {}) },
    spec: {
      selector: { matchLabels: { app: name } },
      template: {
        metadata: {
          labels: { app: name, ...(options.labelled === false ? {} : { 'secret-agent.io/inject': 'true' }) },
          annotations: { 'secret-agent.io/inject': 'true', ...annotations },
        },
        // The app's uid is named: the files are its own (0400), with no group-sharing warning.
        spec: { securityContext: { runAsUser: 1000 }, containers: [{ name: 'app', image: 'nginx:1.27' }] },
      },
    },
  };
}

/** A YAML stream (kubectl reads a stream that starts with `{` as JSON, and so does render). */
const yaml = (...objects: Obj[]) => objects.map((o) => stringify(o)).join('---\n');

describe('render: golden files, one per workload kind', () => {
  // Job and DaemonSet as on a cluster before 1.29 (classic sidecars), the rest with native sidecars.
  const cases: [string, string][] = [
    ['pod', '1.31'],
    ['deployment', '1.31'],
    ['statefulset', '1.30'],
    ['daemonset', '1.28'],
    ['replicaset', '1.29'],
    ['job', '1.28'],
    ['cronjob', '1.31'],
    // Secrets as env vars: the command the wrapper runs (docs/env.md).
    ['env-vars', '1.31'],
  ];
  for (const [kind, version] of cases)
    it(`${kind} (--cluster-version ${version})`, async () => {
      const input = join(GOLDEN, `${kind}.input.yaml`);
      const run = await render(['-f', input, '--cluster-version', version]);
      assert.equal(run.code, 0, run.stderr);
      const outputFile = join(GOLDEN, `${kind}.output.yaml`);
      const stderrFile = join(GOLDEN, `${kind}.stderr.txt`);
      if (UPDATE) {
        writeFileSync(outputFile, run.stdout);
        writeFileSync(stderrFile, run.stderr);
      }
      assert.equal(
        run.stdout,
        readFileSync(outputFile, 'utf8'),
        `${kind}: stdout differs from the golden file`,
      );
      assert.equal(
        run.stderr,
        readFileSync(stderrFile, 'utf8'),
        `${kind}: stderr differs from the golden file`,
      );

      const [rendered, ...rest] = yamlDocs(run.stdout);
      // Whatever follows the workload in its input (a ConfigMap) passes unchanged.
      assert.deepEqual(rest, yamlDocs(readFileSync(input, 'utf8')).slice(1));
      validateRendered(rendered!);
      const pod = podOf(rendered!);
      assert.equal(pod.metadata.annotations?.[STATUS], 'injected');
      assert.ok(agentsOf(pod).length > 0, 'the agent is injected');
      // Comments stay: every golden input starts with one.
      const comment = readFileSync(input, 'utf8').split('\n')[0]!;
      assert.match(comment, /^# /);
      assert.ok(run.stdout.startsWith(`${comment}\n`), 'the leading comment is kept');

      // Rendering twice changes nothing: the webhook leaves injected pods alone.
      const again = await render(['-f', '-', '--cluster-version', version], { stdin: run.stdout });
      assert.equal(again.code, 0, again.stderr);
      assert.deepEqual(yamlDocs(again.stdout), yamlDocs(run.stdout));
    });

  it('native and classic sidecars follow --cluster-version', async () => {
    const input = join(GOLDEN, 'daemonset.input.yaml');
    const native = podOf(yamlDocs((await render(['-f', input, '--cluster-version', '1.29'])).stdout)[0]!);
    const classic = podOf(
      yamlDocs((await render(['-f', input, '--cluster-version', 'v1.28.15-eks-1'])).stdout)[0]!,
    );
    assert.deepEqual(
      agentsOf(native).map((c) => [c.name, c.restartPolicy]),
      [['secret-agent', 'Always']],
    );
    assert.deepEqual(
      agentsOf(classic).map((c) => [c.name, c.restartPolicy]),
      [
        ['secret-agent-init', undefined],
        ['secret-agent', undefined],
      ],
    );
  });
});

describe('render runs the server’s admission code', () => {
  let pair: ServingPair;
  let tls: ReturnType<typeof certDir>;
  let webhook: RunningWebhook;
  before(async () => {
    pair = await makeServingPair();
    tls = certDir();
    tls.write(pair);
    const config = parseWebhookConfig({
      AGENT_IMAGE,
      WEBHOOK_PORT: '0',
      WEBHOOK_HOST: '127.0.0.1',
      TLS_CERT_FILE: tls.cert,
      TLS_KEY_FILE: tls.key,
      NATIVE_SIDECARS: 'true',
      ...CLUSTER_DEFAULTS,
      AGENT_AWS_REGION: 'eu-central-1',
    });
    webhook = await startWebhook(config, { log: pino({ level: 'silent' }) });
  });
  after(async () => {
    await webhook.close();
    tls[Symbol.dispose]();
  });

  it('the rendered pod of a Deployment is what the server’s /mutate patch makes of the same pod', async () => {
    // The same settings as the server, from env, with no flag.
    const run = await render(['-f', join(GOLDEN, 'deployment.input.yaml')], {
      env: { NATIVE_SIDECARS: 'true', AGENT_AWS_REGION: 'eu-central-1' },
    });
    assert.equal(run.code, 0, run.stderr);
    // NATIVE_SIDECARS=true: no note, only what the golden run warns of (the app's uid is not named).
    assert.equal(run.stderr, readFileSync(join(GOLDEN, 'deployment.stderr.txt'), 'utf8'));
    const rendered = podOf(yamlDocs(run.stdout)[0]!);

    const input = podOf(yamlDocs(readFileSync(join(GOLDEN, 'deployment.input.yaml'), 'utf8'))[0]!);
    // The pod as the ReplicaSet controller creates it.
    const pod: PodDoc = {
      ...input,
      metadata: {
        ...input.metadata,
        namespace: 'shop',
        labels: { ...input.metadata.labels, 'pod-template-hash': '7d4b9c' },
      },
    };
    const reply = await call(webhook.port, pair.ca, '/mutate', {
      body: JSON.stringify(review(pod, { namespace: 'shop' })),
    });
    assert.equal(reply.status, 200);
    const answer = JSON.parse(reply.body) as { response: { allowed: boolean; patch?: string } };
    assert.equal(answer.response.allowed, true);
    const patched = mutate(pod, decodePatch(answer.response));
    assert.deepEqual(rendered.spec, patched.spec);
    assert.deepEqual(rendered.metadata.annotations, patched.metadata.annotations);
    assert.ok(
      agentsOf(rendered).some((c) =>
        (c.env as { name: string; value?: string }[]).some(
          (e) => e.name === 'AWS_REGION' && e.value === 'eu-central-1',
        ),
      ),
      'the cluster default from env reaches the agent',
    );
  });
});

describe('render --check', () => {
  // A secret pasted where a reference belongs: refused, and described by its length only.
  const bad = deployment('bad', { 'secret-agent.io/secret-db': canary('pasted-secret') });
  const good = deployment('good', { 'secret-agent.io/secret-db': 'aws:prod/db' }, { namespace: 'shop' });
  const manifest = yaml(good, bad);

  it('prints nothing when every object would be admitted', async () => {
    const run = await render(['--check', '-f', '-'], { stdin: yaml(good) });
    assert.deepEqual(run, { code: 0, stdout: '', stderr: '' });
  });

  it('one refused object, one good: exit 1, the refusal on stderr as the server words it, no value', async () => {
    const run = await render(['--check', '-f', '-', '--namespace', 'apps'], { stdin: manifest });
    assert.equal(run.code, 1);
    assert.equal(run.stdout, '');
    const lines = run.stderr.trimEnd().split('\n');
    assert.equal(lines.length, 1, run.stderr);
    assert.match(
      lines[0]!,
      /^Deployment\/apps\/bad: secret-agent cannot inject this pod: secret-agent\.io\/secret-db: \(a value of \d+ characters\).*\. Fix: .+$/,
    );
  });

  it('without --check: exit 1, the good object printed, the refused one left out', async () => {
    const run = await render(['-f', '-'], { stdin: manifest });
    assert.equal(run.code, 1);
    assert.match(run.stderr, /^Deployment\/default\/bad: secret-agent cannot inject this pod: /m);
    const docs = yamlDocs(run.stdout);
    assert.deepEqual(
      docs.map((d) => d.metadata?.name),
      ['good'],
    );
    assert.equal(podOf(docs[0]!).metadata.annotations?.[STATUS], 'injected');
  });

  it('secrets as env vars in a container without command: exit 1, the field and how to find the image’s entrypoint', async () => {
    // deployment()'s app container, like most manifests, leaves the image's entrypoint implicit.
    const envOnly = deployment('billing', { 'secret-agent.io/env-DATABASE_URL': 'aws:prod/db#url' });
    const run = await render(['--check', '-f', '-'], { stdin: yaml(envOnly) });
    assert.equal(run.code, 1);
    assert.match(
      run.stderr,
      /^Deployment\/default\/billing: secret-agent cannot inject this pod: spec\.containers\[0\]\.command: container "app" has no command in the pod spec.*\{\{json \.Config\.Entrypoint\}\}.*secret-agent render then shows the wrapped command/m,
    );
  });

  it('a Deployment restarted by restart-on-change (the agent’s restarted-for on its template) passes', async () => {
    const restarted = deployment('web', {
      'secret-agent.io/secret-db': 'aws:prod/db',
      'secret-agent.io/restart-on-change': 'true',
      'secret-agent.io/restarted-for': '5f0c3a9e1b2d4c6f',
    });
    assert.deepEqual(await render(['--check', '-f', '-'], { stdin: yaml(restarted) }), {
      code: 0,
      stdout: '',
      stderr: '',
    });
    const run = await render(['-f', '-', '--cluster-version', '1.31'], { stdin: yaml(restarted) });
    assert.equal(run.code, 0, run.stderr);
    const annotations = podOf(yamlDocs(run.stdout)[0]!).metadata.annotations;
    assert.equal(annotations?.['secret-agent.io/restarted-for'], '5f0c3a9e1b2d4c6f');
    assert.equal(annotations?.[STATUS], 'injected');
  });

  it('the annotation without the label is an error: its pods would run without their secrets', async () => {
    const unlabelled = deployment('web', { 'secret-agent.io/secret-db': 'aws:prod/db' }, { labelled: false });
    const pod = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'one-off', annotations: { 'secret-agent.io/inject': 'true' } },
      spec: { containers: [{ name: 'app', image: 'nginx:1.27' }] },
    } satisfies PodDoc;
    const optedOut = deployment('off', { 'secret-agent.io/inject': 'false' }, { labelled: false });
    const run = await render(['--check', '-f', '-', '-n', 'shop'], {
      stdin: yaml(good, unlabelled, pod as Obj, optedOut),
    });
    assert.deepEqual(run, {
      code: 1,
      stdout: '',
      stderr: [
        'Deployment/shop/web: not injected: it has the annotation secret-agent.io/inject but not the label secret-agent.io/inject: "true", so the API server never sends its pods to the webhook. Fix: add the label secret-agent.io/inject: "true" to spec.template.metadata.labels',
        'Pod/shop/one-off: not injected: it has the annotation secret-agent.io/inject but not the label secret-agent.io/inject: "true", so the API server never sends its pods to the webhook. Fix: add the label secret-agent.io/inject: "true" to metadata.labels',
        '',
      ].join('\n'),
    });
    // Labelled, it passes.
    const fixed = deployment('web', { 'secret-agent.io/secret-db': 'aws:prod/db' });
    assert.deepEqual(await render(['--check', '-f', '-'], { stdin: yaml(fixed, optedOut) }), {
      code: 0,
      stdout: '',
      stderr: '',
    });
  });

  it('an opted-in pod the API server would refuse too is reported, not a crash', async () => {
    const broken = deployment('broken', { 'secret-agent.io/secret-db': 'aws:prod/db' });
    ((broken.spec as { template: { spec: { containers: unknown[] } } }).template.spec
      .containers as unknown[]) = [];
    const run = await render(['--check', '-f', '-'], { stdin: yaml(broken) });
    assert.equal(run.code, 1);
    assert.match(
      run.stderr,
      /^Deployment\/default\/broken: the webhook cannot read this pod: spec\.template\.spec\.containers is not a non-empty list\. Fix: /,
    );
  });
});

describe('render: input', () => {
  it('unreadable input exits 2 naming the file and the document, and prints no manifests', async () => {
    using tmp = tempDir();
    const good = join(tmp.dir, 'good.yaml');
    writeFileSync(good, yaml(deployment('web', { 'secret-agent.io/secret-db': 'aws:prod/db' })));
    const missing = join(tmp.dir, 'missing.yaml');
    const run = await render(['-f', good, '-f', missing]);
    assert.deepEqual(run, {
      code: 2,
      stdout: '',
      stderr: `secret-agent-webhook render: ${missing}: cannot be read (ENOENT). Fix: check the path\n`,
    });

    // The parser's own message quotes the line; the value there must not be echoed.
    const badYaml = `apiVersion: v1\nkind: ConfigMap\n---\napiVersion: v1\nkind: Secret\nstringData:\n  password: ${canary('secret')}\n   oops: [\n`;
    const yamlRun = await render(['-f', good, '-f', '-'], { stdin: badYaml });
    assert.equal(yamlRun.code, 2);
    assert.equal(yamlRun.stdout, '');
    assert.match(
      yamlRun.stderr,
      /^secret-agent-webhook render: <stdin>: document 2: is not valid YAML \([A-Z_]+ at line \d+, column \d+\)\. Fix: fix the syntax\n$/,
    );

    const jsonRun = await render(['-f', '-'], { stdin: `{"kind": "Secret", "data": ${canary('json')}}` });
    assert.equal(jsonRun.code, 2);
    assert.match(jsonRun.stderr, /^secret-agent-webhook render: <stdin>: document 1: is not valid JSON/);

    const scalar = await render(['-f', '-'], { stdin: 'kind: ConfigMap\n---\njust text\n' });
    assert.equal(scalar.code, 2);
    assert.match(scalar.stderr, /<stdin>: document 2: is not a Kubernetes object/);
  });

  it('JSON in, JSON out, a kind: List included; other kinds pass through unchanged', async () => {
    const service = {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'web' },
      spec: { ports: [{ port: 80 }] },
    };
    const list = {
      apiVersion: 'v1',
      kind: 'List',
      items: [deployment('web', { 'secret-agent.io/secret-db': 'aws:prod/db' }), service],
    };
    const run = await render(['-f', '-', '--cluster-version', '1.31'], { stdin: JSON.stringify(list) });
    assert.equal(run.code, 0, run.stderr);
    assert.ok(run.stdout.startsWith('{\n  "apiVersion": "v1",\n  "kind": "List",'), run.stdout.slice(0, 80));
    const out = JSON.parse(run.stdout) as { items: Obj[] };
    assert.equal(out.items.length, 2);
    validateRendered(out.items[0]!);
    assert.equal(podOf(out.items[0]!).metadata.annotations?.[STATUS], 'injected');
    assert.deepEqual(out.items[1], service);
  });

  it('several files: documents in order, JSON converted to YAML when any input is YAML', async () => {
    using tmp = tempDir();
    const a = join(tmp.dir, 'a.json');
    writeFileSync(a, JSON.stringify(deployment('first', { 'secret-agent.io/secret-db': 'aws:prod/db' })));
    const b = join(tmp.dir, 'b.yaml');
    writeFileSync(b, 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: second\n---\n---\n');
    const run = await render(['-f', a, '-f', b, '-f', a, '--cluster-version', '1.31']);
    assert.equal(run.code, 0, run.stderr);
    assert.deepEqual(
      yamlDocs(run.stdout).map((d) => d.metadata?.name),
      ['first', 'second', 'first'],
    );
  });

  it('without --check, a template with the annotation but not the label passes unchanged, with a warning naming the fix', async () => {
    const unlabelled = deployment('web', { 'secret-agent.io/secret-db': 'aws:prod/db' }, { labelled: false });
    const input = `# keep me\n${yaml(unlabelled)}`;
    const run = await render(['-f', '-', '-n', 'shop', '--cluster-version', '1.31'], { stdin: input });
    assert.equal(run.code, 0);
    assert.deepEqual(yamlDocs(run.stdout), [unlabelled]);
    assert.match(run.stdout, /^# keep me\n/);
    assert.equal(
      run.stderr,
      'Deployment/shop/web: warning: not injected: it has the annotation secret-agent.io/inject but not the label secret-agent.io/inject: "true", so the API server never sends its pods to the webhook. Fix: add the label secret-agent.io/inject: "true" to spec.template.metadata.labels\n',
    );
  });

  it('pods in the webhook’s own namespace pass unchanged, with a warning', async () => {
    const run = await render(['-f', '-', '--cluster-version', '1.31'], {
      stdin: yaml(
        deployment('web', { 'secret-agent.io/secret-db': 'aws:prod/db' }, { namespace: 'secret-agent' }),
      ),
    });
    assert.equal(run.code, 0);
    assert.equal(podOf(yamlDocs(run.stdout)[0]!).metadata.annotations?.[STATUS], undefined);
    assert.match(
      run.stderr,
      /^Deployment\/secret-agent\/web: warning: not injected: secret-agent is the webhook's own namespace/,
    );
  });
});

describe('render: settings', () => {
  const manifest = yaml(deployment('web', { 'secret-agent.io/secret-db': 'aws:prod/db' }));
  const agentOf = (run: Run) => agentsOf(podOf(yamlDocs(run.stdout)[0]!));

  it('no agent image from env, file or flag: exit 2 naming --agent-image and AGENT_IMAGE', async () => {
    const run = await webhookJs(['render', '-f', '-'], { stdin: manifest });
    assert.equal(run.code, 2);
    assert.equal(run.stdout, '');
    assert.match(
      run.stderr,
      /^secret-agent-webhook render: invalid configuration\n {2}AGENT_IMAGE: is not set\. Fix: pass --agent-image IMAGE/,
    );
  });

  it('--agent-image wins over AGENT_IMAGE; a bad one names the flag', async () => {
    const run = await render(['-f', '-', '--agent-image', 'registry.example/agent:2'], { stdin: manifest });
    assert.equal(run.code, 0, run.stderr);
    assert.ok(
      [...(podOf(yamlDocs(run.stdout)[0]!).spec.initContainers ?? [])].some(
        (c) => c.image === 'registry.example/agent:2',
      ),
    );
    const bad = await render(['-f', '-', '--agent-image', 'Not An Image'], { stdin: manifest });
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /^ {2}--agent-image: "Not An Image" is not an image reference\. Fix: /m);
  });

  it('TLS and the other server-only settings are not needed, even when invalid', async () => {
    const run = await render(['-f', '-', '--check'], {
      stdin: manifest,
      env: { TLS_MODE: 'nope', TLS_CERT_FILE: '/nonexistent/tls.crt', WEBHOOK_PORT: 'tcp://10.0.0.1:443' },
    });
    assert.deepEqual(run, { code: 0, stdout: '', stderr: '' });
  });

  it('NATIVE_SIDECARS: false from env is used; --cluster-version wins over it', async () => {
    const env = { NATIVE_SIDECARS: 'false' };
    const classic = await render(['-f', '-'], { stdin: manifest, env });
    assert.equal(classic.stderr, '');
    assert.deepEqual(
      agentOf(classic).map((c) => c.name),
      ['secret-agent-init', 'secret-agent'],
    );
    const native = await render(['-f', '-', '--cluster-version', '1.30'], { stdin: manifest, env });
    assert.deepEqual(
      agentOf(native).map((c) => [c.name, c.restartPolicy]),
      [['secret-agent', 'Always']],
    );
  });

  it('NATIVE_SIDECARS=auto without --cluster-version: native, with one note (none with --check)', async () => {
    const run = await render(['-f', '-'], { stdin: manifest });
    assert.equal(run.code, 0);
    assert.deepEqual(
      agentOf(run).map((c) => c.restartPolicy),
      ['Always'],
    );
    assert.match(
      run.stderr,
      /^note: NATIVE_SIDECARS=auto and no --cluster-version: rendering native sidecars .*\n$/,
    );
    const check = await render(['-f', '-', '--check'], { stdin: manifest });
    assert.deepEqual(check, { code: 0, stdout: '', stderr: '' });
  });

  it('cluster defaults come from WEBHOOK_CONFIG_FILE as for the server', async () => {
    using tmp = tempDir();
    const file = join(tmp.dir, 'webhook.yaml');
    writeFileSync(file, 'AGENT_VAULT_ROLE: from-the-file\nAGENT_MEMORY_LIMIT: 256Mi\n');
    const run = await render(['-f', '-', '--cluster-version', '1.31'], {
      stdin: manifest,
      env: { WEBHOOK_CONFIG_FILE: file },
    });
    assert.equal(run.code, 0, run.stderr);
    const [agent] = agentOf(run);
    const env = agent!.env as { name: string; value?: string }[];
    assert.ok(env.some((e) => e.name === 'VAULT_ROLE' && e.value === 'from-the-file'));
    assert.deepEqual((agent!.resources as { limits: unknown }).limits, { memory: '256Mi' });
  });

  it('exec: references: refused unless the settings allow them, then rendered with the helpers volume', async () => {
    const input = JSON.stringify(
      deployment('vaulted', { 'secret-agent.io/secret-db': 'exec:kubernetes-secret/db/password' }),
    );
    const refused = await render(['-f', '-', '--check', '--cluster-version', '1.31'], { stdin: input });
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /exec: references are turned off on this cluster/);
    const run = await render(['-f', '-', '--cluster-version', '1.31'], {
      stdin: input,
      env: {
        ALLOW_EXEC_REFERENCES: 'true',
        EXEC_HELPERS_VOLUME: '{"configMap":{"name":"secret-agent-helpers"}}',
      },
    });
    assert.equal(run.code, 0, run.stderr);
    const [object] = yamlDocs(run.stdout);
    validateRendered(object!);
    const pod = podOf(object!);
    assert.deepEqual(
      (pod.spec.volumes as Record<string, unknown>[]).find((v) => v.name === 'secret-agent-helpers'),
      { name: 'secret-agent-helpers', configMap: { name: 'secret-agent-helpers', defaultMode: 365 } },
    );
    assert.deepEqual(
      agentsOf(pod).map((c) => (c.volumeMounts as { mountPath: string }[]).map((m) => m.mountPath)),
      [['/secret-agent/secrets', '/secret-agent/helpers']],
    );
  });

  it('bad arguments exit 2 with the flag and the fix', async () => {
    for (const args of [
      [],
      ['manifests.yaml'],
      ['-f', '-', '--bogus'],
      ['-f', '-', '--cluster-version', 'latest'],
      ['-f', '-', '-f', '-'],
      ['-f', '-', '-n', 'Bad_NS'],
    ]) {
      const run = await render(args);
      assert.equal(run.code, 2, `${args.join(' ')}: ${run.stderr}`);
      assert.equal(run.stdout, '');
      assert.match(run.stderr, /^secret-agent-webhook render: \S+: .+\. Fix: .+\n$/, args.join(' '));
    }
  });
});

describe('the program’s --help and --version', () => {
  it('--help prints the usage and every setting, from the same declarations as the reference tables', async () => {
    const run = await webhookJs(['--help']);
    assert.equal(run.code, 0);
    assert.equal(run.stderr, '');
    assert.match(run.stdout, /^Usage: secret-agent-webhook /);
    assert.match(run.stdout, /render \.\.\./);
    for (const [name, s] of Object.entries(WEBHOOK_SETTINGS)) {
      const line = s.default ? `  ${name} (default: ${s.default})\n` : `  ${name}\n`;
      assert.ok(run.stdout.includes(line), `--help lists ${name}`);
    }
  });

  it('render --help prints its usage and exit codes', async () => {
    const run = await webhookJs(['render', '--help']);
    assert.equal(run.code, 0);
    assert.match(run.stdout, /^Usage: secret-agent-webhook render -f FILE\|- /);
    assert.match(run.stdout, /Exit status:\n {2}0 .+\n {2}1 .+\n {2}2 .+\n/);
  });

  it('--version still works; an unknown command exits 2', async () => {
    const version = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
    assert.deepEqual(await webhookJs(['--version']), {
      code: 0,
      stdout: `secret-agent-webhook ${version.version}\n`,
      stderr: '',
    });
    const unknown = await webhookJs(['rendr']);
    assert.equal(unknown.code, 2);
    assert.match(unknown.stderr, /unknown argument "rendr"\. Fix: /);
  });
});
