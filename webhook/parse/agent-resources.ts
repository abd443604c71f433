import { quantityMiB, smallestGuardedLimitMiB } from '../agent-sizing.ts';
import { PREFIX } from '../annotations/annotation.ts';
import type { InjectionDefaults } from '../config/injection-defaults.ts';
import type { AgentResources, InjectionRequest } from '../injection-request.ts';
import type { PodValueReader } from './read-annotations.ts';

/** What the agent container and the secrets volume may use: the pod's annotations over the cluster's defaults. */
export function agentResources(
  read: PodValueReader,
  defaults: Pick<InjectionDefaults, 'resources' | 'volumeSizeLimit'>,
): Pick<InjectionRequest, 'resources' | 'volumeSizeLimit'> & {
  /** A small sidecar's: its own default memory request, the rest as the other agent containers'. */
  readonly smallResources: AgentResources;
  readonly warnings: readonly string[];
} {
  const cpuLimit = read('agent-cpu-limit') ?? defaults.resources.cpuLimit;
  const podMemoryLimit = read('agent-memory-limit');
  const podVolumeSizeLimit = read('volume-size-limit');
  const podMemoryRequest = read('agent-memory-request');
  const resources = {
    requests: {
      cpu: read('agent-cpu-request') ?? defaults.resources.cpuRequest,
      memory: podMemoryRequest ?? defaults.resources.memoryRequest,
    },
    limits: {
      ...(cpuLimit ? { cpu: cpuLimit } : {}),
      memory: podMemoryLimit ?? defaults.resources.memoryLimit,
    },
  };
  // Between refreshes only the resident stays; a run peaks as an init run does, within the same limit.
  const smallResources = {
    ...resources,
    requests: {
      ...resources.requests,
      memory: podMemoryRequest ?? defaults.resources.smallSidecarMemoryRequest,
    },
  };
  const volumeSizeLimit = podVolumeSizeLimit ?? defaults.volumeSizeLimit;
  const podSetEither = podMemoryLimit !== undefined || podVolumeSizeLimit !== undefined;
  return {
    resources,
    smallResources,
    volumeSizeLimit,
    warnings: podSetEither ? smallLimitWarnings(resources.limits.memory, volumeSizeLimit) : [],
  };
}

/**
 * A pod may set a memory limit too small for the V8 heap cap to protect it (agent-sizing.ts): allowed,
 * since a pod with few small secrets may run in less, but said, since the agent would then be
 * OOM-killed without a word, or slowed by the kernel dropping Node's own pages, instead of ending with
 * V8's "heap out of memory". Only for what the pod set: the cluster's defaults are the operator's choice.
 */
function smallLimitWarnings(memoryLimit: string, volumeSizeLimit: string): string[] {
  const smallest = smallestGuardedLimitMiB(volumeSizeLimit);
  const limitMiB = quantityMiB(memoryLimit);
  if (!(limitMiB < smallest)) return [];
  return [
    `secret-agent: ${PREFIX}agent-memory-limit is ${memoryLimit} and the secrets volume ${volumeSizeLimit}: below ${smallest}Mi the agent's heap cap cannot keep it under its limit, so under load it may be OOM-killed without a message in its log. Set at least ${smallest}Mi, or leave it unset.`,
  ];
}
