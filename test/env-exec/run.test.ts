/**
 * What the app gets from the wrapper (agent/native/env-exec.c): its argv, its env with the variables
 * set from the agent's set (written by the agent's own AtomicDir), its PID, its exit code, its
 * signals; and how a command is found (a path, or PATH as execvp searches it, never through /bin/sh).
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { ENV_EXEC_EXIT } from '../../agent/contract/env-exec.ts';
import { canary } from '../support/canary.ts';
import { memoryDir } from '../support/run-agent.ts';
import { envExecBinary, envVolume, runCommand, runWrapper } from './wrapper.ts';

const REPORT_APP = new URL('./report-app.ts', import.meta.url).pathname;
const NODE = process.execPath;
const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

interface Report {
  argv: string[];
  pid: number;
  cwd: string;
  env: Record<string, string | { length: number; sha256: string }>;
}
const report = (stdout: string) => JSON.parse(Buffer.from(stdout, 'latin1').toString('utf8')) as Report;

/** A scratch directory on disk (scripts to exec), removed on dispose. */
function scratch(): { path: string; [Symbol.dispose](): void } {
  const path = mkdtempSync(join(tmpdir(), 'env-exec-test-'));
  return { path, [Symbol.dispose]: () => rmSync(path, { recursive: true, force: true }) };
}

function script(path: string, text: string, mode = 0o755): string {
  writeFileSync(path, text);
  chmodSync(path, mode);
  return path;
}

describe('env-exec: the app’s argv, env, pid and exit code', () => {
  it('passes argv after -- unchanged, sets each variable over the inherited env, keeps the rest', async () => {
    using vol = memoryDir();
    const values = {
      DB_PASSWORD: canary('db'),
      API_KEY: canary('api'),
      EMPTY: '',
      MULTI: `a\nb=c ${canary()}`,
    };
    await (await envVolume(vol.path)).write(values);
    const appArgs = ['', ' spaced  arg ', '--', '--set=X', 'line\nbreak', 'ünïcödé', '$HOME', '*'];
    const inherited = {
      PATH: '/usr/bin:/bin',
      REPORT_SET: Object.keys(values).join(','),
      DB_PASSWORD: 'inherited-and-replaced',
      KEEP: 'a=b=c',
      EMPTY_KEPT: '',
    };
    const run = await runWrapper(
      [
        `--dir=${vol.path}`,
        '--wait=5',
        ...Object.keys(values).map((n) => `--set=${n}`),
        '--',
        NODE,
        REPORT_APP,
        ...appArgs,
      ],
      { env: inherited },
    );
    assert.equal(run.code, 0, run.stderr);
    assert.equal(run.stderr, '', 'nothing said when all is well');
    const seen = report(run.stdout);
    assert.deepEqual(seen.argv, appArgs);
    const { DB_PASSWORD: _replaced, ...kept } = inherited;
    assert.deepEqual(seen.env, {
      ...kept,
      ...Object.fromEntries(
        Object.entries(values).map(([k, v]) => [k, { length: Buffer.byteLength(v), sha256: sha256(v) }]),
      ),
    });
  });

  it('the app is the same process: it keeps the wrapper’s PID, and its working directory', async () => {
    using vol = memoryDir();
    using cwd = scratch();
    await (await envVolume(vol.path)).write({ A: canary() });
    const run = await runWrapper([`--dir=${vol.path}`, '--wait=5', '--set=A', '--', NODE, REPORT_APP], {
      env: { REPORT_SET: 'A' },
      cwd: cwd.path,
    });
    assert.equal(run.code, 0, run.stderr);
    assert.equal(report(run.stdout).pid, run.pid);
    assert.equal(report(run.stdout).cwd, cwd.path);
  });

  it('the app’s exit code is the exit code (3 stays 3, 0 stays 0)', async () => {
    using vol = memoryDir();
    await (await envVolume(vol.path)).write({ A: canary() });
    for (const code of [3, 0, 255]) {
      const run = await runWrapper([`--dir=${vol.path}`, '--wait=5', '--set=A', '--', NODE, REPORT_APP], {
        env: { REPORT_SET: 'A', REPORT_EXIT: String(code) },
      });
      assert.equal(run.code, code, run.stderr);
    }
  });

  it('a signal after exec reaches the app’s handler: no mask, no disposition of the wrapper’s is left', async () => {
    using vol = memoryDir();
    await (await envVolume(vol.path)).write({ A: canary() });
    const app = `process.on('SIGTERM', () => { process.stdout.write('app got SIGTERM\\n'); process.exit(7); });
      process.stdout.write('ready\\n'); setTimeout(() => {}, 60000);`;
    let pid = 0;
    let ready: () => void;
    const isReady = new Promise<void>((resolve) => (ready = resolve));
    // Signalled once the app said it is ready: its handler is installed, the wrapper is gone.
    const running = runWrapper([`--dir=${vol.path}`, '--wait=5', '--set=A', '--', NODE, '-e', app], {
      started: (p) => (pid = p),
      stdoutSoFar: (out) => out === 'ready\n' && ready(),
    });
    await Promise.race([isReady, running]);
    process.kill(pid, 'SIGTERM');
    const run = await running;
    assert.deepEqual([run.code, run.stdout], [7, 'ready\napp got SIGTERM\n'], run.stderr);
  });

  it('the app starts with the signal mask and the ignored signals the wrapper was started with', async () => {
    using vol = memoryDir();
    await (await envVolume(vol.path)).write({ A: canary() });
    // sh ignores SIGHUP (trap ''), then becomes the wrapper: the app must still ignore it, and catch nothing.
    const run = await runCommand(
      [
        '/bin/sh',
        '-c',
        `trap '' HUP; exec "$0" "$@"`,
        envExecBinary(),
        `--dir=${vol.path}`,
        '--wait=5',
        '--set=A',
        '--',
        '/bin/cat',
        '/proc/self/status',
      ],
      { env: {} },
    );
    assert.equal(run.code, 0, run.stderr);
    assert.deepEqual(
      run.stdout.split('\n').filter((l) => /^Sig(Blk|Ign|Cgt):/.test(l)),
      ['SigBlk:\t0000000000000000', 'SigIgn:\t0000000000000001', 'SigCgt:\t0000000000000000'],
    );
  });
});

