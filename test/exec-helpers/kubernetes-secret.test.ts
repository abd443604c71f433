/**
 * The example exec: helper deploy/exec-helpers/kubernetes-secret.ts, as built (dist/helpers/kubernetes-secret),
 * run by the built agent (dist/agent.js) against the local Kubernetes API fake: the pod's token and
 * CA from a service-account directory, a Secret of the pod's namespace, RBAC and failures as the
 * real API server answers them.
 */
import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, beforeEach, describe, it } from 'node:test';
import { parseReference, type ExecReference } from '../../agent/contract/reference.ts';
import { openExecProvider } from '../../agent/providers/exec/exec-provider.ts';
import { EXEC_SETTINGS } from '../../agent/providers/exec/env.ts';
import { basicPod, containerEnv, admitThroughWebhook, injectedPod } from '../webhook/fixtures.ts';
import { startKubernetesWorkloadsFake, type KubernetesWorkloadsFake } from '../fakes/kubernetes-workloads.ts';
import { assertNoCanary, canary } from '../support/canary.ts';
import { memoryDir, runAgent } from '../support/run-agent.ts';
import { buildHelpers } from '../../images/build-helpers.ts';

const NAMESPACE = 'apps';

let api: KubernetesWorkloadsFake;
let helpers: string;
let serviceAccount: string;
/** The token in the pod's service-account directory. */
let podToken: string;
const values = { password: '', binary: Buffer.alloc(0) };

/** What the agent needs to run the helper against the fake, as the webhook and the kubelet set it up. */
function agentEnv(secretsDir: string, extra: Record<string, string> = {}): Record<string, string> {
  const url = new URL(api.url);
  return {
    SECRETS_DIR: secretsDir,
    EXEC_HELPERS_DIR: helpers,
    SERVICE_ACCOUNT_DIR: serviceAccount,
    KUBERNETES_SERVICE_HOST: url.hostname,
    KUBERNETES_SERVICE_PORT: url.port,
    POD_NAMESPACE: NAMESPACE,
    POD_NAME: 'web-1',
    ...extra,
  };
}

/** Every request the helper made carried the pod's token and no body; no value went the other way. */
function assertRequestsClean(): void {
  for (const r of api.requests) {
    assert.equal(r.method, 'GET');
    assert.equal(r.body, '');
    assertNoCanary(`${r.path}${r.query}`, 'a request to the API server');
  }
}

