import { AGENT_SETTINGS } from '../agent/contract/agent-settings.ts';
import { SECRET_FORMATS, SECRET_SETTINGS } from '../agent/contract/secret-settings.ts';
import { compileTemplate } from '../agent/format/template.ts';
import { ConfigError, quote } from '../agent/contract/errors.ts';
import { parseReference, parseVaultNamespace, type SecretReference } from '../agent/contract/reference.ts';
import { validateRelativePath } from '../agent/contract/path.ts';
import { ANNOTATION_PREFIX } from '../agent/contract/product-annotations.ts';

/**
 * The webhook's public surface on pods, declared once as data: every annotation with its value
 * type, default, parser and one-line doc. Parsing, validation messages and the README table all
 * come from these tables (docs/tables.ts renders them into the README and docs/webhook.md). The
 * annotations secret-agent writes itself are not settings: agent/contract/product-annotations.ts.
 */

export const PREFIX = ANNOTATION_PREFIX;

/** The label the MutatingWebhookConfiguration's objectSelector matches (see deploy/base). */
export const OPT_IN_LABEL = `${PREFIX}inject`;

/** What the names of the volumes the webhook adds start with (render/pod-patch.ts). */
export const OWN_VOLUME_PREFIX = 'secret-agent';

/** Container names the webhook adds; a pod that already uses one cannot be injected. */
export const AGENT_CONTAINER = 'secret-agent';
export const AGENT_INIT_CONTAINER = 'secret-agent-init';
/** The name of the sidecar's HTTP port (probes, /metrics): what the monitoring PodMonitor scrapes. */
export const AGENT_PORT_NAME = 'secret-agent';

export type InjectionMode = 'init' | 'sidecar' | 'init+sidecar';

/**
 * How an error may show an annotation's value (webhook/admission/redact.ts applies it to refusals).
 * `quote`: names, enums, booleans, durations, modes, quantities, paths, container names: never a
 * secret, shown as written so the message is readable. `shape`: text that could be a secret pasted
 * by mistake (a reference, a command, free text): only its length. `url`: method, scheme, host and
 * port only; userinfo, path, query and fragment (where credentials and tokens live) become `…`.
 */
export type Echo = 'quote' | 'shape' | 'url';

export interface Annotation<T> {
  /** Type of the value, as the docs show it. */
  readonly type: string;
  /** How a refusal may show a bad value of this annotation. */
  readonly echo: Echo;
  /** The default as written in an annotation; undefined means unset unless the pod sets it. */
  readonly default: string | undefined;
  readonly doc: string;
  readonly parse: (text: string, field: string) => T;
  /** The agent env var the value is passed through to unchanged (after validation). */
  readonly env?: keyof typeof AGENT_SETTINGS;
}

function annotation<T>(a: Annotation<T>): Annotation<T> {
  return a;
}

/** An annotation that is an agent env var under another name: parsed by the agent's own parser. */
function agentSetting<K extends keyof typeof AGENT_SETTINGS>(
  env: K,
  type: string,
  doc: string,
  echo: Echo,
): Annotation<string> {
  const setting = AGENT_SETTINGS[env];
  return {
    type,
    echo,
    // Shown in the docs; never applied here: the agent applies its own default when the env is unset.
    default: setting.default,
    doc: `${doc} Passed to the agent as \`${env}\`.`,
    env,
    parse: (text, field) => {
      setting.parse(text, field);
      return text;
    },
  };
}

function boolean(text: string, field: string): boolean {
  if (text === 'true') return true;
  if (text === 'false') return false;
  throw new ConfigError(field, `${quote(text)} is not a boolean`, 'set it to "true" or "false"');
}

const MODES: readonly InjectionMode[] = ['init', 'sidecar', 'init+sidecar'];

function injectionMode(text: string, field: string): InjectionMode {
  if ((MODES as readonly string[]).includes(text)) return text as InjectionMode;
  throw new ConfigError(field, `${quote(text)} is not an injection mode`, `use one of ${MODES.join(', ')}`);
}

export function absolutePath(text: string, field: string): string {
  if (!text.startsWith('/') || text.length > 1024 || /[\0\n\\:]/.test(text) || text.split('/').includes('..'))
    throw new ConfigError(
      field,
      `${quote(text)} is not an absolute path without .. segments`,
      'use an absolute path such as /etc/secrets',
    );
  return text.length > 1 ? text.replace(/\/+$/, '') : text;
}

