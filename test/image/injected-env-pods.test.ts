import assert from 'node:assert/strict';
import { after, before, describe, it, type TestContext } from 'node:test';
import { ENV_EXEC_APP_PATH } from '../../agent/contract/env-exec.ts';
import { platformImage } from '../../images/manifest.ts';
import { hostPlatform, PLATFORMS, type Platform } from '../../images/platforms.ts';
import { AGENT_CONTAINER, AGENT_INIT_CONTAINER } from '../../webhook/injected-names.ts';
import { assertNoCanary, canary } from '../support/canary.ts';
import { MOTO_ENV, motoSecrets, startMoto, type Moto, type MotoSecrets } from '../support/moto.ts';
import { eventually } from '../support/run-agent.ts';
import { basicPod, decodePatch, mutate, review, validatePod, type PodDoc } from '../webhook/fixtures.ts';
import { call } from '../webhook/https-call.ts';
import { certDir, makeServingPair, type ServingPair } from '../webhook/tls-certs.ts';
import { APP_KINDS, APP_PATH, envAppImages, type AppKind } from './env-app-images.ts';
import { builtImages, type RunningContainer } from './podman.ts';
import { runPod, type PodRun } from './run-pod.ts';
import { startWebhookImage } from './webhook-image.ts';

/**
 * Secrets as env vars (docs/env.md), end to end: the webhook image patches a pod whose app image has
 * no shell (distroless-style), musl's loader only (Alpine-style) or Debian's glibc and shell; podman
 * runs the patched pod with the agent image of the app's platform, amd64 and arm64 (QEMU). The app
 * (test/image/env-app/report.c) reports at its first instruction its PID, argv and the length of each
 * variable, never a value; the harness checks every output for the canaries.
 */

const APP = 'app';
const COMMAND = [APP_PATH, 'first', 'two words'];
const ARGS = ['--flag=x', ''];

interface Started {
  readonly pid: number;
  readonly uid: number;
  readonly argv: readonly string[];
  readonly lengths: Record<string, number | null>;
  readonly env_names: readonly string[];
}

