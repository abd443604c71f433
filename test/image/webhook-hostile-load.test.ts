import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { eventually } from '../support/run-agent.ts';
import { deployedWebhook } from '../webhook/deployed-webhook.ts';
import { certDir, makeServingPair } from '../webhook/tls-certs.ts';
import { startWebhookImage } from './webhook-image.ts';

describe('the webhook image under its Deployment’s memory limit', () => {
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
            new RegExp(`--max-old-space-size=${deployed.memoryLimitMiB / 2} `),
          );
        } else assert.equal(warning, undefined, JSON.stringify(warning));
      } finally {
        await container.kill('SIGKILL');
        await container.exited.catch(() => undefined);
      }
    }
  });
});
