import { AGENT_SETTINGS } from '../../agent/contract/agent-settings.ts';
import { ConfigError, quote } from '../../agent/contract/errors.ts';

/** The loopback of either family: the pod's own, which no other pod can open a connection to. */
export const LOOPBACK_HOSTS: ReadonlySet<string> = new Set(['127.0.0.1', '::1', 'localhost']);
/** Every address: what Prometheus, scraping the pod's IP, needs. */
export const WILDCARD_HOSTS: ReadonlySet<string> = new Set(['0.0.0.0', '::']);

/**
 * Where a sidecar may serve its port: the loopback or every address. The native sidecar's postStart hook
 * asks /readyz over the loopback of the family the agent binds, which reaches either, and nothing else.
 */
export function parseAgentHttpAddr(text: string, field: string): { host: string; port: number } {
  const addr = AGENT_SETTINGS.AGENT_HTTP_ADDR.parse(text, field);
  const unreachable = hostProblem(addr.host, text, field);
  if (unreachable) throw unreachable;
  return addr;
}

/** Why an address `text` (its host already parsed) is one the hook cannot reach, if it is. */
export function hostProblem(host: string, text: string, field: string): ConfigError | undefined {
  if (LOOPBACK_HOSTS.has(host) || WILDCARD_HOSTS.has(host)) return undefined;
  return new ConfigError(
    field,
    `${quote(text)} binds ${quote(host)}, which the postStart hook cannot reach over the pod's loopback`,
    'bind the loopback (127.0.0.1:8099, the default) or, for Prometheus, every address (0.0.0.0:8099)',
  );
}
