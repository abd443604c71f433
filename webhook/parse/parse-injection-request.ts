import { ConfigErrors, type ConfigError } from '../../agent/contract/errors.ts';
import type { InjectionDefaults } from '../config/injection-defaults.ts';
import type { InjectionRequest } from '../injection-request.ts';
import { podContainers, type PodShape } from '../pod-shape.ts';
import { checkAgentContainer } from './agent-container-policy.ts';
import { agentHttpPort, withClusterHttpAddr } from './agent-http-port.ts';
import { agentResources } from './agent-resources.ts';
import { agentSettingRequests } from './agent-settings.ts';
import { checkAppContainers } from './app-containers.ts';
import { checkProcessSharing, signalWarnings } from './app-processes.ts';
import { planEnvContainers } from './env-containers.ts';
import { parseEnvVars } from './parse-env-vars.ts';
import { parseSecretFiles } from './parse-secret-files.ts';
import { chosenModes, planFileAccess } from './plan-file-access.ts';
import { providerEnv } from './provider-env.ts';
import { checkProviderPrerequisites } from './provider-prerequisites.ts';
import { podValueReader, readAnnotations } from './read-annotations.ts';
import { processPeekWarnings, riskWarnings } from './risk-warnings.ts';
import { runToCompletion } from './run-to-completion.ts';
import { chooseSidecarProcess } from './sidecar-process.ts';

/**
 * Turns a pod's `secret-agent.io/*` annotations into one validated InjectionRequest, or throws
 * ConfigErrors listing every problem, each naming the annotation and the fix. `namespace`: the pod's.
 * Each step is a module of this folder; every problem is collected, in this order, before any is
 * thrown, so a user fixes them all in one pass.
 */
export function parseInjectionRequest(
  pod: PodShape,
  defaults: InjectionDefaults,
  namespace: string,
): InjectionRequest {
  const errors: ConfigError[] = [];
  const values = readAnnotations(pod.metadata?.annotations ?? {}, errors);
  const read = podValueReader(values.pod, errors);
  const mode = read('mode');
  const mountPath = read('mount-path');
  const containers = read('containers');
  const chosenSettings = agentSettingRequests(values.pod, errors);
  const files = parseSecretFiles(values.files, defaults, errors, values.env.size);
  const env = parseEnvVars(values.env, files.secrets, defaults, errors);
  // A variable is a secret like a file's, written where the env wrapper reads it.
  const secrets = [...files.secrets, ...env.secrets];
  const references = [...files.references, ...env.references];

  const app = checkAppContainers(pod, containers, mountPath);
  errors.push(...app.errors);
  const agentContainer = { rotationCommand: values.pod.has('rotation-command') };
  errors.push(...checkAgentContainer(agentContainer, defaults.allowRotationCommand));
  const completion = runToCompletion(
    pod,
    mode,
    values.pod.has('mode'),
    defaults.nativeSidecars,
    chosenSettings,
  );
  if (completion.error) errors.push(completion.error);
  const sidecar = completion.mode === 'sidecar' || completion.mode === 'init+sidecar';
  const agentSettings = sidecar
    ? withClusterHttpAddr(completion.agentSettings, defaults.agentHttpAddr)
    : completion.agentSettings;
  const http = agentHttpPort(pod, agentSettings, sidecar);
  errors.push(...http.errors);
  const processes = checkProcessSharing(pod, agentSettings);
  errors.push(...processes.errors);

  const envContainers = planEnvContainers(
    {
      pod,
      names: env.secrets.map((s) => s.env!),
      containers,
      mode: completion.mode,
      nativeSidecars: defaults.nativeSidecars,
      agentSettings,
    },
    errors,
  );

  const fileAccess = planFileAccess({
    pod,
    mounting: app.mounting,
    agentUser: read('agent-run-as-user'),
    chosenModes: chosenModes(values.pod.get('file-mode'), secrets),
    defaults,
  });
  errors.push(...fileAccess.errors);
  const {
    resources,
    smallResources,
    volumeSizeLimit,
    warnings: resourceWarnings,
  } = agentResources(read, defaults);
  const providers = providerEnv(pod, namespace, read, references, defaults, errors);
  checkProviderPrerequisites(references, values.pod, providers.providerEnv, pod, errors);
  const sidecarProcess =
    completion.mode &&
    chooseSidecarProcess(
      {
        chosen: read('sidecar-process'),
        mode: completion.mode,
        agentSettings,
        secrets,
        providerEnv: providers.providerEnv,
        revokeChosen: values.pod.has('vault-revoke-on-shutdown'),
        smallResources,
      },
      defaults,
      errors,
    );

  if (errors.length > 0) throw new ConfigErrors(errors);
  const usesExec = references.some((r) => r.ref.provider === 'exec');
  return {
    mode: completion.mode!,
    secrets,
    mountPath: mountPath!,
    ...(containers ? { containers } : {}),
    agentSettings,
    httpPort: http.port,
    resources,
    ...(sidecarProcess ? { sidecarProcess } : {}),
    fileAccess: fileAccess.access,
    volumeSizeLimit,
    providerEnv: providers.providerEnv,
    identityMounts: providers.identityMounts,
    ...(usesExec && defaults.execHelpers ? { execHelpers: defaults.execHelpers } : {}),
    ...(providers.vaultClientCertSecret !== undefined
      ? { vaultClientCertSecret: providers.vaultClientCertSecret }
      : {}),
    ...(envContainers.envExec ? { envExec: envContainers.envExec } : {}),
    shareProcessNamespace: processes.share,
    warnings: [
      ...completion.warnings,
      ...fileAccess.warnings,
      ...signalWarnings(processes.signal, fileAccess.access),
      ...riskWarnings(values.pod, values.files, sidecar),
      ...processPeekWarnings({
        sharesProcesses:
          processes.share || pod.spec.shareProcessNamespace === true || pod.spec.hostPID === true,
        containers: podContainers(pod),
      }),
      ...resourceWarnings,
      ...providers.warnings,
      ...envContainers.warnings,
    ],
  };
}