const CONTAINER_NAME = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

function containerList(text: string, field: string): readonly string[] {
  const names = text
    .split(',')
    .map((n) => n.trim())
    .filter((n) => n !== '');
  const bad = names.find((n) => !CONTAINER_NAME.test(n));
  if (names.length === 0 || bad !== undefined)
    throw new ConfigError(
      field,
      bad === undefined ? 'names no container' : `${quote(bad)} is not a container name`,
      'list container names separated by commas, e.g. app,worker',
    );
  return [...new Set(names)];
}

/** Kubernetes resource quantity (a subset: plain decimal with an SI or binary suffix). */
export function quantity(text: string, field: string): string {
  if (!/^(?:\d{1,15}(?:\.\d{1,6})?|\.\d{1,6})(?:m|k|M|G|T|Ki|Mi|Gi|Ti)?$/.test(text))
    throw new ConfigError(
      field,
      `${quote(text)} is not a resource quantity`,
      'write it like 50m, 64Mi or 1Gi',
    );
  return text;
}

export function userId(text: string, field: string): number {
  const n = /^\d{1,10}$/.test(text) ? Number(text) : NaN;
  if (!(n >= 1 && n <= 2_147_483_647))
    throw new ConfigError(
      field,
      `${quote(text)} is not a non-root user id`,
      'use a number from 1 to 2147483647 (the agent never runs as root)',
    );
  return n;
}

export function groupId(text: string, field: string): number {
  const n = /^\d{1,10}$/.test(text) ? Number(text) : NaN;
  if (!(n >= 1 && n <= 2_147_483_647))
    throw new ConfigError(
      field,
      `${quote(text)} is not a non-root group id`,
      'use a number from 1 to 2147483647 (files are never shared through the root group)',
    );
  return n;
}

export const AWS_REGION = /^[a-z]{2}(?:-[a-z]+)+-\d{1,2}$/;
const GCP_PROJECT = /^[a-z][a-z0-9-]{4,28}[a-z0-9]$/;

function pattern(re: RegExp, what: string, example: string) {
  return (text: string, field: string): string => {
    if (!re.test(text))
      throw new ConfigError(field, `${quote(text)} is not ${what}`, `write it like ${example}`);
    return text;
  };
}

/**
 * Vault auth methods a webhook-injected agent can use: each logs in with what the pod already has
 * (its service-account token, its cloud identity, a TLS Secret the webhook mounts). approle and
 * token need a secret handed to the agent, which no annotation may carry.
 */
export const WEBHOOK_VAULT_AUTH_METHODS = ['kubernetes', 'jwt', 'cert', 'aws', 'gcp'] as const;
export type WebhookVaultAuthMethod = (typeof WEBHOOK_VAULT_AUTH_METHODS)[number];

export function vaultAuthMethod(text: string, field: string): WebhookVaultAuthMethod {
  if ((WEBHOOK_VAULT_AUTH_METHODS as readonly string[]).includes(text)) return text as WebhookVaultAuthMethod;
  throw new ConfigError(
    field,
    `${quote(text)} is not a Vault auth method the webhook can set up`,
    `use one of ${WEBHOOK_VAULT_AUTH_METHODS.join(', ')} (approle and token need a secret no annotation may carry)`,
  );
}

/** A Vault namespace path, validated with the agent's own rule and passed on as written. */
export function vaultNamespace(text: string, field: string): string {
  const parsed = parseVaultNamespace(text);
  if (typeof parsed !== 'string')
    throw new ConfigError(
      field,
      `${quote(text)} is not a Vault namespace: ${parsed.problem}`,
      'write it as `vault namespace list` shows it, e.g. admin/team-a (root for the root namespace)',
    );
  return text;
}

/** A Secret's name (DNS subdomain). */
const SECRET_NAME = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;

