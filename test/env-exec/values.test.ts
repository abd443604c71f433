/**
 * How the wrapper (agent/native/env-exec.c) reads the agent's set: it waits for it (bounded, and a
 * signal ends the wait even as PID 1 would), reads one consistent version while the agent swaps sets,
 * refuses what an env var cannot hold without printing any of it, and refuses what the agent never
 * writes (a link, a FIFO, a directory, `..data` pointing out of the volume) at once, without hanging.
 * The volume is the agent's own writer's (AtomicDir), but for the hostile layouts, made by hand.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, readFileSync, readlinkSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { ENV_EXEC_EXIT, ENV_VALUES_DIR, MAX_ENV_VALUE_BYTES } from '../../agent/contract/env-exec.ts';
import { CANARY_MARKER, canary } from '../support/canary.ts';
import { memoryDir } from '../support/run-agent.ts';
import { envExecBinary, envVolume, runCommand, runWrapper, type WrapperRun } from './wrapper.ts';

const wrap = (dir: string, names: readonly string[], wait = 0, command = ['/bin/true']) =>
  runWrapper([`--dir=${dir}`, `--wait=${wait}`, ...names.map((n) => `--set=${n}`), '--', ...command], {
    env: {},
  });

/** Neither output holds a canary (runWrapper checks stderr; the app here prints nothing else). */
function noValue(run: WrapperRun): void {
  assert.ok(
    !run.stdout.includes(CANARY_MARKER) && !run.stderr.includes(CANARY_MARKER),
    'a value was printed',
  );
}

/** Resolves with `pid`'s caught-signal mask once it has a handler for `signal` (it is waiting). */
async function catching(pid: () => number, signal: number): Promise<void> {
  for (let i = 0; i < 500; i++) {
    const status = pid() ? readFileSync(`/proc/${pid()}/status`, 'utf8') : '';
    const cgt = /^SigCgt:\t([0-9a-f]+)$/m.exec(status)?.[1];
    if (cgt !== undefined && (BigInt(`0x${cgt}`) >> BigInt(signal - 1)) & 1n) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`no handler for signal ${signal} within 5 s`);
}

describe('env-exec: waiting for the agent’s set', () => {
  it('waits for a set the agent writes later, then runs the app with it', async () => {
    using vol = memoryDir();
    const writer = await envVolume(vol.path);
    const value = canary();
    const running = wrap(vol.path, ['A', 'B'], 30, ['/bin/sh', '-c', 'test "$A" = "$B" && test -n "$A"']);
    await new Promise((r) => setTimeout(r, 300));
    await writer.write({ A: value }); // not all of it yet: it keeps waiting
    await new Promise((r) => setTimeout(r, 300));
    await writer.write({ A: value, B: value });
    const run = await running;
    assert.equal(run.code, 0, run.stderr);
  });

  it('timeout: 75 naming the missing variables, the path and the fix', async () => {
    using vol = memoryDir();
    const nothing = await wrap(vol.path, ['DB_PASSWORD'], 0);
    assert.equal(nothing.code, ENV_EXEC_EXIT.timeout, nothing.stderr);
    assert.equal(
      nothing.stderr,
      `env-exec: no set from the agent in 0 s: "${vol.path}/..data" is not there (or not the agent's): ` +
        `DB_PASSWORD not set. Fix: see the agent container's log (its init container's, first)\n`,
    );
    await (await envVolume(vol.path)).write({ B: canary() });
    const some = await wrap(vol.path, ['A', 'B', 'C'], 1);
    assert.equal(some.code, ENV_EXEC_EXIT.timeout, some.stderr);
    assert.equal(
      some.stderr,
      `env-exec: A, C not in the agent's set in 1 s (no "${vol.path}/..data/${ENV_VALUES_DIR}/A"). Fix: see the ` +
        `agent container's log; each variable needs the annotation secret-agent.io/env-NAME\n`,
    );
    noValue(some);
  });

  it('many missing variables: the message stays one bounded line', async () => {
    using vol = memoryDir();
    const names = Array.from({ length: 64 }, (_, i) => `V${i}_${'X'.repeat(200)}`);
    const run = await wrap(vol.path, names, 0);
    assert.equal(run.code, ENV_EXEC_EXIT.timeout);
    assert.match(run.stderr, /^env-exec: no set .* not set\. Fix: [^\n]+\n$/);
    assert.match(run.stderr, / and \d+ more not set/);
    assert.ok(run.stderr.length < 1100, `${run.stderr.length} bytes`);
  });

  for (const [signal, number] of [
    ['SIGTERM', 15],
    ['SIGINT', 2],
    ['SIGHUP', 1],
    ['SIGQUIT', 3],
  ] as const)
    it(`${signal} during the wait: exits ${128 + number} at once with one line (PID 1 would ignore it unhandled)`, async () => {
      using vol = memoryDir();
      let pid = 0;
      const running = runWrapper([`--dir=${vol.path}`, '--wait=3600', '--set=A', '--', '/bin/true'], {
        env: {},
        started: (p) => (pid = p),
        withinMs: 10_000, // far below the wait: the signal, not the timeout, ended it
      });
      await catching(() => pid, number);
      process.kill(pid, signal);
      const run = await running;
      assert.deepEqual([run.code, run.signal], [128 + number, null]);
      assert.equal(
        run.stderr,
        `env-exec: ${signal} while waiting for the agent's set; exiting ${128 + number}\n`,
      );
    });
});

