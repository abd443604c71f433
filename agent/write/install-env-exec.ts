import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { open, readFile, rename, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { ENV_EXEC_NAME } from '../contract/env-exec.ts';
import { ConfigError, quote } from '../contract/errors.ts';

/**
 * Puts the env wrapper where app containers run it from (docs/env.md): ENV_EXEC_DIR, a volume of its
 * own that the apps mount read-only. A copy, because an app container sees nothing of the agent's image.
 * The new file appears whole, by one rename; an unchanged one is left alone (a small sidecar's every run
 * would otherwise rewrite it).
 */

/** The wrapper is tens of KiB: anything this big is not it. */
const MAX_PROGRAM_BYTES = 4 * 1024 * 1024;

export async function installEnvExec(envExec: {
  readonly dir: string;
  readonly program: string;
}): Promise<'installed' | 'unchanged'> {
  const program = await readFile(envExec.program).catch((e: NodeJS.ErrnoException) => {
    throw new ConfigError(
      'ENV_EXEC_PROGRAM',
      `${quote(envExec.program)} cannot be read (${e.code ?? 'error'})`,
      'run the agent image, whose /app/env-exec it is; outside it, node images/build-native.ts builds dist/native/env-exec',
    );
  });
  if (program.length === 0 || program.length > MAX_PROGRAM_BYTES || program.readUInt32BE(0) !== 0x7f454c46)
    throw new ConfigError(
      'ENV_EXEC_PROGRAM',
      `${quote(envExec.program)} is not an executable (${program.length} bytes)`,
      'unset it: the image’s /app/env-exec is the wrapper',
    );
  const target = join(envExec.dir, ENV_EXEC_NAME);
  // Not through a link: only a file of its own counts as installed (a link is replaced, never followed).
  const present = await readFile(target, { flag: constants.O_RDONLY | constants.O_NOFOLLOW }).catch(
    () => undefined,
  );
  if (present?.equals(program)) return 'unchanged';
  const temporary = join(envExec.dir, `.${ENV_EXEC_NAME}.${randomBytes(6).toString('hex')}`);
  try {
    // O_EXCL: never through a link someone left at that name.
    const file = await open(temporary, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o700);
    try {
      await file.writeFile(program);
      // Every user runs it (the app's is any uid); nobody writes it.
      await file.chmod(0o555);
    } finally {
      await file.close();
    }
    await rename(temporary, target);
  } catch (e) {
    await unlink(temporary).catch(() => undefined);
    throw new ConfigError(
      'ENV_EXEC_DIR',
      `the wrapper cannot be written to ${quote(envExec.dir)} (${(e as NodeJS.ErrnoException).code ?? 'error'})`,
      'mount a writable volume there (the webhook renders a memory emptyDir), or unset ENV_EXEC_DIR',
    );
  }
  return 'installed';
}