/** Pod-wide annotations: `secret-agent.io/<name>`. */
export const POD_ANNOTATIONS = {
  inject: annotation({
    type: 'bool',
    echo: 'quote',
    default: 'false',
    doc: 'Opt-in: `"true"` injects the agent. The pod also needs the label `secret-agent.io/inject: "true"`, or the API server never sends it to the webhook.',
    parse: boolean,
  }),
  mode: annotation({
    type: '`init` | `sidecar` | `init+sidecar`',
    echo: 'quote',
    default: 'init+sidecar',
    doc: '`init`: write the files once before the app starts. `sidecar`: keep them fresh while the app runs (the app may start first). `init+sidecar`: both; one native sidecar where the cluster has them.',
    parse: injectionMode,
  }),
  'mount-path': annotation({
    type: 'absolute path',
    echo: 'quote',
    default: '/etc/secrets',
    doc: 'Where the secrets volume is mounted (read-only) in app containers; also the value of their `SECRETS_DIR` env var. Never at, above or below the agent container’s own paths (`/app`, `/nodejs`, `/secret-agent`, its certificate and token directories).',
    parse: absolutePath,
  }),
  containers: annotation({
    type: 'comma-separated names',
    echo: 'quote',
    default: undefined,
    doc: 'Containers and init containers that get the mount and `SECRETS_DIR`. Default: all of them.',
    parse: containerList,
  }),
  'file-mode': agentSetting(
    'FILE_MODE',
    'octal mode',
    'Mode of the written files. Unset, the webhook picks 0400 when every container that mounts the secrets runs as one uid the spec names (the agent runs as it), else 0440 shared through a group they all hold (docs/webhook.md, “Who can read the files”). A mode without the group’s read bit is refused where the files must be shared; one readable by others, such as 0644, is admitted with a warning.',
    'quote',
  ),
  'refresh-interval': agentSetting(
    'REFRESH_INTERVAL',
    'duration',
    'How often the sidecar checks each secret for a new version. Under 30s is admitted with a warning (every check is a backend call).',
    'quote',
  ),
  'init-deadline': agentSetting(
    'INIT_DEADLINE',
    'duration',
    'How long the first fetch retries transient errors. A native sidecar holds the app at most this plus 15 s; then the kubelet restarts the agent.',
    'quote',
  ),
  'log-level': agentSetting('LOG_LEVEL', 'pino level', 'The agent’s log level.', 'quote'),
  'rotation-signal': agentSetting(
    'ROTATION_SIGNAL',
    'signal',
    'Signal sent to the app after a rotation; needs rotation-signal-process or -pidfile. Turns on `shareProcessNamespace` (denied if the pod sets it to false).',
    'quote',
  ),
  'rotation-signal-process': agentSetting(
    'ROTATION_SIGNAL_PROCESS',
    'process name',
    'Name of the process to signal.',
    'quote',
  ),
  'rotation-signal-pidfile': agentSetting(
    'ROTATION_SIGNAL_PIDFILE',
    'absolute path',
    'File holding the PID to signal.',
    'quote',
  ),
  'exit-with-process': agentSetting(
    'EXIT_WITH_PROCESS',
    'process name',
    'A run-to-completion pod (a Job’s) on a cluster without native sidecars: the sidecar exits once the app’s process of this name (as in /proc/PID/comm, e.g. python3; a Node 24 app shows MainThread unless it sets process.title) has run and ended, so the pod can complete. Turns on `shareProcessNamespace` (denied if the pod sets it to false). Ignored, with a warning, where no classic sidecar runs: the kubelet stops native sidecars itself.',
    'quote',
  ),
  // A URL may carry credentials (userinfo) or a token (path, query): only its host part is shown.
  'rotation-http-url': agentSetting(
    'ROTATION_HTTP_URL',
    '`[METHOD] URL`',
    'HTTP request made after a rotation, e.g. `POST http://127.0.0.1:8080/-/reload`.',
    'url',
  ),
  // Free text: a command line may hold a token as an argument.
  'rotation-command': agentSetting(
    'ROTATION_COMMAND',
    'command',
    'Command the agent runs (no shell) after a rotation, in the agent container: refused unless the cluster sets ALLOW_ROTATION_COMMAND=true (docs/security.md).',
    'shape',
  ),
  'rotation-debounce': agentSetting(
    'ROTATION_DEBOUNCE',
    'duration',
    'Rotations this close together are told to the app once.',
    'quote',
  ),
  'rotation-sentinel-file': agentSetting(
    'ROTATION_SENTINEL_FILE',
    'relative path',
    'A file in the mount path that exists for `rotation-sentinel-hold` after each rotation, for a liveness probe that restarts the app (docs/rotation.md).',
    'quote',
  ),
  'rotation-sentinel-hold': agentSetting(
    'ROTATION_SENTINEL_HOLD',
    'duration',
    'How long the sentinel file stays after a rotation.',
    'quote',
  ),
  'kubernetes-events': agentSetting(
    'KUBERNETES_EVENTS',
    'bool',
    'Record Events on the pod (SecretsDelivered, SecretsRotated, SecretRefreshFailing) so `kubectl describe pod` shows what the agent did; needs the agent RBAC `create events` (deploy/agent-rbac).',
    'quote',
  ),
  'kubernetes-events-failing-after': agentSetting(
    'KUBERNETES_EVENTS_FAILING_AFTER',
    'count',
    'Failed refresh cycles in a row before a SecretRefreshFailing event.',
    'quote',
  ),
  'restart-on-change': agentSetting(
    'RESTART_ON_CHANGE',
    'bool',
    'Restart the pod’s owner after a rotation; needs the agent RBAC (deploy/agent-rbac).',
    'quote',
  ),
  'restart-delete-bare-pod': agentSetting(
    'RESTART_DELETE_BARE_POD',
    'bool',
    'With restart-on-change: delete a pod that has no owner.',
    'quote',
  ),
  'agent-http-addr': agentSetting(
    'AGENT_HTTP_ADDR',
    'HOST:PORT',
    'Where the sidecar serves /healthz, /readyz and /metrics (default 0.0.0.0:8099). Move it when the port is taken; the host must be 0.0.0.0 or [::] for the kubelet’s probes.',
    'quote',
  ),
  'agent-cpu-request': annotation({
    type: 'quantity',
    echo: 'quote',
    default: undefined,
    doc: 'The agent container’s CPU request (default: AGENT_CPU_REQUEST).',
    parse: quantity,
  }),
  'agent-cpu-limit': annotation({
    type: 'quantity',
    echo: 'quote',
    default: undefined,
    doc: 'The agent container’s CPU limit (default: AGENT_CPU_LIMIT, none).',
    parse: quantity,
  }),
  'agent-memory-request': annotation({
    type: 'quantity',
    echo: 'quote',
    default: undefined,
    doc: 'The agent container’s memory request (default: AGENT_MEMORY_REQUEST).',
    parse: quantity,
  }),
  'agent-memory-limit': annotation({
    type: 'quantity',
    echo: 'quote',
    default: undefined,
    doc: 'The agent container’s memory limit (default: AGENT_MEMORY_LIMIT).',
    parse: quantity,
  }),
  'agent-run-as-user': annotation({
    type: 'uid',
    echo: 'quote',
    default: undefined,
    doc: 'User the agent runs as. Default: the uid every container that mounts the secrets runs as, when their spec names one and it is not 0 (0400 files are then readable by the app alone), else AGENT_RUN_AS_USER (65532) with the files shared through a group. Another uid than the app’s makes the files shared through a group. Never 0.',
    parse: userId,
  }),
  'volume-size-limit': annotation({
    type: 'quantity',
    echo: 'quote',
    default: undefined,
    doc: 'Size limit of the memory-medium volume (default: SECRETS_VOLUME_SIZE_LIMIT). Counts against the pod’s memory.',
    parse: quantity,
  }),
  'aws-region': annotation({
    type: 'region',
    echo: 'quote',
    default: undefined,
    doc: 'AWS region for `aws:NAME` references (default: AGENT_AWS_REGION; ARNs carry their own). A pod with `aws:NAME` references and neither is refused. Passed as `AWS_REGION`.',
    parse: pattern(AWS_REGION, 'an AWS region', 'eu-west-1'),
  }),
  'gcp-project': annotation({
    type: 'project id',
    echo: 'quote',
    default: undefined,
    doc: 'GCP project for `gcp:SECRET` references (default: AGENT_GCP_PROJECT; `projects/P/…` carries its own). A pod with `gcp:SECRET` references and neither is refused. Passed as `GCP_PROJECT`.',
    parse: pattern(GCP_PROJECT, 'a GCP project id', 'my-project'),
  }),
  'vault-role': annotation({
    type: 'role name',
    echo: 'quote',
    default: undefined,
    doc: 'Vault role to log in as (default: AGENT_VAULT_ROLE). With the kubernetes or gcp method a pod with `vault:` references and neither is refused. The Vault address, CA and auth mount are cluster settings only. Passed as `VAULT_ROLE`.',
    parse: pattern(/^[A-Za-z0-9_.@-]{1,128}$/, 'a Vault role name', 'my-app'),
  }),
  'vault-auth-method': annotation({
    type: WEBHOOK_VAULT_AUTH_METHODS.map((m) => `\`${m}\``).join(' | '),
    echo: 'quote',
    default: undefined,
    doc: 'How the agent logs in to Vault (default: AGENT_VAULT_AUTH_METHOD, else kubernetes): the pod’s service-account token (`kubernetes`, `jwt`), its TLS certificate (`cert`, with vault-client-cert-secret), its IAM role (`aws`: IRSA or EKS Pod Identity) or its Google service account (`gcp`: Workload Identity). One of the cluster’s ALLOW_VAULT_AUTH_METHODS, which also says at which mount. Passed as `VAULT_AUTH_METHOD`.',
    parse: vaultAuthMethod,
  }),
  'vault-namespace': annotation({
    type: 'namespace path',
    echo: 'quote',
    default: undefined,
    doc: 'Vault Enterprise / HCP namespace the secrets are read in (default: the pod’s namespace pin in VAULT_NAMESPACE_PINS, else AGENT_VAULT_NAMESPACE); a reference’s `?namespace=` overrides it. Both must be inside the pin where there is one. Passed as `VAULT_NAMESPACE`.',
    parse: vaultNamespace,
  }),
  'vault-auth-namespace': annotation({
    type: 'namespace path',
    echo: 'quote',
    default: undefined,
    doc: 'Namespace of the auth method when it is a parent of vault-namespace (default: AGENT_VAULT_AUTH_NAMESPACE, else vault-namespace). Inside the pod’s namespace pin, or AGENT_VAULT_AUTH_NAMESPACE, where VAULT_NAMESPACE_PINS has one. Passed as `VAULT_AUTH_NAMESPACE`.',
    parse: vaultNamespace,
  }),
  'vault-client-cert-secret': annotation({
    type: 'Secret name',
    echo: 'quote',
    default: undefined,
    doc: 'A `kubernetes.io/tls` Secret in the pod’s namespace (e.g. cert-manager’s) whose tls.crt / tls.key the agent presents to Vault: for the cert auth method, or a listener that requires client certificates. Mounted read-only into the agent container only; passed as `VAULT_CLIENT_CERT` / `VAULT_CLIENT_KEY`. Needs an https AGENT_VAULT_ADDR.',
    parse: pattern(SECRET_NAME, 'a Secret name', 'web-vault-client'),
  }),
  'vault-gcp-service-account': annotation({
    type: 'email',
    echo: 'quote',
    default: undefined,
    doc: 'gcp method: the Google service account the JWT is signed for (default: the pod’s Workload Identity account). Passed as `VAULT_GCP_SERVICE_ACCOUNT`.',
    parse: pattern(/^[^@\s]+@[^@\s]+$/, 'a service account email', 'web@my-project.iam.gserviceaccount.com'),
  }),
  'vault-revoke-on-shutdown': annotation({
    type: 'bool',
    echo: 'quote',
    default: undefined,
    doc: 'The sidecar revokes its Vault token and leases when it stops (default: AGENT_VAULT_REVOKE_ON_SHUTDOWN, else false); never at the end of an init run. Passed as `VAULT_REVOKE_ON_SHUTDOWN`.',
    parse: (text, field) => String(boolean(text, field)),
  }),
} as const;

