import type { AgentMode } from '../../agent/contract/agent-config.ts';
import type { AGENT_SETTINGS } from '../../agent/contract/agent-settings.ts';
import { renderSecretEnv } from '../../agent/contract/render-secret-env.ts';
import { ENV_EXEC_AGENT_DIR } from '../../agent/contract/env-exec.ts';
import { SDK_CONFIG_ENV } from '../../agent/contract/sdk-config-env.ts';
import { nodeOptions } from '../agent-sizing.ts';
import { AGENT_SECRETS_DIR } from '../injected-names.ts';
import type { InjectionRequest } from '../injection-request.ts';

/** A container env entry as the Pod API takes it. */
export type EnvVar =
  | { readonly name: string; readonly value: string }
  | { readonly name: string; readonly valueFrom: { readonly fieldRef: { readonly fieldPath: string } } };

/** Pod identity through the downward API: the agent sends it to backends for their audit logs. */
const DOWNWARD: readonly [keyof typeof AGENT_SETTINGS, string][] = [
  ['POD_NAME', 'metadata.name'],
  ['POD_NAMESPACE', 'metadata.namespace'],
  ['POD_UID', 'metadata.uid'],
];

/** Where each env var came from, so an agent-side error can name the annotation to fix. */
export interface RenderedAgentEnv {
  readonly env: readonly EnvVar[];
  readonly sources: ReadonlyMap<string, string>;
}

/**
 * The agent's env, rendered with the same contract module the agent parses it with. Names only
 * (references, paths, settings): never a secret value.
 */
export function renderAgentEnv(request: InjectionRequest, mode: AgentMode): RenderedAgentEnv {
  const sources = new Map<string, string>();
  const fixed = (name: keyof typeof AGENT_SETTINGS, value: string): EnvVar => ({ name, value });
  const env: EnvVar[] = [fixed('AGENT_MODE', mode), fixed('SECRETS_DIR', AGENT_SECRETS_DIR)];
  // For /app/resident, which passes its env to every run. Never AGENT_HANDOFF_FDS: the resident sets
  // that for its runs alone; with it a process makes one refresh and exits.
  if (mode === 'sidecar' && request.sidecarProcess?.kind === 'small')
    env.push(fixed('AGENT_RUN_DEADLINE', request.sidecarProcess.runDeadline));
  for (const s of request.agentSettings) {
    env.push(fixed(s.env, s.value));
    sources.set(s.env, s.annotation);
  }
  // The env wrapper, installed before any file is written (agent/write/install-env-exec.ts).
  if (request.envExec) env.push(fixed('ENV_EXEC_DIR', ENV_EXEC_AGENT_DIR));
  // Files shared through a group need its read bit; a mode the pod chose was checked for it instead.
  const { defaultFileMode } = request.fileAccess;
  if (defaultFileMode !== undefined && !request.agentSettings.some((s) => s.env === 'FILE_MODE'))
    env.push(fixed('FILE_MODE', defaultFileMode));
  // Templates reach other secrets by name: each secret is named after its <file>.
  const named = request.secrets.some((s) => s.template !== undefined);
  const secretEnv = renderSecretEnv(
    request.secrets.map((s) => ({
      // A template reads files by their <file>; a variable is no file of the pod's.
      ...(named && s.env === undefined ? { name: s.file } : {}),
      ...(s.template !== undefined ? { template: s.template } : {}),
      ref: s.ref,
      filename: s.path,
      format: s.format,
      ...(s.mode !== undefined ? { mode: s.mode } : {}),
      ...(s.refreshInterval !== undefined ? { refreshInterval: s.refreshInterval } : {}),
    })),
  );
  for (const e of secretEnv) {
    const index = Number(/^SECRET_(\d+)_/.exec(e.name)![1]);
    sources.set(e.name, request.secrets[index]!.annotation);
    env.push(e);
  }
  env.push(...request.providerEnv);
  // No SDK reads a config or credentials file a pod could have put in reach (agent/contract/sdk-config-env.ts).
  for (const [name, value] of Object.entries(SDK_CONFIG_ENV)) env.push({ name, value });
  env.push({
    name: 'NODE_OPTIONS',
    value: nodeOptions(request.resources.limits.memory, request.volumeSizeLimit),
  });
  for (const [name, fieldPath] of DOWNWARD) env.push({ name, valueFrom: { fieldRef: { fieldPath } } });
  return { env, sources };
}
