import { ConfigError, quote } from './errors.ts';
import { parseFileMode } from './file-mode.ts';
import { validateRelativePath } from './path.ts';
import { parseReference } from './reference.ts';
import { DEFAULT_SERVICE_ACCOUNT_DIR } from './service-account.ts';
import { ENV_EXEC_IMAGE_PATH } from './env-exec.ts';
import { absolutePath, boolean, count, duration, nonEmpty, oneOf, setting } from './settings.ts';

/**
 * The settings that apply to the whole agent, declared once as data: the agent parses its env with
 * them (agent/config/parse-agent-config.ts), the webhook renders env from them, and the docs tables and
 * `--help` are generated from them (a test keeps them equal). Each setting's parser is here too.
 */

export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

function signalName(text: string, field: string): NodeJS.Signals {
  const SIGNALS = ['SIGHUP', 'SIGINT', 'SIGQUIT', 'SIGTERM', 'SIGUSR1', 'SIGUSR2', 'SIGWINCH'] as const;
  const name = text.startsWith('SIG') ? text : `SIG${text}`;
  if ((SIGNALS as readonly string[]).includes(name)) return name as NodeJS.Signals;
  throw new ConfigError(
    field,
    `${quote(text)} is not a signal the agent sends`,
    `use one of ${SIGNALS.join(', ')}`,
  );
}

function httpTarget(text: string, field: string): { method: string; url: string } {
  const m = /^(?:(GET|POST|PUT|PATCH|DELETE) )?(\S+)$/.exec(text.trim());
  let url: URL | undefined;
  try {
    url = m ? new URL(m[2]!) : undefined;
  } catch {
    url = undefined;
  }
  if (!m || !url || (url.protocol !== 'http:' && url.protocol !== 'https:')) {
    throw new ConfigError(
      field,
      `${quote(text)} is not [METHOD] URL`,
      'write it like POST http://127.0.0.1:8080/-/reload',
    );
  }
  return { method: m[1] ?? 'POST', url: url.toString() };
}

function listenAddress(text: string, field: string): { host: string; port: number } {
  const m = /^(?:\[([0-9a-fA-F:]+)\]|([^:]*)):(\d{1,5})$/.exec(text);
  const port = m ? Number(m[3]) : NaN;
  if (!m || port > 65535)
    throw new ConfigError(
      field,
      `${quote(text)} is not HOST:PORT`,
      'write it like 0.0.0.0:8099 or 127.0.0.1:9000',
    );
  return { host: m[1] ?? (m[2] || '0.0.0.0'), port };
}

/** The resident always hands over fds 3 (state in) and 4 (outcome out); anything else is not from it. */
function handoffFds(text: string, field: string): { stateFd: number; outcomeFd: number } {
  if (text !== '3,4')
    throw new ConfigError(
      field,
      `${quote(text)} is not the resident's handoff`,
      'unset it: only /app/resident sets it, to 3,4',
    );
  return { stateFd: 3, outcomeFd: 4 };
}

function podField(text: string, field: string): string {
  if (text.length > 253 || !/^[A-Za-z0-9._-]*$/.test(text))
    throw new ConfigError(
      field,
      `${quote(text)} is not a Kubernetes name`,
      'set it from the downward API (fieldRef metadata.name / metadata.namespace / metadata.uid)',
    );
  return text;
}

