import { AGENT_SETTINGS } from '../contract/agent-settings.ts';
import { SECRET_VAR } from '../contract/secret-settings.ts';
import type { Env } from '../contract/settings.ts';

/** Keys AGENT_CONFIG_FILE may hold: the agent's settings and SECRET_<N>_* (not the file's own name). */
function isAgentFileSetting(key: string): boolean {
  return (Object.hasOwn(AGENT_SETTINGS, key) && key !== 'AGENT_CONFIG_FILE') || SECRET_VAR.test(key);
}

/**
 * The agent's env with AGENT_CONFIG_FILE's settings laid over it (the file wins: it is the one edited
 * live); throws ConfigErrors. The file reader (contract/config-file.ts) loads on the first call only:
 * the YAML parser is ~140 KB an init container without a file would otherwise load for nothing.
 */
export async function withConfigFile(env: Env, path: string): Promise<Env> {
  const { readConfigFile } = await import('../contract/config-file.ts');
  return { ...env, ...readConfigFile(path, 'AGENT_CONFIG_FILE', isAgentFileSetting) };
}
