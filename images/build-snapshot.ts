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
 *
 * Built to the same bytes every time, so the image's digest can be rebuilt: V8 seeds its random
 * generator (and from it the hash seed of every hash table in the blob) with BUILD_RANDOM_SEED instead
 * of fresh randomness; --predictable runs its garbage collector and compilers on this thread on a
 * schedule of their own rather than the machine's load (which decides what is aged or flushed when
 * the heap is written); agent/snapshot-reproducible.ts stops the clocks and fixes the host name and
 * pid the heap would otherwise keep. V8 leaves both flags out of what a blob must be run with. A blob's seed is read by anyone who has the image, fixed or not, so fixing it
 * gives nothing away; a pod's own Math.random and crypto are seeded afresh when it starts (the check
 * below runs the snapshot twice to prove it).
 */
import { spawnSync } from 'node:child_process';
import { rmSync } from 'node:fs';

const [script, blob, ...options] = process.argv.slice(2);
if (!script || !blob || options.some((o) => o !== '--with-gcp'))
  throw new Error('usage: node build-snapshot.ts SCRIPT BLOB [--with-gcp]');
const variant = options.includes('--with-gcp') ? 'with-gcp' : 'default';
const BUILD_RANDOM_SEED = '--random-seed=1';
const BUILD_PREDICTABLE = '--predictable';

function fail(problem: string): never {
  rmSync(blob!, { force: true });
  process.stderr.write(`build-snapshot: ${problem}\n`);
  process.exit(1);
}

/** Runs the snapshot with the agent's arguments: its stdout, pid and the time span it ran in. */
function runSnapshot(...args: string[]): { stdout: string; pid: number; from: number; to: number } {
  const from = Date.now();
  const run = spawnSync(process.execPath, ['--snapshot-blob', blob!, '--', ...args], {
    encoding: 'utf8',
    env: {},
  });
  if (run.status !== 0) fail(`the snapshot run with ${args.join(' ')} exited ${run.status}: ${run.stderr}`);
  return { stdout: run.stdout, pid: run.pid, from, to: Date.now() };
}

// --no-warnings: Node warns that the builtins pino and debug load while the snapshot is built (tty,
// worker_threads, module) are "not yet fully verified" in snapshots; the image tests run the agent
// from this snapshot through every backend.
const build = spawnSync(
  process.execPath,
  [
    '--no-warnings',
    BUILD_RANDOM_SEED,
    BUILD_PREDICTABLE,
    '--snapshot-blob',
    blob,
    '--build-snapshot',
    script,
    ...options,
  ],
  { encoding: 'utf8', env: {}, stdio: ['ignore', 'inherit', 'pipe'] },
);
if (build.status !== 0) fail(`node --build-snapshot exited ${build.status}: ${build.stderr}`);

const printed = runSnapshot('--version').stdout.trim();
if (!printed.startsWith('secret-agent ')) fail(`--version printed "${printed}", not the agent's version`);
// agent/snapshot.ts printSnapshotCheck: one draw from each pool (randomUUID's, randomInt's) and from
// Math.random per run, the variant, pid, architecture and clock. A draw repeated is frozen state.
const [first, second] = [runSnapshot('--check-snapshot'), runSnapshot('--check-snapshot')].map((run) => {
  const [uuid, int, kind, random, pid, arch, now] = run.stdout.trim().split(' ');
  return { run, uuid, int, kind, random, pid: Number(pid), arch, now: Number(now) };
});
for (const [pool, source] of [
  ['uuid', 'crypto.randomUUID'],
  ['int', 'crypto.randomInt'],
  ['random', 'Math.random'],
] as const)
  if (first![pool] === undefined || first![pool] === second![pool])
    fail(`two runs of the snapshot drew the same from ${source}: its state was filled while building it`);
if (first!.kind !== variant) fail(`the snapshot is the variant "${first!.kind}", not "${variant}"`);
for (const { run, pid, arch, now } of [first!, second!]) {
  if (pid !== run.pid)
    fail(`a run from the snapshot says its pid is ${pid}, not ${run.pid}: the build's stayed`);
  if (arch !== process.arch) fail(`a run from the snapshot says it runs on ${arch}, not ${process.arch}`);
  if (!(now >= run.from && now <= run.to))
    fail(`a run from the snapshot read the clock as ${now}: the build's stopped clock stayed`);
}
process.stdout.write(`build-snapshot: ${blob} (${printed}, ${variant}, ${process.arch})\n`);
