import { accessSync, constants, realpathSync, statSync } from 'node:fs';
import { isAbsolute, join, relative, sep } from 'node:path';
import { ConfigErrors, quote, type ConfigError } from '../../contract/errors.ts';
import { settingsReader, type Env } from '../../contract/settings.ts';
import { ProviderError } from '../provider.ts';
import { EXEC_SETTINGS } from './env.ts';
import { ownProgramReadable, readableProgram } from './readable-program.ts';

/**
 * The exec provider's settings (declared in env.ts) and the check that a helper may run: read at
 * start-up (agent/config/check-backend-settings.ts, so a missing helper is a configuration error found
 * before any fetch) and again before every run (the volume may have changed under a sidecar). Kept
 * apart from the provider so start-up checks run without loading child_process code.
 */

export interface ExecSettings {
  readonly helpersDir: string;
  readonly timeoutMs: number;
  readonly concurrency: number;
}

/** Reads the settings; throws ConfigErrors naming each bad variable. */
export function parseExecSettings(env: Env): ExecSettings {
  const errors: ConfigError[] = [];
  const read = settingsReader([env], errors);
  const s = EXEC_SETTINGS;
  const helpersDir = read('EXEC_HELPERS_DIR', s.EXEC_HELPERS_DIR);
  const timeoutMs = read('EXEC_TIMEOUT', s.EXEC_TIMEOUT);
  const concurrency = read('EXEC_CONCURRENCY', s.EXEC_CONCURRENCY);
  if (errors.length > 0) throw new ConfigErrors(errors);
  return { helpersDir: helpersDir!, timeoutMs: timeoutMs!, concurrency: concurrency! };
}

/**
 * The real path of helper `name` in `dir`, checked: it exists, resolves (through the links a
 * ConfigMap volume is made of) to a regular file inside `dir`, this process may execute it, and its
 * run will be no easier to read than the agent itself (readable-program.ts): where the agent's own
 * program is closed to its user (the image), a helper its user can read, or a script whose `#!`
 * interpreter its user can read, is refused, since its process would be dumpable and open to every
 * other process of the agent's uid. Throws a non-transient ProviderError whose message starts with
 * `EXEC_HELPERS_DIR: `. Synchronous: a few system calls, run at start-up and before each helper run.
 *
 * The file checked is the file run (the real path, not the link), but it could change in between:
 * the helpers volume is the platform's, read-only in the agent container and mounted in no other
 * (whoever can write it chooses what the helper does anyway); a ConfigMap's files never change in
 * place (an update is a new directory and a swapped link, which the next run's check sees).
 */
export function resolveHelper(dir: string, name: string): string {
  let realDir: string;
  try {
    realDir = realpathSync(dir);
  } catch (e) {
    throw new ProviderError(
      'not-found',
      `EXEC_HELPERS_DIR: ${quote(dir)} cannot be read (${errorCode(e)})`,
      'mount the helpers volume there (the webhook does when the cluster allows exec: references), or set EXEC_HELPERS_DIR to where it is',
      { transient: false },
    );
  }
  let real: string;
  try {
    real = realpathSync(join(realDir, name));
  } catch (e) {
    throw new ProviderError(
      'not-found',
      `EXEC_HELPERS_DIR: ${quote(dir)} has no helper ${quote(name)} (${errorCode(e)})`,
      'add the helper to the helpers volume (with a ConfigMap: a key named after it), or correct the name after exec:',
      { transient: false },
    );
  }
  const inside = relative(realDir, real);
  // `..data/…` (a ConfigMap volume's own layout) is inside; only `..` as a whole segment leads out.
  if (inside === '' || inside === '..' || inside.startsWith(`..${sep}`) || isAbsolute(inside))
    throw new ProviderError(
      'invalid',
      `EXEC_HELPERS_DIR: the helper ${quote(name)} leads out of ${quote(dir)} (a link to ${quote(real)})`,
      'put the program itself in the helpers volume; links there may only point inside it',
      { transient: false },
    );
  if (!statSync(real).isFile())
    throw new ProviderError(
      'invalid',
      `EXEC_HELPERS_DIR: the helper ${quote(name)} in ${quote(dir)} is not a regular file`,
      'put a program or a script with a #! line there',
      { transient: false },
    );
  try {
    accessSync(real, constants.X_OK);
  } catch {
    throw new ProviderError(
      'permission-denied',
      `EXEC_HELPERS_DIR: the helper ${quote(name)} in ${quote(dir)} is not executable by the agent (uid ${process.getuid?.() ?? '?'})`,
      'give a #!/nodejs/bin/node script mode 0555 (a ConfigMap volume: defaultMode 365, the default), a binary mode 0511, root’s (defaultMode 329)',
      { transient: false },
    );
  }
  // The helpers volume's directory: the run's working directory, where a relative #! interpreter is found.
  const readable = ownProgramReadable() ? undefined : readableProgram(real, realDir);
  if (readable?.kind === 'program')
    throw new ProviderError(
      'permission-denied',
      `EXEC_HELPERS_DIR: the helper ${quote(name)} in ${quote(dir)} is readable by the agent's uid ${process.getuid?.() ?? '?'}: its process could be read by another container of the pod (its environment, memory, pipes, and the agent's files through /proc)`,
      'make it root’s and execute-only, mode 0511 (EXEC_HELPERS_VOLUME: a configMap with "defaultMode":329 in pods without fsGroup, or a claim whose files are root’s and 0511), or write it for Node, starting #!/nodejs/bin/node (docs/exec-helpers.md, “Writing a helper”)',
      { transient: false },
    );
  if (readable?.kind === 'interpreter')
    throw new ProviderError(
      'permission-denied',
      `EXEC_HELPERS_DIR: the helper ${quote(name)} in ${quote(dir)} is a script whose #! interpreter ${quote(readable.interpreter)} is readable by the agent's uid ${process.getuid?.() ?? '?'}: its process could be read by another container of the pod (its environment, memory, pipes, and the agent's files through /proc)`,
      'start it with #!/nodejs/bin/node (the agent image’s Node, which is execute-only), or make it a static binary, root’s and mode 0511 (docs/exec-helpers.md, “Writing a helper”)',
      { transient: false },
    );
  return real;
}

function errorCode(e: unknown): string {
  return (e as NodeJS.ErrnoException).code ?? 'error';
}
