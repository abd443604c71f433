import { AGENT_SETTINGS } from '../../agent/contract/agent-settings.ts';
import { duration, nonEmpty, oneOf, setting } from '../../agent/contract/settings.ts';
import {
  absolutePath,
  sidecarProcessName,
  groupId,
  cpuQuantity,
  memoryQuantity,
  userId,
  vaultAuthMethod,
  vaultNamespace,
  WEBHOOK_VAULT_AUTH_METHODS,
} from '../annotations/values.ts';
import { parseExecHelpersVolume } from '../exec-helpers-volume.ts';
import { parseAgentHttpAddr } from './agent-http-address.ts';
import { parseAllowedVaultAuth, parseVaultNamespacePins } from '../vault-policy.ts';
import {
  awsRegionOrAuto,
  cacheEntries,
  dnsLabel,
  flag,
  hostName,
  httpsUrl,
  image,
  nativeSidecars,
  optionalQuantity,
  pemCertificates,
  port,
} from './setting-values.ts';
import {
  DEFAULT_CPU_REQUEST,
  DEFAULT_MEMORY_LIMIT,
  DEFAULT_MEMORY_REQUEST,
  DEFAULT_SMALL_SIDECAR_MEMORY_REQUEST,
  MEASURED,
  MEASURED_SMALL_SIDECAR,
  OUTSIDE_HEAP_RESERVE_MIB,
  SMALL_SIDECAR_MIN_INTERVAL_MS,
} from '../agent-sizing.ts';

/**
 * The webhook's own configuration, declared once as data like the agent's env: name, default,
 * parser, doc. Read from env, optionally from a YAML file (WEBHOOK_CONFIG_FILE, same keys);
 * env wins over the file (parse-webhook-config.ts). docs/tables.ts renders it into the docs tables.
 */

