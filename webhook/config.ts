import { readConfigFile } from '../agent/contract/config-file.ts';
import { ConfigError, ConfigErrors, quote } from '../agent/contract/errors.ts';
import {
  duration,
  nonEmpty,
  oneOf,
  setting,
  settingsReader,
  type Env,
  type Setting,
} from '../agent/contract/settings.ts';
import type { LogLevel } from '../agent/contract/env.ts';
import { X509Certificate } from 'node:crypto';
import {
  absolutePath,
  AWS_REGION,
  quantity,
  userId,
  vaultAuthMethod,
  vaultNamespace,
  WEBHOOK_VAULT_AUTH_METHODS,
} from './annotations.ts';
import {
  DEFAULT_CPU_REQUEST,
  DEFAULT_MEMORY_LIMIT,
  DEFAULT_MEMORY_REQUEST,
  MEASURED,
  OUTSIDE_HEAP_RESERVE_MIB,
} from './agent-resources.ts';
import { parseExecHelpersVolume, type ExecHelpersVolume } from './exec-helpers-volume.ts';

/**
 * The webhook's own configuration, declared once as data like the agent's env: name, default,
 * parser, doc. Read from env, optionally from a YAML file (WEBHOOK_CONFIG_FILE, same keys);
 * env wins over the file. docs/tables.ts renders it into the docs tables.
 */

function port(text: string, field: string): number {
  const n = /^\d{1,5}$/.test(text) ? Number(text) : NaN;
  if (!(n >= 0 && n <= 65535))
    throw new ConfigError(field, `${quote(text)} is not a port`, 'use 1 to 65535 (0: any free port)');
  return n;
}

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
function dnsLabel(text: string, field: string): string {
  if (!DNS_LABEL.test(text))
    throw new ConfigError(
      field,
      `${quote(text)} is not a Kubernetes name`,
      'use lower-case letters, digits and -',
    );
  return text;
}

function optionalQuantity(text: string, field: string): string | undefined {
  return text === '' ? undefined : quantity(text, field);
}

function image(text: string, field: string): string {
  if (!/^[a-z0-9][a-zA-Z0-9._\-/:@]*$/.test(text))
    throw new ConfigError(
      field,
      `${quote(text)} is not an image reference`,
      'use e.g. ghcr.io/example/secret-agent:0.1.0',
    );
  return text;
}

/** PEM CA certificates, each of which must parse: what agents get as VAULT_CACERT_BYTES. */
function pemCertificates(text: string, field: string): string {
  const blocks = text.match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g) ?? [];
  const fix =
    'set it to the PEM text of the CA that signed Vault’s certificate (YAML block scalar in WEBHOOK_CONFIG_FILE)';
  if (blocks.length === 0)
    throw new ConfigError(field, `holds no PEM certificate (${text.length} characters)`, fix);
  blocks.forEach((block, i) => {
    try {
      new X509Certificate(block);
    } catch {
      throw new ConfigError(field, `certificate ${i + 1} of ${blocks.length} does not parse`, fix);
    }
  });
  return blocks.join('\n');
}

function httpsUrl(text: string, field: string): string {
  let url: URL | undefined;
  try {
    url = new URL(text);
  } catch {
    url = undefined;
  }
  if (!url || url.protocol !== 'https:' || url.username || url.password || url.search || url.hash)
    throw new ConfigError(
      field,
      `${quote(text)} is not an https URL`,
      'write it like https://sts.eu-west-1.amazonaws.com',
    );
  return text;
}

function awsRegionOrAuto(text: string, field: string): string {
  if (text === 'auto' || AWS_REGION.test(text)) return text;
  throw new ConfigError(
    field,
    `${quote(text)} is not an AWS region or auto`,
    'write it like us-east-1, or auto',
  );
}

function hostName(text: string, field: string): string {
  if (!/^[A-Za-z0-9]([A-Za-z0-9-.]{0,251}[A-Za-z0-9])?$/.test(text))
    throw new ConfigError(field, `${quote(text)} is not a host name`, 'write it like vault.internal');
  return text;
}

