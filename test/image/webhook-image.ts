import { freePort } from '../support/moto.ts';
import { eventually } from '../support/run-agent.ts';
import { call } from '../webhook/https-call.ts';
import type { ServingPair } from '../webhook/tls-certs.ts';
import type { Platform } from '../../images/platforms.ts';
import { builtImages, startContainer, type RunningContainer } from './podman.ts';

/**
 * The webhook image serving on this machine's loopback with `pair` mounted read-only from
 * `tlsDir` (nothing writable: it needs no volume), injecting the agent image that was built;
 * resolves once /healthz answers. `options.image` runs another platform's webhook image.
 */
export async function startWebhookImage(
  env: Record<string, string>,
  pair: ServingPair,
  tlsDir: string,
  options: {
    readonly memory?: string;
    /** Another platform's webhook image. */
    readonly image?: { readonly ref: string; readonly platform: Platform };
  } = {},
): Promise<{ port: number; container: RunningContainer }> {
  const { manifest } = builtImages();
  const { image } = options;
  const port = await freePort();
  const container = startContainer({
    image: image?.ref ?? manifest.images.webhook.ref,
    ...(image ? { platform: image.platform } : {}),
    network: 'host',
    env: {
      AGENT_IMAGE: manifest.images.agent.ref,
      WEBHOOK_PORT: String(port),
      WEBHOOK_HOST: '127.0.0.1',
      ...env,
    },
    mounts: [{ host: tlsDir, container: '/etc/webhook/tls', readOnly: true }],
    ...(options.memory === undefined ? {} : { memory: options.memory }),
  });
  try {
    await eventually(
      async () =>
        (await call(port, pair.ca, '/healthz').catch(() => undefined))?.status === 200 ? true : undefined,
      `the webhook's /healthz (${container.output().stderr})`,
      // Under QEMU the webhook takes seconds to start.
      image ? 120_000 : 30_000,
    );
  } catch (e) {
    await container.kill('SIGKILL');
    throw e;
  }
  return { port, container };
}
