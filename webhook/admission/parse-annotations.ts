import type { SecretFormat } from '../../agent/contract/secret-settings.ts';
import { AGENT_SETTINGS } from '../../agent/contract/agent-settings.ts';
import { SECRET_SETTINGS } from '../../agent/contract/secret-settings.ts';
import { ConfigError, ConfigErrors, quote } from '../../agent/contract/errors.ts';
import { findPathConflict } from '../../agent/contract/path.ts';
import { isProductAnnotation } from '../../agent/contract/product-annotations.ts';
import { inheritCloudIdentity } from './inherit-cloud-identity.ts';
import { checkAgentContainer } from './agent-container-policy.ts';
import { vaultLogin } from './vault-login.ts';
import { chosenModes, planFileAccess } from './plan-file-access.ts';
import type { SecretReference } from '../../agent/contract/reference.ts';
import {
  AGENT_CONTAINER,
  AGENT_PORT_NAME,
  AGENT_INIT_CONTAINER,
  FILE_ANNOTATIONS,
  FILE_NAME,
  matchFileAnnotation,
  POD_ANNOTATIONS,
  PREFIX,
  type Annotation,
  type FileAnnotationName,
  type InjectionMode,
  type PodAnnotationName,
} from '../annotations.ts';
import type { InjectionDefaults } from '../config.ts';
import { VAULT_CLIENT_CERT_DIR } from '../render/agent-containers.ts';
import { checkSecretNames, type CompiledTemplate } from '../../agent/format/template.ts';
import type { AgentSettingRequest, InjectionRequest, SecretFileRequest } from '../injection-request.ts';
import type { PodShape } from './review.ts';

const WILDCARD_HOSTS = new Set(['0.0.0.0', '::', '']);

/**
 * Turns a pod's `secret-agent.io/*` annotations into one validated InjectionRequest, or throws
 * ConfigErrors listing every problem, each naming the annotation and the fix. `namespace`: the pod's.
 */
