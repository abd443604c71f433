import { mkdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { Notifier, NotifierDeps } from './notifier.ts';

/**
 * ROTATION_SENTINEL_FILE, for apps that only re-read secrets when they start: after a rotation a
 * file appears in the volume and stays for `holdMs`, so a liveness probe such as
 * `test ! -e /etc/secrets/.rotated` fails and the kubelet restarts the app container (CyberArk's
 * pattern). The app's mount is read-only, so the app cannot clear the file; the agent removes it
 * once the hold ends, before the restarted container's first probe (its initialDelaySeconds is
 * longer than the hold, docs/rotation.md). The file holds the time and the changed file names.
 */
export function createSentinelFileNotifier(
  settings: { readonly path: string; readonly holdMs: number },
  deps: Pick<NotifierDeps, 'secretsDir' | 'log'>,
): Notifier {
  const file = join(deps.secretsDir, settings.path);
  let clear: NodeJS.Timeout | undefined;
  /** When the file in place must go (its hold ends); undefined when there is none. */
  let holdEndsAt: number | undefined;
  const remove = () =>
    rm(file, { force: true }).then(
      () => {
        holdEndsAt = undefined;
      },
      (e: unknown) =>
        deps.log.warn(
          { file: settings.path, code: (e as NodeJS.ErrnoException).code },
          'sentinel file not removed',
        ),
    );
  const removeAfter = (ms: number) => {
    clearTimeout(clear);
    holdEndsAt = Date.now() + ms;
    clear = setTimeout(() => void remove(), ms);
    // Not a reason to stay alive at shutdown: a pod that stops does not need the file cleared.
    clear.unref();
  };
  // Left by an agent that stopped during a hold (or by the small sidecar's last run): removed when
  // its hold is over, or the app would be restarted again and again.
  const found = stat(file).then(
    (info) => {
      const left = info.mtimeMs + settings.holdMs - Date.now();
      if (left > 0) removeAfter(left);
      else return remove();
    },
    () => undefined,
  );
  return {
    kind: 'sentinel',
    async settle() {
      await found;
      return { dueAt: holdEndsAt };
    },
    async notify(event) {
      const text = `rotated ${new Date().toISOString()}\n${event.changedFiles.map((f) => `${f}\n`).join('')}`;
      const tmp = join(dirname(file), `..sentinel_tmp_${process.pid}`);
      try {
        await mkdir(dirname(file), { recursive: true, mode: 0o755 });
        // Whole or absent: a probe never reads half a file.
        await writeFile(tmp, text, { mode: 0o444 });
        await rename(tmp, file);
      } catch (e) {
        await rm(tmp, { force: true }).catch(() => undefined);
        deps.log.warn(
          { file: settings.path, code: (e as NodeJS.ErrnoException).code },
          'sentinel file not written',
        );
        return { ok: false, reason: 'write' };
      }
      // A later rotation extends the hold: one restart covers every rotation in it.
      removeAfter(settings.holdMs);
      return { ok: true };
    },
  };
}
