import type { Logger } from '../log.ts';
import { COMM_LENGTH, listProcesses } from './find-processes.ts';

export interface AppExitWatch {
  stop(): void;
}

/**
 * EXIT_WITH_PROCESS: a classic sidecar would keep a Job's pod running forever after its app is done.
 * Once a process with this name has been seen and is gone, `exit` is called.
 *
 * It samples /proc (at once, then every `intervalMs`): an app that starts and ends between two
 * samples goes unseen. If it is never seen, a warning after `warnAfter` samples names the processes
 * that are visible, so a wrong name (a Node 24 app shows MainThread unless it sets process.title) or
 * a missing shared process namespace shows in the log instead of a silent wait.
 */
export function watchAppExit(
  name: string,
  log: Logger,
  exit: () => void,
  options: { intervalMs?: number; warnAfter?: number; procDir?: string } = {},
): AppExitWatch {
  const wanted = name.slice(0, COMM_LENGTH);
  const warnAfter = options.warnAfter ?? 30;
  let seen = false;
  let busy = false;
  let samples = 0;
  const sample = async () => {
    if (busy) return;
    busy = true;
    try {
      const processes = await listProcesses(options.procDir);
      const running = processes.some((p) => p.comm === wanted);
      if (running && !seen) log.info({ process: name }, 'watching the app; will exit when it ends');
      if (!running && seen) exit();
      seen ||= running;
      if (!seen && ++samples === warnAfter)
        log.warn(
          { process: name, visible: [...new Set(processes.map((p) => p.comm))].sort().slice(0, 20) },
          'no process of this name has been seen: check EXIT_WITH_PROCESS against the names visible (only the agent’s own without a shared process namespace)',
        );
    } catch (e) {
      log.warn(
        { code: (e as NodeJS.ErrnoException).code },
        'cannot list processes for EXIT_WITH_PROCESS; is /proc mounted?',
      );
    } finally {
      busy = false;
    }
  };
  void sample();
  const timer = setInterval(() => void sample(), options.intervalMs ?? 1000);
  return { stop: () => clearInterval(timer) };
}
