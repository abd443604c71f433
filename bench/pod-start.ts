/**
 * An injected pod's start against the same pod without injection, in podman as a kubelet orders it
 * (test/image/run-pod.ts): the sample app on the images' runtime base, one AWS secret from moto, the
 * pod patched by the webhook's own admission code. Measured from the first container's creation to the
 * app's first line (it prints one as it starts, with the time), in interleaved rounds, medians:
 *   - floor: the pod without injection (no annotation asks for a secret);
 *   - init: `mode: init`, the agent as an init container;
 *   - native sidecar, small (the default render): the resident, its postStart hook holding the app;
 *   - native sidecar, Node (`sidecar-process: node`).
 * `node bench/pod-start.ts` runs it alone, after `npm run images`.
 */
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { runPod } from '../test/image/run-pod.ts';
import { sampleAppImage } from '../test/image/sample-app-image.ts';
import { builtImages } from '../test/image/podman.ts';
import { MOTO_ENV, motoSecrets, startMoto, type Moto } from '../test/support/moto.ts';
import { admitThroughWebhook, basicPod, injectedPod, type PodDoc } from '../test/webhook/fixtures.ts';

export const POD_START_CASES = ['floor', 'init', 'nativeSmall', 'nativeNode'] as const;
export type PodStartCase = (typeof POD_START_CASES)[number];

export interface PodStartFigures {
  readonly rounds: number;
  /** Median ms from the first container's creation to the app's first line. */
  readonly medianMs: Readonly<Record<PodStartCase, number>>;
}

const APP = 'app';
const CASE_ANNOTATIONS: Readonly<Record<Exclude<PodStartCase, 'floor'>, Record<string, string>>> = {
  init: { 'secret-agent.io/mode': 'init' },
  nativeSmall: {},
  nativeNode: { 'secret-agent.io/sidecar-process': 'node' },
};

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

export async function benchPodStart(moto: Moto, rounds = 5): Promise<PodStartFigures> {
  const agentImage = builtImages().manifest.images.agent.ref;
  const appImage = await sampleAppImage();
  const secrets = motoSecrets(moto.endpoint);
  await secrets.put('pod-start/db', 'x'.repeat(64)).catch(() => undefined); // made by an earlier round
  const app = { name: APP, image: appImage, env: [{ name: 'APP_FILES', value: 'db' }] };
  const pods: Record<PodStartCase, PodDoc> = {
    floor: { ...basicPod({}, { containers: [app] }), metadata: { name: 'pod-start', namespace: 'apps' } },
    ...(Object.fromEntries(
      Object.entries(CASE_ANNOTATIONS).map(([c, annotations]) => {
        const pod = basicPod(
          { 'secret-agent.io/secret-db': 'aws:pod-start/db', ...annotations },
          { containers: [app] },
        );
        const env = {
          AGENT_IMAGE: agentImage,
          NATIVE_SIDECARS: 'true',
          AGENT_AWS_REGION: MOTO_ENV.AWS_REGION,
        };
        return [c, injectedPod(pod, admitThroughWebhook(pod, env))];
      }),
    ) as Record<Exclude<PodStartCase, 'floor'>, PodDoc>),
  };
  const samples = Object.fromEntries(POD_START_CASES.map((c) => [c, [] as number[]])) as Record<
    PodStartCase,
    number[]
  >;
  try {
    for (let round = -1; round < rounds; round++)
      for (const c of POD_START_CASES) {
        const began = Date.now();
        const running = await runPod(pods[c], {
          agentImage,
          agentEnv: {
            AWS_ACCESS_KEY_ID: 'bench',
            AWS_SECRET_ACCESS_KEY: 'bench',
            AWS_ENDPOINT_URL_SECRETS_MANAGER: moto.endpoint,
          },
        });
        try {
          if (running.failedInit || running.failedPostStart)
            throw new Error(
              `${c}: the pod did not start: ${JSON.stringify(running.failedInit ?? running.failedPostStart)}`,
            );
          let started: Record<string, unknown> | undefined;
          for (let waited = 0; !started; waited += 50) {
            if (waited > 60_000) throw new Error(`${c}: the app printed nothing in 60 s`);
            started = running.events(APP).find((e) => e.event === 'started');
            if (!started) await sleep(50);
          }
          const files = started.files as Record<string, string>;
          if (c !== 'floor' && files.db?.startsWith('missing'))
            throw new Error(`${c}: the app started without its file`);
          // The first round warms the page cache with every image: not counted.
          if (round >= 0) samples[c].push((started.at as number) - began);
        } finally {
          await running.remove();
        }
      }
  } finally {
    secrets.destroy();
  }
  return {
    rounds,
    medianMs: Object.fromEntries(POD_START_CASES.map((c) => [c, median(samples[c])])) as Record<
      PodStartCase,
      number
    >,
  };
}

export function formatPodStart(f: PodStartFigures): string {
  const floor = f.medianMs.floor;
  return [
    `pod start in podman, first container created → the app's first line, median of ${f.rounds} rounds`,
    '',
    '| pod | ms | × no injection |',
    '| --- | ---: | ---: |',
    ...POD_START_CASES.map((c) => `| ${c} | ${f.medianMs[c]} | ${(f.medianMs[c] / floor).toFixed(2)} |`),
  ].join('\n');
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const moto = await startMoto();
  try {
    console.log(formatPodStart(await benchPodStart(moto, Number(process.env.BENCH_POD_ROUNDS ?? 5))));
  } finally {
    await moto.stop();
  }
}
