import type { AgentConfig } from '../contract/agent-config.ts';
import type { Logger } from '../log.ts';
import { AtomicDir } from '../write/atomic-dir.ts';

/**
 * The volume, opened for the agent's file set (init and sidecar alike), and a log line for each kind
 * of repair the opening made after an interrupted run.
 */
export async function openSecretsDir(config: AgentConfig, log: Logger): Promise<AtomicDir> {
  const dir = await AtomicDir.open(config.secretsDir, {
    setName: config.setName,
    requireMemoryFs: config.requireMemoryFs,
  });
  if (dir.leftoversRemoved.length > 0)
    log.info({ removed: dir.leftoversRemoved }, 'removed what an interrupted run left in the volume');
  if (dir.linksRestored.length > 0)
    log.info({ restored: dir.linksRestored }, 'made the links an interrupted run did not make');
  return dir;
}