export function parseInjectionRequest(
  pod: PodShape,
  defaults: InjectionDefaults,
  namespace: string,
): InjectionRequest {
  const errors: ConfigError[] = [];
  const annotations = pod.metadata?.annotations ?? {};
  const podValues = new Map<PodAnnotationName, string>();
  const fileValues = new Map<string, Map<FileAnnotationName, string>>();

  for (const [key, value] of Object.entries(annotations)) {
    // What the agent or the webhook wrote (a restart's template annotation) is not a setting: kept as is.
    if (!key.startsWith(PREFIX) || isProductAnnotation(key)) continue;
    const name = key.slice(PREFIX.length);
    if (Object.hasOwn(POD_ANNOTATIONS, name)) {
      podValues.set(name as PodAnnotationName, value);
      continue;
    }
    const match = matchFileAnnotation(name);
    if (!match) {
      const near = closestName(name);
      errors.push(
        new ConfigError(
          key,
          'is not a secret-agent annotation',
          `${near ? `did you mean ${PREFIX}${near}? Otherwise ` : ''}remove it; files are named by ${PREFIX}secret-<file> (see docs/webhook.md for every annotation)`,
        ),
      );
      continue;
    }
    if (!FILE_NAME.test(match.file)) {
      errors.push(
        new ConfigError(
          key,
          `${quote(match.file)} is not a file name`,
          'use letters, digits, -, _ and . (sub-directories go in path-<file>)',
        ),
      );
      continue;
    }
    let values = fileValues.get(match.file);
    if (!values) fileValues.set(match.file, (values = new Map()));
    values.set(match.name, value);
  }

  const read = <T>(name: PodAnnotationName, a: Annotation<T>): T | undefined => {
    const raw = podValues.get(name) ?? a.default;
    if (raw === undefined) return undefined;
    return attempt(errors, () => a.parse(raw, PREFIX + name));
  };
  const p = POD_ANNOTATIONS;
  const mode = read('mode', p.mode);
  const mountPath = read('mount-path', p['mount-path']);
  const containers = read('containers', p.containers);

  const agentSettings: AgentSettingRequest[] = [];
  for (const [name, a] of Object.entries(POD_ANNOTATIONS) as [PodAnnotationName, Annotation<unknown>][]) {
    const value = podValues.get(name);
    if (a.env === undefined || value === undefined) continue;
    if (attempt(errors, () => a.parse(value, PREFIX + name)) !== undefined)
      agentSettings.push({ env: a.env, value, annotation: PREFIX + name });
  }

  const references: ParsedReference[] = [];
  const secrets = parseSecretFiles(fileValues, defaults, errors, references);
  if (secrets.length === 0 && fileValues.size === 0)
    errors.push(
      new ConfigError(
        `${PREFIX}inject`,
        'is "true" but no secret is named',
        'add an annotation secret-agent.io/secret-<file>: <reference>',
      ),
    );

  const allContainers = [...pod.spec.containers, ...(pod.spec.initContainers ?? [])];
  for (const taken of [AGENT_CONTAINER, AGENT_INIT_CONTAINER])
    if (allContainers.some((c) => c.name === taken))
      errors.push(
        new ConfigError(
          `${PREFIX}inject`,
          `the pod already has a container named ${quote(taken)}`,
          'rename that container; the webhook adds it',
        ),
      );
  if (containers) {
    const unknown = containers.filter((n) => !allContainers.some((c) => c.name === n));
    if (unknown.length)
      errors.push(
        new ConfigError(
          `${PREFIX}containers`,
          `names ${unknown.map(quote).join(', ')}, which the pod does not have`,
          `use names from: ${allContainers.map((c) => c.name).join(', ')}`,
        ),
      );
  }
  const selected = containers ? allContainers.filter((c) => containers.includes(c.name)) : allContainers;
  if (mountPath) {
    for (const c of selected) {
      const clash = (c.volumeMounts ?? []).find(
        (m) => typeof m.mountPath === 'string' && overlaps(m.mountPath, mountPath),
      );
      if (clash)
        errors.push(
          new ConfigError(
            `${PREFIX}mount-path`,
            `${quote(mountPath)} overlaps the mount ${quote(String(clash.mountPath))} of container ${quote(c.name)}`,
            'choose another mount path, e.g. /var/run/secret-agent',
          ),
        );
    }
  }

  const usesExec = references.some((r) => r.ref.provider === 'exec');
  const agentContainer = { mountPath, rotationCommand: podValues.has('rotation-command') };
  errors.push(...checkAgentContainer(agentContainer, defaults.allowRotationCommand, errors));

  const exitWith = agentSettings.findIndex((s) => s.env === 'EXIT_WITH_PROCESS');
  const completion = runToCompletion(
    pod,
    mode,
    podValues.has('mode'),
    defaults.nativeSidecars,
    exitWith >= 0,
  );
  if (completion.error) errors.push(completion.error);
  if (completion.dropExitWithProcess) agentSettings.splice(exitWith, 1);
  const effectiveMode = completion.mode;
  const sidecar = effectiveMode === 'sidecar' || effectiveMode === 'init+sidecar';
  const httpAddr = agentSettings.find((s) => s.env === 'AGENT_HTTP_ADDR');
  const addr = AGENT_SETTINGS.AGENT_HTTP_ADDR.parse(
    httpAddr?.value ?? AGENT_SETTINGS.AGENT_HTTP_ADDR.default ?? '0.0.0.0:8099',
    'AGENT_HTTP_ADDR',
  );
  if (sidecar) {
    if (!WILDCARD_HOSTS.has(addr.host))
      errors.push(
        new ConfigError(
          `${PREFIX}agent-http-addr`,
          `${quote(httpAddr!.value)} binds ${quote(addr.host)}, which the kubelet's probes cannot reach`,
          `bind all addresses, e.g. 0.0.0.0:${addr.port}`,
        ),
      );
    const portOwner = allContainers.find((c) =>
      (c.ports ?? []).some((port) => port.containerPort === addr.port),
    );
    if (portOwner)
      errors.push(
        new ConfigError(
          `${PREFIX}agent-http-addr`,
          `port ${addr.port} is also declared by container ${quote(portOwner.name)}`,
          'move the agent with secret-agent.io/agent-http-addr, e.g. 0.0.0.0:8199',
        ),
      );
    const nameOwner = allContainers.find((c) =>
      (c.ports ?? []).some((port) => port.name === AGENT_PORT_NAME),
    );
    if (nameOwner)
      errors.push(
        new ConfigError(
          `${PREFIX}inject`,
          `container ${quote(nameOwner.name)} declares a port named ${quote(AGENT_PORT_NAME)}, the name the agent's port takes (monitoring scrapes it by that name)`,
          'rename that port',
        ),
      );
  }

  const wantsSignal = agentSettings.some((s) => s.env === 'ROTATION_SIGNAL');
  if (wantsSignal && pod.spec.shareProcessNamespace === false)
    errors.push(
      new ConfigError(
        `${PREFIX}rotation-signal`,
        'needs a shared process namespace, but the pod sets shareProcessNamespace: false',
        'remove shareProcessNamespace: false, or use rotation-http-url / rotation-command instead',
      ),
    );
  const exitsWithApp = agentSettings.some((s) => s.env === 'EXIT_WITH_PROCESS');
  if (exitsWithApp && pod.spec.shareProcessNamespace === false)
    errors.push(
      new ConfigError(
        `${PREFIX}exit-with-process`,
        'needs a shared process namespace to see the app end, but the pod sets shareProcessNamespace: false',
        `remove shareProcessNamespace: false, or use ${PREFIX}mode: init`,
      ),
    );

  const fileAccess = planFileAccess({
    pod,
    mounting: selected,
    agentUser: read('agent-run-as-user', p['agent-run-as-user']),
    chosenModes: chosenModes(podValues.get('file-mode'), secrets),
    defaults,
  });
  errors.push(...fileAccess.errors);
  // A signal needs the app's uid (or CAP_KILL); shared by group, the agent runs as another.
  const signalWarning =
    wantsSignal && fileAccess.access.sharing === 'group'
      ? [
          `secret-agent: ${PREFIX}rotation-signal: the agent runs as uid ${fileAccess.access.runAsUser}, which the spec does not show to be the app's, and the kernel refuses a signal to another uid's process. Set securityContext.runAsUser on the containers that mount the secrets (the agent then runs as it), or use rotation-http-url.`,
        ]
      : [];
  const cpuLimit = read('agent-cpu-limit', p['agent-cpu-limit']) ?? defaults.resources.cpuLimit;
  const resources = {
    requests: {
      cpu: read('agent-cpu-request', p['agent-cpu-request']) ?? defaults.resources.cpuRequest,
      memory: read('agent-memory-request', p['agent-memory-request']) ?? defaults.resources.memoryRequest,
    },
    limits: {
      ...(cpuLimit ? { cpu: cpuLimit } : {}),
      memory: read('agent-memory-limit', p['agent-memory-limit']) ?? defaults.resources.memoryLimit,
    },
  };
  const volumeSizeLimit = read('volume-size-limit', p['volume-size-limit']) ?? defaults.volumeSizeLimit;
  const cluster = defaults.cluster;
  const vaultClientCertSecret = read('vault-client-cert-secret', p['vault-client-cert-secret']);
  const method = read('vault-auth-method', p['vault-auth-method']);
  const vaultNamespace = read('vault-namespace', p['vault-namespace']);
  const authNamespace = read('vault-auth-namespace', p['vault-auth-namespace']);
  const login = vaultLogin(
    { namespace, method, vaultNamespace, authNamespace, references },
    cluster,
    defaults.vaultPolicy,
  );
  errors.push(...login.errors);
  const providerEnv = [
    ['AWS_REGION', read('aws-region', p['aws-region']) ?? cluster.awsRegion],
    ['GCP_PROJECT', read('gcp-project', p['gcp-project']) ?? cluster.gcpProject],
    ['VAULT_ADDR', cluster.vaultAddr],
    ['VAULT_CACERT_BYTES', cluster.vaultCaCert],
    ['VAULT_TLS_SERVER_NAME', cluster.vaultTlsServerName],
    ['VAULT_NAMESPACE', login.env.VAULT_NAMESPACE],
    ['VAULT_AUTH_NAMESPACE', login.env.VAULT_AUTH_NAMESPACE],
    ['VAULT_AUTH_METHOD', login.env.VAULT_AUTH_METHOD],
    ['VAULT_ROLE', read('vault-role', p['vault-role']) ?? cluster.vaultRole],
    ['VAULT_AUTH_MOUNT', login.env.VAULT_AUTH_MOUNT],
    ...(vaultClientCertSecret !== undefined
      ? [
          ['VAULT_CLIENT_CERT', `${VAULT_CLIENT_CERT_DIR}/tls.crt`],
          ['VAULT_CLIENT_KEY', `${VAULT_CLIENT_CERT_DIR}/tls.key`],
        ]
      : []),
    ['VAULT_AWS_REGION', cluster.vaultAwsRegion],
    ['VAULT_AWS_STS_ENDPOINT', cluster.vaultAwsStsEndpoint],
    ['VAULT_AWS_IAM_SERVER_ID', cluster.vaultAwsIamServerId],
    ['VAULT_GCP_SERVICE_ACCOUNT', read('vault-gcp-service-account', p['vault-gcp-service-account'])],
    [
      'VAULT_REVOKE_ON_SHUTDOWN',
      read('vault-revoke-on-shutdown', p['vault-revoke-on-shutdown']) ?? cluster.vaultRevokeOnShutdown,
    ],
  ]
    .filter((e): e is [string, string] => e[1] !== undefined)
    .map(([name, value]) => ({ name, value }));

  // EKS's identity webhook may have wired the app but not our containers: the agent inherits it.
  const identity = inheritCloudIdentity(pod);
  const own = new Set(providerEnv.map((e) => e.name));
  providerEnv.push(...identity.env.filter((e) => !own.has(e.name)));
  checkProviders(references, podValues, providerEnv, pod, errors);
  const risks = riskWarnings(podValues, fileValues, sidecar);

  if (errors.length > 0) throw new ConfigErrors(errors);
  return {
    mode: effectiveMode!,
    secrets,
    mountPath: mountPath!,
    ...(containers ? { containers } : {}),
    agentSettings,
    httpPort: addr.port,
    resources,
    fileAccess: fileAccess.access,
    volumeSizeLimit,
    providerEnv,
    identityMounts: identity.volumeMounts,
    ...(usesExec && defaults.execHelpers ? { execHelpers: defaults.execHelpers } : {}),
    ...(vaultClientCertSecret !== undefined ? { vaultClientCertSecret } : {}),
    shareProcessNamespace: wantsSignal || exitsWithApp,
    warnings: [
      ...completion.warnings,
      ...fileAccess.warnings,
      ...signalWarning,
      ...risks,
      ...identity.warnings,
    ],
  };
}

