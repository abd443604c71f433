import type { AgentMode } from '../../contract/agent-config.ts';
import type { Env } from '../../contract/settings.ts';
import { quote } from '../../contract/errors.ts';
import { ProviderError } from '../provider.ts';

/**
 * GCP_TRANSPORT: how the agent talks to Secret Manager. Apart from gcp-provider.ts so that start-up checks
 * (agent/config/check-backend-settings.ts) read it without loading the client library.
 */
export const GCP_TRANSPORTS = ['rest', 'grpc'] as const;
export type GcpTransport = (typeof GCP_TRANSPORTS)[number];

/**
 * REST starts faster and in less memory (it never loads gRPC); gRPC costs less CPU per call over a
 * sidecar's long run. docs/gcp.md#transport has the figures.
 */
export const DEFAULT_GCP_TRANSPORT: Readonly<Record<AgentMode, GcpTransport>> = {
  init: 'rest',
  sidecar: 'grpc',
};

/**
 * The proxy variables the gRPC client honours (@grpc/grpc-js reads these, lower case only). The REST
 * client ignores every proxy setting: google-gax hands its HTTP client a keep-alive agent of its own,
 * which overrides the proxy gaxios would otherwise have used.
 */
export const PROXY_VARIABLES = ['grpc_proxy', 'https_proxy', 'http_proxy'] as const;

/**
 * The transport GCP_TRANSPORT names, else the mode's default, else gRPC where a proxy is set; throws
 * a ProviderError naming GCP_TRANSPORT for a value that is none, or for REST with a proxy it would
 * bypass.
 */
export function gcpTransport(env: Env, mode: AgentMode = 'init'): GcpTransport {
  const text = env.GCP_TRANSPORT;
  const proxy = PROXY_VARIABLES.find((name) => env[name]);
  if (text === undefined || text === '') return proxy ? 'grpc' : DEFAULT_GCP_TRANSPORT[mode];
  if (!(GCP_TRANSPORTS as readonly string[]).includes(text)) {
    throw new ProviderError(
      'invalid',
      `GCP_TRANSPORT: ${quote(text)} is not a transport`,
      // DEFAULT_GCP_TRANSPORT, spelt out for the docs' error catalogue.
      'use rest or grpc, or unset it (rest in init mode, grpc in a sidecar or wherever a proxy is set)',
      { transient: false },
    );
  }
  if (text === 'rest' && proxy) throw restPastProxy(proxy);
  return text as GcpTransport;
}

function restPastProxy(variable: string): ProviderError {
  return new ProviderError(
    'invalid',
    `GCP_TRANSPORT: "rest" would not go through the proxy ${variable} names: the REST client ignores proxy settings`,
    `use grpc (the default wherever a proxy is set), or unset ${variable} for the agent`,
    { transient: false },
  );
}
