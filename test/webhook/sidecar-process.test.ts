import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { parseAgentConfig } from '../../agent/config/parse-agent-config.ts';
import { ConfigErrors } from '../../agent/contract/errors.ts';
import { parseWebhookConfig } from '../../webhook/config/parse-webhook-config.ts';
import {
  AGENT_ENTRYPOINT,
  GCP_INIT_COMMAND,
  RESIDENT_HANDOFF_FDS,
  SIDECAR_COMMAND,
} from '../../webhook/render/agent-containers.ts';
import { ROOT } from '../support/run-agent.ts';
import {
  admitThroughWebhook,
  AGENT_IMAGE,
  basicPod,
  containerEnv,
  injectedPod,
  type PodDoc,
} from './fixtures.ts';

/**
 * What stays in the sidecar between refreshes: the small sidecar (/app/resident running the agent for
 * each refresh) where a pod suits it, the Node agent where it does not or the pod or cluster says so.
 * Every injected pod here goes through the real admission code and is schema-checked (injectedPod).
 */

const CLUSTER = {
  AGENT_AWS_REGION: 'eu-west-1',
  AGENT_VAULT_ADDR: 'https://vault.example:8200',
  AGENT_VAULT_ROLE: 'apps',
};
const CLASSIC = { ...CLUSTER, NATIVE_SIDECARS: 'false' };
const SMALL_AWS = [
  '/app/resident',
  '--',
  '/nodejs/bin/node',
  '--disable-sigusr1',
  '--snapshot-blob',
  '/app/agent.blob',
  '--',
];
const AWS = { 'secret-agent.io/secret-db': 'aws:prod/db' };
const VAULT = { 'secret-agent.io/secret-api': 'vault:secret/data/api#token' };
/** The app's uid is named: no file-sharing warning, so the warnings left are the ones under test. */
const SPEC: Partial<PodDoc['spec']> = { securityContext: { runAsUser: 1000 } };

interface Injected {
  readonly pod: PodDoc;
  readonly agents: Record<string, unknown>[];
  readonly sidecar: Record<string, unknown>;
  readonly warnings: readonly string[];
}

function inject(
  annotations: Record<string, string>,
  cluster: Record<string, string> = CLUSTER,
  spec: Partial<PodDoc['spec']> = SPEC,
): Injected {
  const pod = basicPod(annotations, spec);
  const result = admitThroughWebhook(pod, cluster);
  const patched = injectedPod(pod, result);
  const agents = [...(patched.spec.initContainers ?? []), ...patched.spec.containers].filter(
    (c) => c.image === AGENT_IMAGE,
  );
  const sidecar = agents.find((c) => c.name === 'secret-agent');
  assert.ok(sidecar, 'a sidecar is injected');
  return { pod: patched, agents, sidecar, warnings: result.review.response.warnings ?? [] };
}

const isSmall = (c: Record<string, unknown>) => (c.command as string[])[0] === '/app/resident';
const envOf = (c: Record<string, unknown>, pod: PodDoc) => containerEnv(c, pod);

function refusal(
  annotations: Record<string, string>,
  cluster: Record<string, string> = CLUSTER,
  spec: Partial<PodDoc['spec']> = SPEC,
): string {
  const result = admitThroughWebhook(basicPod(annotations, spec), cluster);
  assert.equal(result.outcome, 'denied');
  return result.review.response.status!.message!;
}