describe('env-exec: values an env var cannot hold', () => {
  it('a NUL byte: 65 naming the variable and the fix, no byte of the value printed', async () => {
    using vol = memoryDir();
    await (await envVolume(vol.path)).write({ OK: canary(), BAD: Buffer.from(`${canary()}\0${canary()}`) });
    const run = await wrap(vol.path, ['OK', 'BAD'], 5, ['/bin/echo', 'ran']);
    assert.equal(run.code, ENV_EXEC_EXIT.badValue, run.stderr);
    assert.equal(run.stdout, '');
    assert.match(
      run.stderr,
      /^env-exec: the value of BAD holds a NUL byte, .+ Fix: .+secret-agent\.io\/env-BAD\)\n$/,
    );
    noValue(run);
  });

  it(`over ${MAX_ENV_VALUE_BYTES} bytes: 65; exactly ${MAX_ENV_VALUE_BYTES}: set`, async () => {
    using vol = memoryDir();
    const writer = await envVolume(vol.path);
    await writer.write({ BIG: canary().padEnd(MAX_ENV_VALUE_BYTES + 1, 'x') });
    const over = await wrap(vol.path, ['BIG'], 5, ['/bin/echo', 'ran']);
    assert.equal(over.code, ENV_EXEC_EXIT.badValue, over.stderr);
    assert.match(over.stderr, /^env-exec: the value of BIG is over 130816 bytes, .+ Fix: .+\n$/);
    noValue(over);
    await writer.write({ BIG: canary().padEnd(MAX_ENV_VALUE_BYTES, 'x') });
    const at = await wrap(vol.path, ['BIG'], 5, ['/bin/sh', '-c', 'echo ${#BIG}']);
    assert.equal(at.code, 0, at.stderr);
    assert.equal(at.stdout, `${MAX_ENV_VALUE_BYTES}\n`);
  });
});

describe('env-exec: values this uid may not read', () => {
  /** The wrapper as uid 65532 (setpriv), as an app container of another uid than the agent's runs it. */
  const asOtherUid = (dir: string) =>
    runCommand(
      [
        'setpriv',
        '--reuid=65532',
        '--regid=65532',
        '--clear-groups',
        envExecBinary(),
        `--dir=${dir}`,
        '--wait=3600',
        '--set=A',
        '--',
        '/bin/true',
      ],
      { env: {}, withinMs: 10_000 }, // far below the wait: it does not wait for what waiting cannot change
    );

  it('0400 values of another uid: 74 at once naming the uid and the fix, not a wait for the timeout', async () => {
    if (spawnSync('setpriv', ['--version']).error)
      throw new Error('this test runs the wrapper as another uid. Install: apt-get install -y util-linux');
    using vol = memoryDir();
    const writer = await envVolume(vol.path);
    await writer.write({ A: canary() }, 0o400); // its directories 0500: not even searchable by others
    // The volume itself (mkdtemp's 0700) not searchable:
    const volumeDenied = await asOtherUid(vol.path);
    assert.equal(volumeDenied.code, ENV_EXEC_EXIT.readError, volumeDenied.stderr);
    assert.equal(
      volumeDenied.stderr,
      `env-exec: cannot read the agent's set: "${vol.path}/..data" may not be read by this process's uid 65532 ` +
        `(EACCES). Fix: the agent writes the values for the pod's runAsUser, or for its fsGroup: run this ` +
        `container as that uid, or give the pod an fsGroup\n`,
    );
    chmodSync(vol.path, 0o755); // as an emptyDir is
    const dirDenied = await asOtherUid(vol.path);
    assert.equal(dirDenied.code, ENV_EXEC_EXIT.readError, dirDenied.stderr);
    assert.match(
      dirDenied.stderr,
      /^env-exec: cannot read the agent's set: "[^"]+\/\.\.data_[^"/]+\/\.secret-agent-env\/" may not be read by this process's uid 65532 \(EACCES\)\. Fix: .+fsGroup\n$/,
    );
    await writer.write({ A: canary() }, 0o600);
    execFileSync('chmod', [
      'o+x',
      join(vol.path, readlinkSync(join(vol.path, '..data'))),
      join(vol.path, '..data', ENV_VALUES_DIR),
    ]);
    const fileDenied = await asOtherUid(vol.path);
    assert.equal(fileDenied.code, ENV_EXEC_EXIT.readError, fileDenied.stderr);
    assert.match(
      fileDenied.stderr,
      /^env-exec: cannot read the value of A: "[^"]+" may not be read by this process's uid 65532 \(EACCES\)\. Fix: /,
    );
    noValue(fileDenied);
  });
});

