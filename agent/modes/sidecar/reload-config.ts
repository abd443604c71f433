import type { FSWatcher } from 'chokidar';
import { readFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { withConfigFile } from '../../config/agent-config-file.ts';
import { checkBackendSettings } from '../../config/check-backend-settings.ts';
import { parseAgentConfig } from '../../config/parse-agent-config.ts';
import { ConfigError, ConfigErrors } from '../../contract/errors.ts';
import type { Env } from '../../contract/settings.ts';
import { loadFormats } from '../../format/load-formats.ts';
import type { Logger } from '../../log.ts';
import { loadNotifiers } from '../../notify/load-notifiers.ts';
import type { NotifierDeps } from '../../notify/notifier.ts';
import type { Sidecar } from './sidecar.ts';

/**
 * Watches AGENT_CONFIG_FILE and hands each valid edit to the sidecar, checked as at start-up
 * (settings, what the backends need, notifiers, templates), without a restart; a bad edit is logged
 * and the running configuration kept. `env` is the process env the file's settings are laid over.
 */
export async function watchConfigFile(
  configFile: string,
  sidecar: Sidecar,
  deps: { readonly env: Env; readonly log: Logger; readonly notifierDeps: NotifierDeps },
): Promise<FSWatcher> {
  const { env, log, notifierDeps } = deps;
  let lastText = safeRead(configFile);
  // Watch the directory: a ConfigMap update swaps a ..data symlink there and never writes the file itself.
  // chokidar loads only when a config file is used (the YAML parser with withConfigFile).
  const { watch } = await import('chokidar');
  const watcher = watch(dirname(configFile), { ignoreInitial: true, depth: 0 });
  watcher.on('all', async () => {
    const text = safeRead(configFile);
    if (text === lastText) return;
    lastText = text;
    try {
      const next = parseAgentConfig(await withConfigFile(env, configFile));
      const missing = checkBackendSettings(next, env);
      if (missing.length > 0) throw new ConfigErrors(missing);
      const notifiers = await loadNotifiers(next.sidecar, notifierDeps);
      const formats = await loadFormats(next.secrets);
      log.info({ file: configFile }, 'configuration file changed; applying');
      void sidecar.reconfigure(next, notifiers, formats);
    } catch (e) {
      if (!(e instanceof ConfigError || e instanceof ConfigErrors)) throw e;
      sidecar.metrics.reloads.inc({ outcome: 'rejected' });
      log.error(
        {
          file: configFile,
          problems: e instanceof ConfigErrors ? e.errors.map((x) => x.message) : [e.message],
        },
        'configuration file rejected; keeping the running configuration',
      );
    }
  });
  return watcher;
}

function safeRead(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
}
