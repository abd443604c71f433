import { EXEC_SETTINGS } from '../providers/exec/config.ts';
import { VAULT_ENV } from '../providers/vault/config.ts';
import { closestName, findMisspelledNames } from './env-names.ts';
import { ConfigError, ConfigErrors, quote, valueShape } from './errors.ts';
import { findPathConflict, validateRelativePath } from './path.ts';
import { parseReference, type SecretReference } from './reference.ts';
import { checkSettingSizes } from './value-limits.ts';
import {
  absolutePath,
  boolean,
  count,
  duration,
  nonEmpty,
  oneOf,
  setting,
  settingsReader,
  type Env,
  type Setting,
} from './settings.ts';

export type { Env } from './settings.ts';

/**
 * The agent's environment contract, declared once as data. The agent parses env with it, the
 * webhook renders env with it, and the README tables are generated from it (a test keeps them equal).
 */

export type AgentMode = 'init' | 'sidecar';
export const SECRET_FORMATS = [
  'raw',
  'split',
  'dotenv',
  'env',
  'json',
  'yaml',
  'properties',
  'template',
] as const;
export type SecretFormat = (typeof SECRET_FORMATS)[number];
export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export interface SecretSpec {
  /** The env prefix the secret came from (`SECRET_0`, or `SECRET_ARN` for the legacy form): what errors name. */
  readonly id: string;
  readonly ref: SecretReference;
  /** Path inside the secrets directory; for `split`, the directory the keys go into ('' = top level). */
  readonly filename: string;
  readonly format: SecretFormat;
  readonly mode: number;
  /** Sidecar refresh period for this secret (defaults to REFRESH_INTERVAL). */
  readonly refreshIntervalMs: number;
  /** The name templates reach this secret's value by (`{{secrets.NAME.key}}`). */
  readonly name?: string;
  /** FORMAT=template: the template text (compiled at start-up by agent/format/load-formats.ts). */
  readonly template?: string;
}

export interface PodIdentity {
  readonly namespace?: string;
  readonly name?: string;
  readonly uid?: string;
}

export interface AgentConfig {
  readonly mode: AgentMode;
  readonly secretsDir: string;
  /**
   * Name of the file set this agent owns in the directory. Distinct sets let several agents share one
   * volume, as Flyte's one-init-container-per-secret layout does with the legacy env.
   */
  readonly setName: string;
  readonly secrets: readonly SecretSpec[];
  readonly initDeadlineMs: number;
  readonly logLevel: LogLevel;
  readonly requireMemoryFs: boolean;
  readonly pod: PodIdentity;
  /** Service-account token, ca.crt and namespace, for the Kubernetes API (restart-on-change). */
  readonly serviceAccountDir: string;
  /**
   * Kubernetes Events on the pod (KUBERNETES_EVENTS); `failingAfter`: failed refresh cycles in a row
   * before SecretRefreshFailing.
   */
  readonly events?: { readonly failingAfter: number };
  readonly sidecar: SidecarSettings;
}

/** How the sidecar tells the app about a rotation, and where it serves probes and metrics. */
export interface SidecarSettings {
  readonly refreshIntervalMs: number;
  readonly httpAddr: { readonly host: string; readonly port: number };
  readonly signal?: { readonly name: NodeJS.Signals; readonly process?: string; readonly pidFile?: string };
  readonly http?: { readonly method: string; readonly url: string };
  readonly command?: string;
  readonly restartOnChange: boolean;
  readonly deleteBarePod: boolean;
  readonly configFile?: string;
  readonly exitWithProcess?: string;
  /** Rotations landing this close together are told to the app once. */
  readonly debounceMs: number;
  /** A file in SECRETS_DIR that exists for `holdMs` after each rotation, for a liveness probe. */
  readonly sentinel?: { readonly path: string; readonly holdMs: number };
}

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

function podField(text: string, field: string): string {
  if (text.length > 253 || !/^[A-Za-z0-9._-]*$/.test(text))
    throw new ConfigError(
      field,
      `${quote(text)} is not a Kubernetes name`,
      'set it from the downward API (fieldRef metadata.name / metadata.namespace / metadata.uid)',
    );
  return text;
}

