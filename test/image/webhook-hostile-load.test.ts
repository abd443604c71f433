import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { MAX_TEMPLATE_BYTES, MAX_SETTING_BYTES } from '../../agent/contract/value-limits.ts';
import { MAX_ANNOTATIONS } from '../../webhook/admission/annotation-limits.ts';
import { MAX_CONTAINERS } from '../../webhook/admission/answer-limits.ts';
import { MAX_JSON_DEPTH, MAX_JSON_VALUES } from '../../webhook/admission/json-limits.ts';
import { eventually } from '../support/run-agent.ts';
import { deployedWebhook } from '../webhook/deployed-webhook.ts';
import {
  HOSTILE_KINDS,
  runHostileLoad,
  summarize,
  type Answer,
  type HostileKind,
  type HostileLoadFigures,
} from '../webhook/hostile-load.ts';
import {
  describeAttack,
  runConnectionAttack,
  served,
  type ConnectionAttackOptions,
} from '../webhook/connection-attacks.ts';
import { certDir, makeServingPair } from '../webhook/tls-certs.ts';
import { builtImages } from './podman.ts';
import { startWebhookImage } from './webhook-image.ts';
import { oldSpaceMiB } from '../../webhook/heap-limit.ts';

/**
 * The ceiling on the webhook's private memory (RssAnon: heap, buffers; what the container's cgroup is
 * charged for and no reclaim can take back), as a share of the Deployment's memory limit: the kernel
 * kills at the limit, and the cgroup is charged for page cache and kernel buffers besides. Its whole
 * resident set (VmHWM) also counts Node's binary, file pages the kernel can drop and the cgroup may not
 * be charged for: that stays under the limit itself. Measured on a 256 MiB limit: 105 to 110 MiB private,
 * 160 to 170 MiB in all (52 MiB of it Node's binary).
 */
const CEILING_SHARE = 3 / 4;

/** What the webhook answers each hostile kind, once it reads it. */
const REFUSAL: Readonly<Record<HostileKind, { status: number; says: RegExp }>> = {
  'template-1MiB': {
    status: 200,
    says: new RegExp(
      `secret-agent\\.io/template-db: is \\d+ bytes long, over its limit of ${MAX_TEMPLATE_BYTES / 1024} KiB`,
    ),
  },
  'template-2.5MiB': {
    status: 200,
    says: new RegExp(
      `secret-agent\\.io/template-db: is \\d+ bytes long, over its limit of ${MAX_TEMPLATE_BYTES / 1024} KiB`,
    ),
  },
  'rotation-command-1MiB': {
    status: 200,
    says: new RegExp(
      `secret-agent\\.io/rotation-command: is \\d+ bytes long, over its limit of ${MAX_SETTING_BYTES / 1024} KiB`,
    ),
  },
  'many-annotations': {
    status: 200,
    says: new RegExp(`annotations, over their limit of ${MAX_ANNOTATIONS}`),
  },
  'deep-json': { status: 400, says: new RegExp(`nests deeper than ${MAX_JSON_DEPTH} levels`) },
  'wide-json': { status: 400, says: new RegExp(`more than ${MAX_JSON_VALUES} JSON values`) },
  'containers-9000': {
    status: 200,
    says: new RegExp(
      `the pod has 9,000 containers and init containers, over the webhook's limit of ${MAX_CONTAINERS}`,
    ),
  },
};

/** The refusal's text: the AdmissionReview's status message, or the HTTP error's. */
function said(answer: Answer): { allowed?: boolean; text: string } {
  const body = JSON.parse(answer.body) as {
    error?: string;
    response?: { allowed: boolean; status?: { message: string } };
  };
  return body.response
    ? { allowed: body.response.allowed, text: body.response.status?.message ?? '' }
    : { text: body.error ?? '' };
}