describe('the small sidecar by default', () => {
  it('a pod that suits it, in each shape that runs a sidecar: the resident, 4Mi requested, the same limit and heap cap', () => {
    const shapes: [string, Record<string, string>, Record<string, string>][] = [
      ['native init+sidecar', {}, CLUSTER],
      ['native sidecar', { 'secret-agent.io/mode': 'sidecar' }, CLUSTER],
      ['classic sidecar', { 'secret-agent.io/mode': 'sidecar' }, CLASSIC],
      ['classic init+sidecar', {}, CLASSIC],
    ];
    for (const [shape, annotations, cluster] of shapes) {
      const { sidecar, agents, pod, warnings } = inject({ ...AWS, ...annotations }, cluster);
      assert.deepEqual(sidecar.command, SMALL_AWS, shape);
      assert.deepEqual(
        sidecar.resources,
        { requests: { cpu: '15m', memory: '4Mi' }, limits: { memory: '128Mi' } },
        shape,
      );
      const env = envOf(sidecar, pod);
      assert.equal(env.AGENT_MODE, 'sidecar', shape);
      assert.equal(env.AGENT_RUN_DEADLINE, '2m', shape);
      assert.equal(env.NODE_OPTIONS, '--max-old-space-size=44 --max-semi-space-size=1', shape);
      assert.deepEqual(warnings, [], `${shape}: nothing to tell`);
      // The port is the resident's now, on the pod's loopback: no probe, no declared port.
      assert.equal(sidecar.readinessProbe, undefined, shape);
      assert.equal(sidecar.livenessProbe, undefined, shape);
      assert.equal(sidecar.ports, undefined, shape);
      for (const agent of agents) assert.equal(envOf(agent, pod).AGENT_HANDOFF_FDS, undefined, shape);
    }
  });

  it('the classic init container is the same as beside a Node sidecar: the entrypoint, 40Mi, no run deadline', () => {
    const small = inject(AWS, CLASSIC);
    const node = inject({ ...AWS, 'secret-agent.io/sidecar-process': 'node' }, CLASSIC);
    const init = (i: Injected) => i.agents.find((c) => c.name === 'secret-agent-init')!;
    assert.deepEqual(init(small), init(node));
    assert.equal(init(small).command, undefined);
    assert.equal(envOf(init(small), small.pod).AGENT_RUN_DEADLINE, undefined);
    assert.deepEqual(node.sidecar.command, [...SIDECAR_COMMAND]);
  });

  it('mode init runs no sidecar: sidecar-process changes nothing', () => {
    const pod = basicPod({
      ...AWS,
      'secret-agent.io/mode': 'init',
      'secret-agent.io/sidecar-process': 'small',
    });
    const patched = injectedPod(pod, admitThroughWebhook(pod, CLUSTER));
    const agents = patched.spec.initContainers!.filter((c) => c.image === AGENT_IMAGE);
    assert.deepEqual(
      agents.map((c) => [c.name, c.command]),
      [['secret-agent-init', undefined]],
    );
  });

  it('a pod that reads GCP: each run starts from GCP’s snapshot, as its init run would', () => {
    const { sidecar } = inject({
      'secret-agent.io/secret-key': 'projects/my-project/secrets/api-key',
      ...AWS,
    });
    assert.deepEqual(sidecar.command, ['/app/resident', '--', ...GCP_INIT_COMMAND]);
  });

  it('the run is the image’s entrypoint, as Dockerfile.agent declares it', () => {
    const dockerfile = readFileSync(join(ROOT, 'Dockerfile.agent'), 'utf8');
    const entrypoint = /^ENTRYPOINT (\[.*\])$/m.exec(dockerfile);
    assert.ok(entrypoint, 'Dockerfile.agent has an exec-form ENTRYPOINT');
    assert.deepEqual(JSON.parse(entrypoint[1]!), AGENT_ENTRYPOINT);
  });

  it('a file: reference suits it: the file provider reads the file at each refresh and watches nothing', () => {
    const { sidecar } = inject(
      { 'secret-agent.io/secret-local': 'file:/etc/hostname' },
      {
        ...CLUSTER,
        ALLOW_FILE_REFERENCES: 'true',
      },
    );
    assert.ok(isSmall(sidecar));
  });

  it('a Job’s pod on a cluster with native sidecars suits it: the kubelet stops the sidecar, nothing watches the app', () => {
    const { sidecar } = inject(AWS, CLUSTER, { ...SPEC, restartPolicy: 'Never' });
    assert.ok(isSmall(sidecar));
  });
});

