import { spawn } from 'node:child_process';
import { DISABLE_SIGUSR1 } from '../contract/no-inspector.ts';
import { accessSync, constants, statSync } from 'node:fs';
import { ConfigError, ConfigErrors, quote } from '../contract/errors.ts';
import type { Logger } from '../log.ts';
import { ownProgramReadable, readableProgram } from '../providers/exec/readable-program.ts';
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
  if (argv[0] === 'node') argv.splice(0, 1, process.execPath, DISABLE_SIGUSR1);
  return argv;
}

/** Where execvp finds `program` on `path` (from `cwd`), or undefined when nothing there runs. */
function programPath(program: string, path: string, cwd: string): string | undefined {
  const candidates = program.includes('/')
    ? [program]
    : path.split(':').map((dir) => `${dir === '' ? '.' : dir}/${program}`);
  for (const candidate of candidates) {
    const full = candidate.startsWith('/') ? candidate : `${cwd}/${candidate}`;
    try {
      accessSync(full, constants.X_OK);
      if (statSync(full).isFile()) return full;
    } catch {
      // Not there or not executable: execvp goes on to the next directory too.
    }
  }
  return undefined;
}

/**
 * Why running argv[0] would be a process other processes of the agent's uid can read (an app in a
 * shared-PID pod: the command's memory, and the agent's files through /proc/PID/root), or undefined.
 * As for exec: helpers (agent/providers/exec/readable-program.ts): held to the agent's own standard,
 * so only checked where the agent's own program is closed to its user (the image). `node` is the
 * agent's own Node, closed too; a program the command's PATH does not find is left to the run.
 */
function readableCommand(program: string): ConfigError | undefined {
  if (ownProgramReadable()) return undefined;
  const cwd = process.cwd();
  const path = programPath(program, process.env.PATH ?? DEFAULT_PATH, cwd);
  if (path === undefined) return undefined;
  const readable = readableProgram(path, cwd);
  if (readable === undefined) return undefined;
  const uid = process.getuid?.() ?? '?';
  const fix =
    'run a script with the agent’s own Node, which is execute-only (ROTATION_COMMAND=node /path/to/reload.mjs), or make the program root’s and execute-only, mode 0511';
  return readable.kind === 'program'
    ? new ConfigError(
        'ROTATION_COMMAND',
        `runs ${quote(path)}, which the agent's uid ${uid} can read: its process could be read by another container of the pod (its environment, memory, and the agent's files through /proc)`,
        fix,
      )
    : new ConfigError(
        'ROTATION_COMMAND',
        `runs ${quote(path)}, a script whose #! interpreter ${quote(readable.interpreter)} the agent's uid ${uid} can read: its process could be read by another container of the pod (its environment, memory, and the agent's files through /proc)`,
        fix,
      );
}

/**
 * ROTATION_COMMAND: runs a program in the agent's container, without a shell, with an environment
 * of PATH and SECRETS_ROTATED_FILES (comma-separated changed files) only, so nothing else of the
 * agent's environment (credentials) leaks into it. Exit 0 is success. Its output is discarded: it
 * may print what it read, and the agent's log must never hold a secret. A program the agent's user
 * can read is refused (readableCommand): at start-up (ConfigErrors) and again before each run.
 */
export function createRunCommandNotifier(options: RunCommandOptions, log: Logger): Notifier {
  const argv = commandArgv(options.command);
  const timeoutMs = options.timeoutMs ?? 30_000;
  const killGraceMs = options.killGraceMs ?? 2000;
  const commandLog = log.child({ notifier: 'command', program: argv[0] });
  const refused = readableCommand(argv[0]!);
  if (refused) throw new ConfigErrors([refused]);

  const run = (event: RotationEvent, signal: AbortSignal): Promise<NotifyOutcome> =>
    new Promise((resolve) => {
      if (signal.aborted) return resolve({ ok: false, reason: 'aborted' });
      // What it names may have changed since start-up (a program on a volume).
      const nowReadable = readableCommand(argv[0]!);
      if (nowReadable) {
        commandLog.warn(
          { problem: nowReadable.problem, fix: nowReadable.fix },
          'rotation: the command was refused',
        );
        return resolve({ ok: false, reason: 'permission-denied' });
      }
      let stopped: 'timeout' | 'aborted' | undefined;
      let killTimer: NodeJS.Timeout | undefined;
      const child = spawn(argv[0]!, argv.slice(1), {
        env: {
          PATH: process.env.PATH ?? DEFAULT_PATH,
          SECRETS_ROTATED_FILES: event.changedFiles.join(','),
          // A Node program it runs (`#!/usr/bin/env node`) gets the flag too (agent/contract/no-inspector.ts).
          NODE_OPTIONS: DISABLE_SIGUSR1,
        },
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
