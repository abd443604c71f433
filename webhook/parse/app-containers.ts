import { ConfigError, quote } from '../../agent/contract/errors.ts';
import { PREFIX } from '../annotations/annotation.ts';
import { AGENT_CONTAINER, AGENT_INIT_CONTAINER } from '../injected-names.ts';
import { podContainers, type ContainerShape, type PodShape } from '../pod-shape.ts';
import { mountsOverlap } from './mount-overlap.ts';

/**
 * The pod's own containers against what the webhook adds to them: no container takes an agent
 * container's name, `containers` names containers the pod has, and the secrets volume's mount path
 * overlaps none of the mounts of those that get it.
 */

export interface AppContainers {
  /** The containers and init containers that get the secrets volume: all of them unless `containers` says. */
  readonly mounting: readonly ContainerShape[];
  readonly errors: readonly ConfigError[];
}

/** `containers` and `mountPath` as parsed: undefined when unset or invalid (their own errors say so). */
export function checkAppContainers(
  pod: PodShape,
  containers: readonly string[] | undefined,
  mountPath: string | undefined,
): AppContainers {
  const errors: ConfigError[] = [];
  const allContainers = podContainers(pod);
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
        (m) => typeof m.mountPath === 'string' && mountsOverlap(m.mountPath, mountPath),
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
  return { mounting: selected, errors };
}
