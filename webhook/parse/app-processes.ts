import { ConfigError } from '../../agent/contract/errors.ts';
import { PREFIX } from '../annotations/annotation.ts';
import type { AgentSettingRequest, FileAccess } from '../injection-request.ts';
import type { PodShape } from '../pod-shape.ts';

/**
 * What the agent needs of the app's processes: rotation-signal and exit-with-process see them through
 * a shared process namespace, refused where the pod turns it off; and a signal reaches only a process
 * of the agent's own uid.
 */

export interface ProcessSharing {
  /** The pod gets shareProcessNamespace: true. */
  readonly share: boolean;
  /** rotation-signal is set. */
  readonly signal: boolean;
  readonly errors: readonly ConfigError[];
}

export function checkProcessSharing(
  pod: PodShape,
  agentSettings: readonly AgentSettingRequest[],
): ProcessSharing {
  const errors: ConfigError[] = [];
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
  return { share: wantsSignal || exitsWithApp, signal: wantsSignal, errors };
}

/** A signal needs the app's uid (or CAP_KILL); shared by group, the agent runs as another: a warning. */
export function signalWarnings(signal: boolean, access: FileAccess): string[] {
  return signal && access.sharing === 'group'
    ? [
        `secret-agent: ${PREFIX}rotation-signal: the agent runs as uid ${access.runAsUser}, which the spec does not show to be the app's, and the kernel refuses a signal to another uid's process. Set securityContext.runAsUser on the containers that mount the secrets (the agent then runs as it), or use rotation-http-url.`,
      ]
    : [];
}
