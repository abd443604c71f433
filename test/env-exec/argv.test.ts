/**
 * Random and near-valid argv (fast-check) at the wrapper's parser, judged against a model of the rules
 * written apart from the C (agent/contract/env-exec.ts): a bad argv exits 64, a good one goes on to
 * wait (0 s here), read and exec; never a crash or a signal, always within a bound. Arguments reach it as
 * raw bytes (bash's $'\xNN' quoting), so non-UTF-8 ones too. The seed is pinned; ENV_EXEC_FUZZ_SEED and
 * ENV_EXEC_FUZZ_RUNS explore further.
 */
import fc from 'fast-check';
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  ENV_EXEC_EXIT,
  ENV_EXEC_MAX_DIR_BYTES,
  ENV_EXEC_MAX_WAIT_SECONDS,
  ENV_NAME,
  MAX_ENV_NAME_BYTES,
  MAX_ENV_VARS,
} from '../../agent/contract/env-exec.ts';
import { canary } from '../support/canary.ts';
import { memoryDir } from '../support/run-agent.ts';
import { envExecBinary, envVolume, runCommand } from './wrapper.ts';

const SEED = Number(process.env.ENV_EXEC_FUZZ_SEED ?? 32);
const RUNS = Number(process.env.ENV_EXEC_FUZZ_RUNS ?? 150);
const WRITTEN = ['A', 'B'];

/** What the wrapper must do with `args` (after argv[0]): 'usage', or run on (then: which names). */
function model(
  args: readonly Buffer[],
): { usage: true } | { usage: false; names: string[]; command: Buffer } {
  const usage = { usage: true } as const;
  let dir: Buffer | undefined;
  let wait: number | undefined;
  const names: string[] = [];
  let i = 0;
  for (; i < args.length && args[i]!.toString('latin1') !== '--'; i++) {
    const a = args[i]!.toString('latin1');
    if (a.startsWith('--dir=')) {
      const d = args[i]!.subarray(6);
      if (dir !== undefined || d[0] !== 0x2f || d.length > ENV_EXEC_MAX_DIR_BYTES) return usage;
      dir = d;
    } else if (a.startsWith('--wait=')) {
      const w = a.slice(7);
      if (wait !== undefined || !/^(0|[1-9]\d*)$/.test(w) || Number(w) > ENV_EXEC_MAX_WAIT_SECONDS)
        return usage;
      wait = Number(w);
    } else if (a.startsWith('--set=')) {
      const n = a.slice(6);
      if (
        !ENV_NAME.test(n) ||
        n.length > MAX_ENV_NAME_BYTES ||
        names.includes(n) ||
        names.length === MAX_ENV_VARS
      )
        return usage;
      names.push(n);
    } else return usage;
  }
  if (i + 1 >= args.length || dir === undefined || wait === undefined || names.length === 0) return usage;
  return { usage: false, names, command: args[i + 1]! };
}

/** bash's ANSI-C quoting of any bytes but NUL. */
const quote = (b: Buffer) => `$'${[...b].map((c) => `\\x${c.toString(16).padStart(2, '0')}`).join('')}'`;

