/**
 * Builds the agent's V8 start-up snapshot from dist/agent-snapshot.cjs (agent/snapshot.ts), then
 * proves it before anyone runs it. A blob only runs on the Node binary that built it, so
 * Dockerfile.agent runs this in the runtime stage with the image's own Node; `npm run bench` and the
 * tests run it on the host with node_modules' Node.
 * Usage: node build-snapshot.ts SCRIPT BLOB [--with-gcp]
 * --with-gcp builds the variant that also holds GCP's REST client (agent/snapshot.ts says why it is a
 * second blob).
 *
 * Refused (exit 1, nothing left at BLOB):
 * - a snapshot that does not print the agent's version;
 * - a snapshot whose two runs draw the same from crypto's random pools: a pool was filled while
 *   building and would be replayed in every pod (agent/snapshot.ts keeps the warm-up off them);
 * - a snapshot that is not the variant asked for.
 */
import { spawnSync } from 'node:child_process';
import { rmSync } from 'node:fs';

const [script, blob, ...options] = process.argv.slice(2);
if (!script || !blob || options.some((o) => o !== '--with-gcp'))
  throw new Error('usage: node build-snapshot.ts SCRIPT BLOB [--with-gcp]');
const variant = options.includes('--with-gcp') ? 'with-gcp' : 'default';

function fail(problem: string): never {
  rmSync(blob!, { force: true });
  process.stderr.write(`build-snapshot: ${problem}\n`);
  process.exit(1);
}

/** Runs the snapshot with the agent's arguments; its stdout. */
function runSnapshot(...args: string[]): string {
  const run = spawnSync(process.execPath, ['--snapshot-blob', blob!, '--', ...args], {
    encoding: 'utf8',
    env: {},
  });
  if (run.status !== 0) fail(`the snapshot run with ${args.join(' ')} exited ${run.status}: ${run.stderr}`);
  return run.stdout;
}

// --no-warnings: Node warns that the builtins pino and debug load while the snapshot is built (tty,
// worker_threads, module) are "not yet fully verified" in snapshots; the image tests run the agent
// from this snapshot through every backend.
const build = spawnSync(
  process.execPath,
  ['--no-warnings', '--snapshot-blob', blob, '--build-snapshot', script, ...options],
  { encoding: 'utf8', env: {}, stdio: ['ignore', 'inherit', 'pipe'] },
);
if (build.status !== 0) fail(`node --build-snapshot exited ${build.status}: ${build.stderr}`);

const printed = runSnapshot('--version').trim();
if (!printed.startsWith('secret-agent ')) fail(`--version printed "${printed}", not the agent's version`);
// One draw from each pool (randomUUID's, randomInt's) per run: any one repeated is a frozen pool.
const [first, second] = [runSnapshot('--check-snapshot'), runSnapshot('--check-snapshot')].map((out) =>
  out.trim().split(' '),
);
for (const [i, pool] of ['randomUUID', 'randomInt'].entries())
  if (first![i] === undefined || first![i] === second![i])
    fail(`two runs of the snapshot drew the same from crypto.${pool}: its pool was filled while building it`);
if (first![2] !== variant) fail(`the snapshot is the variant "${first![2]}", not "${variant}"`);
process.stdout.write(`build-snapshot: ${blob} (${printed}, ${variant})\n`);
