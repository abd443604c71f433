import { AGENT_SETTINGS } from '../../agent/contract/agent-settings.ts';
import { ConfigError, quote } from '../../agent/contract/errors.ts';
import { PREFIX } from '../annotations/annotation.ts';
import { hostProblem } from '../config/agent-http-address.ts';
import type { AgentSettingRequest } from '../injection-request.ts';
import { AGENT_PORT_NAME } from '../injected-names.ts';
import { podContainers, type PodShape } from '../pod-shape.ts';

/**
 * A sidecar's settings with the cluster's AGENT_HTTP_ADDR where the pod names none and the cluster's is not
 * the agent's own default (rendered as the agent's env, like any setting a pod chooses).
 */
export function withClusterHttpAddr(
  agentSettings: readonly AgentSettingRequest[],
  clusterAddr: string,
): AgentSettingRequest[] {
  if (
    agentSettings.some((s) => s.env === 'AGENT_HTTP_ADDR') ||
    clusterAddr === AGENT_SETTINGS.AGENT_HTTP_ADDR.default
  )
    return [...agentSettings];
  return [
    ...agentSettings,
    { env: 'AGENT_HTTP_ADDR', value: clusterAddr, annotation: `${PREFIX}agent-http-addr` },
  ];
}

/**
 * The port the sidecar serves /healthz, /readyz and /metrics on (agent-http-addr, else the cluster's or
 * the agent's default), and, where a sidecar runs, the checks that it can: the postStart hook reaches the
 * address over the pod's loopback, and no container of the pod declares that port or the name the
 * agent's port takes.
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
  const text = httpAddr?.value ?? AGENT_SETTINGS.AGENT_HTTP_ADDR.default!;
  const addr = AGENT_SETTINGS.AGENT_HTTP_ADDR.parse(text, 'AGENT_HTTP_ADDR');
  if (sidecar) {
    // In the node's network namespace the loopback is the node's: every hostNetwork pod and node process
    // reaches the port, two such pods on a node take the same one, and a postStart hook could be answered
    // by another pod's agent, letting the app start before its own files exist.
    if (pod.spec.hostNetwork === true)
      errors.push(
        new ConfigError(
          `${PREFIX}mode`,
          `the pod sets hostNetwork: true, where a sidecar's port would be the node's, shared with every other hostNetwork pod and answerable by another pod's agent`,
          'use secret-agent.io/mode: init (the files are written once, before the app starts, with no port), or run the pod without hostNetwork',
        ),
      );
    if (addr.port === 0)
      errors.push(
        new ConfigError(
          `${PREFIX}agent-http-addr`,
          `${quote(httpAddr!.value)} lets the agent pick its port, which the postStart hook cannot know`,
          'name the port, e.g. 127.0.0.1:8099',
        ),
      );
    const unreachable = hostProblem(addr.host, text, `${PREFIX}agent-http-addr`);
    if (unreachable) errors.push(unreachable);
    const portOwner = allContainers.find((c) =>
      (c.ports ?? []).some((port) => port.containerPort === addr.port),
    );
    if (portOwner)
      errors.push(
        new ConfigError(
          `${PREFIX}agent-http-addr`,
          `port ${addr.port} is also declared by container ${quote(portOwner.name)}`,
          'move the agent with secret-agent.io/agent-http-addr, e.g. 127.0.0.1:8199',
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
