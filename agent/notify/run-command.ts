import { spawn } from 'node:child_process';
import type { Logger } from '../log.ts';
import type { Notifier, NotifyOutcome, RotationEvent } from './notifier.ts';

export interface RunCommandOptions {
  /** ROTATION_COMMAND: words separated by whitespace; no shell, no quoting. */
  readonly command: string;
  readonly timeoutMs?: number;
  /** After the timeout's SIGTERM, how long before SIGKILL. */
  readonly killGraceMs?: number;
}

/** The PATH a command gets when the agent has none (distroless images set one). */
const DEFAULT_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/** Splits ROTATION_COMMAND into argv; `node` means the agent's own Node (distroless has it off PATH). */
export function commandArgv(command: string): string[] {
  const argv = command.trim().split(/\s+/);
  if (argv[0] === 'node') argv[0] = process.execPath;
  return argv;
}

/**
 * ROTATION_COMMAND: runs a program in the agent's container, without a shell, with an environment
 * of PATH and SECRETS_ROTATED_FILES (comma-separated changed files) only, so nothing else of the
 * agent's environment (credentials) leaks into it. Exit 0 is success. Its output is discarded: it
 * may print what it read, and the agent's log must never hold a secret.
 */
export function createRunCommandNotifier(options: RunCommandOptions, log: Logger): Notifier {
  const argv = commandArgv(options.command);
  const timeoutMs = options.timeoutMs ?? 30_000;
  const killGraceMs = options.killGraceMs ?? 2000;
  const commandLog = log.child({ notifier: 'command', program: argv[0] });

  const run = (event: RotationEvent, signal: AbortSignal): Promise<NotifyOutcome> =>
    new Promise((resolve) => {
      if (signal.aborted) return resolve({ ok: false, reason: 'aborted' });
      let stopped: 'timeout' | 'aborted' | undefined;
      let killTimer: NodeJS.Timeout | undefined;
      const child = spawn(argv[0]!, argv.slice(1), {
        env: { PATH: process.env.PATH ?? DEFAULT_PATH, SECRETS_ROTATED_FILES: event.changedFiles.join(',') },
        stdio: 'ignore',
      });
      const stop = (why: 'timeout' | 'aborted') => {
        if (stopped || child.exitCode !== null) return;
        stopped = why;
        child.kill('SIGTERM');
        killTimer = setTimeout(() => child.kill('SIGKILL'), killGraceMs);
      };
      const timer = setTimeout(() => stop('timeout'), timeoutMs);
      const onAbort = () => stop('aborted');
      signal.addEventListener('abort', onAbort, { once: true });
      let settled = false;
      const settle = (outcome: NotifyOutcome) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        clearTimeout(killTimer);
        signal.removeEventListener('abort', onAbort);
        resolve(outcome);
      };
      child.once('error', (e: NodeJS.ErrnoException) => {
        const reason =
          e.code === 'ENOENT' ? 'not-found' : e.code === 'EACCES' ? 'permission-denied' : 'spawn-failed';
        commandLog.warn(
          { code: e.code },
          reason === 'not-found'
            ? 'rotation: the command does not exist in the agent’s image (it is distroless: no shell, no tools); use node or a binary you add'
            : 'rotation: the command could not be started',
        );
        settle({ ok: false, reason });
      });
      child.once('exit', (code, killedBy) => {
        if (stopped) {
          commandLog.warn(
            { after: stopped === 'timeout' ? timeoutMs : undefined },
            `rotation: the command was stopped (${stopped})`,
          );
          return settle({ ok: false, reason: stopped });
        }
        if (code === 0) {
          commandLog.info('rotation: the command succeeded');
          return settle({ ok: true });
        }
        const reason = code !== null ? `exit-${code}` : `signal-${killedBy ?? 'unknown'}`;
        commandLog.warn({ reason }, 'rotation: the command failed');
        settle({ ok: false, reason });
      });
    });

  return { kind: 'command', notify: run };
}
