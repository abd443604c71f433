import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { after } from 'node:test';
import { ROOT } from '../support/run-agent.ts';
import { deployedWebhook } from '../webhook/deployed-webhook.ts';
import { startBundle, type RunningBundle } from '../webhook/hostile-load.ts';

const WEBHOOK_JS = join(ROOT, 'dist/webhook.js');

/**
 * Starts the built bundle with its Deployment's NODE_OPTIONS (a fresh one per call, so each peak is
 * that run's), and registers, in the calling test file, an `after` that stops every one started.
 */
export function deployedBundles(): () => Promise<RunningBundle> {
  const running: RunningBundle[] = [];
  after(async () => {
    for (const w of running.splice(0)) await w.stop();
  });
  return async () => {
    assert.ok(
      existsSync(WEBHOOK_JS),
      `${WEBHOOK_JS} is missing: build it first with \`node images/build.ts\``,
    );
    const { nodeOptions } = deployedWebhook();
    assert.match(nodeOptions, /--max-old-space-size=\d+/, 'the Deployment caps the heap');
    const w = await startBundle(WEBHOOK_JS, nodeOptions);
    running.push(w);
    return w;
  };
}