describe('the webhook image under its Deployment’s memory limit, while a tenant sends hostile pods', () => {
  it('stays under its memory ceiling, refuses each hostile pod by name and limit, and answers ordinary pods in time', async (t) => {
    const { podman } = builtImages();
    const deployed = deployedWebhook();
    assert.match(deployed.nodeOptions, /--max-old-space-size=\d+/, 'the Deployment caps the heap');
    const ceilingMiB = deployed.memoryLimitMiB * CEILING_SHARE;
    const pair = await makeServingPair();
    using tls = certDir();
    tls.write(pair);
    const { port, container } = await startWebhookImage(
      { NODE_OPTIONS: deployed.nodeOptions, NATIVE_SIDECARS: 'true' },
      pair,
      tls.dir,
      { memory: `${deployed.memoryLimitMiB}m` },
    );
    let figures: HostileLoadFigures;
    try {
      const pid = Number(podman.run(['inspect', '--format', '{{.State.Pid}}', container.name]).stdout.trim());
      assert.ok(pid > 0, 'podman names the webhook’s process');
      // Eight hostile requests at once, at least 24 of each kind (each its own body, so no cache
      // helps), and more until 50 ordinary pods, one every 100 ms, have met the attack. The API
      // server's deadline is the webhook's timeoutSeconds: that is "in time", whatever the load.
      figures = await runHostileLoad(
        { port, ca: pair.ca, pid, gone: container.exited },
        {
          concurrency: 8,
          perKind: 24,
          ordinaryEveryMs: 100,
          minOrdinary: 50,
          deadlineMs: deployed.timeoutSeconds * 1000,
        },
      );
    } finally {
      await container.kill('SIGKILL');
      await container.exited.catch(() => undefined);
    }
    const report = summarize(figures);
    t.diagnostic(report);
    assert.equal(
      figures.gone,
      false,
      `the webhook died under the load:\n${report}\n${container.output().stderr}`,
    );
    assert.ok(figures.peakAnonymousMiB < ceilingMiB, `private memory reached ${ceilingMiB} MiB:\n${report}`);
    assert.ok(figures.peakMiB < deployed.memoryLimitMiB, `peak RSS reached the memory limit:\n${report}`);
    const listening = container.logs().find((l) => l.msg === 'webhook listening');
    const oldSpace = Number(/--max-old-space-size=(\d+)/.exec(deployed.nodeOptions)![1]);
    assert.ok(
      (listening?.heapLimitMiB as number) < oldSpace * 1.25,
      `the webhook ran with the Deployment's heap cap (${JSON.stringify(listening)})`,
    );
    assert.equal(
      container.logs().filter((l) => l.msg === 'request failed').length,
      0,
      'no request ended in an internal error',
    );

    // Ordinary pods: every one injected, answered within the API server's deadline.
    assert.ok(figures.ordinary.length >= 50, `the attack lasted: ${report}`);
    for (const answer of figures.ordinary) {
      assert.equal(
        answer.status,
        200,
        `an ordinary pod was not answered in time: ${JSON.stringify(answer)}\n${report}`,
      );
      const response = (JSON.parse(answer.body) as { response: { allowed: boolean; patch?: string } })
        .response;
      assert.equal(response.allowed, true);
      assert.ok(response.patch, 'injected');
    }

    // Hostile pods: never admitted. Each is answered with its refusal, or still shed or waiting when
    // the API server's deadline passes (then failurePolicy Fail refuses it); never a dropped
    // connection. Most of each kind are read and refused.
    for (const kind of HOSTILE_KINDS) {
      const answers = figures.hostile[kind];
      assert.ok(answers.length >= 24, `${kind}: ${answers.length} sent`);
      const refused = answers.filter((a) => a.status !== 0);
      assert.ok(refused.length >= answers.length / 2, `${kind}: mostly unread\n${report}`);
      for (const answer of refused) {
        assert.equal(answer.status, REFUSAL[kind].status, `${kind}: ${answer.body.slice(0, 300)}`);
        const { allowed, text } = said(answer);
        assert.notEqual(allowed, true, `${kind} was admitted`);
        assert.match(text, REFUSAL[kind].says, kind);
      }
      for (const answer of answers.filter((a) => a.status === 0))
        assert.equal(answer.error, 'deadline', `${kind}: ${JSON.stringify(answer)}`);
      for (const answer of answers.filter((a) => a.retried > 0))
        assert.equal(answer.retryAfter, '1', `${kind}: shed with Retry-After: 1`);
    }
  });

  it('holds under a tenant’s connections: idle TLS, TCP without TLS, dripped bodies, many addresses, unread answers', async (t) => {
    const { podman } = builtImages();
    const deployed = deployedWebhook();
    const pair = await makeServingPair();
    using tls = certDir();
    tls.write(pair);
    const { port, container } = await startWebhookImage(
      { NODE_OPTIONS: deployed.nodeOptions, NATIVE_SIDECARS: 'true' },
      pair,
      tls.dir,
      { memory: `${deployed.memoryLimitMiB}m` },
    );
    // The attacks of test/siege/webhook-connections.test.ts, one after another on one container under
    // its memory limit: its peak is the worst of them.
    const attacks: [string, Omit<ConnectionAttackOptions, 'ordinaryEveryMs' | 'deadlineMs'>][] = [
      ['idle TLS', { attack: { kind: 'idle-tls' }, connections: 4000, sources: 1, durationMs: 8000 }],
      ['idle TCP', { attack: { kind: 'idle-tcp' }, connections: 4000, sources: 1, durationMs: 8000 }],
      [
        'drip 3 MiB',
        {
          attack: { kind: 'drip', declared: 3 * 1024 * 1024, first: 200 * 1024, everyMs: 1000 },
          connections: 200,
          sources: 10,
          durationMs: 8000,
        },
      ],
      ['many sources', { attack: { kind: 'idle-tls' }, connections: 39 * 64, sources: 39, durationMs: 8000 }],
      ['slow readers', { attack: { kind: 'slow-reader' }, connections: 40, sources: 4, durationMs: 8000 }],
    ];
    const reports: string[] = [];
    let peakMiB = 0;
    try {
      const pid = Number(podman.run(['inspect', '--format', '{{.State.Pid}}', container.name]).stdout.trim());
      assert.ok(pid > 0, 'podman names the webhook’s process');
      for (const [name, options] of attacks) {
        const figures = await runConnectionAttack(
          { port, ca: pair.ca, pid, gone: container.exited },
          { ...options, ordinaryEveryMs: 100, deadlineMs: deployed.timeoutSeconds * 1000 },
        );
        const report = describeAttack(name, figures);
        reports.push(report);
        t.diagnostic(report);
        assert.equal(figures.gone, false, `the webhook died:\n${report}\n${container.output().stderr}`);
        peakMiB = Math.max(peakMiB, figures.peakMiB);
        assert.ok(figures.ordinary.length >= 40, report);
        assert.ok(served(figures.ordinary) >= figures.ordinary.length * 0.95, report);
      }
    } finally {
      await container.kill('SIGKILL');
      await container.exited.catch(() => undefined);
    }
    assert.ok(
      peakMiB < deployed.memoryLimitMiB * CEILING_SHARE,
      `peak RSS reached ${deployed.memoryLimitMiB * CEILING_SHARE} MiB:\n${reports.join('\n')}`,
    );
  });

  it('warns at start when nothing caps V8’s heap below the container’s limit, and not with the Deployment’s NODE_OPTIONS', async () => {
    const deployed = deployedWebhook();
    const pair = await makeServingPair();
    using tls = certDir();
    tls.write(pair);
    const HEAP_WARNING =
      'the V8 heap may grow past three quarters of the container memory limit; under load the kernel would kill the webhook';
    for (const [env, warns] of [
      [{}, true],
      [{ NODE_OPTIONS: deployed.nodeOptions }, false],
    ] as const) {
      const { container } = await startWebhookImage({ ...env, NATIVE_SIDECARS: 'true' }, pair, tls.dir, {
        memory: `${deployed.memoryLimitMiB}m`,
      });
      try {
        await eventually(
          () => (container.logs().some((l) => l.msg === 'webhook listening') ? true : undefined),
          'the listening line',
        );
        // The check runs right after it, in the same turn.
        await sleep(200);
        const warning = container.logs().find((l) => l.msg === HEAP_WARNING);
        if (warns) {
          assert.equal(warning?.level, 'warn', JSON.stringify(container.logs()));
          assert.equal(warning!.memoryLimitMiB, deployed.memoryLimitMiB);
          assert.ok((warning!.heapLimitMiB as number) > deployed.memoryLimitMiB);
          assert.match(
            warning!.fix as string,
            new RegExp(`--max-old-space-size=${oldSpaceMiB(deployed.memoryLimitMiB)} `),
          );
        } else assert.equal(warning, undefined, JSON.stringify(warning));
      } finally {
        await container.kill('SIGKILL');
        await container.exited.catch(() => undefined);
      }
    }
  });
});
