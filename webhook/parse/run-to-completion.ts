import { ConfigError } from '../../agent/contract/errors.ts';
import { PREFIX } from '../annotations/annotation.ts';
import type { InjectionMode } from '../annotations/values.ts';
import type { AgentSettingRequest } from '../injection-request.ts';
import type { PodShape } from '../pod-shape.ts';

/**
 * A classic sidecar is a plain container: when a run-to-completion pod's app ends (a Job's),
 * nothing stops it, and the pod never completes. Native sidecars are stopped by the kubelet. So on
 * a cluster without them such a pod gets a sidecar only if it says which process to exit with
 * (exit-with-process); the default mode falls back to init, told by a warning; a sidecar asked for
 * by name is refused. exit-with-process is dropped (with a warning) wherever no classic sidecar
 * runs: a native sidecar that exits on its own would only be restarted.
 */

export interface RunToCompletion {
  /** The mode the pod gets. */
  readonly mode: InjectionMode | undefined;
  /** The agent settings it gets: without EXIT_WITH_PROCESS where that is dropped. */
  readonly agentSettings: AgentSettingRequest[];
  readonly warnings: readonly string[];
  readonly error?: ConfigError;
}

/** `mode` as parsed (undefined when invalid); `modeChosen`: the pod set it. */
export function runToCompletion(
  pod: PodShape,
  mode: InjectionMode | undefined,
  modeChosen: boolean,
  nativeSidecars: boolean,
  agentSettings: AgentSettingRequest[],
): RunToCompletion {
  const exitWithProcess = agentSettings.some((s) => s.env === 'EXIT_WITH_PROCESS');
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
      agentSettings: agentSettings.filter((s) => s.env !== 'EXIT_WITH_PROCESS'),
      warnings: [`secret-agent: ${PREFIX}exit-with-process is ignored: ${why}.`],
    };
  }
  if (!classicSidecar || !completes || exitWithProcess) return { mode, agentSettings, warnings: [] };
  if (modeChosen)
    return {
      mode,
      agentSettings,
      warnings: [],
      error: new ConfigError(
        `${PREFIX}mode`,
        `${mode} runs a sidecar, which would keep this pod (restartPolicy ${policy}) from ever completing: the cluster has no native sidecars to stop it`,
        `set ${PREFIX}exit-with-process to the app’s process name (the sidecar then exits with it), or use ${PREFIX}mode: init`,
      ),
    };
  return {
    mode: 'init',
    agentSettings,
    warnings: [
      `secret-agent: this pod runs to completion (restartPolicy ${policy}) on a cluster without native sidecars, so its secrets are written once, by an init container. To keep them fresh, set ${PREFIX}exit-with-process to the app’s process name.`,
    ],
  };
}