/** Bounded so a typo cannot hold the webhook's memory limit: at most 64 KiB per entry. */
const MAX_CACHE_ENTRIES = 65_536;

function cacheEntries(text: string, field: string): number {
  const n = /^\d{1,6}$/.test(text) ? Number(text) : NaN;
  if (!(n <= MAX_CACHE_ENTRIES))
    throw new ConfigError(
      field,
      `${quote(text)} is not a number of entries`,
      `use 0 (off) to ${MAX_CACHE_ENTRIES}, e.g. 256`,
    );
  return n;
}

/** NATIVE_SIDECARS as configured; `auto` is resolved once at start (webhook/native-sidecars.ts). */
export type NativeSidecarsSetting = boolean | 'auto';

function nativeSidecars(text: string, field: string): NativeSidecarsSetting {
  const v = oneOf(['auto', 'true', 'false'] as const)(text, field);
  return v === 'auto' ? v : v === 'true';
}

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
    doc: 'Required. The agent image injected into pods (pods cannot choose it).',
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
  ALLOW_FILE_REFERENCES: setting({
    default: 'false',
    doc: '`true` lets pods use `file:` references (local runs, demos, tests). Off in clusters: a `file:` reference reads a file inside the agent container.',
    parse: (text, field) => oneOf(['true', 'false'] as const)(text, field) === 'true',
  }),
  ALLOW_EXEC_REFERENCES: setting({
    default: 'false',
    doc: '`true` lets pods use `exec:` references: the agent runs a helper program from EXEC_HELPERS_VOLUME, which this needs (docs/exec-helpers.md). Off by default: the platform team chooses the helpers.',
    parse: (text, field) => oneOf(['true', 'false'] as const)(text, field) === 'true',
  }),
  EXEC_HELPERS_VOLUME: setting({
    default: undefined,
    doc: 'With ALLOW_EXEC_REFERENCES: the volume the helper programs come from, as JSON, mounted read-only at /secret-agent/helpers into the agent containers (never the app’s) of pods with an `exec:` reference. `{"configMap":{"name":"secret-agent-helpers"}}`: a ConfigMap in each such pod’s namespace, one key per helper, mode 0555 unless `defaultMode` says otherwise; or `{"persistentVolumeClaim":{"claimName":"…"}}`.',
    parse: parseExecHelpersVolume,
  }),
  AGENT_RUN_AS_USER: setting({
    default: '65532',
    doc: 'The agent’s uid when the pod sets no runAsUser.',
    parse: userId,
  }),
  AGENT_CPU_REQUEST: setting({
    default: DEFAULT_CPU_REQUEST,
    doc: `Default agent CPU request: the share that gets the slowest start measured (${MEASURED.startCpuSeconds} CPU-s) done within INIT_DEADLINE on a node whose CPU is all taken; the steady state uses ~${MEASURED.steadyCpuMillicores}m (docs/webhook.md, What a pod costs).`,
    parse: quantity,
  }),
  AGENT_CPU_LIMIT: setting({
    default: '',
    doc: 'Default agent CPU limit (empty: none, to avoid throttling the cold start).',
    parse: optionalQuantity,
  }),
  AGENT_MEMORY_REQUEST: setting({
    default: DEFAULT_MEMORY_REQUEST,
    doc: `Default agent memory request: the largest steady-state working set measured (${MEASURED.steadyWorkingSetMiB} MiB: 100 GCP secrets and an HTTP notifier) and a quarter more. What the node counts (usage − inactive file), not RSS, which counts the Node binary shared by every agent (docs/webhook.md, What a pod costs).`,
    parse: quantity,
  }),
  AGENT_MEMORY_LIMIT: setting({
    default: DEFAULT_MEMORY_LIMIT,
    doc: `Default agent memory limit: a tenth over the ${MEASURED.worstCaseCleanLimitMiB}Mi under which the worst case measured (the first agent on a node, 100 GCP secrets, rotations) barely thrashes. The agent’s V8 heap cap (NODE_OPTIONS) is the limit less the volume’s size and ${OUTSIDE_HEAP_RESERVE_MIB} MiB for the rest, so the heap gives out before the limit.`,
    parse: quantity,
  }),
  SECRETS_VOLUME_SIZE_LIMIT: setting({
    default: '8Mi',
    doc: 'Default sizeLimit of the memory-medium secrets volume.',
    parse: quantity,
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
    doc: 'Passed to agents as VAULT_AUTH_MOUNT (cluster only): the mount of AGENT_VAULT_AUTH_METHOD (default kubernetes). A pod that picks another method with secret-agent.io/vault-auth-method logs in at that method’s default mount.',
    parse: nonEmpty,
  }),
  AGENT_VAULT_AUTH_METHOD: setting({
    default: undefined,
    doc: `Cluster default passed to agents as VAULT_AUTH_METHOD (${WEBHOOK_VAULT_AUTH_METHODS.join(', ')}); unset: kubernetes.`,
    parse: vaultAuthMethod,
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
    doc: 'Admission decisions kept (least recently used dropped first), each keyed by a SHA-256 of exactly what decides it: the pod’s `secret-agent.io/` annotations and opt-in label, its containers’ names, env, mounts and ports, its volumes’ names, the pod fields the checks read, the namespace and these settings. The replicas of a workload share one, so a rollout is checked and rendered once; an answer over 64 KiB is not kept. `0`: off.',
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

export interface ClusterDefaults {
  readonly awsRegion?: string;
  readonly gcpProject?: string;
  readonly vaultAddr?: string;
  readonly vaultRole?: string;
  readonly vaultAuthMount?: string;
  readonly vaultAuthMethod?: string;
  readonly vaultNamespace?: string;
  readonly vaultAuthNamespace?: string;
  /** PEM. */
  readonly vaultCaCert?: string;
  readonly vaultTlsServerName?: string;
  readonly vaultRevokeOnShutdown?: string;
  readonly vaultAwsRegion?: string;
  readonly vaultAwsStsEndpoint?: string;
  readonly vaultAwsIamServerId?: string;
}

/** What rendering needs: the part of the config that shapes patches. */
export interface InjectionDefaults {
  readonly agentImage: string;
  readonly imagePullPolicy: 'Always' | 'IfNotPresent' | 'Never';
  readonly nativeSidecars: boolean;
  readonly allowFileReferences: boolean;
  /** Where exec: helpers come from; undefined: exec: references are refused (ALLOW_EXEC_REFERENCES). */
  readonly execHelpers?: ExecHelpersVolume;
  readonly runAsUser: number;
  readonly resources: {
    readonly cpuRequest: string;
    readonly cpuLimit?: string;
    readonly memoryRequest: string;
    readonly memoryLimit: string;
  };
  readonly volumeSizeLimit: string;
  readonly cluster: ClusterDefaults;
  /** Never inject here. */
  readonly ownNamespace: string;
}

/** The config's injection part: InjectionDefaults before NATIVE_SIDECARS=auto is resolved at start. */
export type InjectionSettings = Omit<InjectionDefaults, 'nativeSidecars'> & {
  readonly nativeSidecars: NativeSidecarsSetting;
};

export interface WebhookConfig {
  readonly port: number;
  readonly host: string;
  readonly logLevel: LogLevel;
  /** Admission decisions kept; 0: no cache. */
  readonly admissionCacheSize: number;
  readonly tls:
    | { readonly mode: 'file'; readonly certFile: string; readonly keyFile: string }
    | {
        readonly mode: 'self-managed';
        readonly secretName: string;
        readonly serviceName: string;
        readonly webhookConfigurationName: string;
        readonly certValidityMs: number;
        readonly caValidityMs: number;
      };
  readonly injection: InjectionSettings;
}

/** Parses env (and the optional config file) into a typed config; throws ConfigErrors listing all problems. */
export function parseWebhookConfig(env: Env): WebhookConfig {
  const errors: ConfigError[] = [];
  let file: Env = {};
  if (env.WEBHOOK_CONFIG_FILE !== undefined) {
    const isSetting = (key: string) => Object.hasOwn(WEBHOOK_SETTINGS, key) && key !== 'WEBHOOK_CONFIG_FILE';
    let path: string;
    try {
      path = absolutePath(env.WEBHOOK_CONFIG_FILE, 'WEBHOOK_CONFIG_FILE');
    } catch (e) {
      if (e instanceof ConfigError) throw new ConfigErrors([e]);
      throw e;
    }
    file = readConfigFile(path, 'WEBHOOK_CONFIG_FILE', isSetting);
  }
  // Env wins over the file.
  const read = settingsReader([env, file], errors) as <T>(
    name: WebhookSettingName,
    s: Setting<T>,
  ) => T | undefined;
  const s = WEBHOOK_SETTINGS;
  const tlsMode = read('TLS_MODE', s.TLS_MODE);
  const agentImage = read('AGENT_IMAGE', s.AGENT_IMAGE);
  if (agentImage === undefined && !errors.some((e) => e.field === 'AGENT_IMAGE'))
    errors.push(
      new ConfigError(
        'AGENT_IMAGE',
        'is not set',
        'set it to the agent image, e.g. ghcr.io/example/secret-agent:0.1.0',
      ),
    );
  const values = {
    port: read('WEBHOOK_PORT', s.WEBHOOK_PORT),
    host: read('WEBHOOK_HOST', s.WEBHOOK_HOST),
    namespace: read('WEBHOOK_NAMESPACE', s.WEBHOOK_NAMESPACE),
    certFile: read('TLS_CERT_FILE', s.TLS_CERT_FILE),
    keyFile: read('TLS_KEY_FILE', s.TLS_KEY_FILE),
    secretName: read('TLS_SECRET_NAME', s.TLS_SECRET_NAME),
    serviceName: read('WEBHOOK_SERVICE_NAME', s.WEBHOOK_SERVICE_NAME),
    webhookConfigurationName: read('WEBHOOK_CONFIGURATION_NAME', s.WEBHOOK_CONFIGURATION_NAME),
    certValidityMs: read('CERT_VALIDITY', s.CERT_VALIDITY),
    caValidityMs: read('CA_VALIDITY', s.CA_VALIDITY),
    imagePullPolicy: read('AGENT_IMAGE_PULL_POLICY', s.AGENT_IMAGE_PULL_POLICY),
    nativeSidecars: read('NATIVE_SIDECARS', s.NATIVE_SIDECARS),
    allowFileReferences: read('ALLOW_FILE_REFERENCES', s.ALLOW_FILE_REFERENCES),
    allowExecReferences: read('ALLOW_EXEC_REFERENCES', s.ALLOW_EXEC_REFERENCES),
    runAsUser: read('AGENT_RUN_AS_USER', s.AGENT_RUN_AS_USER),
    cpuRequest: read('AGENT_CPU_REQUEST', s.AGENT_CPU_REQUEST),
    cpuLimit: read('AGENT_CPU_LIMIT', s.AGENT_CPU_LIMIT),
    memoryRequest: read('AGENT_MEMORY_REQUEST', s.AGENT_MEMORY_REQUEST),
    memoryLimit: read('AGENT_MEMORY_LIMIT', s.AGENT_MEMORY_LIMIT),
    volumeSizeLimit: read('SECRETS_VOLUME_SIZE_LIMIT', s.SECRETS_VOLUME_SIZE_LIMIT),
    logLevel: read('LOG_LEVEL', s.LOG_LEVEL),
    admissionCacheSize: read('ADMISSION_CACHE_SIZE', s.ADMISSION_CACHE_SIZE),
  };
  const cluster: ClusterDefaults = {
    ...optional('awsRegion', read('AGENT_AWS_REGION', s.AGENT_AWS_REGION)),
    ...optional('gcpProject', read('AGENT_GCP_PROJECT', s.AGENT_GCP_PROJECT)),
    ...optional('vaultAddr', read('AGENT_VAULT_ADDR', s.AGENT_VAULT_ADDR)),
    ...optional('vaultRole', read('AGENT_VAULT_ROLE', s.AGENT_VAULT_ROLE)),
    ...optional('vaultAuthMount', read('AGENT_VAULT_AUTH_MOUNT', s.AGENT_VAULT_AUTH_MOUNT)),
    ...optional('vaultAuthMethod', read('AGENT_VAULT_AUTH_METHOD', s.AGENT_VAULT_AUTH_METHOD)),
    ...optional('vaultNamespace', read('AGENT_VAULT_NAMESPACE', s.AGENT_VAULT_NAMESPACE)),
    ...optional('vaultAuthNamespace', read('AGENT_VAULT_AUTH_NAMESPACE', s.AGENT_VAULT_AUTH_NAMESPACE)),
    ...optional('vaultCaCert', read('AGENT_VAULT_CACERT', s.AGENT_VAULT_CACERT)),
    ...optional('vaultTlsServerName', read('AGENT_VAULT_TLS_SERVER_NAME', s.AGENT_VAULT_TLS_SERVER_NAME)),
    ...optional(
      'vaultRevokeOnShutdown',
      read('AGENT_VAULT_REVOKE_ON_SHUTDOWN', s.AGENT_VAULT_REVOKE_ON_SHUTDOWN),
    ),
    ...optional('vaultAwsRegion', read('AGENT_VAULT_AWS_REGION', s.AGENT_VAULT_AWS_REGION)),
    ...optional('vaultAwsStsEndpoint', read('AGENT_VAULT_AWS_STS_ENDPOINT', s.AGENT_VAULT_AWS_STS_ENDPOINT)),
    ...optional(
      'vaultAwsIamServerId',
      read('AGENT_VAULT_AWS_IAM_SERVER_ID', s.AGENT_VAULT_AWS_IAM_SERVER_ID),
    ),
  };
  const execHelpers = read('EXEC_HELPERS_VOLUME', s.EXEC_HELPERS_VOLUME);
  const execSet = [env, file].some((source) => source.EXEC_HELPERS_VOLUME !== undefined);
  if (values.allowExecReferences === true && !execSet)
    errors.push(
      new ConfigError(
        'EXEC_HELPERS_VOLUME',
        'is not set, but ALLOW_EXEC_REFERENCES is true, so the agent would have no helpers to run',
        'name the volume the helper programs come from, e.g. {"configMap":{"name":"secret-agent-helpers"}} (docs/exec-helpers.md)',
      ),
    );
  if (values.allowExecReferences === false && execSet)
    errors.push(
      new ConfigError(
        'EXEC_HELPERS_VOLUME',
        'is set, but ALLOW_EXEC_REFERENCES is not true, so it would be ignored',
        'set ALLOW_EXEC_REFERENCES=true to let pods use exec: references, or remove EXEC_HELPERS_VOLUME',
      ),
    );
  if (errors.length > 0) throw new ConfigErrors(errors);
  const v = values as { [K in keyof typeof values]: NonNullable<(typeof values)[K]> };
  return {
    port: v.port,
    host: v.host,
    logLevel: v.logLevel,
    admissionCacheSize: v.admissionCacheSize,
    tls:
      tlsMode === 'self-managed'
        ? {
            mode: 'self-managed',
            secretName: v.secretName,
            serviceName: v.serviceName,
            webhookConfigurationName: v.webhookConfigurationName,
            certValidityMs: v.certValidityMs,
            caValidityMs: v.caValidityMs,
          }
        : { mode: 'file', certFile: v.certFile, keyFile: v.keyFile },
    injection: {
      agentImage: agentImage!,
      imagePullPolicy: v.imagePullPolicy,
      nativeSidecars: v.nativeSidecars!,
      allowFileReferences: v.allowFileReferences!,
      ...(v.allowExecReferences && execHelpers ? { execHelpers } : {}),
      runAsUser: v.runAsUser,
      resources: {
        cpuRequest: v.cpuRequest,
        ...(values.cpuLimit ? { cpuLimit: values.cpuLimit } : {}),
        memoryRequest: v.memoryRequest,
        memoryLimit: v.memoryLimit,
      },
      volumeSizeLimit: v.volumeSizeLimit,
      cluster,
      ownNamespace: v.namespace,
    },
  };
}

function optional<K extends string>(key: K, value: string | undefined): { [P in K]?: string } {
  return (value === undefined ? {} : { [key]: value }) as { [P in K]?: string };
}
