import type { FSWatcher } from 'chokidar';
import { setTimeout as sleep } from 'node:timers/promises';
import type { AgentConfig } from '../../contract/agent-config.ts';
import { applySidecarV8Flags } from '../../contract/sidecar-v8-flags.ts';
import type { Env } from '../../contract/settings.ts';
import type { FormatKit } from '../../format/render-files.ts';
import type { Logger } from '../../log.ts';
import { loadNotifiers, notifierDepsOf } from '../../notify/load-notifiers.ts';
import { openPodEvents } from '../../notify/open-pod-events.ts';
import { watchAppExit, type AppExitWatch } from '../../proc/watch-app-exit.ts';
import type { AgentMetrics } from '../../serve/metrics.ts';
import { watchLiveness } from './liveness-watchdog.ts';
import { watchConfigFile } from './reload-config.ts';
import { Sidecar } from './sidecar.ts';

/** How long a stalled sidecar waits for a clean stop before it exits anyway. */
const STALLED_STOP_BUDGET_MS = 10_000;

export interface RunSidecarOptions {
  readonly log: Logger;
  readonly agentVersion: string;
  /** The process env; the config file's settings are laid over it on every reload. */
  readonly env: Env;
  readonly formats: FormatKit;
}

/**
 * The sidecar process: runs until SIGTERM/SIGINT (or the app's exit, with EXIT_WITH_PROCESS), then
 * stops cleanly (in-flight swap finished, files intact) and resolves with the exit code: 1 when its
 * refresh loop stalled (liveness-watchdog.ts).
 * AGENT_CONFIG_FILE is watched (reload-config.ts).
 */
export async function runSidecar(config: AgentConfig, options: RunSidecarOptions): Promise<number> {
  // A long-running process from here on: V8 set for memory, not for peak speed.
  applySidecarV8Flags();
  const { log, env } = options;
  const notifierDeps = notifierDepsOf(config, log, env);
  // Outcomes go to the sidecar's metrics, which exist only once it does.
  const started: { metrics?: AgentMetrics } = {};
  const events = await openPodEvents(config, {
    log,
    kubernetesApiUrl: notifierDeps.kubernetesApiUrl,
    onOutcome: (reason, outcome) => started.metrics?.events.inc({ reason, outcome }),
  });
  const sidecar = await Sidecar.start(config, {
    log,
    agentVersion: options.agentVersion,
    notifiers: await loadNotifiers(config.sidecar, notifierDeps),
    formats: options.formats,
    ...(events ? { events } : {}),
  });
  started.metrics = sidecar.metrics;
  log.info(
    { addr: `${config.sidecar.httpAddr.host}:${sidecar.httpPort}` },
    'serving /healthz, /readyz, /metrics',
  );

  const configFile = config.sidecar.configFile;
  const watcher: FSWatcher | undefined = configFile
    ? await watchConfigFile(configFile, sidecar, { env, log, notifierDeps })
    : undefined;

  let exitWatch: AppExitWatch | undefined;
  let fail: (e: unknown) => void = () => undefined;
  const stopped = new Promise<number>((resolve, reject) => {
    let stopping = false;
    // The first fill failing for good (files that clash, a bug): stop as for SIGTERM, then let the
    // caller report it (exit 2 for a ConfigError) instead of dying of an unhandled rejection.
    fail = (e: unknown) => {
      if (stopping) return;
      stopping = true;
      exitWatch?.stop();
      void (async () => {
        await watcher?.close();
        await sidecar.stop().catch(() => undefined);
        reject(e);
      })();
    };
    const stop = (why: string) => {
      if (stopping) return;
      stopping = true;
      log.info({ why }, 'stopping');
      exitWatch?.stop();
      liveness.stop();
      void (async () => {
        await watcher?.close();
        await sidecar.stop();
        resolve(0);
      })();
    };
    // Its refresh loop stalled: exit 1 so that the kubelet restarts the container, after what of a clean
    // stop finishes within the budget (what stalled may be what a stop waits for).
    const liveness = watchLiveness(
      () => sidecar.live(),
      () => {
        if (stopping) return;
        stopping = true;
        log.error(
          { fix: 'the container restarts; if it happens again, report it with this log' },
          'the refresh loop has not run within its interval: exiting 1 so that the container restarts',
        );
        exitWatch?.stop();
        void Promise.race([sidecar.stop().catch(() => undefined), sleep(STALLED_STOP_BUDGET_MS)]).then(() =>
          resolve(1),
        );
      },
    );
    // on, not once: a second signal during the final swap must not take the default action.
    process.on('SIGTERM', () => stop('SIGTERM'));
    process.on('SIGINT', () => stop('SIGINT'));
    const app = config.sidecar.exitWithProcess;
    if (app) exitWatch = watchAppExit(app, log, () => stop(`${app} exited`));
  });
  sidecar.run().catch(fail);
  return stopped;
}
