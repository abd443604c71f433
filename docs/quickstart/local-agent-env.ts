/**
 * The agent container's env from the patched pod, turned into the env of a local process. Only
 * what a pod gets from the kubelet or the pod's network is replaced: the volume's path, the probe
 * address (0.0.0.0:8099 is for the kubelet; locally a free loopback port), the downward API, and
 * the tmpfs check when this machine has no /dev/shm. Everything else is passed exactly as rendered.
 */
import { describeEnv, type ContainerDoc } from './summarise-injection.ts';

export interface LocalSubstitutes {
  readonly secretsDir: string;
  readonly pod: { readonly name: string; readonly namespace: string; readonly uid: string };
  /** False when there is no tmpfs to write to (the agent then needs REQUIRE_MEMORY_FS=false). */
  readonly memoryFs: boolean;
}

export interface LocalAgentEnv {
  readonly env: Record<string, string>;
  /** What was replaced: name, as rendered (or unset), as run. */
  readonly changes: readonly { name: string; rendered: string; local: string }[];
}

const DOWNWARD: Readonly<Record<string, 'name' | 'namespace' | 'uid'>> = {
  'metadata.name': 'name',
  'metadata.namespace': 'namespace',
  'metadata.uid': 'uid',
};

export function localAgentEnv(agent: ContainerDoc, subs: LocalSubstitutes): LocalAgentEnv {
  const env: Record<string, string> = {};
  const changes: { name: string; rendered: string; local: string }[] = [];
  const replace = (name: string, rendered: string, local: string) => {
    env[name] = local;
    changes.push({ name, rendered, local });
  };
  for (const e of agent.env ?? []) {
    if (e.value !== undefined) {
      if (e.name === 'SECRETS_DIR') replace(e.name, e.value, subs.secretsDir);
      else if (e.name === 'AGENT_HTTP_ADDR') replace(e.name, e.value, '127.0.0.1:0');
      else env[e.name] = e.value;
      continue;
    }
    const field = DOWNWARD[e.valueFrom?.fieldRef?.fieldPath ?? ''];
    if (field === undefined) throw new Error(`cannot run ${describeEnv(e)} locally`);
    replace(e.name, `(downward API ${e.valueFrom!.fieldRef!.fieldPath})`, subs.pod[field]);
  }
  if (env.AGENT_HTTP_ADDR === undefined) replace('AGENT_HTTP_ADDR', '(unset: 0.0.0.0:8099)', '127.0.0.1:0');
  if (!subs.memoryFs) replace('REQUIRE_MEMORY_FS', '(unset: true)', 'false');
  return { env, changes };
}
