import { ConfigErrors } from '../../agent/contract/errors.ts';
import { createLogger } from '../../agent/log.ts';
import { parseWebhookConfig } from '../config.ts';
import { inClusterApiOptions } from '../kubernetes-api.ts';
import { startWebhook } from '../start.ts';

/**
 * The program without arguments: the webhook server, configured by env (and WEBHOOK_CONFIG_FILE),
 * until SIGTERM. Exit codes: 2 invalid configuration; 70 an unexpected fault at start-up.
 */
export async function serve(): Promise<void> {
  let config;
  try {
    config = parseWebhookConfig(process.env);
  } catch (e) {
    if (e instanceof ConfigErrors) {
      process.stderr.write(
        `secret-agent-webhook: invalid configuration\n${e.errors.map((err) => `  ${err.message}\n`).join('')}`,
      );
      process.exit(2);
    }
    throw e;
  }
  const log = createLogger(config.logLevel, { component: 'webhook' });
  const webhook = await startWebhook(config, {
    log,
    kubernetes: () => inClusterApiOptions(process.env),
    defaultMetrics: true,
  });
  const shutdown = (signal: NodeJS.Signals) => {
    log.info({ signal }, 'shutting down');
    // Endpoints removal races SIGTERM; in-flight admissions finish before close() resolves.
    webhook.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once('SIGTERM', shutdown);
  process.once('SIGINT', shutdown);
}

/** A fault nothing above handled: name, message and stack (from our code), exit 70. */
export function startupFailed(e: unknown): never {
  const err = e as Error;
  process.stderr.write(
    `secret-agent-webhook: start-up failed: ${err?.name ?? 'Error'}: ${err?.message ?? ''}\n${err?.stack ?? ''}\n`,
  );
  process.exit(70);
}
