/**
 * `npm start`: runs the built agent exactly as an init container would, on the embedded `file:`
 * provider (no cloud account), into a fresh memory directory, and shows what it wrote.
 * The values under docs/quickstart/secrets/ are demo data, not secrets.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, lstatSync, mkdtempSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const root = new URL('../../', import.meta.url).pathname;
const examples = join(root, 'docs/quickstart/secrets');
const inMemory = existsSync('/dev/shm');
const dir = mkdtempSync(join(inMemory ? '/dev/shm' : tmpdir(), 'secret-agent-quickstart-'));

const env: Record<string, string> = {
  PATH: process.env.PATH ?? '',
  SECRETS_DIR: dir,
  SECRET_0_REF: `file:${examples}/database.json#password`,
  SECRET_0_FILENAME: 'db-password',
  SECRET_1_REF: `file:${examples}/database.json`,
  SECRET_1_FILENAME: 'db',
  SECRET_1_FORMAT: 'split',
  SECRET_1_MODE: '0440',
  SECRET_2_REF: `file:${examples}/database.json`,
  SECRET_2_FILENAME: 'database.env',
  SECRET_2_FORMAT: 'dotenv',
  SECRET_3_REF: `file:${examples}/api-key`,
  SECRET_3_FILENAME: 'api-key',
  ...(inMemory ? {} : { REQUIRE_MEMORY_FS: 'false' }),
};

console.log('$ env \\');
for (const [k, v] of Object.entries(env)) if (k !== 'PATH') console.log(`    ${k}=${v} \\`);
console.log('  node dist/agent.js\n');
const run = spawnSync(process.execPath, [join(root, 'dist/agent.js')], { env, encoding: 'utf8' });
process.stdout.write(run.stdout);
process.stderr.write(run.stderr);
if (run.status !== 0) {
  console.error(`agent exited with ${run.status}`);
  process.exit(run.status ?? 1);
}

console.log(`\nWrote ${dir}${inMemory ? ' (tmpfs)' : ''}:`);
const show = (path: string, depth: number): void => {
  for (const name of readdirSync(path).sort()) {
    const full = join(path, name);
    const info = lstatSync(full);
    const pad = '  '.repeat(depth + 1);
    if (info.isSymbolicLink()) console.log(`${pad}${name} -> ${readlinkSync(full)}`);
    else if (info.isDirectory()) {
      console.log(`${pad}${name}/`);
      show(full, depth + 1);
    } else {
      const mode = (info.mode & 0o777).toString(8).padStart(4, '0');
      console.log(`${pad}${name}  [${mode}]  ${JSON.stringify(readFileSync(full, 'utf8'))}`);
    }
  }
};
show(dir, 0);
console.log(
  `\nAn app reads ${dir}/db/password; a new set replaces the old one with a single rename of ..data.`,
);
