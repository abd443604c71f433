import { ConfigError, ConfigErrors } from '../contract/errors.ts';
import { createHttpRequestNotifier } from './http-request.ts';
import type { CreateNotifiers, Notifier } from './notifier.ts';
import { createRestartOwnerNotifier } from './restart-owner.ts';
import { createRunCommandNotifier } from './run-command.ts';
import { createSentinelFileNotifier } from './sentinel-file.ts';
import { createSignalProcessNotifier } from './signal-process.ts';

/**
 * The notifiers the sidecar settings ask for, in a fixed order (sentinel, signal, http, command,
 * restart).
 * Throws ConfigErrors when RESTART_ON_CHANGE cannot work in this pod (no API address, no pod name),
 * so the mistake shows at start-up and not at the first rotation.
 */
export const createNotifiers: CreateNotifiers = (settings, deps) => {
  const notifiers: Notifier[] = [];
  if (settings.sentinel) notifiers.push(createSentinelFileNotifier(settings.sentinel, deps));
  if (settings.signal) {
    notifiers.push(
      createSignalProcessNotifier(
        {
          signal: settings.signal.name,
          ...(settings.signal.process ? { process: settings.signal.process } : {}),
          ...(settings.signal.pidFile ? { pidFile: settings.signal.pidFile } : {}),
        },
        deps.log,
      ),
    );
  }
  if (settings.http) notifiers.push(createHttpRequestNotifier(settings.http, deps.log));
  if (settings.command) notifiers.push(createRunCommandNotifier({ command: settings.command }, deps.log));
  if (settings.restartOnChange) {
    const errors: ConfigError[] = [];
    if (!deps.kubernetesApiUrl) {
      errors.push(
        new ConfigError(
          'RESTART_ON_CHANGE',
          'is true but the agent does not run in a Kubernetes pod (KUBERNETES_SERVICE_HOST is not set)',
          'set RESTART_ON_CHANGE=false outside Kubernetes',
        ),
      );
    }
    if (!deps.pod.name) {
      errors.push(
        new ConfigError(
          'POD_NAME',
          'is not set, and RESTART_ON_CHANGE needs it to find the pod’s owner',
          'set POD_NAME from the downward API (fieldRef metadata.name)',
        ),
      );
    }
    if (errors.length > 0) throw new ConfigErrors(errors);
    notifiers.push(
      createRestartOwnerNotifier(
        { deleteBarePod: settings.deleteBarePod },
        { ...deps, kubernetesApiUrl: deps.kubernetesApiUrl!, podName: deps.pod.name! },
      ),
    );
  }
  return notifiers;
};
