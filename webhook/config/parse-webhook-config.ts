import { readConfigFile } from '../../agent/contract/config-file.ts';
import type { LogLevel } from '../../agent/contract/agent-settings.ts';
import { ConfigError, ConfigErrors } from '../../agent/contract/errors.ts';
import { settingsReader, type Env, type Setting } from '../../agent/contract/settings.ts';
import { absolutePath } from '../annotations/values.ts';
import { checkVaultPolicy, type VaultPolicy } from '../vault-policy.ts';
import type { ClusterDefaults, InjectionSettings } from './injection-defaults.ts';
import { WEBHOOK_SETTINGS, type WebhookSettingName } from './settings.ts';

/**
 * Reads the webhook's settings (settings.ts) from env and WEBHOOK_CONFIG_FILE into one typed config,
 * with the checks that take several settings together.
 */

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
    allowRotationCommand: read('ALLOW_ROTATION_COMMAND', s.ALLOW_ROTATION_COMMAND),
    runAsUser: read('AGENT_RUN_AS_USER', s.AGENT_RUN_AS_USER),
    fileGroup: read('AGENT_FILE_GROUP', s.AGENT_FILE_GROUP),
    cpuRequest: read('AGENT_CPU_REQUEST', s.AGENT_CPU_REQUEST),
    cpuLimit: read('AGENT_CPU_LIMIT', s.AGENT_CPU_LIMIT),
    memoryRequest: read('AGENT_MEMORY_REQUEST', s.AGENT_MEMORY_REQUEST),
    memoryLimit: read('AGENT_MEMORY_LIMIT', s.AGENT_MEMORY_LIMIT),
    smallSidecarMemoryRequest: read(
      'AGENT_SMALL_SIDECAR_MEMORY_REQUEST',
      s.AGENT_SMALL_SIDECAR_MEMORY_REQUEST,
    ),
    sidecarProcess: read('AGENT_SIDECAR_PROCESS', s.AGENT_SIDECAR_PROCESS),
    runDeadlineMs: read('AGENT_RUN_DEADLINE', s.AGENT_RUN_DEADLINE),
    agentHttpAddr: read('AGENT_HTTP_ADDR', s.AGENT_HTTP_ADDR),
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
  const authMethods = read('ALLOW_VAULT_AUTH_METHODS', s.ALLOW_VAULT_AUTH_METHODS);
  const namespacePins = read('VAULT_NAMESPACE_PINS', s.VAULT_NAMESPACE_PINS);
  const vaultPolicy: VaultPolicy | undefined = authMethods && {
    authMethods,
    ...(namespacePins ? { namespacePins } : {}),
  };
  if (vaultPolicy && !errors.some((e) => e.field.startsWith('AGENT_VAULT_AUTH_')))
    errors.push(...checkVaultPolicy(vaultPolicy, cluster));
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
      fileGroup: v.fileGroup,
      resources: {
        cpuRequest: v.cpuRequest,
        ...(values.cpuLimit ? { cpuLimit: values.cpuLimit } : {}),
        memoryRequest: v.memoryRequest,
        memoryLimit: v.memoryLimit,
        smallSidecarMemoryRequest: v.smallSidecarMemoryRequest,
      },
      sidecarProcess: v.sidecarProcess,
      runDeadlineMs: v.runDeadlineMs,
      agentHttpAddr: v.agentHttpAddr,
      volumeSizeLimit: v.volumeSizeLimit,
      cluster,
      allowRotationCommand: v.allowRotationCommand,
      vaultPolicy: vaultPolicy!,
      ownNamespace: v.namespace,
    },
  };
}

function optional<K extends string>(key: K, value: string | undefined): { [P in K]?: string } {
  return (value === undefined ? {} : { [key]: value }) as { [P in K]?: string };
}
