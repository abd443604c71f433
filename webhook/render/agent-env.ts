import type { AgentMode } from '../../agent/contract/agent-config.ts';
import type { AGENT_SETTINGS } from '../../agent/contract/agent-settings.ts';
import { renderSecretEnv } from '../../agent/contract/render-secret-env.ts';
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
  const env: EnvVar[] = [fixed('AGENT_MODE', mode), fixed('SECRETS_DIR', request.mountPath)];
  for (const s of request.agentSettings) {
    env.push(fixed(s.env, s.value));
    sources.set(s.env, s.annotation);
  }
  // Files shared through a group need its read bit; a mode the pod chose was checked for it instead.
  const { defaultFileMode } = request.fileAccess;
  if (defaultFileMode !== undefined && !request.agentSettings.some((s) => s.env === 'FILE_MODE'))
    env.push(fixed('FILE_MODE', defaultFileMode));
  // Templates reach other secrets by name: each secret is named after its <file>.
  const named = request.secrets.some((s) => s.template !== undefined);
  const secretEnv = renderSecretEnv(
    request.secrets.map((s) => ({
      ...(named ? { name: s.file } : {}),
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
  env.push({ name: 'NODE_OPTIONS', value: nodeOptions(request.resources.limits.memory) });
  for (const [name, fieldPath] of DOWNWARD) env.push({ name, valueFrom: { fieldRef: { fieldPath } } });
  return { env, sources };
}

const UNIT_MIB: Record<string, number> = {
  '': 1 / 1048576,
  k: 1e3 / 1048576,
  M: 1e6 / 1048576,
  G: 1e9 / 1048576,
  T: 1e12 / 1048576,
  Ki: 1 / 1024,
  Mi: 1,
  Gi: 1024,
  Ti: 1024 * 1024,
};

/**
 * V8 sizes its heap for the whole machine and grows it lazily, so a long-running agent's RSS creeps
 * toward the container's memory limit (measured: 125 -> 179 MiB over 10 minutes with 100 secrets, the
 * live heap flat at 10-20 MiB). Half the limit caps the old generation (the rest is Node's code, native
 * memory and buffers, ~50 MiB), and a 1 MiB young generation keeps each scavenge small; with the
 * default 128Mi limit that is a 64 MiB cap. These are the V8 flags NODE_OPTIONS takes; the sidecar
 * runs with the ones it refuses (no optimising compilers) on its command line: agent/contract/sidecar-v8-flags.ts.
 * Measured with both, against moto, a rotation every 10 s: 1 or 100 secrets 62 MiB, flat (idle node:
 * 42 MiB); 1 GCP secret 68 MiB.
 */
export function nodeOptions(memoryLimit: string): string {
  const m = /^([\d.]+)(k|M|G|T|Ki|Mi|Gi|Ti)?$/.exec(memoryLimit);
  const mib = m ? Number(m[1]) * UNIT_MIB[m[2] ?? '']! : NaN;
  // An unreadable limit (validated before, so never in practice): half the default 128Mi.
  const heap = Number.isFinite(mib) ? Math.max(32, Math.floor(mib / 2)) : 64;
  return `--max-old-space-size=${heap} --max-semi-space-size=1`;
}