interface ParsedReference {
  /** The `secret-agent.io/secret-<file>` key it came from. */
  readonly annotation: string;
  readonly ref: SecretReference;
}

/**
 * What each provider needs that a reference may not carry. Without it the agent fails in the pod, after
 * it exists; refused here, the user learns it from `kubectl apply` (or the ReplicaSet's events).
 */
function checkProviders(
  references: readonly ParsedReference[],
  podValues: ReadonlyMap<PodAnnotationName, string>,
  providerEnv: readonly { readonly name: string; readonly value: string }[],
  pod: PodShape,
  errors: ConfigError[],
): void {
  const provided = new Set(providerEnv.map((e) => e.name));
  const envValue = (name: string) => providerEnv.find((e) => e.name === name)?.value;
  const names = (refs: readonly ParsedReference[]) => refs.map((r) => r.annotation).join(', ');
  // An annotation that is set but invalid has its own error already.
  const lacks = (annotation: PodAnnotationName, env: string) =>
    !podValues.has(annotation) && !provided.has(env);
  const awsByName = references.filter((r) => r.ref.provider === 'aws' && r.ref.region === undefined);
  if (awsByName.length > 0 && lacks('aws-region', 'AWS_REGION'))
    errors.push(
      new ConfigError(
        `${PREFIX}aws-region`,
        `is not set and the webhook has no AGENT_AWS_REGION default, so ${names(awsByName)} (aws:NAME, which has no region) cannot be fetched`,
        `set ${PREFIX}aws-region to the secrets' region, e.g. eu-west-1, or reference them by ARN (an ARN carries its region); a cluster admin can set AGENT_AWS_REGION on the webhook for every pod`,
      ),
    );
  const gcpShort = references.filter((r) => r.ref.provider === 'gcp' && r.ref.project === undefined);
  if (gcpShort.length > 0 && lacks('gcp-project', 'GCP_PROJECT'))
    errors.push(
      new ConfigError(
        `${PREFIX}gcp-project`,
        `is not set and the webhook has no AGENT_GCP_PROJECT default, so ${names(gcpShort)} (gcp:SECRET, which has no project) cannot be fetched`,
        `set ${PREFIX}gcp-project to the project id, e.g. my-project, or write the references as projects/PROJECT/secrets/SECRET; a cluster admin can set AGENT_GCP_PROJECT on the webhook for every pod`,
      ),
    );
  const vault = references.filter((r) => r.ref.provider === 'vault');
  const certSecret = `${PREFIX}vault-client-cert-secret`;
  const vaultAddr = envValue('VAULT_ADDR');
  if (
    podValues.has('vault-client-cert-secret') &&
    vaultAddr !== undefined &&
    !vaultAddr.startsWith('https://')
  )
    errors.push(
      new ConfigError(
        certSecret,
        'is set, but the cluster’s AGENT_VAULT_ADDR is not https://, so no client certificate is ever sent',
        `remove ${certSecret}, or ask the cluster admin for Vault’s https:// address`,
      ),
    );
  if (vault.length === 0) return;
  // The agent logs in with what the pod has: an address, the method's role and identity
  // (agent/providers/vault/config.ts). An annotation set but invalid has its own error already.
  if (!provided.has('VAULT_ADDR'))
    errors.push(
      new ConfigError(
        vault[0]!.annotation,
        `${vault.length > 1 ? `this and ${vault.length - 1} more reference Vault` : 'references Vault'}, but the webhook has no Vault address (AGENT_VAULT_ADDR is not set), so the agent would try https://127.0.0.1:8200`,
        'ask the cluster admin to set AGENT_VAULT_ADDR on the webhook (docs/install/vault.md); a pod cannot choose the Vault address',
      ),
    );
  if (podValues.has('vault-auth-method') && !provided.has('VAULT_AUTH_METHOD')) return;
  const method = envValue('VAULT_AUTH_METHOD') ?? 'kubernetes';
  if ((method === 'kubernetes' || method === 'gcp') && lacks('vault-role', 'VAULT_ROLE'))
    errors.push(
      new ConfigError(
        `${PREFIX}vault-role`,
        `is not set and the webhook has no AGENT_VAULT_ROLE default, but ${names(vault)} read from Vault, where the agent logs in with ${method} auth, which needs a role`,
        `set ${PREFIX}vault-role to the Vault role bound to this pod's ${method === 'gcp' ? 'Google service account' : 'service account'} (docs/install/vault.md)`,
      ),
    );
  if ((method === 'kubernetes' || method === 'jwt') && pod.spec.automountServiceAccountToken === false)
    errors.push(
      new ConfigError(
        vault[0]!.annotation,
        `references Vault, but the pod sets automountServiceAccountToken: false, so the agent has no service-account token to log in with (${method} auth)`,
        `remove automountServiceAccountToken: false from the pod spec (or set it to true), or choose another ${PREFIX}vault-auth-method`,
      ),
    );
  if (method === 'cert' && !provided.has('VAULT_CLIENT_CERT'))
    errors.push(
      new ConfigError(
        `${PREFIX}vault-auth-method`,
        `is cert, but ${certSecret} is not set, so the agent has no certificate to log in with`,
        `set ${certSecret} to a kubernetes.io/tls Secret (e.g. cert-manager’s) whose certificate a Vault cert role trusts`,
      ),
    );
}