export type PodAnnotationName = keyof typeof POD_ANNOTATIONS;

/**
 * Per-file annotations: `secret-agent.io/<setting>-<file>`. `<file>` is the name after the prefix;
 * annotation names cannot hold `/`, so `path-<file>` moves a file into a sub-directory.
 */
export const FILE_ANNOTATIONS = {
  secret: annotation<SecretReference>({
    type: 'reference',
    // A reference is a name, but text that fails to parse as one may be the secret itself.
    echo: 'shape',
    default: undefined,
    doc: 'Required, one per file: the secret reference (agent reference grammar). Writes the file `<file>` into the mount path. `aws:NAME` needs a region (aws-region or AGENT_AWS_REGION), `gcp:SECRET` a project (gcp-project or AGENT_GCP_PROJECT), `vault:` the cluster’s AGENT_VAULT_ADDR and a role (vault-role or AGENT_VAULT_ROLE), `exec:` a cluster that allows it (ALLOW_EXEC_REFERENCES): a pod without them is refused.',
    parse: parseReference,
  }),
  path: annotation({
    type: 'relative path',
    echo: 'quote',
    default: '`<file>`',
    doc: 'Path of the file inside the mount path, sub-directories allowed (e.g. `db/password`), never escaping it. For `format-<file>: split`, the directory the keys go into; `.` means the top level.',
    parse: (text, field) => (text === '.' ? '' : validateRelativePath(text, field)),
  }),
  format: annotation({
    type: SECRET_FORMATS.map((f) => `\`${f}\``).join(' | '),
    echo: 'quote',
    default: 'raw',
    doc: 'How the value becomes files (see the agent’s SECRET_<N>_FORMAT). `template` needs `template-<file>`, which implies it.',
    parse: (text, field) => SECRET_SETTINGS.FORMAT.parse(text, field),
  }),
  // Refusals quote only tag and section names from it (never the text around them), and hiding every
  // string the template contains would hide those names, which are the point of the message.
  template: annotation({
    type: 'Mustache text',
    echo: 'quote',
    default: undefined,
    doc: 'The file’s text: `{{key}}` for this secret’s JSON keys, `{{secrets.<other file>.key}}` for another secret of the pod (by its `<file>` name), `{{^key}}fallback{{/key}}` for a default (docs/templates.md). Implies `format-<file>: template`. A syntax error, a partial, or a `secrets.` name that is no file of the pod is refused with the line and column.',
    parse: (text, field) => compileTemplate(text, field),
  }),
  'file-mode': annotation({
    type: 'octal mode',
    echo: 'quote',
    default: '`file-mode`',
    doc: 'Mode of this file.',
    parse: (text, field) => (SECRET_SETTINGS.MODE.parse(text, field), text),
  }),
  'refresh-interval': annotation({
    type: 'duration',
    echo: 'quote',
    default: '`refresh-interval`',
    doc: 'Sidecar refresh period of this file.',
    parse: (text, field) => (SECRET_SETTINGS.REFRESH_INTERVAL.parse(text, field), text),
  }),
} as const;

