/**
 * The app container of the injected-pod tests, run by the image's own Node (type stripping). It
 * reports, as JSON lines on stdout, what a real app would see: at start, the files the agent should
 * have written (by hash: a value never reaches a log); whether it can write anything in the volume;
 * and on POST /-/reload, the files again. Env: SECRETS_DIR (set by the webhook), APP_FILES (names to
 * read), APP_PORT (reload endpoint on 127.0.0.1), APP_EXIT_AFTER_MS (a Job's app: exit 0 then).
 */
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, unlinkSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { join } from 'node:path';

// What /proc/PID/comm shows (Node 24 would show MainThread): the name exit-with-process watches for.
process.title = 'sample-app';
const dir = process.env.SECRETS_DIR ?? '';
const files = (process.env.APP_FILES ?? '').split(',').filter((f) => f !== '');
const report = (event: string, fields: Record<string, unknown>) =>
  process.stdout.write(`${JSON.stringify({ event, at: Date.now(), ...fields })}\n`);

function hashes(): Record<string, string> {
  const seen: Record<string, string> = {};
  for (const f of files) {
    try {
      seen[f] = createHash('sha256')
        .update(readFileSync(join(dir, f)))
        .digest('hex');
    } catch (e) {
      seen[f] = `missing: ${(e as NodeJS.ErrnoException).code}`;
    }
  }
  return seen;
}

function attempt(what: string, action: () => void): [string, string] {
  try {
    action();
    return [what, 'done'];
  } catch (e) {
    return [what, (e as NodeJS.ErrnoException).code ?? 'error'];
  }
}

report('started', { uid: process.getuid?.(), files: hashes() });
const first = files[0] ?? 'none';
report(
  'write-attempts',
  Object.fromEntries([
    attempt('create a file in the volume', () => writeFileSync(join(dir, 'written-by-app'), 'x')),
    attempt('overwrite a secret file', () => writeFileSync(join(dir, first), 'x')),
    attempt('delete a secret file', () => unlinkSync(join(dir, first))),
    attempt('replace ..data', () => renameSync(join(dir, first), join(dir, '..data'))),
    attempt('make a directory in the volume', () => mkdirSync(join(dir, 'made-by-app'))),
  ]),
);

const port = Number(process.env.APP_PORT ?? '0');
if (port > 0)
  createServer((req, res) => {
    if (req.method === 'POST' && req.url === '/-/reload') report('reloaded', { files: hashes() });
    res.writeHead(req.url === '/-/reload' ? 204 : 404).end();
  }).listen(port, '127.0.0.1', () => report('listening', { port }));

const exitAfter = Number(process.env.APP_EXIT_AFTER_MS ?? '0');
if (exitAfter > 0) setTimeout(() => process.exit(0), exitAfter);
process.on('SIGTERM', () => process.exit(0));