/** A refresh interval under this is allowed, with a warning: every check is a call to the backend. */
const SHORT_REFRESH_MS = 30_000;

/** What is allowed but risky: told to the user as AdmissionReview warnings (kubectl prints them). */
function riskWarnings(
  podValues: ReadonlyMap<PodAnnotationName, string>,
  fileValues: ReadonlyMap<string, ReadonlyMap<FileAnnotationName, string>>,
  sidecar: boolean,
): string[] {
  const modes: [string, string | undefined][] = [[`${PREFIX}file-mode`, podValues.get('file-mode')]];
  const intervals: [string, string | undefined][] = [
    [`${PREFIX}refresh-interval`, podValues.get('refresh-interval')],
  ];
  for (const [file, values] of [...fileValues].sort(([a], [b]) => a.localeCompare(b))) {
    modes.push([`${PREFIX}file-mode-${file}`, values.get('file-mode')]);
    intervals.push([`${PREFIX}refresh-interval-${file}`, values.get('refresh-interval')]);
  }
  const warnings: string[] = [];
  for (const [key, text] of modes) {
    const mode = text === undefined ? undefined : valid(() => SECRET_SETTINGS.MODE.parse(text, key));
    if (mode !== undefined && (mode & 0o004) !== 0)
      warnings.push(
        `secret-agent: ${key} is ${text}: the file is readable by every user in the containers that mount the secrets, not only by the app's. Leave the mode unset: the webhook picks 0400 (the agent runs as the app's uid) or 0440 (shared through a group every such container holds).`,
      );
  }
  if (sidecar)
    for (const [key, text] of intervals) {
      const ms =
        text === undefined ? undefined : valid(() => SECRET_SETTINGS.REFRESH_INTERVAL.parse(text, key));
      if (ms !== undefined && ms < SHORT_REFRESH_MS)
        warnings.push(
          `secret-agent: ${key} is ${text}: the sidecar asks the backend for each secret that often, which costs API calls and may hit rate limits. 30s or more is usually enough.`,
        );
    }
  return warnings;
}

