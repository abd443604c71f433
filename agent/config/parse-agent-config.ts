import type { AgentConfig } from '../contract/agent-config.ts';
import { AGENT_SETTINGS } from '../contract/agent-settings.ts';
import { findMisspelledNames } from '../contract/env-names.ts';
import { ConfigError, ConfigErrors, quote } from '../contract/errors.ts';
import { SECRET_SETTINGS, SECRET_VAR } from '../contract/secret-settings.ts';
import { settingsReader, type Env } from '../contract/settings.ts';
import { checkSettingSizes } from '../contract/value-limits.ts';
import { PROVIDER_ENV } from '../providers/provider-env.ts';
import { parseSecretSpecs } from './parse-secret-specs.ts';

/**
 * Every variable the agent or its backend clients read: the agent's own settings (the contract) and
 * each provider's (agent/providers/provider-env.ts), in declaration order. A name close to one of
 * these but not itself one is taken for a misspelling (agent/contract/env-names.ts).
 */
export const KNOWN_ENV: readonly string[] = [...Object.keys(AGENT_SETTINGS), ...PROVIDER_ENV];

/** Parses the agent's env into a typed config; throws ConfigErrors listing every problem found. */
export function parseAgentConfig(env: Env): AgentConfig {
  // Sizes first: text over its cap is refused before any parser reads it.
  checkSettingSizes(env, (name) => Object.hasOwn(AGENT_SETTINGS, name) || SECRET_VAR.test(name));
  const errors: ConfigError[] = findMisspelledNames(env, KNOWN_ENV, {
    pattern: SECRET_VAR,
    suffixes: Object.keys(SECRET_SETTINGS),
  });
  const read = settingsReader([env], errors);

  const g = AGENT_SETTINGS;
  const mode = read('AGENT_MODE', g.AGENT_MODE);
  const secretsDir = read('SECRETS_DIR', g.SECRETS_DIR);
  const fileMode = read('FILE_MODE', g.FILE_MODE);
  const initDeadlineMs = read('INIT_DEADLINE', g.INIT_DEADLINE);
  const requireMemoryFs = read('REQUIRE_MEMORY_FS', g.REQUIRE_MEMORY_FS);
  const logLevel = read('LOG_LEVEL', g.LOG_LEVEL);
  const refreshIntervalMs = read('REFRESH_INTERVAL', g.REFRESH_INTERVAL);
  const httpAddr = read('AGENT_HTTP_ADDR', g.AGENT_HTTP_ADDR);
  const signal = read('ROTATION_SIGNAL', g.ROTATION_SIGNAL);
  const signalProcess = read('ROTATION_SIGNAL_PROCESS', g.ROTATION_SIGNAL_PROCESS);
  const signalPidFile = read('ROTATION_SIGNAL_PIDFILE', g.ROTATION_SIGNAL_PIDFILE);
  const http = read('ROTATION_HTTP_URL', g.ROTATION_HTTP_URL);
  const command = read('ROTATION_COMMAND', g.ROTATION_COMMAND);
  const restartOnChange = read('RESTART_ON_CHANGE', g.RESTART_ON_CHANGE);
  const deleteBarePod = read('RESTART_DELETE_BARE_POD', g.RESTART_DELETE_BARE_POD);
  const configFile = read('AGENT_CONFIG_FILE', g.AGENT_CONFIG_FILE);
  const serviceAccountDir = read('SERVICE_ACCOUNT_DIR', g.SERVICE_ACCOUNT_DIR);
  const exitWithProcess = read('EXIT_WITH_PROCESS', g.EXIT_WITH_PROCESS);
  const handoff = read('AGENT_HANDOFF_FDS', g.AGENT_HANDOFF_FDS);
  read('AGENT_RUN_DEADLINE', g.AGENT_RUN_DEADLINE);
  const debounceMs = read('ROTATION_DEBOUNCE', g.ROTATION_DEBOUNCE);
  const sentinelPath = read('ROTATION_SENTINEL_FILE', g.ROTATION_SENTINEL_FILE);
  const sentinelHoldMs = read('ROTATION_SENTINEL_HOLD', g.ROTATION_SENTINEL_HOLD);
  const events = read('KUBERNETES_EVENTS', g.KUBERNETES_EVENTS);
  const failingAfter = read('KUBERNETES_EVENTS_FAILING_AFTER', g.KUBERNETES_EVENTS_FAILING_AFTER);
  const envExecDir = read('ENV_EXEC_DIR', g.ENV_EXEC_DIR);
  const envExecProgram = read('ENV_EXEC_PROGRAM', g.ENV_EXEC_PROGRAM);
  if (handoff && mode !== 'sidecar')
    errors.push(
      new ConfigError(
        'AGENT_HANDOFF_FDS',
        `is set in ${quote(mode ?? 'init')} mode`,
        'run /app/resident only as a sidecar (AGENT_MODE=sidecar)',
      ),
    );
  // Ending when the app ends needs a process that watches it between refreshes; the resident does not.
  if (handoff && exitWithProcess)
    errors.push(
      new ConfigError(
        'EXIT_WITH_PROCESS',
        'needs the agent to stay running, and /app/resident runs it only for each refresh',
        'run the agent itself as the sidecar (the webhook does so for Jobs), or unset EXIT_WITH_PROCESS',
      ),
    );
  if (env.ROTATION_SENTINEL_HOLD !== undefined && env.ROTATION_SENTINEL_FILE === undefined) {
    errors.push(
      new ConfigError(
        'ROTATION_SENTINEL_HOLD',
        'is set without ROTATION_SENTINEL_FILE',
        'set ROTATION_SENTINEL_FILE to the file the probe checks, or remove ROTATION_SENTINEL_HOLD',
      ),
    );
  }
  if (signal && !signalProcess && !signalPidFile) {
    errors.push(
      new ConfigError(
        'ROTATION_SIGNAL',
        'is set but no process to signal is named',
        'set ROTATION_SIGNAL_PROCESS (process name) or ROTATION_SIGNAL_PIDFILE',
      ),
    );
  }
  if (!signal && (signalProcess || signalPidFile)) {
    errors.push(
      new ConfigError(
        signalProcess ? 'ROTATION_SIGNAL_PROCESS' : 'ROTATION_SIGNAL_PIDFILE',
        'is set without ROTATION_SIGNAL',
        'set ROTATION_SIGNAL, e.g. SIGHUP',
      ),
    );
  }
  const pod: { namespace?: string; name?: string; uid?: string } = {};
  const namespace = read('POD_NAMESPACE', g.POD_NAMESPACE);
  const podName = read('POD_NAME', g.POD_NAME);
  const uid = read('POD_UID', g.POD_UID);
  if (namespace) pod.namespace = namespace;
  if (podName) pod.name = podName;
  if (uid) pod.uid = uid;

  if (
    envExecDir &&
    secretsDir &&
    (`${envExecDir}/`.startsWith(`${secretsDir}/`) || `${secretsDir}/`.startsWith(`${envExecDir}/`))
  )
    errors.push(
      new ConfigError(
        'ENV_EXEC_DIR',
        `${quote(envExecDir)} overlaps SECRETS_DIR ${quote(secretsDir)}`,
        'give the wrapper its own volume, e.g. /secret-agent/exec (the webhook does)',
      ),
    );
  const { secrets, setName } = parseSecretSpecs(env, errors, { fileMode, refreshIntervalMs });
  if (sentinelPath !== undefined) {
    // Named files only: a split secret's keys are known only after the fetch.
    const owner = secrets.find(
      (s) =>
        s.filename !== '' &&
        (s.filename === sentinelPath ||
          sentinelPath.startsWith(`${s.filename}/`) ||
          s.filename.startsWith(`${sentinelPath}/`)),
    );
    if (owner)
      errors.push(
        new ConfigError(
          'ROTATION_SENTINEL_FILE',
          `${quote(sentinelPath)} is where ${owner.id} writes its files`,
          'name a file no secret writes, e.g. .rotated',
        ),
      );
  }
  if (errors.length === 0 && secrets.length === 0) {
    errors.push(
      new ConfigError(
        'SECRET_0_REF',
        'no secret is configured',
        'set SECRET_0_REF and SECRET_0_FILENAME (or the legacy SECRET_ARN)',
      ),
    );
  }
  if (errors.length > 0) throw new ConfigErrors(errors);
  return {
    mode: mode!,
    secretsDir: secretsDir!,
    setName,
    secrets,
    initDeadlineMs: initDeadlineMs!,
    logLevel: logLevel!,
    requireMemoryFs: requireMemoryFs!,
    pod,
    serviceAccountDir: serviceAccountDir!,
    ...(events ? { events: { failingAfter: failingAfter! } } : {}),
    ...(envExecDir ? { envExec: { dir: envExecDir, program: envExecProgram! } } : {}),
    sidecar: {
      refreshIntervalMs: refreshIntervalMs!,
      httpAddr: httpAddr!,
      ...(signal
        ? {
            signal: {
              name: signal,
              ...(signalProcess ? { process: signalProcess } : {}),
              ...(signalPidFile ? { pidFile: signalPidFile } : {}),
            },
          }
        : {}),
      ...(http ? { http } : {}),
      ...(command ? { command } : {}),
      restartOnChange: restartOnChange!,
      deleteBarePod: deleteBarePod!,
      ...(configFile ? { configFile } : {}),
      ...(exitWithProcess ? { exitWithProcess } : {}),
      debounceMs: debounceMs!,
      ...(sentinelPath !== undefined ? { sentinel: { path: sentinelPath, holdMs: sentinelHoldMs! } } : {}),
      ...(handoff ? { handoff } : {}),
    },
  };
}