describe('a pod the small sidecar does not suit gets the Node agent, silently', () => {
  const node = (
    why: string,
    annotations: Record<string, string>,
    cluster: Record<string, string> = CLUSTER,
    spec: Partial<PodDoc['spec']> = SPEC,
  ) => {
    const { sidecar, pod, warnings } = inject(annotations, cluster, spec);
    assert.deepEqual(sidecar.command, [...SIDECAR_COMMAND], why);
    assert.equal(
      (sidecar.resources as { requests: { memory: string } }).requests.memory,
      '40Mi',
      `${why}: the Node agent's request`,
    );
    assert.equal(envOf(sidecar, pod).AGENT_RUN_DEADLINE, undefined, why);
    return warnings;
  };

  it('a refresh interval under 60s, pod-wide or a file’s own; 60s itself suits', () => {
    assert.deepEqual(node('pod-wide', { ...AWS, 'secret-agent.io/refresh-interval': '59s' }), []);
    assert.deepEqual(
      node('one file', {
        ...AWS,
        ...VAULT,
        'secret-agent.io/refresh-interval': '10m',
        'secret-agent.io/refresh-interval-api': '45s',
      }),
      [],
    );
    assert.ok(isSmall(inject({ ...AWS, 'secret-agent.io/refresh-interval': '60s' }).sidecar));
    // A short pod-wide interval that no secret uses (each has its own) does not count.
    assert.ok(
      isSmall(
        inject({
          ...AWS,
          'secret-agent.io/refresh-interval': '30s',
          'secret-agent.io/refresh-interval-db': '1m',
        }).sidecar,
      ),
    );
  });

  it('exit-with-process: a Job on a cluster without native sidecars', () => {
    const warnings = node(
      'exit-with-process',
      { ...AWS, 'secret-agent.io/exit-with-process': 'python3' },
      CLASSIC,
      { ...SPEC, restartPolicy: 'Never' },
    );
    assert.deepEqual(warnings, []);
  });

  it('Vault revoke-on-shutdown, the pod’s or the cluster’s, for a pod that reads Vault', () => {
    assert.deepEqual(
      node('annotation', { ...VAULT, 'secret-agent.io/vault-revoke-on-shutdown': 'true' }),
      [],
    );
    assert.deepEqual(node('cluster', VAULT, { ...CLUSTER, AGENT_VAULT_REVOKE_ON_SHUTDOWN: 'true' }), []);
    // The pod turns the cluster's off: small again. A pod that reads no Vault holds no token to revoke.
    const off = { ...VAULT, 'secret-agent.io/vault-revoke-on-shutdown': 'false' };
    assert.ok(isSmall(inject(off, { ...CLUSTER, AGENT_VAULT_REVOKE_ON_SHUTDOWN: 'true' }).sidecar));
    assert.ok(isSmall(inject(AWS, { ...CLUSTER, AGENT_VAULT_REVOKE_ON_SHUTDOWN: 'true' }).sidecar));
  });

  it('a cluster whose AGENT_SIDECAR_PROCESS is node: every pod, unless it asks for small', () => {
    node('cluster node', AWS, { ...CLUSTER, AGENT_SIDECAR_PROCESS: 'node' });
    const asked = inject(
      { ...AWS, 'secret-agent.io/sidecar-process': 'small' },
      {
        ...CLUSTER,
        AGENT_SIDECAR_PROCESS: 'node',
      },
    );
    assert.ok(isSmall(asked.sidecar));
  });
});

describe('sidecar-process: small asked for by a pod it does not suit is refused, with why and the fix', () => {
  const small = { 'secret-agent.io/sidecar-process': 'small' };

  it('a short refresh interval: names the interval’s annotation', () => {
    assert.equal(
      refusal({ ...AWS, ...small, 'secret-agent.io/refresh-interval-db': '30s' }),
      'secret-agent cannot inject this pod: secret-agent.io/sidecar-process: "small" does not suit this pod: secret-agent.io/refresh-interval-db is "30s", and a small sidecar starts the agent anew for each refresh, which under 60s costs more CPU than keeping the Node agent. Fix: set secret-agent.io/refresh-interval-db to 60s or more, or secret-agent.io/sidecar-process to node',
    );
  });

  it('exit-with-process', () => {
    assert.equal(
      refusal({ ...AWS, ...small, 'secret-agent.io/exit-with-process': 'python3' }, CLASSIC, {
        ...SPEC,
        restartPolicy: 'OnFailure',
      }),
      'secret-agent cannot inject this pod: secret-agent.io/sidecar-process: "small" does not suit this pod: secret-agent.io/exit-with-process needs the agent running between refreshes to see the app end. Fix: set secret-agent.io/sidecar-process to node',
    );
  });

  it('Vault revoke-on-shutdown: names where it is set', () => {
    assert.equal(
      refusal({ ...VAULT, ...small }, { ...CLUSTER, AGENT_VAULT_REVOKE_ON_SHUTDOWN: 'true' }),
      'secret-agent cannot inject this pod: secret-agent.io/sidecar-process: "small" does not suit this pod: Vault revoke-on-shutdown is on (the cluster’s AGENT_VAULT_REVOKE_ON_SHUTDOWN), which needs the agent that holds the token running when the pod stops. Fix: set secret-agent.io/vault-revoke-on-shutdown to "false", or secret-agent.io/sidecar-process to node',
    );
    assert.match(
      refusal({ ...VAULT, ...small, 'secret-agent.io/vault-revoke-on-shutdown': 'true' }),
      /Vault revoke-on-shutdown is on \(secret-agent\.io\/vault-revoke-on-shutdown\)/,
    );
  });

  it('every reason at once, each a problem of its own', () => {
    const message = refusal(
      {
        ...AWS,
        ...VAULT,
        ...small,
        'secret-agent.io/refresh-interval': '20s',
        'secret-agent.io/vault-revoke-on-shutdown': 'true',
      },
      CLUSTER,
    );
    assert.match(message, /^secret-agent cannot inject this pod \(2 problems\): /);
    assert.match(message, /secret-agent\.io\/refresh-interval is "20s"/);
    assert.match(message, /Vault revoke-on-shutdown is on/);
  });

  it('a value other than small or node', () => {
    assert.equal(
      refusal({ ...AWS, 'secret-agent.io/sidecar-process': 'tiny' }),
      'secret-agent cannot inject this pod: secret-agent.io/sidecar-process: "tiny" is not a sidecar process. Fix: use one of small, node',
    );
  });
});

