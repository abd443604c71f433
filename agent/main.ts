import packageJson from '../package.json' with { type: 'json' };
import { parseAgentConfig } from './contract/env.ts';
import { ConfigError, ConfigErrors } from './contract/errors.ts';
import { createLogger } from './log.ts';
import { formatFailureSummary, runInit } from './modes/init.ts';

/**
 * Exit codes: 0 all secrets written; 1 a secret could not be delivered (nothing written);
 * 2 the configuration is invalid (nothing fetched).
 */
async function main(): Promise<number> {
  let config;
  try {
    config = parseAgentConfig(process.env);
  } catch (e) {
    if (e instanceof ConfigErrors) {
      process.stderr.write(
        `secret-agent: invalid configuration\n${e.errors.map((err) => `  ${err.message}\n`).join('')}`,
      );
      return 2;
    }
    throw e;
  }
  const log = createLogger(config.logLevel, {
    pod: config.pod.name,
    namespace: config.pod.namespace,
    podUid: config.pod.uid,
  });
  log.info(
    {
      version: packageJson.version,
      mode: config.mode,
      secrets: config.secrets.length,
      dir: config.secretsDir,
    },
    'starting',
  );
  try {
    const result = await runInit(config, { log, agentVersion: packageJson.version });
    if (result.ok) return 0;
    process.stderr.write(formatFailureSummary(result.failures, config.secrets.length, config.secretsDir));
    return 1;
  } catch (e) {
    if (e instanceof ConfigError) {
      log.error({ field: e.field }, e.message);
      process.stderr.write(`secret-agent: ${e.message}\n`);
      return 2;
    }
    throw e;
  }
}

main().then(
  (code) => process.exit(code),
  (e: unknown) => {
    // An unexpected fault: name and stack only, which come from our code, never from a payload.
    const err = e as Error;
    process.stderr.write(
      `secret-agent: internal error: ${err?.name ?? 'Error'}: ${err?.message ?? ''}\n${err?.stack ?? ''}\n`,
    );
    process.exit(70);
  },
);