export type FileAnnotationName = keyof typeof FILE_ANNOTATIONS;

/** Longest first, so `file-mode-x` is never read as something shorter. */
export const FILE_ANNOTATION_PREFIXES = (Object.keys(FILE_ANNOTATIONS) as FileAnnotationName[])
  .map((name) => ({ name, prefix: `${name}-` }))
  .sort((a, b) => b.prefix.length - a.prefix.length);

/** The name part rules Kubernetes applies to annotation keys. */
export const FILE_NAME = /^[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;

/** Reads `secret-agent.io/<key>` as a file annotation: which setting, which file. */
export function matchFileAnnotation(key: string): { name: FileAnnotationName; file: string } | undefined {
  for (const { name, prefix } of FILE_ANNOTATION_PREFIXES) {
    if (key.startsWith(prefix) && key.length > prefix.length) return { name, file: key.slice(prefix.length) };
  }
  return undefined;
}

/**
 * The declared annotation behind a full `secret-agent.io/…` key, pod-wide or per-file (also when the
 * file name is not a valid one); undefined for a key that is none of ours.
 */
export function annotationFor(key: string): Annotation<unknown> | undefined {
  if (!key.startsWith(PREFIX)) return undefined;
  const name = key.slice(PREFIX.length);
  if (Object.hasOwn(POD_ANNOTATIONS, name)) return POD_ANNOTATIONS[name as PodAnnotationName];
  const match = matchFileAnnotation(name);
  return match ? FILE_ANNOTATIONS[match.name] : undefined;
}