/** Settings that apply to the whole agent. */
export const AGENT_SETTINGS = {
  AGENT_MODE: setting({
    default: 'init',
    doc: '`init`: fetch every secret, write the set once, exit 0 (non-zero if any secret failed). `sidecar`: write once (ready only then), then keep the files fresh and tell the app.',
    parse: oneOf(['init', 'sidecar'] as const),
  }),
  SECRETS_DIR: setting({
    default: '/tmp',
    doc: 'Directory the files are written to: the memory-medium volume. It must exist. `/tmp` matches the volume mount of the Flyte / aws-samples injectors.',
    parse: absolutePath,
  }),
  FILE_MODE: setting({
    default: '0400',
    doc: 'Default mode of written files: octal with its leading 0, at most 0644 (only the owner writes, nobody executes). 0400 is readable by the agent’s user only: run the agent as the app’s user, or use 0440 and a group the app holds (the webhook picks one of the two from the pod spec). Directories get read and search for whoever may read a file.',
    parse: parseFileMode,
  }),
  INIT_DEADLINE: setting({
    default: '60s',
    doc: 'How long init mode retries transient backend errors (capped exponential backoff with jitter) before it gives up.',
    parse: duration(1000, 3_600_000),
  }),
  REQUIRE_MEMORY_FS: setting({
    default: 'true',
    doc: 'Refuse to write unless SECRETS_DIR is on tmpfs/ramfs, so secrets never reach a disk. `false` only for local runs.',
    parse: boolean,
  }),
  LOG_LEVEL: setting({
    default: 'info',
    doc: 'pino log level: trace, debug, info, warn, error, fatal or silent. Logs are JSON on stdout and never contain secret values.',
    parse: oneOf(LOG_LEVELS),
  }),
  POD_NAMESPACE: setting({
    default: undefined,
    doc: 'Pod namespace (downward API). Sent in the backend user agent so its audit log shows which pod read a secret.',
    parse: podField,
  }),
  POD_NAME: setting({
    default: undefined,
    doc: 'Pod name (downward API), for the backend audit log like POD_NAMESPACE.',
    parse: podField,
  }),
  POD_UID: setting({
    default: undefined,
    doc: 'Pod UID (downward API), logged with every run.',
    parse: podField,
  }),
  REFRESH_INTERVAL: setting({
    default: '5m',
    doc: 'Sidecar: how often each secret is checked for a new version (Go duration, with jitter).',
    parse: duration(1000, 86_400_000),
  }),
  AGENT_HTTP_ADDR: setting({
    default: '127.0.0.1:8099',
    doc: 'Sidecar: where /healthz, /readyz and /metrics are served (HOST:PORT; port 0 picks a free one, which the start-up log names). The pod’s loopback by default: nothing outside the pod reaches it (no probe needs it: docs/security.md); 0.0.0.0:8099 where Prometheus scrapes the agent.',
    parse: listenAddress,
  }),
  ROTATION_SIGNAL: setting({
    default: undefined,
    doc: 'Sidecar: signal sent to the app after a rotation (e.g. SIGHUP); needs ROTATION_SIGNAL_PROCESS or ROTATION_SIGNAL_PIDFILE and a shared process namespace.',
    parse: signalName,
  }),
  ROTATION_SIGNAL_PROCESS: setting({
    default: undefined,
    doc: 'Sidecar: name of the process (as in /proc/PID/comm) to signal.',
    parse: nonEmpty,
  }),
  ROTATION_SIGNAL_PIDFILE: setting({
    default: undefined,
    doc: 'Sidecar: file holding the PID to signal.',
    parse: absolutePath,
  }),
  ROTATION_HTTP_URL: setting({
    default: undefined,
    doc: 'Sidecar: HTTP request made after a rotation, `[METHOD] URL` (default method POST), e.g. `POST http://127.0.0.1:8080/-/reload`.',
    parse: httpTarget,
  }),
  ROTATION_COMMAND: setting({
    default: undefined,
    doc: 'Sidecar: command run (without a shell) after a rotation.',
    parse: nonEmpty,
  }),
  ROTATION_DEBOUNCE: setting({
    default: '100ms',
    doc: 'Sidecar: rotations landing within this time of each other are told to the app once (every notifier, the sentinel file and the event).',
    parse: duration(0, 60_000, '100ms, 2s or 0s'),
  }),
  ROTATION_SENTINEL_FILE: setting({
    default: undefined,
    doc: 'Sidecar: a file (path inside SECRETS_DIR) that exists for ROTATION_SENTINEL_HOLD after each rotation, so a liveness probe such as `test ! -e /etc/secrets/.rotated` restarts the app container (docs/rotation.md).',
    parse: validateRelativePath,
  }),
  ROTATION_SENTINEL_HOLD: setting({
    default: '60s',
    doc: 'Sidecar: how long the sentinel file stays after a rotation. Longer than the probe’s periodSeconds × failureThreshold, shorter than its initialDelaySeconds.',
    parse: duration(1000, 3_600_000),
  }),
  KUBERNETES_EVENTS: setting({
    default: 'false',
    doc: 'Record Kubernetes Events on the pod: SecretsDelivered, SecretsRotated (file names, never values), SecretRefreshFailing. Needs POD_NAME, POD_NAMESPACE and RBAC `create events` (deploy/agent-rbac).',
    parse: boolean,
  }),
  KUBERNETES_EVENTS_FAILING_AFTER: setting({
    default: '3',
    doc: 'Sidecar, with KUBERNETES_EVENTS: failed refresh cycles in a row before a SecretRefreshFailing event (one per failing streak).',
    parse: count(1, 1000),
  }),
  RESTART_ON_CHANGE: setting({
    default: 'false',
    doc: 'Sidecar: after a rotation, restart the pod’s owner (Deployment, StatefulSet, DaemonSet) through a pod-template annotation. Needs RBAC.',
    parse: boolean,
  }),
  RESTART_DELETE_BARE_POD: setting({
    default: 'false',
    doc: 'Sidecar, with RESTART_ON_CHANGE: delete a pod that has no owner to restart (nothing recreates a bare pod).',
    parse: boolean,
  }),
  AGENT_CONFIG_FILE: setting({
    default: undefined,
    doc: 'Sidecar: JSON or YAML file with the same settings as this table (env names as keys), watched and applied on change.',
    parse: absolutePath,
  }),
  EXIT_WITH_PROCESS: setting({
    default: undefined,
    doc: 'Sidecar as a classic (non-native) sidecar in a Job: exit 0 once the process with this name (as in /proc/PID/comm; shared process namespace) has run and ended, so the Job can complete.',
    parse: nonEmpty,
  }),
  AGENT_RUN_DEADLINE: setting({
    default: '2m',
    doc: 'Small sidecar (`/app/resident`): how long one refresh run may take; past it the run gets SIGTERM, SIGKILL 5 s later, and counts as failed. Read by the resident (Go duration of whole units, 1s..1h).',
    parse: duration(1000, 3_600_000),
  }),
  AGENT_HANDOFF_FDS: setting({
    default: undefined,
    doc: 'Set by `/app/resident` for each run, never by hand: the run reads the state the last run handed back on the first fd and writes its outcome to the second (docs/design.md). With it a sidecar makes one refresh and exits; the resident serves AGENT_HTTP_ADDR meanwhile.',
    parse: handoffFds,
  }),
  ENV_EXEC_DIR: setting({
    default: undefined,
    doc: 'Where to install the env wrapper (`/app/env-exec`) before writing anything: the small memory volume app containers mount read-only to run their command through it, for secrets as environment variables (docs/env.md). The webhook sets it when a pod has `secret-agent.io/env-*`. Unset: nothing is installed.',
    parse: absolutePath,
  }),
  ENV_EXEC_PROGRAM: setting({
    default: ENV_EXEC_IMAGE_PATH,
    doc: 'The env wrapper ENV_EXEC_DIR gets a copy of: the image’s own. Change it only for a run outside the image (`node images/build-native.ts` writes `dist/native/env-exec`).',
    parse: absolutePath,
  }),
  SERVICE_ACCOUNT_DIR: setting({
    default: DEFAULT_SERVICE_ACCOUNT_DIR,
    doc: 'Where the pod’s service-account token and ca.crt are mounted: for RESTART_ON_CHANGE and KUBERNETES_EVENTS, and passed to exec: helpers as the pod’s identity.',
    parse: absolutePath,
  }),
  SECRET_ARN: setting({
    default: undefined,
    doc: 'Legacy single-secret form (Flyte / aws-samples sidecar contract): any reference, usually a Secrets Manager ARN. Not combinable with SECRET_<N>_*.',
    parse: (text, field) => parseReference(text, field),
  }),
  SECRET_FILENAME: setting({
    default: 'secret',
    doc: 'With SECRET_ARN: the file name to write the value to.',
    parse: validateRelativePath,
  }),
} as const;