describe('secrets as env vars: pods the webhook image patched, app images with no shell, both platforms', () => {
  let moto: Moto;
  let secrets: MotoSecrets;
  let pair: ServingPair;
  let tls: ReturnType<typeof certDir>;
  let apps: Record<AppKind, Record<Platform, string>>;
  /** A webhook per platform: each renders that platform's agent image, as a cluster of such nodes would. */
  const webhooks = new Map<Platform, { port: number; container: RunningContainer }>();

  before(async () => {
    const { manifest } = builtImages();
    [moto, pair] = await Promise.all([startMoto(), makeServingPair()]);
    apps = envAppImages();
    secrets = motoSecrets(moto.endpoint);
    tls = certDir();
    tls.write(pair);
    for (const platform of PLATFORMS)
      webhooks.set(
        platform,
        await startWebhookImage(
          {
            AGENT_AWS_REGION: MOTO_ENV.AWS_REGION,
            NATIVE_SIDECARS: 'true',
            AGENT_IMAGE: platformImage(manifest, 'agent', platform).ref,
          },
          pair,
          tls.dir,
        ),
      );
  });
  after(async () => {
    for (const w of webhooks.values()) {
      await w.container.kill('SIGTERM');
      assert.equal(await w.container.exited, 0);
    }
    tls?.[Symbol.dispose]();
    secrets?.destroy();
    await moto?.stop();
  });

  /** The pod through the webhook image's /mutate, the patch applied as the API server would. */
  async function admit(pod: PodDoc, platform: Platform) {
    const reply = await call(webhooks.get(platform)!.port, pair.ca, '/mutate', {
      body: JSON.stringify(review(pod)),
    });
    // The answer holds no value: references and names only.
    assertNoCanary(reply.body, 'the admission response');
    const answer = JSON.parse(reply.body) as {
      response: { allowed: boolean; patch?: string; warnings?: string[]; status?: { message: string } };
    };
    assert.equal(answer.response.allowed, true, answer.response.status?.message);
    const patched = mutate(pod, decodePatch(answer.response));
    validatePod(patched);
    assertNoCanary(JSON.stringify(patched), 'the patched pod spec');
    return { pod: patched, warnings: answer.response.warnings ?? [] };
  }

  async function run(t: TestContext, pod: PodDoc, platform: Platform): Promise<PodRun> {
    const running = await runPod(pod, {
      agentImage: platformImage(builtImages().manifest, 'agent', platform).ref,
      agentEnv: {
        AWS_ACCESS_KEY_ID: 'testing',
        AWS_SECRET_ACCESS_KEY: 'testing',
        AWS_ENDPOINT_URL_SECRETS_MANAGER: moto.endpoint,
      },
    });
    t.after(() => running.remove());
    for (const translation of running.translations) t.diagnostic(`translated: ${translation}`);
    return running;
  }

  /** An app of `style` for `platform`, its command in the spec, reporting these variables. */
  function appPod(
    style: AppKind,
    platform: Platform,
    annotations: Record<string, string>,
    env: Record<string, string>,
  ): PodDoc {
    return basicPod(annotations, {
      securityContext: { runAsUser: 1000, runAsNonRoot: true },
      containers: [
        {
          name: APP,
          image: apps[style][platform],
          command: COMMAND,
          args: ARGS,
          env: Object.entries(env).map(([name, value]) => ({ name, value })),
        },
      ],
    });
  }

  const startedOf = (running: PodRun) =>
    eventually(
      () => running.events(APP).find((e) => e.event === 'started') as Started | undefined,
      `the app's first line (${running.logs(APP).stderr})`,
      120_000,
    );

  for (const platform of PLATFORMS)
    for (const style of APP_KINDS)
      it(`${style}, ${platform}: the variables at the app's first instruction, argv and PID 1 its own, its exit code passed through`, async (t) => {
        const arch = platform.split('/')[1]!;
        const url = canary(`env-url-${style}-${arch}`);
        const token = canary(`env-token-${style}-${arch}`);
        await secrets.put(`env/${style}-${arch}/db`, JSON.stringify({ url, user: 'app' }));
        await secrets.put(`env/${style}-${arch}/token`, token);
        const { pod } = await admit(
          appPod(
            style,
            platform,
            {
              'secret-agent.io/mode': 'init',
              'secret-agent.io/env-DATABASE_URL': `aws:env/${style}-${arch}/db#url`,
              'secret-agent.io/env-API_TOKEN': `aws:env/${style}-${arch}/token`,
            },
            { REPORT_VARS: 'DATABASE_URL,API_TOKEN,NOT_SET', REPORT_EXIT: '7' },
          ),
          platform,
        );
        const app = pod.spec.containers.find((c) => c.name === APP);
        assert.equal((app?.command as string[])[0], ENV_EXEC_APP_PATH);
        const running = await run(t, pod, platform);
        assert.equal(running.failedInit, undefined, running.failedInit?.stderr);
        assert.equal(await running.waitFor(AGENT_INIT_CONTAINER, 180_000), 0);
        assert.equal(await running.waitFor(APP, 180_000), 7, running.logs(APP).stderr);
        const started = await startedOf(running);
        assert.equal(started.pid, 1, 'the app is PID 1: the wrapper exec’d it');
        assert.equal(started.uid, 1000, 'as the pod’s runAsUser, which reads the values');
        assert.deepEqual(started.argv, [...COMMAND, ...ARGS], 'argv as without the wrapper');
        assert.deepEqual(started.lengths, {
          DATABASE_URL: Buffer.byteLength(url),
          API_TOKEN: Buffer.byteLength(token),
          NOT_SET: null,
        });
        // The pod's own env and the webhook's are kept; nothing of the wrapper's is added.
        for (const name of ['SECRETS_DIR', 'REPORT_VARS', 'REPORT_EXIT', 'DATABASE_URL', 'API_TOKEN'])
          assert.ok(started.env_names.includes(name), `${name} in the app's env`);
        assert.equal(running.logs(APP).stderr, '', 'the wrapper said nothing');
      });

  for (const style of APP_KINDS)
    it(`${style}, ${hostPlatform()}, native sidecar (the default): SIGTERM reaches the app, not the wrapper; the rotation warning`, async (t) => {
      const platform = hostPlatform();
      const value = canary(`env-signal-${style}`);
      await secrets.put(`env/signal-${style}`, value);
      const { pod, warnings } = await admit(
        appPod(
          style,
          platform,
          { 'secret-agent.io/env-SESSION_KEY': `aws:env/signal-${style}` },
          {
            REPORT_VARS: 'SESSION_KEY',
          },
        ),
        platform,
      );
      assert.equal(warnings.length, 1);
      assert.match(warnings[0]!, /restart-on-change/);
      const running = await run(t, pod, platform);
      assert.equal(running.failedPostStart, undefined);
      const started = await startedOf(running);
      assert.equal(started.pid, 1);
      assert.equal(started.lengths.SESSION_KEY, Buffer.byteLength(value));
      // Its handlers are in place once it says so.
      await eventually(
        () => running.events(APP).find((e) => e.event === 'waiting'),
        'the app’s handlers',
        60_000,
      );
      await running.kill(APP, 'SIGTERM');
      assert.equal(await running.waitFor(APP, 60_000), 143, 'the app’s own handler: 128 + 15');
      assert.ok(
        running.events(APP).some((e) => e.event === 'signal' && e.signal === 15),
        'the app saw SIGTERM',
      );
      // The sidecar keeps running: it is not the app.
      assert.equal(running.inspect(AGENT_CONTAINER).State.Status, 'running');
    });
});
