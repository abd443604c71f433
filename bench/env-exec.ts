/**
 * What the env wrapper (agent/native/env-exec.c, docs/env.md) adds to an app container's start: one
 * exec of the wrapper, which reads two values from a volume the real writer (AtomicDir) laid out and
 * execs the command. Two measures, each against a baseline taken in the same run:
 *   - instructions (valgrind's callgrind, following the exec): `env-exec … -- /bin/true` against
 *     `/bin/true` alone, and `node -e 0` as an app's own start (Node's, among the smallest). Repeatable
 *     whatever else the machine does; user-space only: the wrapper's execve and reads are the kernel's.
 *   - wall time per start, medians of interleaved rounds of starts from one bash loop (a spawn from Node
 *     costs milliseconds itself): on a shared machine process creation dominates, so this shows the
 *     wrapper is within its noise rather than a precise cost.
 * `node bench/env-exec.ts` runs it alone (it builds the wrapper with images/build-native.ts).
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { envExecCommand, envValuePath } from '../agent/contract/env-exec.ts';
import { AtomicDir } from '../agent/write/atomic-dir.ts';
import { MissingToolError } from '../images/container-engine.ts';
import { buildNative } from '../images/build-native.ts';

export interface EnvExecFigures {
  readonly rounds: number;
  /** User-space instructions, the exec'd command's included. */
  readonly instructions: { readonly direct: number; readonly wrapped: number; readonly node: number };
  /** Median µs per start. */
  readonly directUs: number;
  readonly wrappedUs: number;
  readonly nodeUs: number;
}

/** Starts per batch. */
const BATCH = 200;

/** µs per start of `words`, run `count` times in a row by one bash loop. */
function perStart(words: readonly string[], count: number): number {
  const quoted = words.map((w) => `'${w.replace(/'/g, `'\\''`)}'`).join(' ');
  const begin = process.hrtime.bigint();
  const r = spawnSync('bash', ['-c', `for ((i = 0; i < ${count}; i++)); do ${quoted} || exit 1; done`], {
    stdio: 'ignore',
  });
  const us = Number(process.hrtime.bigint() - begin) / 1000;
  if (r.status !== 0) throw new Error(`${words.join(' ')} failed (exit ${r.status})`);
  return us / count;
}

/** Instructions `words` runs, in user space, across its execs (callgrind --trace-children). */
function instructions(words: readonly string[]): number {
  const r = spawnSync(
    'valgrind',
    ['--tool=callgrind', '--trace-children=yes', '--callgrind-out-file=/dev/null', ...words],
    { encoding: 'utf8' },
  );
  if ((r.error as NodeJS.ErrnoException | undefined)?.code === 'ENOENT')
    throw new MissingToolError(
      'valgrind is not installed (the env wrapper bench counts instructions)',
      'apt-get install -y valgrind',
    );
  const collected = [...r.stderr.matchAll(/Collected : (\d+)/g)].map((m) => Number(m[1]));
  if (r.status !== 0 || collected.length === 0)
    throw new Error(`valgrind ${words.join(' ')}: exit ${r.status}: ${r.stderr.slice(-500)}`);
  return collected.reduce((a, b) => a + b, 0);
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

export async function benchEnvExec(rounds = 15): Promise<EnvExecFigures> {
  const out = mkdtempSync('/dev/shm/secret-agent-bench-env-exec-');
  try {
    const wrapper = buildNative(join(out, 'bin')).find((p) => p.endsWith('/env-exec'));
    if (!wrapper) throw new Error('images/build-native.ts built no env-exec');
    const volume = join(out, 'volume');
    mkdirSync(volume);
    const dir = await AtomicDir.open(volume, { requireMemoryFs: true });
    await dir.write([
      { path: envValuePath('A'), bytes: Buffer.from('postgres://app:bench@db:5432/app'), mode: 0o400 },
      { path: envValuePath('B'), bytes: Buffer.from('x'.repeat(64)), mode: 0o400 },
    ]);
    // The webhook's argv, but for the wrapper's path: the one just built.
    const wrapped = [wrapper, ...envExecCommand(volume, 5, ['A', 'B'], ['/bin/true']).slice(1)];
    const node = [process.execPath, '-e', '0'];
    const counted = {
      direct: instructions(['/bin/true']),
      wrapped: instructions(wrapped),
      node: instructions(node),
    };
    const times = { direct: [] as number[], wrapped: [] as number[], node: [] as number[] };
    for (let i = 0; i < rounds; i++) {
      times.direct.push(perStart(['/bin/true'], BATCH));
      times.wrapped.push(perStart(wrapped, BATCH));
      // Node's start is ~30× longer: fewer starts give as steady a figure.
      times.node.push(perStart(node, 5));
    }
    return {
      rounds,
      instructions: counted,
      directUs: median(times.direct),
      wrappedUs: median(times.wrapped),
      nodeUs: median(times.node),
    };
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
}

export function formatEnvExec(f: EnvExecFigures): string {
  const i = f.instructions;
  const added = i.wrapped - i.direct;
  return [
    'env wrapper: what it adds to an app container’s start (2 variables)',
    '| start | user-space instructions | × direct | µs per start (median) | × direct |',
    '| --- | --- | --- | --- | --- |',
    `| direct /bin/true | ${i.direct} | 1.00 | ${f.directUs.toFixed(0)} | 1.00 |`,
    `| env-exec … -- /bin/true | ${i.wrapped} | ${(i.wrapped / i.direct).toFixed(3)} | ${f.wrappedUs.toFixed(0)} | ${(f.wrappedUs / f.directUs).toFixed(2)} |`,
    `| node -e 0 (an app's own start) | ${i.node} | ${(i.node / i.direct).toFixed(0)} | ${f.nodeUs.toFixed(0)} | ${(f.nodeUs / f.directUs).toFixed(2)} |`,
    `the wrapper adds ${added} instructions (${((added / i.node) * 100).toFixed(4)} % of node -e 0) and one execve; times are medians of ${f.rounds} rounds of ${BATCH} starts`,
  ].join('\n');
}

if (process.argv[1] === fileURLToPath(import.meta.url))
  console.log(formatEnvExec(await benchEnvExec(Number(process.env.BENCH_ENV_EXEC_ROUNDS ?? 15))));
