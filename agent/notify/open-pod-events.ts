import type { AgentConfig } from '../contract/agent-config.ts';
import { ConfigError, ConfigErrors } from '../contract/errors.ts';
import type { FileEntry } from '../format/render-files.ts';
import type { Logger } from '../log.ts';
import type { PodEventReason, PodEventRecorder } from './pod-events.ts';

/**
 * The pod's event recorder when KUBERNETES_EVENTS is on, else undefined. What it needs (an API
 * address, the pod's name and namespace) is checked here, at start-up, so a missing downward-API
 * variable shows before any fetch. Its module (and the HTTP client) loads only when it is on.
 */
export async function openPodEvents(
  config: AgentConfig,
  deps: {
    readonly log: Logger;
    readonly kubernetesApiUrl: string | undefined;
    readonly onOutcome?: (reason: PodEventReason, outcome: string) => void;
  },
): Promise<PodEventRecorder | undefined> {
  if (!config.events) return undefined;
  const errors: ConfigError[] = [];
  if (!deps.kubernetesApiUrl)
    errors.push(
      new ConfigError(
        'KUBERNETES_EVENTS',
        'is true but the agent does not run in a Kubernetes pod (KUBERNETES_SERVICE_HOST is not set)',
        'set KUBERNETES_EVENTS=false outside Kubernetes',
      ),
    );
  for (const [field, value, path] of [
    ['POD_NAME', config.pod.name, 'metadata.name'],
    ['POD_NAMESPACE', config.pod.namespace, 'metadata.namespace'],
  ] as const)
    if (!value)
      errors.push(
        new ConfigError(
          field,
          'is not set, and KUBERNETES_EVENTS needs it to name the pod the events are about',
          `set ${field} from the downward API (fieldRef ${path})`,
        ),
      );
  if (errors.length > 0) throw new ConfigErrors(errors);
  const { createPodEventRecorder } = await import('./pod-events.ts');
  const name = config.pod.name!;
  return createPodEventRecorder({
    apiUrl: deps.kubernetesApiUrl!,
    serviceAccountDir: config.serviceAccountDir,
    pod: {
      namespace: config.pod.namespace!,
      name,
      ...(config.pod.uid !== undefined ? { uid: config.pod.uid } : {}),
    },
    component: 'secret-agent',
    instance: `${name}/${config.mode === 'init' ? 'secret-agent-init' : 'secret-agent'}`,
    log: deps.log,
    // The app waits for the init container to exit: an API that does not answer costs it 2 s at most.
    ...(config.mode === 'init' ? { timing: { flushTimeoutMs: 2000 } } : {}),
    ...(deps.onOutcome ? { onOutcome: deps.onOutcome } : {}),
  });
}

/** SecretsDelivered's message: how many files and their names (at most 20; never a value). */
export function deliveredMessage(files: readonly FileEntry[]): string {
  const names = files.map((f) => f.path).sort();
  return `${names.length} files ready: ${names.slice(0, 20).join(', ')}${names.length > 20 ? ', …' : ''}`;
}
