import { AGENT_SETTINGS } from '../../agent/contract/agent-settings.ts';
import { ConfigError, quote } from '../../agent/contract/errors.ts';
import { PREFIX } from '../annotations/annotation.ts';
import type { AgentSettingRequest } from '../injection-request.ts';
import { AGENT_PORT_NAME } from '../injected-names.ts';
import { podContainers, type PodShape } from '../pod-shape.ts';

const WILDCARD_HOSTS = new Set(['0.0.0.0', '::', '']);

/**
 * The port the sidecar serves its probes and /metrics on (agent-http-addr, else the agent's default),
 * and, where a sidecar runs, the checks that it can: the kubelet reaches the address, and no container
 * of the pod declares that port or the name the agent's port takes.
 */
export function agentHttpPort(
  pod: PodShape,
  agentSettings: readonly AgentSettingRequest[],
  sidecar: boolean,
): { readonly port: number; readonly errors: readonly ConfigError[] } {
  const errors: ConfigError[] = [];
  const allContainers = podContainers(pod);
  // Only a value that parsed is among the agent settings.
  const httpAddr = agentSettings.find((s) => s.env === 'AGENT_HTTP_ADDR');
  const addr = AGENT_SETTINGS.AGENT_HTTP_ADDR.parse(
    httpAddr?.value ?? AGENT_SETTINGS.AGENT_HTTP_ADDR.default ?? '0.0.0.0:8099',
    'AGENT_HTTP_ADDR',
  );
  if (sidecar) {
    if (!WILDCARD_HOSTS.has(addr.host))
      errors.push(
        new ConfigError(
          `${PREFIX}agent-http-addr`,
          `${quote(httpAddr!.value)} binds ${quote(addr.host)}, which the kubelet's probes cannot reach`,
          `bind all addresses, e.g. 0.0.0.0:${addr.port}`,
        ),
      );
    const portOwner = allContainers.find((c) =>
      (c.ports ?? []).some((port) => port.containerPort === addr.port),
    );
    if (portOwner)
      errors.push(
        new ConfigError(
          `${PREFIX}agent-http-addr`,
          `port ${addr.port} is also declared by container ${quote(portOwner.name)}`,
          'move the agent with secret-agent.io/agent-http-addr, e.g. 0.0.0.0:8199',
        ),
      );
    const nameOwner = allContainers.find((c) =>
      (c.ports ?? []).some((port) => port.name === AGENT_PORT_NAME),
    );
    if (nameOwner)
      errors.push(
        new ConfigError(
          `${PREFIX}inject`,
          `container ${quote(nameOwner.name)} declares a port named ${quote(AGENT_PORT_NAME)}, the name the agent's port takes (monitoring scrapes it by that name)`,
          'rename that port',
        ),
      );
  }
  return { port: addr.port, errors };
}
