/**
 * The agent, from its environment to its exit code. The entry points (main.ts for the plain bundle,
 * snapshot.ts for the V8 start-up snapshot) only call runAgent.
 */
import packageJson from '../package.json' with { type: 'json' };
import { parseAgentConfig } from './config/parse-agent-config.ts';
import type { AgentConfig } from './contract/agent-config.ts';
import { LOG_LEVELS, type LogLevel } from './contract/agent-settings.ts';
import type { Env } from './contract/settings.ts';
import { ConfigError, ConfigErrors, valueShape } from './contract/errors.ts';
import { withConfigFile } from './config/agent-config-file.ts';
import { checkBackendSettings } from './config/check-backend-settings.ts';
import { loadFormats } from './format/load-formats.ts';
import type { FormatKit } from './format/render-files.ts';
import { helpText } from './help.ts';
import { createLogger, type Logger } from './log.ts';
import { formatFailureSummary, runInit } from './modes/init.ts';
import { kubernetesApiUrl } from './notify/kubernetes-api-url.ts';
import { openPodEvents } from './notify/open-pod-events.ts';
import { errorDetail } from './providers/provider.ts';
import { installEnvExec } from './write/install-env-exec.ts';

/**
 * Exit codes (agent/help.ts, EXIT_CODES, says the same to a person): 0 all secrets written (init) or
 * a clean stop (sidecar); 1 a secret could not be delivered (nothing written); 2 the configuration or
 * environment is invalid (nothing written; found before any fetch, but for a clash among a split
 * secret's keys); 70 internal error, a bug of ours.
 *
 * Every failure is told twice: as text on stderr for a person (`kubectl logs`, the pod's termination
 * message), and as JSON lines on stdout for log search, one per problem.
 */

let log: Logger | undefined;

async function main(args: readonly string[]): Promise<number> {
  // The webhook's Deployment runs the agent image this way to prove it pulls and runs.
  if (args.includes('--version')) {
    process.stdout.write(`secret-agent ${packageJson.version}\n`);
    return 0;
  }
  if (args.includes('--help') || args.includes('-h')) {
    process.stdout.write(helpText(packageJson.version));
    return 0;
  }
  if (args.length > 0) {
    const arg = args[0]!;
    return reportConfigErrors(earlyLogger(process.env), [
      new ConfigError(
        'arguments',
        // An option-like word is ours to quote; anything else might be a value pasted on the command line.
        `${/^--?[A-Za-z][A-Za-z-]*$/.test(arg) ? JSON.stringify(arg) : valueShape(arg)} is not an argument the agent takes`,
        'configure the agent with env variables; it takes only --help and --version',
      ),
    ]);
  }

  let config: AgentConfig;
  let env: Env = process.env;
  try {
    const file = process.env.AGENT_CONFIG_FILE;
    if (file) env = await withConfigFile(process.env, file);
    config = parseAgentConfig(env);
  } catch (e) {
    if (e instanceof ConfigErrors || e instanceof ConfigError) return reportConfigErrors(earlyLogger(env), e);
    throw e;
  }
  log = createLogger(config.logLevel, {
    pod: config.pod.name,
    namespace: config.pod.namespace,
    podUid: config.pod.uid,
  });
  // What the backends need (region, project, Vault settings) is configuration too: found before any call.
  const missing = checkBackendSettings(config, process.env);
  if (missing.length > 0) return reportConfigErrors(log, missing);
  let formats: FormatKit;
  try {
    // Templates are compiled here: a syntax error stops the agent before any backend call.
    formats = await loadFormats(config.secrets);
  } catch (e) {
    if (e instanceof ConfigErrors || e instanceof ConfigError) return reportConfigErrors(log, e);
    throw e;
  }

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
    // Before any file: an app container waiting for its variables runs the wrapper once the set is written.
    if (config.envExec) {
      const outcome = await installEnvExec(config.envExec);
      log[outcome === 'installed' ? 'info' : 'debug']({ dir: config.envExec.dir }, `env wrapper ${outcome}`);
    }
    if (config.mode === 'sidecar' && config.sidecar.handoff) {
      // One refresh for /app/resident, which holds the port and the state between runs.
      const { runHandoff } = await import('./modes/sidecar/handoff-run.ts');
      return await runHandoff(config, { log, agentVersion: packageJson.version, env: process.env, formats });
    }
    if (config.mode === 'sidecar') {
      // Loaded only here: an init container never pays for the HTTP server, metrics or notifiers.
      const { runSidecar } = await import('./modes/sidecar/run-sidecar.ts');
      return await runSidecar(config, {
        log,
        agentVersion: packageJson.version,
        env: process.env,
        formats,
      });
    }
    const events = await openPodEvents(config, { log, kubernetesApiUrl: kubernetesApiUrl(process.env) });
    const result = await runInit(config, {
      log,
      agentVersion: packageJson.version,
      formats,
      ...(events ? { events } : {}),
    });
    if (result.ok) return 0;
    process.stderr.write(formatFailureSummary(result.failures, config.secrets.length, config.secretsDir));
    return 1;
  } catch (e) {
    // Problems only visible at start-up: the volume, the listen address, what a notifier needs
    // (RESTART_ON_CHANGE), files that clash once a split secret's keys are known.
    if (e instanceof ConfigError || e instanceof ConfigErrors) return reportConfigErrors(log, e);
    throw e;
  }
}

/** Before the configuration is read: the log level it asks for if that much is valid, else info. */
function earlyLogger(env: Env): Logger {
  const level = env.LOG_LEVEL;
  return createLogger((LOG_LEVELS as readonly string[]).includes(level ?? '') ? (level as LogLevel) : 'info');
}

/** Each problem as a JSON line on stdout, then all of them on stderr for a person; exit code 2. */
function reportConfigErrors(logger: Logger, e: ConfigError | ConfigErrors | readonly ConfigError[]): number {
  const errors = e instanceof ConfigErrors ? e.errors : e instanceof ConfigError ? [e] : e;
  for (const err of errors)
    logger.error({ field: err.field, problem: err.problem, fix: err.fix }, 'invalid configuration');
  process.stderr.write(
    `secret-agent: invalid configuration\n${errors.map((err) => `  ${err.message}\n`).join('')}`,
  );
  return 2;
}

/**
 * Runs the agent with its command-line arguments (after the script's path, or the snapshot's) and
 * exits the process with its exit code (see the top of this file).
 */
export function runAgent(args: readonly string[]): void {
  main(args).then(
    (code) => process.exit(code),
    (e: unknown) => {
      // An unexpected fault: its name and message (a parser's message is dropped, as it quotes its
      // input) and the stack, which comes from our code, never from a payload.
      const detail = errorDetail(e);
      // Only the frames: a stack's first line repeats the message errorDetail may have left out.
      const stack =
        e instanceof Error
          ? (e.stack ?? '')
              .split('\n')
              .filter((l) => /^\s+at /.test(l))
              .join('\n')
          : '';
      (log ?? createLogger('info')).error({ detail, stack }, 'internal error');
      process.stderr.write(`secret-agent: internal error: ${detail}\n${stack}\n`);
      process.exit(70);
    },
  );
}
