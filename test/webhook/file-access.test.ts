/**
 * Who can read the files, through the real admission code: for each pod shape, the uid and groups the
 * kubelet will give each container that mounts the secrets (container securityContext over the pod's,
 * fsGroup and supplementalGroups for every container), and what the webhook makes of them: the agent's
 * user and group, the files' mode, a supplementalGroups entry, and the warning or the refusal.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseAgentConfig } from '../../agent/config/parse-agent-config.ts';
import { WARNINGS_ANNOTATION } from '../../agent/contract/product-annotations.ts';
import { admitThroughWebhook, basicPod, containerEnv, injectedPod, type PodDoc } from './fixtures.ts';

const REF = { 'secret-agent.io/secret-db': 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:db-AbCdEf' };

interface Outcome {
  readonly agent: { runAsUser?: number; runAsGroup?: number };
  readonly fileMode: number;
  readonly supplementalGroups?: unknown;
  readonly warnings: readonly string[];
  readonly annotation?: string;
}

/** Admits `pod` and reads back what the kubelet would run: the agent's ids, its FILE_MODE, the pod's groups. */
function admitted(pod: PodDoc, env: Record<string, string> = {}): Outcome {
  const result = admitThroughWebhook(pod, env);
  const patched = injectedPod(pod, result);
  const agents = (patched.spec.initContainers ?? []).filter((c) => String(c.name).startsWith('secret-agent'));
  assert.equal(agents.length, 1);
  const agent = agents[0]!;
  const context = agent.securityContext as Record<string, unknown>;
  assert.equal(context.runAsNonRoot, true);
  const config = parseAgentConfig(containerEnv(agent, patched));
  const annotations = patched.metadata.annotations ?? {};
  return {
    agent: {
      ...(context.runAsUser !== undefined ? { runAsUser: context.runAsUser as number } : {}),
      ...(context.runAsGroup !== undefined ? { runAsGroup: context.runAsGroup as number } : {}),
    },
    fileMode: config.secrets[0]!.mode,
    supplementalGroups: (patched.spec.securityContext as Record<string, unknown> | undefined)
      ?.supplementalGroups,
    warnings: result.review.response.warnings ?? [],
    ...(annotations[WARNINGS_ANNOTATION] !== undefined
      ? { annotation: annotations[WARNINGS_ANNOTATION] }
      : {}),
  };
}

function refused(pod: PodDoc): string {
  const result = admitThroughWebhook(pod);
  assert.equal(result.outcome, 'denied');
  return result.review.response.status!.message;
}

const container = (name: string, securityContext?: Record<string, unknown>) => ({
  name,
  image: `registry.example/${name}:1`,
  ...(securityContext ? { securityContext } : {}),
});

describe('who can read the files: one known uid, the agent runs as it and files stay 0400', () => {
  it('a restricted-style app: runAsUser on the container only (not the pod)', () => {
    const restricted = {
      runAsNonRoot: true,
      runAsUser: 1000,
      allowPrivilegeEscalation: false,
      capabilities: { drop: ['ALL'] },
      seccompProfile: { type: 'RuntimeDefault' },
    };
    const out = admitted(basicPod(REF, { containers: [container('app', restricted)] }));
    assert.deepEqual(out.agent, { runAsUser: 1000, runAsGroup: 65532 });
    assert.equal(out.fileMode, 0o400);
    assert.equal(out.supplementalGroups, undefined);
    assert.deepEqual(out.warnings, []);
    assert.equal(out.annotation, undefined);
  });

  it('pod runAsUser 1000, the app overrides it with 101: the agent runs as 101, the app’s', () => {
    const out = admitted(
      basicPod(REF, {
        securityContext: { runAsUser: 1000 },
        containers: [container('app', { runAsUser: 101 })],
      }),
    );
    assert.deepEqual(out.agent, { runAsUser: 101, runAsGroup: 65532 });
    assert.equal(out.fileMode, 0o400);
    assert.deepEqual(out.warnings, []);
  });

  it('only the containers that mount the volume count (secret-agent.io/containers)', () => {
    const out = admitted(
      basicPod(
        { ...REF, 'secret-agent.io/containers': 'app' },
        { containers: [container('app', { runAsUser: 1000, runAsGroup: 3000 }), container('proxy')] },
      ),
    );
    assert.deepEqual(out.agent, { runAsUser: 1000, runAsGroup: 3000 });
    assert.equal(out.fileMode, 0o400);
  });

  it('an explicit 0440 is kept: the owner reads, nothing to warn about', () => {
    const out = admitted(
      basicPod(
        { ...REF, 'secret-agent.io/file-mode': '0440' },
        { securityContext: { runAsUser: 1000, fsGroup: 2000 } },
      ),
    );
    assert.deepEqual(out.agent, { runAsUser: 1000, runAsGroup: 65532 });
    assert.equal(out.fileMode, 0o440);
    assert.deepEqual(out.warnings, []);
  });
});