/** The parsed value, or undefined when invalid (that annotation's error is reported elsewhere). */
function valid<T>(parse: () => T): T | undefined {
  try {
    return parse();
  } catch (e) {
    if (e instanceof ConfigError) return undefined;
    throw e;
  }
}

/**
 * A classic sidecar is a plain container: when a run-to-completion pod's app ends (a Job's),
 * nothing stops it, and the pod never completes. Native sidecars are stopped by the kubelet. So on
 * a cluster without them such a pod gets a sidecar only if it says which process to exit with
 * (exit-with-process); the default mode falls back to init, told by a warning; a sidecar asked for
 * by name is refused. exit-with-process is dropped (with a warning) wherever no classic sidecar
 * runs: a native sidecar that exits on its own would only be restarted.
 */
function runToCompletion(
  pod: PodShape,
  mode: InjectionMode | undefined,
  modeChosen: boolean,
  nativeSidecars: boolean,
  exitWithProcess: boolean,
): { mode: InjectionMode | undefined; warnings: string[]; error?: ConfigError; dropExitWithProcess?: true } {
  const policy = pod.spec.restartPolicy;
  const completes = policy === 'Never' || policy === 'OnFailure';
  const classicSidecar = !nativeSidecars && (mode === 'sidecar' || mode === 'init+sidecar');
  if (exitWithProcess && !(classicSidecar && completes)) {
    const why = nativeSidecars
      ? 'the kubelet stops native sidecars when the app ends'
      : mode === 'init'
        ? 'mode init runs no sidecar'
        : `the pod does not run to completion (restartPolicy ${typeof policy === 'string' ? policy : 'Always'})`;
    return {
      mode,
      warnings: [`secret-agent: ${PREFIX}exit-with-process is ignored: ${why}.`],
      dropExitWithProcess: true,
    };
  }
  if (!classicSidecar || !completes || exitWithProcess) return { mode, warnings: [] };
  if (modeChosen)
    return {
      mode,
      warnings: [],
      error: new ConfigError(
        `${PREFIX}mode`,
        `${mode} runs a sidecar, which would keep this pod (restartPolicy ${policy}) from ever completing: the cluster has no native sidecars to stop it`,
        `set ${PREFIX}exit-with-process to the app’s process name (the sidecar then exits with it), or use ${PREFIX}mode: init`,
      ),
    };
  return {
    mode: 'init',
    warnings: [
      `secret-agent: this pod runs to completion (restartPolicy ${policy}) on a cluster without native sidecars, so its secrets are written once, by an init container. To keep them fresh, set ${PREFIX}exit-with-process to the app’s process name.`,
    ],
  };
}