export const WEBHOOK_SETTINGS = {
  WEBHOOK_PORT: setting({ default: '8443', doc: 'HTTPS port.', parse: port }),
  WEBHOOK_HOST: setting({ default: '0.0.0.0', doc: 'Address the HTTPS server binds.', parse: nonEmpty }),
  WEBHOOK_NAMESPACE: setting({
    default: 'secret-agent',
    doc: 'The webhook’s own namespace (downward API): pods there are never injected; the self-managed Secret lives there.',
    parse: dnsLabel,
  }),
  TLS_MODE: setting({
    default: 'file',
    doc: '`file`: serve TLS_CERT_FILE / TLS_KEY_FILE and reload them on change (cert-manager). `self-managed`: generate a CA and serving cert, keep them in a Secret, patch the caBundle.',
    parse: oneOf(['file', 'self-managed'] as const),
  }),
  TLS_CERT_FILE: setting({
    default: '/etc/webhook/tls/tls.crt',
    doc: 'PEM certificate chain (file mode).',
    parse: absolutePath,
  }),
  TLS_KEY_FILE: setting({
    default: '/etc/webhook/tls/tls.key',
    doc: 'PEM private key (file mode).',
    parse: absolutePath,
  }),
  TLS_SECRET_NAME: setting({
    default: 'secret-agent-webhook-tls',
    doc: 'Self-managed mode: the Secret holding the CA and serving cert.',
    parse: dnsLabel,
  }),
  WEBHOOK_SERVICE_NAME: setting({
    default: 'secret-agent-webhook',
    doc: 'Self-managed mode: the Service name the serving cert is issued for.',
    parse: dnsLabel,
  }),
  WEBHOOK_CONFIGURATION_NAME: setting({
    default: 'secret-agent',
    doc: 'Self-managed mode: the MutatingWebhookConfiguration whose caBundle is kept current.',
    parse: dnsLabel,
  }),
  CERT_VALIDITY: setting({
    default: '168h',
    doc: 'Self-managed mode: lifetime of a serving cert; renewed when a third of it is left.',
    parse: duration(3_600_000, Infinity, '24h or 720h'),
  }),
  CA_VALIDITY: setting({
    default: '8760h',
    doc: 'Self-managed mode: lifetime of the CA; renewed when a third is left, the old CA staying in the caBundle until it expires.',
    parse: duration(3_600_000, Infinity, '24h or 720h'),
  }),
  AGENT_IMAGE: setting({
    default: undefined,
    doc: 'Required. The agent image injected into pods (pods cannot choose it). Pin it by the index digest that was signed, `REGISTRY/agent@sha256:…` (`.images.agent.pinned` in `dist/images/release.json`; see docs/release.md): injected as it is.',
    parse: image,
  }),
  AGENT_IMAGE_PULL_POLICY: setting({
    default: 'IfNotPresent',
    doc: 'imagePullPolicy of the agent container.',
    parse: oneOf(['Always', 'IfNotPresent', 'Never'] as const),
  }),
  NATIVE_SIDECARS: setting({
    default: 'auto',
    doc: '`auto`: decided once at start from the API server’s `GET /version`: `true` from 1.29 on, else `false`; `false` with a warning when the version cannot be read. Needs no RBAC (the default system:public-info-viewer binding allows /version to everyone) but the service-account token mounted. `auto` follows the control plane only, and kubelets may lag it by up to three minor versions: set `false` while any node runs < 1.29. `true`: init+sidecar becomes one native sidecar (an init container with restartPolicy: Always; every node ≥ 1.29). `false`: an init container plus a classic sidecar; works on every version.',
    parse: nativeSidecars,
  }),
  AGENT_SIDECAR_PROCESS: setting({
    default: 'small',
    doc: `What stays in a pod’s sidecar between refreshes when the pod does not say (\`secret-agent.io/sidecar-process\`). \`small\`: only /app/resident (~2 MiB), which runs the agent for each refresh; a pod it does not suit (a refresh interval under ${SMALL_SIDECAR_MIN_INTERVAL_MS / 1000}s, exit-with-process, Vault revoke-on-shutdown) gets \`node\`. \`node\`: the whole Node agent (~18–30 MiB), as before (docs/webhook.md, “The small sidecar”).`,
    parse: sidecarProcessName,
  }),
  AGENT_HTTP_ADDR: setting({
    default: AGENT_SETTINGS.AGENT_HTTP_ADDR.default,
    doc: 'Where sidecars serve /healthz, /readyz and /metrics when the pod does not say (`secret-agent.io/agent-http-addr`). The pod’s loopback by default: no other pod can open a connection to it, and no probe needs it (the native sidecar’s postStart hook asks over loopback). `0.0.0.0:8099` (the monitoring component sets it) lets Prometheus scrape every agent, and every pod reach the port unless a NetworkPolicy closes it (docs/agent.md, “Who can reach the agent’s port”).',
    parse: (text: string, field: string) => (parseAgentHttpAddr(text, field), text),
  }),
  AGENT_RUN_DEADLINE: setting({
    default: AGENT_SETTINGS.AGENT_RUN_DEADLINE.default,
    doc: 'Passed to small sidecars as AGENT_RUN_DEADLINE: how long one refresh run may take before the resident stops it. Raised for a pod to its INIT_DEADLINE + 15 s (at most 1h), so the first run, which fills the volume and retries for INIT_DEADLINE, is never stopped first.',
    parse: AGENT_SETTINGS.AGENT_RUN_DEADLINE.parse,
  }),
  ALLOW_FILE_REFERENCES: setting({
    default: 'false',
    doc: '`true` lets pods use `file:` references (local runs, demos, tests). Off in clusters: a `file:` reference reads a file inside the agent container.',
    parse: flag,
  }),
  ALLOW_EXEC_REFERENCES: setting({
    default: 'false',
    doc: '`true` lets pods use `exec:` references: the agent runs a helper program from EXEC_HELPERS_VOLUME, which this needs (docs/exec-helpers.md). Off by default: the platform team chooses the helpers.',
    parse: flag,
  }),
  EXEC_HELPERS_VOLUME: setting({
    default: undefined,
    doc: 'With ALLOW_EXEC_REFERENCES: the volume the helper programs come from, as JSON, mounted read-only at /secret-agent/helpers into the agent containers (never the app’s) of pods with an `exec:` reference. `{"configMap":{"name":"secret-agent-helpers"}}`: a ConfigMap in each such pod’s namespace, one key per helper, mode 0555 unless `defaultMode` says otherwise; or `{"persistentVolumeClaim":{"claimName":"…"}}`.',
    parse: parseExecHelpersVolume,
  }),
  ALLOW_ROTATION_COMMAND: setting({
    default: 'false',
    doc: '`true` lets pods use `secret-agent.io/rotation-command`: a program of the pod author’s, run in the agent container next to the pod’s backend credentials. Off by default, so that no tenant code runs there unless the cluster says so (docs/security.md); rotation-http-url, rotation-signal and rotation-sentinel-file tell the app without it.',
    parse: flag,
  }),
  AGENT_RUN_AS_USER: setting({
    default: '65532',
    doc: 'The agent’s uid when the containers that mount the secrets do not all run as one non-root uid their spec names (otherwise the agent runs as that uid). See docs/webhook.md, “Who can read the files”.',
    parse: userId,
  }),
  AGENT_FILE_GROUP: setting({
    default: '65532',
    doc: 'The group the webhook adds to a pod’s `supplementalGroups` to share its files (mode 0440) when its containers run as several or unknown uids and it has no fsGroup or common runAsGroup. Change it where a policy limits supplementalGroups (OpenShift SCCs).',
    parse: groupId,
  }),
  AGENT_CPU_REQUEST: setting({
    default: DEFAULT_CPU_REQUEST,
    doc: `Default agent CPU request: the share that gets the slowest start measured (${MEASURED.startCpuSeconds} CPU-s) done within INIT_DEADLINE on a node whose CPU is all taken; the steady state uses ~${MEASURED.steadyCpuMillicores}m (docs/webhook.md, What a pod costs).`,
    parse: cpuQuantity,
  }),
  AGENT_CPU_LIMIT: setting({
    default: '',
    doc: 'Default agent CPU limit (empty: none, to avoid throttling the cold start).',
    parse: optionalQuantity,
  }),
  AGENT_MEMORY_REQUEST: setting({
    default: DEFAULT_MEMORY_REQUEST,
    doc: `Default agent memory request: the largest steady-state working set measured (${MEASURED.steadyWorkingSetMiB} MiB: 100 GCP secrets and an HTTP notifier) and a quarter more. What the node counts (usage − inactive file), not RSS, which counts the Node binary shared by every agent (docs/webhook.md, What a pod costs).`,
    parse: memoryQuantity,
  }),
  AGENT_MEMORY_LIMIT: setting({
    default: DEFAULT_MEMORY_LIMIT,
    doc: `Default agent memory limit: a tenth over the ${MEASURED.worstCaseCleanLimitMiB}Mi under which the worst case measured (the first agent on a node, 100 GCP secrets, rotations) barely thrashes. The agent’s V8 heap cap (NODE_OPTIONS) is the limit less the volume’s size and ${OUTSIDE_HEAP_RESERVE_MIB} MiB for the rest, so the heap gives out before the limit.`,
    parse: memoryQuantity,
  }),
  AGENT_SMALL_SIDECAR_MEMORY_REQUEST: setting({
    default: DEFAULT_SMALL_SIDECAR_MEMORY_REQUEST,
    doc: `Default memory request of a small sidecar: its working set between refreshes (${MEASURED_SMALL_SIDECAR.idleWorkingSetMiB} MiB: the resident and what the runs leave in the kernel) and a quarter more. A refresh run peaks above it, within AGENT_MEMORY_LIMIT, for under a second every few minutes (docs/webhook.md, What a pod costs).`,
    parse: memoryQuantity,
  }),
  SECRETS_VOLUME_SIZE_LIMIT: setting({
    default: '8Mi',
    doc: 'Default sizeLimit of the memory-medium secrets volume.',
    parse: memoryQuantity,
  }),
  AGENT_AWS_REGION: setting({
    default: undefined,
    doc: 'Cluster default passed to agents as AWS_REGION.',
    parse: nonEmpty,
  }),
  AGENT_GCP_PROJECT: setting({
    default: undefined,
    doc: 'Cluster default passed to agents as GCP_PROJECT.',
    parse: nonEmpty,
  }),
  AGENT_VAULT_ADDR: setting({
    default: undefined,
    doc: 'Passed to agents as VAULT_ADDR (cluster only: a pod cannot redirect its token elsewhere).',
    parse: nonEmpty,
  }),
  AGENT_VAULT_ROLE: setting({
    default: undefined,
    doc: 'Cluster default passed to agents as VAULT_ROLE.',
    parse: nonEmpty,
  }),
  AGENT_VAULT_AUTH_MOUNT: setting({
    default: undefined,
    doc: 'Passed to agents as VAULT_AUTH_MOUNT (cluster only): the mount of AGENT_VAULT_AUTH_METHOD (default kubernetes). A pod that picks another method with secret-agent.io/vault-auth-method logs in at the mount ALLOW_VAULT_AUTH_METHODS gives it, else at that method’s default mount.',
    parse: nonEmpty,
  }),
  AGENT_VAULT_AUTH_METHOD: setting({
    default: undefined,
    doc: `Cluster default passed to agents as VAULT_AUTH_METHOD (${WEBHOOK_VAULT_AUTH_METHODS.join(', ')}); unset: kubernetes.`,
    parse: vaultAuthMethod,
  }),
  ALLOW_VAULT_AUTH_METHODS: setting({
    default: WEBHOOK_VAULT_AUTH_METHODS.join(','),
    doc: 'The Vault auth methods a pod may choose with `secret-agent.io/vault-auth-method`, comma-separated, each optionally `=MOUNT`: where the agent logs in with it (e.g. `kubernetes,jwt=jwt-k8s`; default: AGENT_VAULT_AUTH_MOUNT for the cluster’s method, the method’s name for the others). Must list the cluster’s AGENT_VAULT_AUTH_METHOD. A pod that asks for another method is refused.',
    parse: parseAllowedVaultAuth,
  }),
  VAULT_NAMESPACE_PINS: setting({
    default: undefined,
    doc: 'Pins Kubernetes namespaces to Vault namespaces: `team-a=teams/a,*=tenants/{namespace}` (`*`: every namespace not listed; `{namespace}`: the Kubernetes one; `root`: any). A pod’s vault-namespace, vault-auth-namespace (unless it is AGENT_VAULT_AUTH_NAMESPACE) and references’ `?namespace=` must be its pin or inside it, and the pin is its default VAULT_NAMESPACE. A pod in a namespace without a pin may not read Vault. Unset: pods choose.',
    parse: parseVaultNamespacePins,
  }),
  AGENT_VAULT_NAMESPACE: setting({
    default: undefined,
    doc: 'Cluster default passed to agents as VAULT_NAMESPACE (Vault Enterprise, HCP: e.g. admin/apps).',
    parse: vaultNamespace,
  }),
  AGENT_VAULT_AUTH_NAMESPACE: setting({
    default: undefined,
    doc: 'Cluster default passed to agents as VAULT_AUTH_NAMESPACE: where the auth method is, when it is a parent of the secrets’ namespace.',
    parse: vaultNamespace,
  }),
  AGENT_VAULT_CACERT: setting({
    default: undefined,
    doc: 'PEM text of the CA that signed Vault’s certificate, passed to agents as VAULT_CACERT_BYTES (cluster only). Set it in WEBHOOK_CONFIG_FILE as a block scalar.',
    parse: pemCertificates,
  }),
  AGENT_VAULT_TLS_SERVER_NAME: setting({
    default: undefined,
    doc: 'Passed to agents as VAULT_TLS_SERVER_NAME (cluster only), when Vault’s certificate names another host than AGENT_VAULT_ADDR.',
    parse: hostName,
  }),
  AGENT_VAULT_REVOKE_ON_SHUTDOWN: setting({
    default: undefined,
    doc: 'Cluster default passed to agents as VAULT_REVOKE_ON_SHUTDOWN.',
    parse: oneOf(['true', 'false'] as const),
  }),
  AGENT_VAULT_AWS_REGION: setting({
    default: undefined,
    doc: 'Passed to agents as VAULT_AWS_REGION (aws method; Vault’s sts_region).',
    parse: awsRegionOrAuto,
  }),
  AGENT_VAULT_AWS_STS_ENDPOINT: setting({
    default: undefined,
    doc: 'Passed to agents as VAULT_AWS_STS_ENDPOINT (aws method; Vault’s sts_endpoint).',
    parse: httpsUrl,
  }),
  AGENT_VAULT_AWS_IAM_SERVER_ID: setting({
    default: undefined,
    doc: 'Passed to agents as VAULT_AWS_IAM_SERVER_ID (aws method; Vault’s iam_server_id_header_value).',
    parse: nonEmpty,
  }),
  ADMISSION_CACHE_SIZE: setting({
    default: '256',
    doc: 'Admission decisions kept (least recently used dropped first), each keyed by a SHA-256 of exactly what decides it: the pod’s `secret-agent.io/` annotations and opt-in label, its containers’ names, env, mounts and ports, the names of its volumes that admission compares (the webhook’s own and EKS’s token volumes: not the service account’s `kube-api-access-<random>`, which differs per pod), the pod fields the checks read, the namespace and these settings. The replicas of a workload share one, so a rollout is checked and rendered once; an answer over 64 KiB is not kept, nor more than 16 MiB in all. `0`: off.',
    parse: cacheEntries,
  }),
  LOG_LEVEL: setting({
    default: 'info',
    doc: 'The webhook’s pino log level.',
    parse: oneOf(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const),
  }),
  WEBHOOK_CONFIG_FILE: setting({
    default: undefined,
    doc: 'YAML file with any of these settings (same names as keys); env wins.',
    parse: absolutePath,
  }),
} as const;

export type WebhookSettingName = keyof typeof WEBHOOK_SETTINGS;
