import { ConfigError, quote } from '../../agent/contract/errors.ts';
import { PREFIX } from '../annotations/annotation.ts';
import { AGENT_CONTAINER, AGENT_INIT_CONTAINER, OWN_VOLUME_PREFIX } from '../injected-names.ts';
import { podContainers, type ContainerShape, type PodShape } from '../pod-shape.ts';
import { mountsOverlap, occupiedPaths, type OccupiedPath } from './mount-overlap.ts';

/**
 * The pod's own containers against what the webhook adds to them: no container takes an agent
 * container's name, no volume or mount takes the name of the webhook's volumes, `containers` names
 * containers the pod has, and the secrets volume's mount path overlaps nothing the runtime puts into
 * those that get it: their mounts, their block devices, their termination logs.
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
  errors.push(...ownVolumeNameErrors(pod));
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
  if (mountPath)
    for (const c of selected) {
      // The first clash of each kind: one problem per thing to move, not one per mount.
      const clashes = occupiedPaths(c).filter((p) => mountsOverlap(p.path, mountPath));
      for (const kind of ['termination log', 'mount', 'device'] as const) {
        const clash = clashes.find((p) => p.kind === kind);
        if (clash) errors.push(mountPathClash(mountPath, c.name, clash));
      }
    }
  return { mounting: selected, errors };
}

/**
 * A container of the pod that mounts one of the webhook's volumes by name would get it whatever
 * `containers` says, read-write, and could write what the agent reads or runs (its helpers, the
 * files); a volume of the pod's by that name would be one the webhook does not control. Any name
 * starting with OWN_VOLUME_PREFIX is the webhook's.
 */
function ownVolumeNameErrors(pod: PodShape): ConfigError[] {
  const errors: ConfigError[] = [];
  const own = (name: unknown): name is string =>
    typeof name === 'string' && name.startsWith(OWN_VOLUME_PREFIX);
  (pod.spec.volumes ?? []).forEach((v, i) => {
    if (own(v.name))
      errors.push(
        new ConfigError(
          `${PREFIX}inject`,
          `the pod’s volume spec.volumes[${i}] is named ${quote(v.name)}, a name of the webhook’s volumes (they start with ${quote(OWN_VOLUME_PREFIX)})`,
          `rename the volume and its mounts; the webhook adds its own ${quote(`${OWN_VOLUME_PREFIX}-secrets`)}`,
        ),
      );
  });
  for (const field of ['initContainers', 'containers'] as const)
    (pod.spec[field] ?? []).forEach((c, i) =>
      (c.volumeMounts ?? []).forEach((m, j) => {
        if (own(m.name))
          errors.push(
            new ConfigError(
              `${PREFIX}inject`,
              `container ${quote(c.name)} mounts ${quote(m.name)} (spec.${field}[${i}].volumeMounts[${j}]), a volume of the webhook’s, which it would get read-write whatever ${PREFIX}containers says`,
              `remove that mount: the containers ${PREFIX}containers selects (all by default) get the secrets read-only at ${PREFIX}mount-path`,
            ),
          );
      }),
    );
  return errors;
}

/** `secret-agent.io/mount-path` at, above or below what container `name` has at `clash`. */
function mountPathClash(mountPath: string, name: string, clash: OccupiedPath): ConfigError {
  const field = `${PREFIX}mount-path`;
  switch (clash.kind) {
    case 'termination log':
      return new ConfigError(
        field,
        `${quote(mountPath)} overlaps ${quote(clash.path)}, the terminationMessagePath of container ${quote(name)}, where the kubelet mounts its termination log: the read-only volume would stop the container from starting`,
        'choose another mount path, e.g. /var/run/secret-agent, or move terminationMessagePath out of it',
      );
    case 'device':
      return new ConfigError(
        field,
        `${quote(mountPath)} overlaps ${quote(clash.path)}, where container ${quote(name)} has a block device (${clash.field}): the runtime would create the device inside the read-only volume, or mount the volume over it`,
        'choose another mount path, e.g. /var/run/secret-agent, or move the devicePath out of it',
      );
    case 'mount':
      return new ConfigError(
        field,
        `${quote(mountPath)} overlaps the mount ${quote(clash.path)} of container ${quote(name)}`,
        'choose another mount path, e.g. /var/run/secret-agent',
      );
  }
}