function parseSecretFiles(
  fileValues: ReadonlyMap<string, ReadonlyMap<FileAnnotationName, string>>,
  defaults: Pick<InjectionDefaults, 'allowFileReferences' | 'execHelpers'>,
  errors: ConfigError[],
  references: ParsedReference[],
): SecretFileRequest[] {
  const secrets: SecretFileRequest[] = [];
  const templates: CompiledTemplate[] = [];
  for (const file of [...fileValues.keys()].sort()) {
    const values = fileValues.get(file)!;
    const key = (name: FileAnnotationName) => `${PREFIX}${name}-${file}`;
    const ref = values.get('secret');
    if (ref === undefined) {
      for (const name of values.keys())
        errors.push(
          new ConfigError(
            key(name),
            `configures file ${quote(file)}, but ${key('secret')} is not set`,
            `add ${key('secret')}: <reference>, or remove this annotation`,
          ),
        );
      continue;
    }
    const get = (name: FileAnnotationName): unknown => {
      const raw = values.get(name);
      return raw === undefined
        ? undefined
        : attempt(errors, () => FILE_ANNOTATIONS[name].parse(raw, key(name)));
    };
    const okRef = get('secret') as SecretReference | undefined;
    if (okRef?.provider === 'file' && !defaults.allowFileReferences) {
      errors.push(
        new ConfigError(
          key('secret'),
          'file: references are turned off on this cluster (they read files inside the agent container)',
          'reference the secret in AWS, GCP or Vault; file: is for local runs (webhook setting ALLOW_FILE_REFERENCES)',
        ),
      );
      continue;
    }
    if (okRef?.provider === 'exec' && !defaults.execHelpers) {
      errors.push(
        new ConfigError(
          key('secret'),
          'exec: references are turned off on this cluster (they run a helper program in the agent container)',
          'reference the secret in AWS, GCP or Vault, or ask the cluster admin to allow exec: references (webhook settings ALLOW_EXEC_REFERENCES and EXEC_HELPERS_VOLUME, docs/exec-helpers.md)',
        ),
      );
      continue;
    }
    const template = get('template') as CompiledTemplate | undefined;
    const chosenFormat = get('format') as SecretFormat | undefined;
    const format = values.has('template') ? 'template' : (chosenFormat ?? 'raw');
    if (values.has('template') && chosenFormat !== undefined && chosenFormat !== 'template') {
      errors.push(
        new ConfigError(
          key('format'),
          `is ${quote(chosenFormat)}, but ${key('template')} makes the file a template`,
          `remove ${key('format')}, or remove ${key('template')}`,
        ),
      );
      continue;
    }
    if (chosenFormat === 'template' && !values.has('template')) {
      errors.push(
        new ConfigError(
          key('format'),
          `is "template", but ${key('template')} is not set`,
          `add ${key('template')} with the file's text, e.g. postgres://{{username}}:{{password}}@db:5432/app`,
        ),
      );
      continue;
    }
    if (values.has('template') && template === undefined) continue;
    if (template) templates.push(template);
    const path = values.has('path') ? (get('path') as string | undefined) : file;
    const mode = get('file-mode') as string | undefined;
    const refreshInterval = get('refresh-interval') as string | undefined;
    if (path === '' && format !== 'split') {
      errors.push(
        new ConfigError(
          key('path'),
          '"." (the top level) is only for format split',
          `name a file, e.g. ${file}`,
        ),
      );
      continue;
    }
    if (okRef === undefined || path === undefined) continue;
    if (
      (values.has('file-mode') && mode === undefined) ||
      (values.has('refresh-interval') && refreshInterval === undefined)
    )
      continue;
    references.push({ annotation: key('secret'), ref: okRef });
    secrets.push({
      file,
      annotation: key('secret'),
      ref,
      provider: okRef.provider,
      path,
      format,
      ...(mode !== undefined ? { mode } : {}),
      ...(refreshInterval !== undefined ? { refreshInterval } : {}),
      ...(template ? { template: template.text } : {}),
    });
  }
  // A template reads other secrets by their file name: every name it uses must be a file here.
  const files = [...fileValues.keys()].sort();
  for (const template of templates)
    errors.push(
      ...checkSecretNames(
        template,
        files,
        () => `use the <file> part of one of this pod's ${PREFIX}secret-<file> annotations after secrets.`,
      ),
    );
  const conflict = findPathConflict(secrets.filter((s) => s.path !== '').map((s) => s.path));
  if (conflict) {
    const [first, second] = conflict;
    const holders = (path: string) => secrets.filter((s) => s.path === path).map((s) => s.annotation);
    const culprit = first === second ? holders(second)[1]! : holders(second)[0]!;
    // The path annotation is what to change, when the file has one.
    const culpritFile = culprit.slice(`${PREFIX}secret-`.length);
    errors.push(
      new ConfigError(
        fileValues.get(culpritFile)?.has('path') ? `${PREFIX}path-${culpritFile}` : culprit,
        first === second
          ? `writes ${quote(first)}, which ${holders(first)[0]} writes too`
          : `writes ${quote(second)}, which needs ${quote(first)} as a directory, but ${holders(first)[0]} writes a file there`,
        'give every file its own path (set secret-agent.io/path-<file>)',
      ),
    );
  }
  return secrets;
}