describe('the small sidecar’s env: what the resident and its runs read', () => {
  it('AGENT_RUN_DEADLINE: the cluster’s, raised to INIT_DEADLINE + 15 s, at most 1h, in whole units', () => {
    const deadline = (annotations: Record<string, string>, cluster: Record<string, string> = {}) => {
      const { sidecar, pod } = inject({ ...AWS, ...annotations }, { ...CLUSTER, ...cluster });
      return envOf(sidecar, pod).AGENT_RUN_DEADLINE;
    };
    assert.equal(deadline({}), '2m');
    assert.equal(deadline({}, { AGENT_RUN_DEADLINE: '3m' }), '3m');
    assert.equal(deadline({}, { AGENT_RUN_DEADLINE: '30s' }), '1m15s', 'INIT_DEADLINE (60s) + 15 s');
    assert.equal(
      deadline({}, { AGENT_RUN_DEADLINE: '1.5m' }),
      '1m30s',
      'whole units, as the resident reads it',
    );
    assert.equal(deadline({ 'secret-agent.io/init-deadline': '5m' }), '5m15s');
    assert.equal(deadline({ 'secret-agent.io/init-deadline': '1h' }), '1h', 'the resident’s most');
  });

  it('the env the agent’s parser accepts as rendered (no AGENT_HANDOFF_FDS) and as each run gets it (with)', () => {
    const { sidecar, pod } = inject({
      ...AWS,
      'secret-agent.io/rotation-http-url': 'POST http://127.0.0.1:8080/-/reload',
      'secret-agent.io/kubernetes-events': 'true',
    });
    const env = envOf(sidecar, pod);
    assert.equal(env.AGENT_HANDOFF_FDS, undefined, 'only the resident sets it, for its runs');
    const rendered = parseAgentConfig(env);
    assert.equal(rendered.mode, 'sidecar');
    assert.equal(rendered.sidecar?.handoff, undefined);
    const run = parseAgentConfig({ ...env, AGENT_HANDOFF_FDS: RESIDENT_HANDOFF_FDS });
    assert.deepEqual(run.sidecar?.handoff, { stateFd: 3, outcomeFd: 4 });
  });

  it('agent-memory-request and -limit override the small sidecar’s, and the heap cap follows the limit', () => {
    const { sidecar, pod } = inject({
      ...AWS,
      'secret-agent.io/agent-memory-request': '12Mi',
      'secret-agent.io/agent-memory-limit': '160Mi',
    });
    assert.ok(isSmall(sidecar));
    assert.deepEqual(sidecar.resources, {
      requests: { cpu: '15m', memory: '12Mi' },
      limits: { memory: '160Mi' },
    });
    assert.equal(envOf(sidecar, pod).NODE_OPTIONS, '--max-old-space-size=76 --max-semi-space-size=1');
    const limitOnly = inject({ ...AWS, 'secret-agent.io/agent-memory-limit': '160Mi' }).sidecar;
    assert.equal((limitOnly.resources as { requests: { memory: string } }).requests.memory, '4Mi');
  });

  it('the cluster’s small request and run deadline are settings, checked at start', () => {
    const custom = inject(AWS, { ...CLUSTER, AGENT_SMALL_SIDECAR_MEMORY_REQUEST: '8Mi' }).sidecar;
    assert.equal((custom.resources as { requests: { memory: string } }).requests.memory, '8Mi');
    for (const [name, value] of [
      ['AGENT_SIDECAR_PROCESS', 'tiny'],
      ['AGENT_RUN_DEADLINE', '2h'],
      ['AGENT_RUN_DEADLINE', 'soon'],
      ['AGENT_SMALL_SIDECAR_MEMORY_REQUEST', 'lots'],
    ] as const)
      assert.throws(
        () => parseWebhookConfig({ AGENT_IMAGE, [name]: value }),
        (e: unknown) => e instanceof ConfigErrors && e.errors.some((err) => err.field === name),
        `${name}=${value}`,
      );
  });
});