/** A secret's name for templates; dots allowed, as the webhook's file names have them (tls.crt). */
export const SECRET_NAME = /^[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;

function secretName(text: string, field: string): string {
  if (!SECRET_NAME.test(text))
    throw new ConfigError(
      field,
      `${/^[\x21-\x7e]{1,64}$/.test(text) ? quote(text) : valueShape(text)} is not a secret name`,
      'use up to 63 letters, digits, ".", "_" and "-", starting and ending with a letter or digit',
    );
  return text;
}

/** The bits a secret file may have: owner read and write, group and others read. */
const SAFE_MODE_BITS = 0o644;

/** `0640` as `rw-r-----`, so an error says what a mode means. */
function symbolicMode(mode: number): string {
  return [6, 3, 0]
    .map((shift) => (mode >> shift) & 7)
    .map((b) => `${b & 4 ? 'r' : '-'}${b & 2 ? 'w' : '-'}${b & 1 ? 'x' : '-'}`)
    .join('');
}

/**
 * An octal file mode for secret files, shared with the webhook's file-mode annotations. Only the
 * owner may write, nobody may execute, and the owner must read (the sidecar reads its set back to
 * take it over). The leading 0 is required: Kubernetes shows modes in decimal too (420 for 0644), so
 * a bare number is ambiguous, and guessing wrong would hand out the wrong permissions silently.
 */
export function parseFileMode(text: string, field: string): number {
  const m = /^(0o?)?([0-7]{3})$/.exec(text);
  if (!m) {
    // Text made of a mode's characters is a mistyped mode, quoted so the message reads well; anything
    // else may be a value pasted into the wrong field, and is only described.
    const shown = /^[0-9a-z-]{0,12}$/.test(text) ? quote(text) : valueShape(text);
    throw new ConfigError(
      field,
      `${shown} is not an octal mode`,
      'write a 0 and three octal digits, such as 0400 (owner only) or 0440 (owner and the pod’s fsGroup)',
    );
  }
  const digits = m[2]!;
  const mode = parseInt(digits, 8);
  const rwx = symbolicMode(mode);
  if (m[1] === undefined) {
    throw new ConfigError(
      field,
      `${quote(text)} has no leading 0, so it is not clearly an octal file mode`,
      `write 0${digits} for ${rwx} (modes are octal; 420 is how Kubernetes shows 0644 in decimal)`,
    );
  }
  if ((mode & ~SAFE_MODE_BITS) !== 0) {
    throw new ConfigError(
      field,
      `${quote(text)} (${rwx}) lets the group or others write the file, or anyone execute it`,
      'use at most 0644 (owner read and write, group and others read only), such as 0400, 0440 or 0640',
    );
  }
  if ((mode & 0o400) === 0) {
    throw new ConfigError(
      field,
      `${quote(text)} (${rwx}) does not let the owner read the file`,
      'give the owner the read bit, such as 0400 (owner only) or 0440 (owner and the pod’s fsGroup)',
    );
  }
  return mode;
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
    default: '0.0.0.0:8099',
    doc: 'Sidecar: where /healthz, /readyz and /metrics are served (HOST:PORT; port 0 picks a free one, which the start-up log names).',
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
  SERVICE_ACCOUNT_DIR: setting({
    default: '/var/run/secrets/kubernetes.io/serviceaccount',
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

/** Settings of secret number N, read from `SECRET_<N>_<NAME>`; N counts up from 0 without gaps. */
export const SECRET_SETTINGS = {
  REF: setting({
    default: undefined,
    doc: 'Required. The secret reference (see the reference forms).',
    parse: (text, field) => parseReference(text, field),
  }),
  FILENAME: setting({
    default: undefined,
    doc: 'Path of the file inside SECRETS_DIR (sub-directories allowed, never escaping it). Required except for `split`, where it is the directory the keys go into (default: the top level).',
    parse: (text, field) => (text === '' ? '' : validateRelativePath(text, field)),
  }),
  FORMAT: setting({
    default: 'raw',
    doc: "`raw`: the value as stored (with `#key`: that key’s value). `split`: each top-level JSON key as its own file. `dotenv`: the JSON object as KEY='value' lines. `env`: the same as `export KEY='value'` lines for `source` in a shell. `json`: the JSON value pretty-printed. `yaml`: the JSON value as YAML. `properties`: a Java .properties file (nested keys joined with `.`). `template`: SECRET_<N>_TEMPLATE rendered over the value, JSON or text (docs/templates.md). The others but `raw` need a JSON value; a binary secret only fits `raw`.",
    parse: oneOf(SECRET_FORMATS),
  }),
  TEMPLATE: setting({
    default: undefined,
    doc: 'With FORMAT=template: the file’s text, with `{{key}}` for this secret’s JSON keys and `{{secrets.NAME.key}}` for other secrets’ (docs/templates.md). Checked at start-up.',
    parse: nonEmpty,
  }),
  NAME: setting({
    default: undefined,
    doc: 'The name templates reach this secret by (`{{secrets.NAME.key}}`): letters, digits, `.`, `_`, `-`.',
    parse: secretName,
  }),
  MODE: setting({
    default: 'FILE_MODE',
    doc: 'File mode for this secret’s files, as FILE_MODE (octal with its leading 0, at most 0644).',
    parse: parseFileMode,
  }),
  REFRESH_INTERVAL: setting({
    default: 'REFRESH_INTERVAL',
    doc: 'Sidecar refresh period for this secret.',
    parse: duration(1000, 86_400_000),
  }),
} as const;

export type SecretSettingName = keyof typeof SECRET_SETTINGS;

/** Variables we do not parse but the backend client libraries read; documented beside ours. */
export const CLIENT_ENV: readonly { name: string; doc: string }[] = [
  { name: 'AWS_REGION', doc: 'AWS SDK: region for `aws:NAME` references (ARNs carry their own).' },
  {
    name: 'AWS_ENDPOINT_URL_SECRETS_MANAGER',
    doc: 'AWS SDK: Secrets Manager endpoint override (VPC endpoint, local testing).',
  },
  { name: 'AWS_ENDPOINT_URL', doc: 'AWS SDK: endpoint override for every AWS service.' },
  { name: 'AWS_ROLE_ARN', doc: 'AWS SDK: role to assume with a web identity token (IRSA sets it).' },
  { name: 'AWS_WEB_IDENTITY_TOKEN_FILE', doc: 'AWS SDK: projected service-account token for IRSA.' },
  {
    name: 'AWS_CONTAINER_CREDENTIALS_FULL_URI',
    doc: 'AWS SDK: EKS Pod Identity agent endpoint (set by EKS).',
  },
  {
    name: 'AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE',
    doc: 'AWS SDK: EKS Pod Identity token file (set by EKS).',
  },
  {
    name: 'AWS_ACCESS_KEY_ID',
    doc: 'AWS SDK: static credentials (with AWS_SECRET_ACCESS_KEY); prefer IRSA or Pod Identity.',
  },
  { name: 'AWS_DEFAULT_REGION', doc: 'The AWS CLI’s name for the region, read when AWS_REGION is unset.' },
  { name: 'GCP_PROJECT', doc: 'Project for `gcp:SECRET` references (else GOOGLE_CLOUD_PROJECT).' },
  { name: 'GOOGLE_CLOUD_PROJECT', doc: 'Project for `gcp:SECRET` references when GCP_PROJECT is unset.' },
  {
    name: 'GCP_SECRET_MANAGER_ENDPOINT',
    doc: '`host:port` instead of secretmanager.googleapis.com:443 for global secrets (Private Service Connect, a local emulator); see docs/gcp.md.',
  },
  {
    name: 'GCP_SECRET_MANAGER_REGIONAL_ENDPOINT',
    doc: '`host:port` instead of secretmanager.LOCATION.rep.googleapis.com:443 for regional secrets; `{location}` in it stands for the secret’s region; see docs/gcp.md.',
  },
  {
    name: 'GCP_TRANSPORT',
    doc: '`rest` or `grpc`: how the agent talks to GCP Secret Manager. Default `rest` in init mode (starts faster, in less memory), `grpc` in a sidecar (less CPU per refresh) and wherever grpc_proxy, https_proxy or http_proxy is set (the REST client ignores proxies); see docs/gcp.md.',
  },
  {
    name: 'GOOGLE_APPLICATION_CREDENTIALS',
    doc: 'Google client: credentials file; not needed on GKE with Workload Identity.',
  },
];

/**
 * Every variable the agent or its backend clients read, in declaration order: a name close to one of
 * these but not itself one is taken for a misspelling (agent/contract/env-names.ts).
 */
export const KNOWN_ENV: readonly string[] = [
  ...Object.keys(AGENT_SETTINGS),
  ...CLIENT_ENV.map((v) => v.name),
  ...VAULT_ENV.map((v) => v.name),
  ...Object.keys(EXEC_SETTINGS),
];

/** `SECRET_<N>_<NAME>`, the per-secret env names. */
export const SECRET_VAR = /^SECRET_(\d+)_([A-Z0-9_]+)$/;

/** The env var name of setting `name` of secret `index`. */
export function secretVar(index: number, name: SecretSettingName): string {
  return `SECRET_${index}_${name}`;
}

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
  const debounceMs = read('ROTATION_DEBOUNCE', g.ROTATION_DEBOUNCE);
  const sentinelPath = read('ROTATION_SENTINEL_FILE', g.ROTATION_SENTINEL_FILE);
  const sentinelHoldMs = read('ROTATION_SENTINEL_HOLD', g.ROTATION_SENTINEL_HOLD);
  const events = read('KUBERNETES_EVENTS', g.KUBERNETES_EVENTS);
  const failingAfter = read('KUBERNETES_EVENTS_FAILING_AFTER', g.KUBERNETES_EVENTS_FAILING_AFTER);
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

  const secrets: SecretSpec[] = [];
  let setName = 'data';
  const indexed = readIndexed(env, errors);

  if (env.SECRET_ARN !== undefined) {
    if (indexed.size > 0) {
      errors.push(
        new ConfigError(
          'SECRET_ARN',
          'the legacy SECRET_ARN form is set together with SECRET_<N>_* variables',
          'use one form: move SECRET_ARN to SECRET_<N>_REF',
        ),
      );
    }
    const ref = read('SECRET_ARN', g.SECRET_ARN);
    const filename = read('SECRET_FILENAME', g.SECRET_FILENAME);
    if (ref && filename !== undefined && fileMode !== undefined) {
      secrets.push({
        id: 'SECRET_ARN',
        ref,
        filename,
        format: 'raw',
        mode: fileMode,
        refreshIntervalMs: refreshIntervalMs ?? 0,
      });
      // One set per file name, so sequential init containers (one per secret) can share the volume.
      setName = `data-${filename.replace(/[^A-Za-z0-9]/g, '-')}`;
    }
  } else if (env.SECRET_FILENAME !== undefined) {
    errors.push(
      new ConfigError(
        'SECRET_FILENAME',
        'is set without SECRET_ARN',
        'set SECRET_ARN too, or use SECRET_<N>_REF / SECRET_<N>_FILENAME',
      ),
    );
  }

  const indices = [...indexed.keys()].sort((a, b) => a - b);
  indices.forEach((index, position) => {
    if (index !== position) {
      errors.push(
        new ConfigError(
          `SECRET_${position}_REF`,
          `secrets are numbered with a gap: SECRET_${index}_* is set but SECRET_${position}_REF is not`,
          'number secrets 0, 1, 2, … without gaps',
        ),
      );
    }
  });
  for (const index of indices) {
    const vars = indexed.get(index)!;
    const get = <T>(name: SecretSettingName, s: Setting<T>): T | undefined => {
      const field = secretVar(index, name);
      const raw = vars.get(name);
      if (raw === undefined) return undefined;
      return read(field, s, raw);
    };
    const id = `SECRET_${index}`;
    if (!vars.has('REF')) {
      errors.push(
        new ConfigError(
          secretVar(index, 'REF'),
          `${id}_* settings are given but no reference`,
          `set ${id}_REF to the secret to fetch`,
        ),
      );
      continue;
    }
    const ref = get('REF', SECRET_SETTINGS.REF);
    const format = get('FORMAT', SECRET_SETTINGS.FORMAT) ?? 'raw';
    const mode = get('MODE', SECRET_SETTINGS.MODE) ?? fileMode;
    const refresh = get('REFRESH_INTERVAL', SECRET_SETTINGS.REFRESH_INTERVAL) ?? refreshIntervalMs ?? 0;
    const name = get('NAME', SECRET_SETTINGS.NAME);
    const template = get('TEMPLATE', SECRET_SETTINGS.TEMPLATE);
    if (format === 'template' && !vars.has('TEMPLATE')) {
      errors.push(
        new ConfigError(
          secretVar(index, 'TEMPLATE'),
          'is not set, and FORMAT=template renders it',
          `set ${id}_TEMPLATE to the file's text, e.g. postgres://{{username}}:{{password}}@db:5432/app`,
        ),
      );
      continue;
    }
    if (format !== 'template' && vars.has('TEMPLATE')) {
      errors.push(
        new ConfigError(
          secretVar(index, 'TEMPLATE'),
          `is set, but ${id}_FORMAT is ${quote(format)}, so it would be ignored`,
          `set ${id}_FORMAT=template, or remove ${id}_TEMPLATE`,
        ),
      );
      continue;
    }
    let filename: string | undefined; // undefined after a parse error, already recorded
    if (vars.has('FILENAME')) filename = get('FILENAME', SECRET_SETTINGS.FILENAME);
    else if (format === 'split') filename = '';
    else {
      errors.push(
        new ConfigError(
          secretVar(index, 'FILENAME'),
          'is not set',
          'name the file to write, e.g. db-password (only FORMAT=split may leave it empty)',
        ),
      );
      continue;
    }
    if (filename === '' && format !== 'split') {
      errors.push(
        new ConfigError(secretVar(index, 'FILENAME'), 'is empty', 'name the file to write, e.g. db-password'),
      );
      continue;
    }
    if (ref && filename !== undefined && mode !== undefined)
      secrets.push({
        id,
        ref,
        filename,
        format,
        mode,
        refreshIntervalMs: refresh,
        ...(name !== undefined ? { name } : {}),
        ...(template !== undefined ? { template } : {}),
      });
  }
  const named = new Map<string, string>();
  for (const s of secrets) {
    if (s.name === undefined) continue;
    const other = named.get(s.name);
    if (other)
      errors.push(
        new ConfigError(
          `${s.id}_NAME`,
          `${other} is already named ${quote(s.name)}`,
          'give every secret its own name',
        ),
      );
    else named.set(s.name, s.id);
  }

  const conflict = findFileConflict(secrets);
  if (conflict) errors.push(conflict);
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
    },
  };
}

/**
 * File names two secrets cannot both have. A split secret's name is a directory whose keys are
 * known only after the fetch (findFileClash checks those), so here it only clashes with a file at or
 * above it.
 */
function findFileConflict(secrets: readonly SecretSpec[]): ConfigError | undefined {
  const files = secrets.filter((s) => s.format !== 'split');
  const clash = findFileClash(files.map((s) => ({ id: s.id, path: s.filename })));
  if (clash) return clash;
  for (const split of secrets.filter((s) => s.format === 'split' && s.filename !== '')) {
    const file = files.find(
      (f) => split.filename === f.filename || split.filename.startsWith(`${f.filename}/`),
    );
    if (file) {
      return new ConfigError(
        `${split.id}_FILENAME`,
        `the split directory ${quote(split.filename)} is where ${file.id} writes the file ${quote(file.filename)}`,
        'give every secret its own file name',
      );
    }
  }
  return undefined;
}

/**
 * The first pair of files, each written by a secret (`id`: SECRET_0, SECRET_ARN), that cannot both
 * exist, as an error naming both secrets: the same path twice, or a file where another needs a
 * directory. The agent runs it on the configured names before fetching, and again on the files a
 * fetch rendered, where a split secret's keys become known.
 */
export function findFileClash(
  files: readonly { readonly id: string; readonly path: string; readonly split?: boolean }[],
): ConfigError | undefined {
  const conflict = findPathConflict(files.map((f) => f.path));
  if (!conflict) return undefined;
  const [first, second] = conflict;
  const holder = files.find((f) => f.path === first)!;
  const other = files.find((f) => f.path === second && f !== holder)!;
  const splits = [...new Set([holder, other].filter((f) => f.split).map((f) => f.id))];
  const why = splits.length === 0 ? '' : ` (${splits.join(' and ')}: FORMAT=split writes each key as a file)`;
  return new ConfigError(
    `${other.id}_FILENAME`,
    first === second
      ? `${holder.id} and ${other.id} both write ${quote(first)}${why}`
      : `${other.id} writes ${quote(second)}, which needs ${quote(first)} as a directory, but ${holder.id} writes a file there${why}`,
    'give every secret (and every key of a split secret) its own file name',
  );
}

/** Groups SECRET_<N>_<NAME> variables by N; reports unknown names and non-canonical numbers. */
function readIndexed(env: Env, errors: ConfigError[]): Map<number, Map<SecretSettingName, string>> {
  const byIndex = new Map<number, Map<SecretSettingName, string>>();
  for (const [name, value] of Object.entries(env)) {
    if (value === undefined) continue;
    const m = SECRET_VAR.exec(name);
    if (!m) continue;
    const [, digits, setting] = m;
    if (String(Number(digits)) !== digits || Number(digits) > 9999) {
      errors.push(
        new ConfigError(
          name,
          `${quote(digits!)} is not a secret number`,
          'number secrets 0, 1, 2, … without leading zeros',
        ),
      );
      continue;
    }
    if (!Object.hasOwn(SECRET_SETTINGS, setting!)) {
      const meant = closestName(setting!, Object.keys(SECRET_SETTINGS));
      errors.push(
        new ConfigError(
          name,
          `${quote(setting!)} is not a secret setting, so its value would be ignored`,
          meant
            ? `did you mean SECRET_${digits}_${meant}? Rename it, or remove it`
            : `use one of ${Object.keys(SECRET_SETTINGS).join(', ')}`,
        ),
      );
      continue;
    }
    const index = Number(digits);
    let vars = byIndex.get(index);
    if (!vars) byIndex.set(index, (vars = new Map()));
    vars.set(setting as SecretSettingName, value);
  }
  return byIndex;
}

/** What the webhook (or a person) specifies per secret; rendered to the env parseAgentConfig reads. */
export interface SecretEnvInput {
  readonly ref: string;
  readonly filename: string;
  readonly format?: SecretFormat;
  /** Octal text, e.g. "0440". */
  readonly mode?: string;
  /** Go duration, e.g. "1m". */
  readonly refreshInterval?: string;
  /** What templates call this secret (`{{secrets.NAME.key}}`). */
  readonly name?: string;
  /** FORMAT=template: the template text. */
  readonly template?: string;
}

/** Renders secrets as SECRET_<N>_* env, omitting settings left at their default. */
export function renderSecretEnv(secrets: readonly SecretEnvInput[]): { name: string; value: string }[] {
  const out: { name: string; value: string }[] = [];
  secrets.forEach((s, index) => {
    out.push({ name: secretVar(index, 'REF'), value: s.ref });
    out.push({ name: secretVar(index, 'FILENAME'), value: s.filename });
    if (s.format && s.format !== 'raw') out.push({ name: secretVar(index, 'FORMAT'), value: s.format });
    if (s.mode) out.push({ name: secretVar(index, 'MODE'), value: s.mode });
    if (s.refreshInterval) out.push({ name: secretVar(index, 'REFRESH_INTERVAL'), value: s.refreshInterval });
    if (s.name !== undefined) out.push({ name: secretVar(index, 'NAME'), value: s.name });
    if (s.template !== undefined) out.push({ name: secretVar(index, 'TEMPLATE'), value: s.template });
  });
  return out;
}