describe('the kubernetes-secret exec: helper, through the built agent', () => {
  before(async () => {
    // The build's own output, as an admin would put it in the helpers volume (built here, so no
    // other test's build of dist/ races this one).
    const out = mkdtempSync(join(tmpdir(), 'secret-agent-built-helpers-'));
    const written = await buildHelpers(out);
    assert.deepEqual(written, [join(out, 'kubernetes-secret')]);
    const built = readFileSync(written[0]!, 'utf8');
    rmSync(out, { recursive: true, force: true });
    assert.ok(built.startsWith('#!/nodejs/bin/node\n'), 'runs with the agent image’s Node');
    assert.doesNotMatch(built, /\bfrom ['"](?!node:)/, 'imports nothing but Node’s built-in modules');
    helpers = mkdtempSync(join(tmpdir(), 'secret-agent-k8s-helpers-'));
    chmodSync(helpers, 0o755);
    // This machine has no /nodejs/bin/node: the same file, run by this test's Node.
    writeFileSync(join(helpers, 'kubernetes-secret'), built.replace(/^#!.*\n/, `#!${process.execPath}\n`), {
      mode: 0o555,
    });

    api = await startKubernetesWorkloadsFake({ serviceAccount: { namespace: NAMESPACE, name: 'web' } });
    serviceAccount = mkdtempSync(join(tmpdir(), 'secret-agent-sa-'));
    podToken = api.token;
    writeFileSync(join(serviceAccount, 'token'), podToken);
    writeFileSync(join(serviceAccount, 'ca.crt'), api.caPem);
    writeFileSync(join(serviceAccount, 'namespace'), NAMESPACE);

    values.password = canary('k8s-password');
    values.binary = Buffer.concat([Buffer.from([0, 255, 254, 10]), Buffer.from(canary('k8s-binary'))]);
    api.addSecret(NAMESPACE, 'db', { username: 'app', password: values.password });
    api.addSecret(NAMESPACE, 'tls', { 'tls.key': values.binary });
    api.addSecret('other', 'db', { password: canary('other-namespace') });
  });
  after(async () => {
    await api?.stop();
    rmSync(helpers, { recursive: true, force: true });
    rmSync(serviceAccount, { recursive: true, force: true });
  });
  beforeEach(() => {
    api.token = podToken;
    api.allowed.add('get secrets');
    (api.requests as unknown[]).length = 0;
  });

  it('reads one key, a key of the JSON of all, and every key split into files', async () => {
    using dir = memoryDir();
    const run = await runAgent(
      agentEnv(dir.path, {
        SECRET_0_REF: 'exec:kubernetes-secret/db/password',
        SECRET_0_FILENAME: 'password',
        SECRET_1_REF: 'exec:kubernetes-secret/db#username',
        SECRET_1_FILENAME: 'username',
        SECRET_2_REF: 'exec:kubernetes-secret/db',
        SECRET_2_FILENAME: 'db',
        SECRET_2_FORMAT: 'split',
        SECRET_3_REF: 'exec:kubernetes-secret/tls/tls.key',
        SECRET_3_FILENAME: 'tls.key',
      }),
    );
    assert.equal(run.code, 0, run.stderr);
    assert.equal(readFileSync(join(dir.path, 'password'), 'utf8'), values.password);
    assert.equal(readFileSync(join(dir.path, 'username'), 'utf8'), 'app');
    assert.deepEqual(readdirSync(join(dir.path, 'db')).sort(), ['password', 'username']);
    assert.equal(readFileSync(join(dir.path, 'db/password'), 'utf8'), values.password);
    assert.deepEqual(readFileSync(join(dir.path, 'tls.key')), values.binary, 'binary values byte for byte');
    assert.deepEqual(api.requests.map((r) => r.path).sort(), [
      // One run per distinct reference: `db` serves both the #username file and the split.
      '/api/v1/namespaces/apps/secrets/db',
      '/api/v1/namespaces/apps/secrets/db',
      '/api/v1/namespaces/apps/secrets/tls',
    ]);
    assertRequestsClean();
  });

  it('names the Secret’s resourceVersion as the version', async () => {
    const provider = openExecProvider(
      { pod: { namespace: NAMESPACE }, agentVersion: '9', serviceAccountDir: serviceAccount },
      {
        env: {
          EXEC_HELPERS_DIR: helpers,
          KUBERNETES_SERVICE_HOST: '127.0.0.1',
          KUBERNETES_SERVICE_PORT: new URL(api.url).port,
        },
      },
    );
    const ref = parseReference('exec:kubernetes-secret/db/password', 'SECRET_0_REF') as ExecReference;
    const [outcome] = await provider.fetch([ref], { signal: AbortSignal.timeout(30_000) });
    assert.ok(outcome?.ok, outcome && !outcome.ok ? outcome.error.message : 'no outcome');
    const stored = api.object('secrets', NAMESPACE, 'db')!.metadata as { resourceVersion: string };
    assert.equal(outcome.value.version, stored.resourceVersion);
    await provider.close?.();
  });

  it('through the webhook: the annotations, the env the webhook renders, the helpers where it mounts them', async () => {
    const pod = basicPod(
      {
        'secret-agent.io/mode': 'init',
        'secret-agent.io/secret-db-password': 'exec:kubernetes-secret/db/password',
        'secret-agent.io/secret-db': 'exec:kubernetes-secret/db',
        'secret-agent.io/format-db': 'split',
      },
      { serviceAccountName: 'web' },
    );
    const result = admitThroughWebhook(pod, {
      ALLOW_EXEC_REFERENCES: 'true',
      EXEC_HELPERS_VOLUME: '{"configMap":{"name":"secret-agent-helpers"}}',
    });
    const patched = injectedPod(pod, result);
    const [agent] = (patched.spec.initContainers ?? []).filter((c) => c.name === 'secret-agent-init');
    const mounts = agent!.volumeMounts as { name: string; mountPath: string }[];
    // The agent's default EXEC_HELPERS_DIR is where the webhook mounts the helpers: no env needed.
    assert.ok(
      mounts.some(
        (m) => m.name === 'secret-agent-helpers' && m.mountPath === EXEC_SETTINGS.EXEC_HELPERS_DIR.default,
      ),
    );
    const env = containerEnv(agent!, patched) as Record<string, string>;
    assert.equal(env.EXEC_HELPERS_DIR, undefined);

    using dir = memoryDir();
    // What the kubelet supplies besides the rendered env: the volumes at their paths, the API address.
    const run = await runAgent({
      ...env,
      ...agentEnv(dir.path, { POD_NAMESPACE: env.POD_NAMESPACE!, POD_NAME: env.POD_NAME! }),
    });
    assert.equal(run.code, 0, run.stderr);
    assert.equal(readFileSync(join(dir.path, 'db-password'), 'utf8'), values.password);
    assert.equal(readFileSync(join(dir.path, 'db/username'), 'utf8'), 'app');
    assertRequestsClean();
  });

  const failures: [string, string, () => void, RegExp][] = [
    [
      'a Secret that does not exist: not found, in the API server’s words',
      'exec:kubernetes-secret/nope/password',
      () => undefined,
      /not-found: helper "kubernetes-secret" exited with 66 \(not found\): kubernetes-secret: secrets "nope" not found/,
    ],
    [
      'a key the Secret does not have: not found',
      'exec:kubernetes-secret/db/passwd',
      () => undefined,
      /not-found: .*exited with 66 \(not found\): kubernetes-secret: secrets "db" has no key "passwd" in namespace "apps"/,
    ],
    [
      'a service account without `get secrets`: permission denied, naming the user',
      'exec:kubernetes-secret/db/password',
      () => api.allowed.delete('get secrets'),
      /permission-denied: .*exited with 77 \(permission denied\): kubernetes-secret: secrets "db" is forbidden: User "system:serviceaccount:apps:web" cannot get resource "secrets" in API group "" in the namespace "apps"/,
    ],
    [
      'a token the API server does not take: permission denied',
      'exec:kubernetes-secret/db/password',
      () => (api.token = 'rotated-away'),
      /permission-denied: .*exited with 77 .*the API server refused the service-account token \(401 Unauthorized\)/,
    ],
    [
      'an argument that is no Secret name: invalid',
      'exec:kubernetes-secret/Not_A_Name',
      () => undefined,
      /invalid: .*exited with 64 \(bad argument\): kubernetes-secret: the argument is not NAME or NAME\/KEY/,
    ],
    [
      'every key at once when one is binary: invalid, naming the way to read it',
      'exec:kubernetes-secret/tls',
      () => undefined,
      /invalid: .*key "tls\.key" of secrets "tls" is binary, which JSON cannot hold: read it alone \(exec:kubernetes-secret\/tls\/tls\.key\)/,
    ],
  ];
  for (const [name, ref, arrange, expected] of failures)
    it(name, async () => {
      using dir = memoryDir();
      arrange();
      const run = await runAgent(agentEnv(dir.path, { SECRET_0_REF: ref, SECRET_0_FILENAME: 'x' }));
      // runAgent has already scanned stdout and stderr for every canary.
      assert.equal(run.code, 1, run.stderr);
      assert.match(run.stderr, expected);
      assert.equal(
        run.logs.filter((l) => l.msg === 'transient backend errors; retrying').length,
        0,
        'a permanent failure is not retried',
      );
      assert.deepEqual(readdirSync(dir.path), []);
    });

  it('an API server that fails for a moment: exit 75, retried with backoff, then delivered', async () => {
    using dir = memoryDir();
    api.failNext(503, 1);
    api.failNext(429, 1);
    const run = await runAgent(
      agentEnv(dir.path, {
        SECRET_0_REF: 'exec:kubernetes-secret/db/password',
        SECRET_0_FILENAME: 'password',
      }),
    );
    assert.equal(run.code, 0, run.stderr);
    assert.equal(readFileSync(join(dir.path, 'password'), 'utf8'), values.password);
    const retries = run.logs.filter((l) => l.msg === 'transient backend errors; retrying');
    assert.equal(retries.length, 2);
    const details = retries.map((l) => (l.secrets as { detail: string }[])[0]!.detail);
    assert.match(details[0]!, /exited with 75 \(temporary failure\): kubernetes-secret: injected 503/);
    assert.match(details[1]!, /exited with 75 \(temporary failure\): kubernetes-secret: injected 429/);
  });

  it('an API server that is not there: exit 75, retried until the deadline', async () => {
    using dir = memoryDir();
    const run = await runAgent(
      agentEnv(dir.path, {
        SECRET_0_REF: 'exec:kubernetes-secret/db/password',
        SECRET_0_FILENAME: 'password',
        KUBERNETES_SERVICE_PORT: '9',
        // Each attempt gets a third of the deadline (at least 1 s): room for the helper's Node to start
        // on a loaded machine, where 1 s sometimes was not and the attempt ended as a timeout instead.
        INIT_DEADLINE: '6s',
      }),
    );
    assert.equal(run.code, 1);
    // The cause is checked in the retried attempts: the last attempt gets only what is left of the
    // deadline, and on a loaded machine it may end as a timeout instead.
    const details = run.logs
      .filter((l) => l.msg === 'transient backend errors; retrying')
      .map((l) => (l.secrets as { detail: string }[])[0]!.detail);
    assert.ok(
      details.some((d) =>
        /exited with 75 .*the API server at 127\.0\.0\.1:9 did not answer: ECONNREFUSED/.test(d),
      ),
      `no retried attempt names the refused API server: ${JSON.stringify(details)}`,
    );
    assert.match(run.stderr, /SECRET_0 \(exec:kubernetes-secret\/db\/password\): (unavailable|timeout): /);
    assert.match(run.stderr, /retried (with backoff )?until the deadline/);
  });
});
