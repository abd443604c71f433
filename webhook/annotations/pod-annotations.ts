import { AGENT_SETTINGS } from '../../agent/contract/agent-settings.ts';
import { annotation, type Annotation, type Echo } from './annotation.ts';
import { DNS_SUBDOMAIN } from '../kubernetes-names.ts';
import {
  mountPath,
  AWS_REGION,
  boolean,
  containerList,
  GCP_PROJECT,
  injectionMode,
  pattern,
  SIDECAR_PROCESSES,
  sidecarProcessName,
  cpuQuantity,
  memoryQuantity,
  userId,
  vaultAuthMethod,
  vaultNamespace,
  WEBHOOK_VAULT_AUTH_METHODS,
} from './values.ts';

/**
 * Pod-wide annotations, `secret-agent.io/<name>`: how the agent is injected, the agent settings a pod
 * may choose (passed through as its env), its resources, and what the backends need of the pod.
 */

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
  'sidecar-process': annotation({
    type: SIDECAR_PROCESSES.map((p) => `\`${p}\``).join(' | '),
    echo: 'quote',
    default: undefined,
    doc: 'What stays in the sidecar between refreshes. `small`: only /app/resident (~2 MiB), which holds the port and runs the agent for each refresh. `node`: the whole Node agent (~18–30 MiB). Default: AGENT_SIDECAR_PROCESS (`small`) where the pod suits it, else `node`; `small` asked for by a pod it does not suit (a refresh interval under 60s, exit-with-process, Vault revoke-on-shutdown) is refused (docs/webhook.md, “The small sidecar”).',
    parse: sidecarProcessName,
  }),
  'mount-path': annotation({
    type: 'absolute path',
    echo: 'quote',
    default: '/etc/secrets',
    doc: 'Where the secrets volume is mounted (read-only) in app containers; also the value of their `SECRETS_DIR` env var. Taken in its normal form (`//`, `.` segments and a trailing `/` dropped); `..`, `/`, anything but ASCII letters, digits and `._~+=,@-/`, and more than 256 bytes are refused, and so is a path at, above or below what every container has mounted already: `/proc`, `/sys`, `/dev`, `/etc/hosts`, `/etc/hostname`, `/etc/resolv.conf`, `/etc/mtab` (a link into /proc), the service-account and EKS token directories (`/var/run/secrets/…` and `/run/secrets/…`), `/.secret-agent`, and a selected container’s mounts, block devices (`volumeDevices`) and `terminationMessagePath`, absolute or not. The agent container mounts the volume at `/secret-agent/secrets` whatever this says.',
    parse: mountPath,
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
    'Where the sidecar serves /healthz, /readyz and /metrics (default: the webhook’s AGENT_HTTP_ADDR, the pod’s loopback 127.0.0.1:8099 unless the cluster scrapes agents). Move it when the port is taken; the host must be the loopback or every address (0.0.0.0, [::]), which the postStart hook reaches over the loopback and Prometheus over the pod’s IP.',
    'quote',
  ),
  'agent-cpu-request': annotation({
    type: 'quantity',
    echo: 'quote',
    default: undefined,
    doc: 'The agent container’s CPU request (default: AGENT_CPU_REQUEST).',
    parse: cpuQuantity,
  }),
  'agent-cpu-limit': annotation({
    type: 'quantity',
    echo: 'quote',
    default: undefined,
    doc: 'The agent container’s CPU limit (default: AGENT_CPU_LIMIT, none).',
    parse: cpuQuantity,
  }),
  'agent-memory-request': annotation({
    type: 'quantity',
    echo: 'quote',
    default: undefined,
    doc: 'The agent container’s memory request (default: AGENT_MEMORY_REQUEST).',
    parse: memoryQuantity,
  }),
  'agent-memory-limit': annotation({
    type: 'quantity',
    echo: 'quote',
    default: undefined,
    doc: 'The agent container’s memory limit (default: AGENT_MEMORY_LIMIT).',
    parse: memoryQuantity,
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
    parse: memoryQuantity,
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
    parse: pattern(DNS_SUBDOMAIN, 'a Secret name', 'web-vault-client'),
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
