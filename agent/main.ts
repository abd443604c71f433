import packageJson from '../package.json' with { type: 'json' };
import { parseAgentConfig, type AgentConfig } from './contract/env.ts';
import { ConfigError, ConfigErrors } from './contract/errors.ts';
import { createLogger } from './log.ts';
import { formatFailureSummary, runInit } from './modes/init.ts';

/**
 * Exit codes: 0 all secrets written (init) or a clean stop (sidecar); 1 a secret could not be
 * delivered (nothing written); 2 the configuration is invalid (nothing fetched); 70 internal error.
 */
async function main(): Promise<number> {
  // The webhook's Deployment runs the agent image this way to prove it pulls and runs.
  if (process.argv.includes('--version')) {
    process.stdout.write(`secret-agent ${packageJson.version}\n`);
    return 0;
  }
  let config: AgentConfig;
  try {
    const file = process.env.AGENT_CONFIG_FILE;
    const env = file
      ? (await import('./contract/config-file.ts')).withConfigFile(process.env, file)
      : process.env;
    config = parseAgentConfig(env);
  } catch (e) {
    if (e instanceof ConfigErrors || e instanceof ConfigError) {
      const errors = e instanceof ConfigErrors ? e.errors : [e];
      process.stderr.write(
        `secret-agent: invalid configuration\n${errors.map((err) => `  ${err.message}\n`).join('')}`,
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
    if (config.mode === 'sidecar') {
      // Loaded only here: an init container never pays for the HTTP server, metrics or notifiers.
      const { runSidecar } = await import('./modes/sidecar.ts');
      return await runSidecar(config, { log, agentVersion: packageJson.version, env: process.env });
    }
    const result = await runInit(config, { log, agentVersion: packageJson.version });
    if (result.ok) return 0;
    process.stderr.write(formatFailureSummary(result.failures, config.secrets.length, config.secretsDir));
    return 1;
  } catch (e) {
    // Problems only visible at start-up: the volume, or what a notifier needs (RESTART_ON_CHANGE).
    if (e instanceof ConfigError || e instanceof ConfigErrors) {
      const errors = e instanceof ConfigErrors ? e.errors : [e];
      for (const err of errors) log.error({ field: err.field }, err.message);
      process.stderr.write(
        `secret-agent: invalid configuration\n${errors.map((err) => `  ${err.message}\n`).join('')}`,
      );
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