describe('who can read the files: shared through a group when no single uid can own them', () => {
  it('no securityContext (the image’s USER decides): 0440, a group the webhook adds, a warning on the pod', () => {
    const out = admitted(basicPod(REF));
    assert.deepEqual(out.agent, { runAsUser: 65532, runAsGroup: 65532 });
    assert.equal(out.fileMode, 0o440);
    assert.deepEqual(out.supplementalGroups, [65532]);
    assert.equal(out.warnings.length, 1);
    assert.match(
      out.warnings[0]!,
      /container "app" sets no runAsUser .* group 65532 \(which the webhook added/,
    );
    assert.equal(out.annotation, out.warnings[0], 'the pod keeps the warning for kubectl describe');
  });

  it('AGENT_FILE_GROUP chooses the added group; one already in supplementalGroups is not added twice', () => {
    assert.deepEqual(admitted(basicPod(REF), { AGENT_FILE_GROUP: '4242' }).supplementalGroups, [4242]);
    const out = admitted(basicPod(REF, { securityContext: { supplementalGroups: [10, 65532] } }));
    assert.deepEqual(out.supplementalGroups, [10, 65532]);
    assert.match(out.warnings[0]!, /group 65532 \(in the pod’s supplementalGroups\)/);
    const appended = admitted(basicPod(REF, { securityContext: { supplementalGroups: [10] } }));
    assert.deepEqual(appended.supplementalGroups, [10, 65532]);
  });

  it('two containers of two uids, and the pod’s fsGroup: shared through the fsGroup, nothing added', () => {
    const out = admitted(
      basicPod(REF, {
        securityContext: { fsGroup: 2000 },
        containers: [container('app', { runAsUser: 1000 }), container('proxy', { runAsUser: 101 })],
      }),
    );
    assert.deepEqual(out.agent, { runAsUser: 65532, runAsGroup: 2000 });
    assert.equal(out.fileMode, 0o440);
    assert.equal(out.supplementalGroups, undefined);
    assert.match(
      out.warnings[0]!,
      /run as different users \("app" 1000, "proxy" 101\).*group 2000 \(the pod’s fsGroup\)/,
    );
  });

  it('two uids with one runAsGroup: shared through it', () => {
    const out = admitted(
      basicPod(REF, {
        securityContext: { runAsGroup: 3000 },
        containers: [container('app', { runAsUser: 1000 }), container('proxy', { runAsUser: 101 })],
      }),
    );
    assert.deepEqual(out.agent, { runAsUser: 65532, runAsGroup: 3000 });
    assert.equal(out.supplementalGroups, undefined);
  });

  it('an app that runs as root: the agent never does, so the files are shared by group', () => {
    const out = admitted(basicPod(REF, { securityContext: { runAsUser: 0 } }));
    assert.deepEqual(out.agent, { runAsUser: 65532, runAsGroup: 65532 });
    assert.match(out.warnings[0]!, /run as root \(uid 0\)/);
  });

  it('agent-run-as-user another than the app’s: shared by group, with that user', () => {
    const out = admitted(
      basicPod(
        { ...REF, 'secret-agent.io/agent-run-as-user': '5000' },
        { securityContext: { runAsUser: 1000 } },
      ),
    );
    assert.deepEqual(out.agent, { runAsUser: 5000, runAsGroup: 65532 });
    assert.equal(out.fileMode, 0o440);
    assert.match(out.warnings[0]!, /agent-run-as-user is 5000, not 1000/);
  });

  it('rotation-signal where the app’s uid is not named: warned, the kernel would refuse the signal', () => {
    const signal = {
      ...REF,
      'secret-agent.io/rotation-signal': 'SIGHUP',
      'secret-agent.io/rotation-signal-process': 'app',
    };
    const out = admitted(basicPod(signal));
    assert.equal(out.warnings.length, 2);
    assert.match(
      out.warnings[1]!,
      /rotation-signal: the agent runs as uid 65532, which the spec does not show to be the app's/,
    );
    assert.deepEqual(admitted(basicPod(signal, { securityContext: { runAsUser: 1000 } })).warnings, []);
  });

  it('a chosen 0644 is kept: others can read it anyway (warned as risky)', () => {
    const out = admitted(basicPod({ ...REF, 'secret-agent.io/file-mode': '0644' }));
    assert.equal(out.fileMode, 0o644);
    assert.equal(out.warnings.length, 2);
  });
});

describe('who can read the files: a chosen mode no reader could read through is refused at admission', () => {
  it('file-mode 0400 with two uids: names the annotation, the containers and both fixes', () => {
    const message = refused(
      basicPod(
        { ...REF, 'secret-agent.io/file-mode': '0400' },
        { containers: [container('app', { runAsUser: 1000 }), container('proxy', { runAsUser: 101 })] },
      ),
    );
    assert.match(message, /secret-agent\.io\/file-mode: "0400" lets only the file’s owner read it/);
    assert.match(message, /"app" 1000, "proxy" 101/);
    assert.match(
      message,
      /Fix: use 0440 .*or run every container that mounts the secrets as one non-root uid/,
    );
  });

  it('file-mode-<file> 0600 where the image’s USER decides', () => {
    const message = refused(basicPod({ ...REF, 'secret-agent.io/file-mode-db': '0600' }));
    assert.match(
      message,
      /secret-agent\.io\/file-mode-db: "0600" lets only the file’s owner read it, but container "app" sets no runAsUser/,
    );
  });
});

describe('the agent never runs with group 0', () => {
  it('a pod-wide runAsGroup 0 is neutralised: the agent sets a group of its own, never 0', () => {
    for (const spec of [
      { securityContext: { runAsUser: 1000, runAsGroup: 0 }, containers: [container('app')] },
      { containers: [container('app', { runAsUser: 1000, runAsGroup: 0 })] },
      { securityContext: { runAsGroup: 0 }, containers: [container('app'), container('proxy')] },
      // No runAsGroup anywhere: left to the runtime, a uid the image's passwd lacks gets group 0.
      { containers: [container('app', { runAsUser: 1000 })] },
    ]) {
      const out = admitted(basicPod(REF, spec));
      assert.ok(out.agent.runAsGroup !== undefined && out.agent.runAsGroup > 0, JSON.stringify(spec));
    }
  });

  it('fsGroup 0 or a supplementalGroups 0, which reach the agent too, is refused naming the field and the fix', () => {
    for (const [securityContext, field] of [
      [{ runAsUser: 1000, fsGroup: 0 }, 'spec.securityContext.fsGroup'],
      [{ runAsUser: 1000, supplementalGroups: [3000, 0] }, 'spec.securityContext.supplementalGroups'],
    ] as const) {
      const message = refused(basicPod(REF, { securityContext, containers: [container('app')] }));
      assert.ok(
        message.includes(
          `secret-agent.io/inject: ${field} gives every container, the agent included, group 0 (root’s), which the agent never runs with. Fix: remove 0 from ${field}`,
        ),
        message,
      );
    }
  });
});