describe('env-exec: finding the command', () => {
  it('a path with / is executed as it is; a name is searched on the inherited PATH, relative entries too', async () => {
    using vol = memoryDir();
    using bin = scratch();
    const value = canary();
    await (await envVolume(vol.path)).write({ A: value });
    mkdirSync(join(bin.path, 'rel'));
    mkdirSync(join(bin.path, 'abs'));
    script(join(bin.path, 'rel/app'), '#!/bin/sh\necho "rel $#:$1"\n');
    script(join(bin.path, 'abs/app'), '#!/bin/sh\necho "abs $#:$1"\n');
    script(join(bin.path, 'abs/only-abs'), '#!/bin/sh\necho "only-abs"\n');
    const wrap = (command: string[], PATH: string | undefined) =>
      runWrapper([`--dir=${vol.path}`, '--wait=5', '--set=A', '--', ...command], {
        env: PATH === undefined ? {} : { PATH },
        cwd: bin.path,
      });
    const found = async (command: string[], PATH: string | undefined) => {
      const run = await wrap(command, PATH);
      assert.equal(run.code, 0, run.stderr);
      return run.stdout;
    };
    assert.equal(
      await found(['app', 'x y'], 'rel:abs'),
      'rel 1:x y\n',
      'a relative entry, from the working directory',
    );
    assert.equal(await found(['app', 'x'], `/nonexistent:${bin.path}/abs:rel`), 'abs 1:x\n', 'in order');
    assert.equal(await found(['only-abs'], `rel:${bin.path}/abs`), 'only-abs\n', 'on to the next entry');
    assert.equal(await found(['./rel/app'], '/nonexistent'), 'rel 0:\n', 'a path: PATH not searched');
    // An empty entry is the working directory, as execvp has it.
    script(join(bin.path, 'here'), '#!/bin/sh\necho here\n');
    assert.equal(await found(['here'], '/nonexistent::/also-not'), 'here\n');
    // No PATH at all: execvp's default, where env lives.
    // (assert.ok, not equal: a failure must not print the value)
    assert.ok((await found(['env'], undefined)) === `A=${value}\n`, 'env found on the default PATH, A set');
  });

  it('not found: 127 naming the command; found but not executable or not a binary: 126, never /bin/sh', async () => {
    using vol = memoryDir();
    using bin = scratch();
    await (await envVolume(vol.path)).write({ A: canary() });
    script(join(bin.path, 'no-shebang'), 'echo this would run under /bin/sh\n');
    script(join(bin.path, 'not-executable'), '#!/bin/sh\necho ran\n', 0o644);
    const wrap = (command: string, PATH = bin.path) =>
      runWrapper([`--dir=${vol.path}`, '--wait=5', '--set=A', '--', command], { env: { PATH } });
    const cases: [string, number, RegExp][] = [
      [
        'nosuch',
        ENV_EXEC_EXIT.notFound,
        /^env-exec: cannot run "nosuch": No such file or directory \(searched PATH\)\. Fix: .+\n$/,
      ],
      [
        '/nonexistent/app',
        ENV_EXEC_EXIT.notFound,
        /^env-exec: cannot run "\/nonexistent\/app": No such file or directory\. Fix: .+\n$/,
      ],
      ['', ENV_EXEC_EXIT.notFound, /^env-exec: cannot run "": No such file or directory/],
      [
        'no-shebang',
        ENV_EXEC_EXIT.cannotExecute,
        /^env-exec: cannot run "no-shebang": Exec format error \(.*never falls back to \/bin\/sh\)\n$/,
      ],
      [`${bin.path}/no-shebang`, ENV_EXEC_EXIT.cannotExecute, /Exec format error/],
      [
        'not-executable',
        ENV_EXEC_EXIT.cannotExecute,
        /^env-exec: cannot run "not-executable": Permission denied\n$/,
      ],
      [bin.path, ENV_EXEC_EXIT.cannotExecute, /Permission denied/],
    ];
    for (const [command, code, message] of cases) {
      const run = await wrap(command);
      assert.equal(run.stdout, '', `${command}: nothing ran`);
      assert.equal(run.code, code, `${command}: ${run.stderr}`);
      assert.match(run.stderr, message);
    }
  });

  it('variables too large together for execve: 126 with its own message (E2BIG), no value', async () => {
    using vol = memoryDir();
    // 64 values just under the bound each: over any ARG_MAX Linux allows (at most 6 MiB).
    const names = Array.from({ length: 64 }, (_, i) => `BIG_${i}`);
    const big = canary('big').padEnd(128 * 1024 - 256, 'x');
    await (await envVolume(vol.path)).write(Object.fromEntries(names.map((n) => [n, big])));
    const run = await runWrapper(
      [`--dir=${vol.path}`, '--wait=5', ...names.map((n) => `--set=${n}`), '--', '/bin/true'],
      { env: {} },
    );
    assert.equal(run.code, ENV_EXEC_EXIT.cannotExecute, run.stderr);
    assert.match(
      run.stderr,
      /^env-exec: cannot run "\/bin\/true": the environment and arguments are too large for execve \(E2BIG.+Fix: .+\n$/,
    );
  });
});
