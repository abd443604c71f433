import { readFile } from 'node:fs/promises';
import { findProcessesByName } from '../proc/find-processes.ts';
import type { Logger } from '../log.ts';
import type { Notifier, NotifyOutcome } from './notifier.ts';

export interface SignalProcessOptions {
  readonly signal: NodeJS.Signals;
  /** Match /proc/PID/comm exactly (the kernel keeps its first 15 bytes). */
  readonly process?: string;
  /** File holding the PID; wins over `process` when both are set. */
  readonly pidFile?: string;
}

/** PID_MAX_LIMIT on 64-bit Linux. */
const PID_LIMIT = 4_194_304;

/**
 * ROTATION_SIGNAL: sends a signal to the app's process, found by pidfile or by name. Works only when
 * the pod shares one process namespace (`shareProcessNamespace: true`) and the agent may signal the
 * app: same uid, or CAP_KILL. By name, every matching process except the agent itself is signalled
 * (a pre-fork server's workers usually share the master's name, and they all need to reload or be
 * told by their master: signalling all is what `pkill -x` does).
 */
export function createSignalProcessNotifier(options: SignalProcessOptions, log: Logger): Notifier {
  const procDir = '/proc';
  const signalLog = log.child({
    notifier: 'signal',
    signal: options.signal,
    ...(options.pidFile ? { pidFile: options.pidFile } : { process: options.process }),
  });

  const fromPidFile = async (file: string): Promise<number[] | NotifyOutcome> => {
    let text: string;
    try {
      text = await readFile(file, 'utf8');
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      signalLog.warn({ code }, 'rotation: cannot read the pidfile; is the app running and writing it?');
      return { ok: false, reason: code === 'ENOENT' ? 'no-pidfile' : 'pidfile-unreadable' };
    }
    const trimmed = text.trim();
    const pid = /^\d{1,7}$/.test(trimmed) ? Number(trimmed) : NaN;
    if (!(pid > 0 && pid <= PID_LIMIT)) {
      signalLog.warn(
        { length: trimmed.length },
        'rotation: the pidfile does not hold a process id (a positive integer)',
      );
      return { ok: false, reason: 'bad-pidfile' };
    }
    if (pid === 1) {
      // PID 1 is the pause container (shared namespace) or the agent itself (not shared): never the app.
      signalLog.warn(
        'rotation: the pidfile holds PID 1: the app wrote its PID in its own process namespace; set shareProcessNamespace: true on the pod',
      );
      return { ok: false, reason: 'pid-1' };
    }
    if (pid === process.pid) {
      signalLog.warn('rotation: the pidfile holds the agent’s own PID; not signalling itself');
      return { ok: false, reason: 'own-process' };
    }
    return [pid];
  };

  return {
    kind: 'signal',
    async notify(): Promise<NotifyOutcome> {
      let pids: number[];
      try {
        const found = options.pidFile
          ? await fromPidFile(options.pidFile)
          : await findProcessesByName(options.process ?? '', procDir);
        if (!Array.isArray(found)) return found;
        pids = found;
      } catch (e) {
        signalLog.warn(
          { code: (e as NodeJS.ErrnoException).code },
          `rotation: cannot list processes in ${procDir}`,
        );
        return { ok: false, reason: 'no-proc' };
      }
      if (pids.length === 0) {
        signalLog.warn(
          'rotation: no process has that name; check ROTATION_SIGNAL_PROCESS against /proc/PID/comm and that the pod sets shareProcessNamespace: true',
        );
        return { ok: false, reason: 'no-process' };
      }
      const failures: { pid: number; code: string }[] = [];
      for (const pid of pids) {
        try {
          process.kill(pid, options.signal);
        } catch (e) {
          failures.push({ pid, code: (e as NodeJS.ErrnoException).code ?? 'error' });
        }
      }
      if (failures.length === 0) {
        signalLog.info({ pids, count: pids.length }, 'rotation: signalled the app');
        return { ok: true };
      }
      const denied = failures.some((f) => f.code === 'EPERM');
      signalLog.warn(
        { pids, count: pids.length, failures },
        denied
          ? 'rotation: not permitted to signal the app: run the agent with the app’s uid (runAsUser), or add CAP_KILL'
          : 'rotation: no such process (it exited, or the pidfile is stale)',
      );
      return { ok: false, reason: denied ? 'permission-denied' : 'no-process' };
    },
  };
}