describe('env-exec: what the agent never writes (hand-made layouts)', () => {
  /** `<vol>/..data -> ..data_hostile`, with `.secret-agent-env/` in it; returns that directory. */
  function handMade(vol: string, values: Record<string, string> = {}): string {
    const env = join(vol, '..data_hostile', ENV_VALUES_DIR);
    mkdirSync(env, { recursive: true });
    for (const [name, value] of Object.entries(values)) writeFileSync(join(env, name), value);
    symlinkSync('..data_hostile', join(vol, '..data'));
    return env;
  }

  it('a symbolic link, a FIFO, a directory: 74 naming the variable and the kind, no hang', async () => {
    using vol = memoryDir();
    const env = handMade(vol.path, { OK: canary() });
    writeFileSync(join(vol.path, 'elsewhere'), canary());
    symlinkSync(join(vol.path, 'elsewhere'), join(env, 'LINK'));
    execFileSync('mkfifo', [join(env, 'FIFO')]);
    mkdirSync(join(env, 'DIR'));
    for (const [name, kind] of [
      ['LINK', 'a symbolic link'],
      ['FIFO', 'a FIFO'],
      ['DIR', 'a directory'],
    ]) {
      const run = await wrap(vol.path, ['OK', name!], 5);
      assert.equal(run.code, ENV_EXEC_EXIT.readError, run.stderr);
      assert.equal(
        run.stderr,
        `env-exec: cannot read the value of ${name}: "${vol.path}/..data_hostile/${ENV_VALUES_DIR}/${name}" ` +
          `is ${kind}. Fix: the agent writes each value as a regular file; see the agent container's log\n`,
      );
      noValue(run);
    }
  });

  it('`..data` pointing out of the volume, or at a link: no set (75), nothing read there', async () => {
    using vol = memoryDir();
    using outside = memoryDir();
    await (await envVolume(outside.path)).write({ A: canary() });
    for (const target of [`${outside.path}/..data`, `../${outside.path.split('/').pop()}/..data`]) {
      execFileSync('ln', ['-sfn', target, join(vol.path, '..data')]);
      const run = await wrap(vol.path, ['A'], 0);
      assert.equal(run.code, ENV_EXEC_EXIT.timeout, `${target}: ${run.stderr}`);
      assert.match(run.stderr, /is not there \(or not the agent's\)/);
    }
    // A payload name that is itself a link to a payload elsewhere: not followed.
    execFileSync('ln', ['-sfn', '..data_link', join(vol.path, '..data')]);
    symlinkSync(join(outside.path, '..data'), join(vol.path, '..data_link'));
    const run = await wrap(vol.path, ['A'], 0);
    assert.equal(run.code, ENV_EXEC_EXIT.timeout, run.stderr);
    noValue(run);
  });

  it('the values directory a link: the variables are not there (75)', async () => {
    using vol = memoryDir();
    using outside = memoryDir();
    await (await envVolume(outside.path)).write({ A: canary() });
    mkdirSync(join(vol.path, '..data_hostile'));
    symlinkSync(
      join(outside.path, '..data', ENV_VALUES_DIR),
      join(vol.path, '..data_hostile', ENV_VALUES_DIR),
    );
    symlinkSync('..data_hostile', join(vol.path, '..data'));
    const run = await wrap(vol.path, ['A'], 0);
    assert.equal(run.code, ENV_EXEC_EXIT.timeout, run.stderr);
    assert.match(run.stderr, /^env-exec: A not in the agent's set/);
  });
});

describe('env-exec: one consistent set while the agent swaps them', () => {
  it('the payload removed between two values (a swap): it starts over from the new payload, all of it', async () => {
    if (spawnSync('strace', ['-V']).error)
      throw new Error('this test holds the wrapper mid-read with strace. Install: apt-get install -y strace');
    using vol = memoryDir();
    using logDir = memoryDir();
    const writer = await envVolume(vol.path);
    await writer.write({ A: 'version-1', B: 'version-1' });
    // B's openat, counted in a dry run (the volume, the payload, its values directory, A, B: the 5th in
    // the musl build; more in a sanitizer's), is held 4 s before it runs: time enough, on a loaded
    // machine too, for the agent to swap to version 2 and remove version 1's payload under the wrapper.
    const log = join(logDir.path, 'strace.log');
    const wrapped = [
      envExecBinary(),
      `--dir=${vol.path}`,
      '--wait=10',
      '--set=A',
      '--set=B',
      '--',
      '/usr/bin/env',
    ];
    execFileSync('strace', ['-qq', '-o', log, '-e', 'trace=openat', ...wrapped], { env: {} });
    const bAt =
      readFileSync(log, 'utf8')
        .split('\n')
        .findIndex((l) => l.includes('"B", ')) + 1;
    assert.ok(bAt > 0, 'the dry run opened B');
    writeFileSync(log, '');
    const running = runCommand(
      [
        'strace',
        '-qq',
        '-o',
        log,
        '-e',
        'trace=openat',
        '-e',
        `inject=openat:delay_enter=4000000:when=${bAt}`,
        ...wrapped,
      ],
      { env: {} },
    );
    for (let i = 0; i < 500 && !readFileSync(log, { encoding: 'utf8', flag: 'a+' }).includes('"B", '); i++)
      await new Promise((r) => setTimeout(r, 10));
    assert.match(
      readFileSync(log, 'utf8'),
      /openat\(\d+, "A", [^\n]*= \d+\n[\s\S]*openat\(\d+, "B", [^\n]*$/,
      'A read, B held',
    );
    await writer.write({ A: 'version-2', B: 'version-2' });
    const run = await running;
    assert.equal(run.code, 0, run.stderr);
    assert.deepEqual(run.stdout.split('\n').filter(Boolean), ['A=version-2', 'B=version-2']);
    // It did read version 1's A before it started over: the swap was in the middle of a read.
    assert.match(readFileSync(log, 'utf8'), /"B", [^\n]*ENOENT[\s\S]*"A", [\s\S]*"B", [^\n]*= \d+/);
  });

  it('many concurrent runs during back-to-back swaps never see two versions at once', async () => {
    using vol = memoryDir();
    const writer = await envVolume(vol.path);
    const names = Array.from({ length: 8 }, (_, i) => `V${i}`);
    // Version numbers (not secrets), padded so a read takes long enough to overlap a swap.
    const set = (version: number) =>
      Object.fromEntries(names.map((n) => [n, `${version}:`.padEnd(16_000, '.')]));
    await writer.write(set(0));
    let version = 0;
    let stop = false;
    const swapping = (async () => {
      while (!stop) await writer.write(set(++version));
    })();
    const seen = new Set<string>();
    const RUNS = 240;
    const CONCURRENT = 8;
    let next = 0;
    const failures: string[] = [];
    await Promise.all(
      Array.from({ length: CONCURRENT }, async () => {
        while (next < RUNS) {
          next++;
          const run = await wrap(vol.path, names, 10, ['/usr/bin/env']);
          if (run.code !== 0) {
            failures.push(`exit ${run.code}: ${run.stderr}`);
            continue;
          }
          const versions = new Set(
            run.stdout
              .split('\n')
              .filter((l) => /^V\d=/.test(l))
              .map((l) => l.slice(3, l.indexOf(':'))),
          );
          const count = run.stdout.split('\n').filter((l) => /^V\d=/.test(l)).length;
          if (versions.size !== 1 || count !== names.length)
            failures.push(`versions ${[...versions].join(',')} in ${count} variables`);
          for (const v of versions) seen.add(v);
        }
      }),
    );
    stop = true;
    await swapping;
    assert.deepEqual(failures, []);
    assert.ok(
      seen.size > 1,
      `the runs saw ${seen.size} version(s) of ${version}: the swaps did not overlap them`,
    );
  });
});
