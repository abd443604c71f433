import { smallestGuardedLimitMiB, quantityValue } from '../agent-sizing.ts';
import { PREFIX } from '../annotations/annotation.ts';
import type { InjectionDefaults } from '../config/injection-defaults.ts';
import type { InjectionRequest } from '../injection-request.ts';
import type { PodValueReader } from './read-annotations.ts';

/** What the agent container and the secrets volume may use: the pod's annotations over the cluster's defaults. */
export function agentResources(
  read: PodValueReader,
  defaults: Pick<InjectionDefaults, 'resources' | 'volumeSizeLimit'>,
): Pick<InjectionRequest, 'resources' | 'volumeSizeLimit'> & { readonly warnings: readonly string[] } {
  const cpuLimit = read('agent-cpu-limit') ?? defaults.resources.cpuLimit;
  const resources = {
    requests: {
      cpu: read('agent-cpu-request') ?? defaults.resources.cpuRequest,
      memory: read('agent-memory-request') ?? defaults.resources.memoryRequest,
    },
    limits: {
      ...(cpuLimit ? { cpu: cpuLimit } : {}),
      memory: read('agent-memory-limit') ?? defaults.resources.memoryLimit,
    },
  };
  const volumeSizeLimit = read('volume-size-limit') ?? defaults.volumeSizeLimit;
  return {
    resources,
    volumeSizeLimit,
    warnings: smallLimitWarnings(read, resources.limits.memory, volumeSizeLimit),
  };
}

/**
 * A pod may set a memory limit too small for the V8 heap cap to protect it (agent-sizing.ts): allowed,
 * since a pod with few small secrets may run in less, but said, since the agent would then be
 * OOM-killed without a word, or slowed by the kernel dropping Node's own pages, instead of ending with
 * V8's "heap out of memory". Only for what the pod set: the cluster's defaults are the operator's choice.
 */
function smallLimitWarnings(read: PodValueReader, memoryLimit: string, volumeSizeLimit: string): string[] {
  if (read('agent-memory-limit') === undefined && read('volume-size-limit') === undefined) return [];
  const smallest = smallestGuardedLimitMiB(volumeSizeLimit);
  const limitMiB = quantityValue(memoryLimit) / 1048576;
  if (!(limitMiB < smallest)) return [];
  return [
    `secret-agent: ${PREFIX}agent-memory-limit is ${memoryLimit} and the secrets volume ${volumeSizeLimit}: below ${smallest}Mi the agent's heap cap cannot keep it under its limit, so under load it may be OOM-killed without a message in its log. Set at least ${smallest}Mi, or leave it unset.`,
  ];
}
