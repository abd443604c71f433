import type { InjectionDefaults } from '../config/injection-defaults.ts';
import type { InjectionRequest } from '../injection-request.ts';
import type { PodValueReader } from './read-annotations.ts';

/** What the agent container and the secrets volume may use: the pod's annotations over the cluster's defaults. */
export function agentResources(
  read: PodValueReader,
  defaults: Pick<InjectionDefaults, 'resources' | 'volumeSizeLimit'>,
): Pick<InjectionRequest, 'resources' | 'volumeSizeLimit'> {
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
  return { resources, volumeSizeLimit };
}