describe('env-exec: any argv', () => {
  it('exits 64 for every argv the rules refuse, runs on for every other; never a crash, a signal or a hang', async () => {
    using vol = memoryDir();
    await (await envVolume(vol.path)).write({ A: canary(), B: canary() });
    const bytes = (s: string) => Buffer.from(s, 'latin1');
    const noise = fc
      .uint8Array({ minLength: 0, maxLength: 40 })
      .map((u) => Buffer.from(u.filter((c) => c !== 0)));
    const token = fc.oneof(
      {
        weight: 6,
        arbitrary: fc
          .constantFrom(`--dir=${vol.path}`, '--wait=0', '--set=A', '--set=B', '--', '/bin/true')
          .map(bytes),
      },
      {
        weight: 4,
        arbitrary: fc
          .constantFrom(
            '--dir=',
            '--dir=relative',
            `--dir=/${'d'.repeat(ENV_EXEC_MAX_DIR_BYTES)}`,
            '--dir=/nonexistent',
            '--wait=',
            '--wait=01',
            '--wait=-1',
            `--wait=${ENV_EXEC_MAX_WAIT_SECONDS + 1}`,
            '--wait=99999999999999999999',
            '--wait= 0',
            '--set=',
            '--set=1A',
            '--set=A-B',
            '--set=A=B',
            '--set=C',
            `--set=${'N'.repeat(MAX_ENV_NAME_BYTES)}`,
            `--set=${'N'.repeat(MAX_ENV_NAME_BYTES + 1)}`,
            '--dir',
            '-',
            '---',
            '',
            'true',
            '/',
            '/nonexistent/cmd',
          )
          .map(bytes),
      },
      { weight: 2, arbitrary: noise },
      { weight: 1, arbitrary: noise.map((n) => Buffer.concat([bytes('--set='), n])) },
    );
    const many = fc
      .constantFrom(MAX_ENV_VARS, MAX_ENV_VARS + 1)
      .map((n) => Array.from({ length: n }, (_, k) => bytes(`--set=S${k}`)));
    // What the webhook writes, its order shuffled, sometimes one token more put anywhere.
    const nearValid = fc
      .tuple(
        fc.constantFrom(`--dir=${vol.path}`, `--dir=${vol.path}`, '--dir=/nonexistent').map(bytes),
        fc.subarray(['A', 'B', 'C'], { minLength: 1 }).map((ns) => ns.map((n) => bytes(`--set=${n}`))),
        fc.oneof(fc.constant(bytes('/bin/true')), fc.constant(bytes('/bin/true')), noise, token),
        fc.array(fc.oneof(noise, token), { maxLength: 4 }),
        fc.option(fc.tuple(token, fc.nat())),
        fc.boolean(),
      )
      .map(([dir, sets, command, rest, extra, setsFirst]) => {
        const options = setsFirst ? [...sets, bytes('--wait=0'), dir] : [dir, bytes('--wait=0'), ...sets];
        const all = [...options, bytes('--'), command, ...rest];
        if (extra) all.splice(extra[1] % (all.length + 1), 0, extra[0]);
        return all;
      });
    const argv = fc.oneof(
      nearValid,
      nearValid,
      fc.array(token, { maxLength: 12 }),
      fc
        .tuple(fc.array(token, { maxLength: 4 }), many, fc.array(token, { maxLength: 4 }))
        .map(([a, m, b]) => [...a, ...m, ...b]),
    );
    const outcomes = { usage: 0, ran: 0, timeout: 0 };
    await fc.assert(
      fc.asyncProperty(argv, async (args) => {
        const script = `exec ${[envExecBinary(), ...args.map(quote)].join(' ')}`;
        const run = await runCommand(['/usr/bin/bash', '-c', script], {
          env: { PATH: '/nonexistent' },
          withinMs: 10_000,
        });
        const want = model(args);
        const shown = args.map((a) => a.toString('latin1').slice(0, 40));
        assert.equal(run.signal, null, `${JSON.stringify(shown)}: killed by ${run.signal}`);
        if (want.usage) {
          assert.equal(run.code, ENV_EXEC_EXIT.usage, `${JSON.stringify(shown)}: ${run.stderr}`);
          assert.match(run.stderr, /^env-exec: [^\n]+ usage: env-exec --dir=\/ABSOLUTE\/PATH [^\n]+\n$/);
          outcomes.usage++;
          return;
        }
        assert.notEqual(run.code, ENV_EXEC_EXIT.usage, `${JSON.stringify(shown)}: ${run.stderr}`);
        const inVolume = args.some((a) => a.toString('latin1') === `--dir=${vol.path}`);
        if (!inVolume || want.names.some((n) => !WRITTEN.includes(n))) {
          assert.equal(run.code, ENV_EXEC_EXIT.timeout, `${JSON.stringify(shown)}: ${run.stderr}`);
          outcomes.timeout++;
          return;
        }
        outcomes.ran++;
        if (want.command.toString('latin1') === '/bin/true') {
          assert.equal(run.code, 0, `${JSON.stringify(shown)}: ${run.stderr}`);
        } else {
          // Anything else as the command: not found, or found and not executable (`/`, a directory).
          assert.ok(
            [ENV_EXEC_EXIT.notFound, ENV_EXEC_EXIT.cannotExecute].includes(run.code as 126 | 127),
            `${JSON.stringify(shown)}: ${run.code} ${run.stderr}`,
          );
          assert.match(run.stderr, /^env-exec: cannot run "[^\n]*\n$/);
        }
      }),
      { seed: SEED, numRuns: RUNS },
    );
    // The generator reaches every branch of the model, not only the refusals.
    assert.ok(outcomes.usage > 0 && outcomes.ran > 0 && outcomes.timeout > 0, JSON.stringify(outcomes));
  });
});
