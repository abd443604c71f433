import { ConfigErrors } from '../../agent/contract/errors.ts';
import { createLogger } from '../../agent/log.ts';
import { parseWebhookConfig } from '../config/parse-webhook-config.ts';
import { checkHeapLimit } from '../heap-limit.ts';
import { inClusterApiOptions } from '../kubernetes-api.ts';
import { MissingPermissionError } from '../missing-permission.ts';
import { startWebhook } from '../start.ts';
import { TurnWriter } from '../turn-writer.ts';
import { SERVE_EXIT } from './exit-codes.ts';

/**
 * The program without arguments: the webhook server, configured by env (and WEBHOOK_CONFIG_FILE),
 * until SIGTERM. Exit codes: webhook/cli/exit-codes.ts.
 */
export async function serve(): Promise<void> {
  let config;
  try {
    config = parseWebhookConfig(process.env);
  } catch (e) {
    if (e instanceof ConfigErrors) invalidConfiguration(e);
    throw e;
  }
  // Admissions log a line each: written once per event-loop turn, not once per line.
  const log = createLogger(config.logLevel, { component: 'webhook' }, new TurnWriter(1));
  let webhook;
  try {
    webhook = await startWebhook(config, {
      log,
      kubernetes: () => inClusterApiOptions(process.env),
      defaultMetrics: true,
    });
  } catch (e) {
    // Certificate files, the port, the host: settings the user fixes, not a fault of ours.
    if (e instanceof ConfigErrors) invalidConfiguration(e);
    // An RBAC rule the installation lacks: neither a setting nor a bug.
    if (e instanceof MissingPermissionError) missingPermission(e);
    throw e;
  }
  checkHeapLimit(log);
  const shutdown = (signal: NodeJS.Signals) => {
    log.info({ signal }, 'shutting down');
    // Endpoints removal races SIGTERM; in-flight admissions finish before close() resolves.
    webhook.close().then(
      () => process.exit(SERVE_EXIT.stopped.code),
      () => process.exit(SERVE_EXIT.closeFailed.code),
    );
  };
  process.once('SIGTERM', shutdown);
  process.once('SIGINT', shutdown);
}

/**
 * Each problem as text on stderr for a person (`kubectl logs`, the termination message), and as one
 * JSON line on stdout for log search, as the agent reports its own.
 */
function invalidConfiguration(e: ConfigErrors): never {
  process.stderr.write(
    `secret-agent-webhook: invalid configuration\n${e.errors.map((err) => `  ${err.message}\n`).join('')}`,
  );
  const time = new Date().toISOString();
  for (const err of e.errors)
    process.stdout.write(
      `${JSON.stringify({ level: 'error', time, component: 'webhook', field: err.field, problem: err.problem, fix: err.fix, msg: 'invalid configuration' })}\n`,
    );
  process.exit(SERVE_EXIT.invalidConfiguration.code);
}

/** The same two ways: what is missing and the manifest that grants it; no stack, it is not our fault. */
function missingPermission(e: MissingPermissionError): never {
  process.stderr.write(`secret-agent-webhook: missing permission\n  ${e.message}\n`);
  const { verb, resource, group, name, namespace } = e.permission;
  process.stdout.write(
    `${JSON.stringify({ level: 'error', time: new Date().toISOString(), component: 'webhook', verb, resource, group, ...(name !== undefined ? { name } : {}), ...(namespace !== undefined ? { namespace } : {}), problem: e.problem, fix: e.fix, msg: 'missing permission' })}\n`,
  );
  process.exit(SERVE_EXIT.missingPermission.code);
}

/** A fault nothing above handled: name, message and stack (from our code). */
export function startupFailed(e: unknown): never {
  const err = e as Error;
  process.stderr.write(
    `secret-agent-webhook: start-up failed: ${err?.name ?? 'Error'}: ${err?.message ?? ''}\n${err?.stack ?? ''}\n`,
  );
  process.exit(SERVE_EXIT.internal.code);
}