function attempt<T>(errors: ConfigError[], parse: () => T): T | undefined {
  try {
    return parse();
  } catch (e) {
    if (e instanceof ConfigError) {
      errors.push(e);
      return undefined;
    }
    throw e;
  }
}

function overlaps(a: string, b: string): boolean {
  const norm = (p: string) => (p.length > 1 ? p.replace(/\/+$/, '') : p);
  const [x, y] = [norm(a), norm(b)];
  return x === y || x.startsWith(`${y}/`) || y.startsWith(`${x}/`) || x === '/' || y === '/';
}

/**
 * The known annotation within two edits of a mistyped one, for the error's fix: pod-wide
 * (`moed` → `mode`) or per-file with the file name kept (`secrets-db` → `secret-db`).
 */
function closestName(name: string): string | undefined {
  let best: { name: string; distance: number } | undefined;
  const consider = (candidate: string, d: number) => {
    if (d <= 2 && (!best || d < best.distance)) best = { name: candidate, distance: d };
  };
  for (const known of Object.keys(POD_ANNOTATIONS)) consider(known, editDistance(name, known));
  // Every `-` may end the mistyped setting: `file-mod-db` is `file-mod` + `db`.
  for (let dash = name.indexOf('-'); dash > 0; dash = name.indexOf('-', dash + 1)) {
    const [setting, file] = [name.slice(0, dash), name.slice(dash + 1)];
    if (!FILE_NAME.test(file)) continue;
    for (const known of Object.keys(FILE_ANNOTATIONS))
      consider(`${known}-${file}`, editDistance(setting, known));
  }
  return best?.name;
}

function editDistance(a: string, b: string): number {
  if (Math.abs(a.length - b.length) > 2) return 3;
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++)
      row[j] = Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    prev = row;
  }
  return prev[b.length]!;
}
