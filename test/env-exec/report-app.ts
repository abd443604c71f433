/**
 * The app the wrapper execs in the tests: prints one JSON line of what it got, its argv, pid, working
 * directory and env, where each variable named in REPORT_SET (comma-separated) is shown by its length
 * and SHA-256 only, never its value.
 */
import { createHash } from 'node:crypto';

const hidden = new Set((process.env.REPORT_SET ?? '').split(',').filter((n) => n !== ''));
const env: Record<string, string | { length: number; sha256: string }> = {};
for (const [name, value] of Object.entries(process.env))
  env[name] = hidden.has(name)
    ? { length: Buffer.byteLength(value!), sha256: createHash('sha256').update(value!).digest('hex') }
    : value!;
process.stdout.write(
  JSON.stringify({ argv: process.argv.slice(2), pid: process.pid, cwd: process.cwd(), env }) + '\n',
);
process.exitCode = Number(process.env.REPORT_EXIT ?? 0);
