/**
 * The resident's runs (agent/native/resident.c): state handed from run to run byte for byte, the
 * outcome's bad bytes refused with the last good outcome kept, failed, crashed and hung runs, exit
 * codes, signals and its own settings. Progress is observed through /metrics and the runs' own log,
 * never by the clock.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { describe, it } from 'node:test';
import { AGENT_SETTINGS } from '../../agent/contract/agent-settings.ts';
import { encodeOutcome, step, type RunStep } from './run-plan.ts';
import { rawRequest, residentBinary, residentKiB, startResident } from './resident-process.ts';

const OK = 'secret_agent_resident_runs_total{outcome="ok"}';
const FAILED = 'secret_agent_resident_runs_total{outcome="failed"}';
const TIMEOUT = 'secret_agent_resident_runs_total{outcome="timeout"}';
const METRICS = '# HELP agent_thing_total A thing.\n# TYPE agent_thing_total counter\nagent_thing_total 7\n';

const good = (
  state: Uint8Array,
  extra: { ready?: boolean; nextMs?: number; metrics?: string; exit?: number } = {},
) =>
  step(
    'write',
    encodeOutcome({
      ready: extra.ready ?? true,
      nextMs: extra.nextMs ?? 1000,
      metrics: extra.metrics ?? METRICS,
      state,
      ...(extra.exit !== undefined ? { exit: extra.exit } : {}),
    }),
  );

describe('resident: runs', { concurrency: 4 }, () => {
  it('hands each run the state the last one handed back, byte for byte; readiness and metrics follow', async () => {
    // Over a pipe's 64 KiB: the resident writes it as the run reads.
    const states = [randomBytes(100_000), randomBytes(3), Buffer.alloc(0), randomBytes(1000)];
    const plan: RunStep[] = [
      good(states[0]!, { ready: false }),
      good(states[1]!, { metrics: 'second_total 2\n' }),
      good(states[2]!),
      good(states[3]!, { nextMs: 86_400_000 }),
    ];
    await using r = await startResident(plan);
    assert.equal((await r.get('/healthz')).status, 200);
    await r.until('two runs', async () => (await r.sample(OK)) === 2);
    assert.equal((await r.get('/readyz')).status, 200);
    await r.until('four runs', async () => (await r.sample(OK)) === 4);
    const runs = r.runs();
    assert.equal(runs.length, 4);
    assert.equal(runs[0]!.state.length, 0, 'the first run starts from nothing');
    for (let i = 1; i < 4; i++)
      assert.ok(runs[i]!.state.equals(states[i - 1]!), `run ${i + 1} got run ${i}'s state`);
    const metrics = await r.get('/metrics');
    assert.match(metrics.raw, /Content-Type: text\/plain; version=0\.0\.4; charset=utf-8\r\n/);
    assert.ok(metrics.body.startsWith(METRICS), 'the last run’s text comes first');
    assert.match(metrics.body, /# TYPE secret_agent_resident_runs_total counter\n/);
    assert.equal(Buffer.byteLength(metrics.body), Number(/Content-Length: (\d+)/.exec(metrics.raw)![1]));
    // The fourth run asked for a day: no fifth run comes however long the test polls.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    assert.equal(r.runs().length, 4);
    assert.equal(await r.sample(FAILED), 0);
  });

  it('not ready until a run says ready', async () => {
    await using r = await startResident([good(Buffer.from('s'), { ready: false, nextMs: 86_400_000 })]);
    await r.until('one run', async () => (await r.sample(OK)) === 1);
    const readyz = await r.get('/readyz');
    assert.equal(readyz.status, 503);
    assert.equal(readyz.body, 'secrets not written yet\n');
  });

  it('refuses every malformed outcome, keeps the last good state and metrics, and says why on one line', async () => {
    const kept = Buffer.from('kept state \u0000\xff bytes', 'latin1');
    const valid = encodeOutcome({ ready: true, nextMs: 1000, state: Buffer.from('new') });
    const bad: [string, RunStep, RegExp][] = [
      ['empty', step('write'), /no end/],
      ['truncated', step('write', valid.subarray(0, valid.length - 3)), /no end/],
      ['garbage magic', step('write', Buffer.from('secret-agent-outcome 2\nready 1\nend\n')), /first line/],
      [
        'a length over the bound',
        step('write', Buffer.from('secret-agent-outcome 1\nready 1\nnext-ms 1000\nstate 1048577\n')),
        /out of bounds/,
      ],
      [
        'a length with 20 digits',
        step('write', Buffer.from('secret-agent-outcome 1\nstate 99999999999999999999\n')),
        /out of bounds/,
      ],
      [
        'a length that lies (short)',
        step('write', Buffer.from('secret-agent-outcome 1\nready 1\nnext-ms 1000\nstate 2\nabc\nend\n')),
        /longer than its length/,
      ],
      [
        'a length that lies (long)',
        step('write', Buffer.from('secret-agent-outcome 1\nready 1\nnext-ms 1000\nstate 9\nabc\nend\n')),
        /no end/,
      ],
      [
        'NUL in metrics',
        step('write', encodeOutcome({ ready: true, nextMs: 1000, metrics: 'a 1\u0000\n' })),
        /not Prometheus text/,
      ],
      [
        'invalid UTF-8 in metrics',
        step(
          'write',
          Buffer.concat([
            Buffer.from('secret-agent-outcome 1\nready 1\nnext-ms 1000\nmetrics 4\na \xc0\xaf', 'latin1'),
            Buffer.from('\nend\n'),
          ]),
        ),
        /not Prometheus text/,
      ],
      [
        'a field twice',
        step('write', Buffer.from('secret-agent-outcome 1\nready 1\nready 1\nnext-ms 1000\nend\n')),
        /twice/,
      ],
      [
        'many fields',
        step('write', Buffer.from(`secret-agent-outcome 1\n${'x 1\n'.repeat(10_000)}end\n`)),
        /unknown field/,
      ],
      [
        'a long line',
        step('write', Buffer.from(`secret-agent-outcome 1\nready ${'1'.repeat(100_000)}\n`)),
        /too long/,
      ],
      ['no end', step('write', valid.subarray(0, valid.length - 4)), /no end/],
      ['bytes after end', step('write', Buffer.concat([valid, Buffer.from('x')])), /after end/],
      [
        'next-ms under a second',
        step('write', Buffer.from('secret-agent-outcome 1\nready 1\nnext-ms 999\nend\n')),
        /under 1000/,
      ],
      [
        'end before next-ms',
        step('write', Buffer.from('secret-agent-outcome 1\nready 1\nend\n')),
        /before ready/,
      ],
      ['fd 4 closed early', step('close-early', valid.subarray(0, 30)), /no end/],
      ['a good outcome, then exit 1', step('write', valid, { code: 1 }), /exited 1/],
      ['exit 2 after a good run', step('write', new Uint8Array(), { code: 2 }), /exited 2/],
      ['a crash', step('crash', valid), /killed by signal 11/],
    ];
    const last = good(Buffer.from('final'), { nextMs: 86_400_000 });
    await using r = await startResident([good(kept, { metrics: METRICS }), ...bad.map((b) => b[1]), last]);
    await r.until('all the bad runs', async () => (await r.sample(FAILED)) === bad.length, 60_000);
    // Until the next good run, the first run's metrics are what is served.
    await r.until('the last good run', async () => (await r.sample(OK)) === 2);
    const runs = r.runs();
    assert.equal(runs.length, bad.length + 2);
    for (let i = 1; i <= bad.length; i++)
      assert.ok(runs[i]!.state.equals(kept), `run ${i + 1} got the kept state`);
    assert.ok(runs.at(-1)!.state.equals(kept), 'the good run after them got it too');
    const lines = r
      .stderr()
      .split('\n')
      .filter((l) => / run \d+ /.test(l));
    for (const [i, [name, , why]] of bad.entries()) {
      const line = lines.find((l) => l.includes(` run ${i + 2} `));
      assert.ok(line !== undefined && why.test(line), `${name}: ${line}`);
    }
    assert.ok(!r.stderr().includes('kept state'), 'state bytes never reach the log');
    assert.equal(await r.sample('secret_agent_resident_consecutive_failures'), 0);
  });

  it('holds the largest outcome (1 MiB of state, 256 KiB of metrics) once, between runs', async (t) => {
    const state = randomBytes(1024 * 1024);
    const metrics =
      `# HELP big_info Padding.\n${'big_info{x="y"} 1\n'.repeat(14_000)}`.slice(0, 256 * 1024 - 1) + '\n';
    await using r = await startResident([
      good(state, { metrics }),
      good(state, { metrics }),
      good(state, { metrics, nextMs: 86_400_000 }),
    ]);
    await r.until('three runs', async () => (await r.sample(OK)) === 3);
    assert.ok(r.runs()[2]!.state.equals(state));
    const kib = residentKiB(r.child.pid!);
    t.diagnostic(`resident VmRSS with the largest outcome: ${kib} KiB`);
    assert.ok(kib < 2048, `VmRSS ${kib} KiB`);
  });

  it('reads an outcome written in small pieces', async () => {
    const state = randomBytes(5000);
    const slow = step('slow', encodeOutcome({ ready: true, nextMs: 1000, metrics: METRICS, state }));
    await using r = await startResident([slow, good(Buffer.alloc(0), { nextMs: 86_400_000 })]);
    await r.until('two runs', async () => (await r.sample(OK)) === 2);
    assert.ok(r.runs()[1]!.state.equals(state));
  });

  it('kills a run that hangs past AGENT_RUN_DEADLINE (SIGTERM, then SIGKILL) and keeps the state', async () => {
    const kept = Buffer.from('kept');
    const plan = [
      good(kept),
      step('hang'),
      step('hang', undefined, { ignoreTerm: true }),
      good(Buffer.alloc(0), { nextMs: 86_400_000 }),
    ];
    await using r = await startResident(plan, { env: { AGENT_RUN_DEADLINE: '4s' } });
    await r.until('two timeouts', async () => (await r.sample(TIMEOUT)) === 2, 30_000);
    await r.until('the run after them', async () => (await r.sample(OK)) === 2, 10_000);
    assert.ok(r.runs()[3]!.state.equals(kept));
    assert.match(r.stderr(), /run 2 passed its deadline \(4000 ms\): SIGTERM/);
    assert.equal((await r.get('/healthz')).status, 200);
  });

  it('a run that SIGKILL does not end: the resident exits 1, 30 s after the kill, so that the container restarts', async (t) => {
    // The run leaves its process group for the resident's, so the kill of its group finds nobody:
    // from the resident's side, a run that no signal ends (as one stuck in the kernel would be).
    const escape = [
      '/usr/bin/env',
      'python3',
      '-c',
      'import os, signal, sys, time\nos.setpgid(0, os.getpgid(os.getppid()))\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(3600)',
    ];
    await using r = await startResident([], { argv: escape, env: { AGENT_RUN_DEADLINE: '1s' } });
    await r.until('the run past its deadline', () => /run 1 passed its deadline/.test(r.stderr()), 15_000);
    // The run, a child of the resident still: killed by the test once the resident has gone.
    const children = readdirSync('/proc')
      .filter((p) => /^\d+$/.test(p))
      .filter((p) => {
        try {
          return (
            readFileSync(`/proc/${p}/stat`, 'utf8').split(') ')[1]!.split(' ')[1] === String(r.child.pid)
          );
        } catch {
          return false;
        }
      });
    assert.equal(children.length, 1, 'the run is the resident’s one child');
    t.after(() => {
      try {
        process.kill(Number(children[0]), 'SIGKILL');
      } catch {
        // gone already
      }
    });
    const { code } = await r.exited(45_000);
    assert.equal(code, 1);
    assert.match(
      r.stderr(),
      /run 1 is not gone 30000 ms after SIGKILL: exiting 1 so that the container restarts/,
    );
  });

  it('backs off while runs fail, and stays alive and not ready', async () => {
    await using r = await startResident([step('write', new Uint8Array(), { code: 1 })]);
    await r.until('two failures', async () => (await r.sample(FAILED)) === 2);
    assert.equal((await r.get('/healthz')).status, 200);
    assert.equal((await r.get('/readyz')).status, 503);
    assert.equal(await r.sample('secret_agent_resident_consecutive_failures'), 2);
    assert.match(r.stderr(), /run 1 exited 1; keeping the last good outcome; next run in 1000 ms/);
    assert.match(r.stderr(), /run 2 exited 1; keeping the last good outcome; next run in 2000 ms/);
  });

  it('a run holds fds 0-4 only (3 and 4 the handoff, whatever the resident inherited) and one AGENT_HANDOFF_FDS', async () => {
    await using r = await startResident([], {
      argv: ['/bin/sleep', '60'],
      env: { AGENT_HANDOFF_FDS: '9,9' },
      extraFds: 3,
    });
    let run: number | undefined;
    await r.until('the run started', () => (run = childOf(r.child.pid!)) !== undefined);
    // Found between fork and execve it still holds the resident's fds: read them once it is sleep.
    await r.until('the run exec’d', () => readFileSync(`/proc/${run}/comm`, 'utf8').trim() === 'sleep');
    try {
      const fds = readdirSync(`/proc/${run}/fd`).map(Number).sort();
      assert.deepEqual(fds, [0, 1, 2, 3, 4]);
      assert.match(readlinkSync(`/proc/${run}/fd/3`), /^pipe:/);
      assert.match(readlinkSync(`/proc/${run}/fd/4`), /^pipe:/);
      const env = readFileSync(`/proc/${run}/environ`, 'utf8').split('\0');
      assert.deepEqual(
        env.filter((e) => e.startsWith('AGENT_HANDOFF_FDS=')),
        ['AGENT_HANDOFF_FDS=3,4'],
      );
    } finally {
      process.kill(run!, 'SIGKILL');
    }
  });

  it('a run that cannot start is a failed run', async () => {
    await using r = await startResident([], { argv: ['/nonexistent/node'] });
    await r.until('a failure', async () => (await r.sample(FAILED)) === 1);
    assert.match(r.stderr(), /cannot run "\/nonexistent\/node": No such file or directory/);
  });

  it('exits 2 when the first run exits 2 (a configuration error), and N when a run asks for exit N', async () => {
    await using config = await startResident([step('write', new Uint8Array(), { code: 2 })]);
    assert.deepEqual(await config.exited(), { code: 2, signal: null });
    await using job = await startResident([good(Buffer.alloc(0), { exit: 3 })]);
    assert.deepEqual(await job.exited(), { code: 3, signal: null });
  });

  it('SIGTERM while waiting, and during a run, ends it with 0 and ends the run', async () => {
    await using waiting = await startResident([good(Buffer.alloc(0), { nextMs: 86_400_000 })]);
    await waiting.until('one run', async () => (await waiting.sample(OK)) === 1);
    waiting.child.kill('SIGTERM');
    assert.deepEqual(await waiting.exited(3000), { code: 0, signal: null });

    for (const ignoreTerm of [false, true]) {
      await using running = await startResident([step('hang', undefined, { ignoreTerm })]);
      await running.until('a run', () => running.runs().length === 1);
      running.child.kill('SIGTERM');
      assert.deepEqual(await running.exited(ignoreTerm ? 8000 : 3000), { code: 0, signal: null });
      await running.until('the run gone', () => !isAlive(running.runs()[0]!.pid), 3000);
    }
  });
});

/** A child process of `parent`, from /proc. */
function childOf(parent: number): number | undefined {
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      if (readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')[1] === String(parent))
        return Number(pid);
    } catch {
      // gone meanwhile
    }
  }
  return undefined;
}

/** Whether `pid` runs (a zombie does not). */
function isAlive(pid: number): boolean {
  try {
    return !/\) Z /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

/** The resident given bad settings: it must exit before any run. */
function runToExit(
  env: Record<string, string>,
  args = ['--', '/bin/false'],
): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(residentBinary(), args, { env, stdio: ['ignore', 'ignore', 'pipe'], timeout: 5000 });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stderr }));
  });
}

describe('resident: its settings', () => {
  it('without AGENT_HTTP_ADDR it serves the agent’s own default, the pod’s loopback (the webhook then renders none)', async () => {
    const { stderr } = await runToExit({ PATH: process.env.PATH ?? '/usr/bin:/bin' });
    const expected = AGENT_SETTINGS.AGENT_HTTP_ADDR.default!;
    assert.equal(expected, '127.0.0.1:8099');
    // Serving there, or refused because something of this machine holds the port: either names it.
    assert.ok(
      stderr.includes(`on ${expected}\n`) || stderr.includes(`"${expected}" is already in use`),
      stderr,
    );
    assert.doesNotMatch(stderr, /0\.0\.0\.0/);
  });

  const cases: [string, Record<string, string>, RegExp][] = [
    [
      'AGENT_HTTP_ADDR without a port',
      { AGENT_HTTP_ADDR: '127.0.0.1' },
      /AGENT_HTTP_ADDR: "127\.0\.0\.1" is not HOST:PORT .*Fix: write it like 0\.0\.0\.0:8099/,
    ],
    [
      'AGENT_HTTP_ADDR with a name',
      { AGENT_HTTP_ADDR: 'example.com:80' },
      /AGENT_HTTP_ADDR: "example\.com:80" is not HOST:PORT/,
    ],
    [
      'AGENT_HTTP_ADDR port too big',
      { AGENT_HTTP_ADDR: '0.0.0.0:65536' },
      /AGENT_HTTP_ADDR: .* is not HOST:PORT/,
    ],
    [
      'AGENT_HTTP_ADDR IPv6 unbracketed',
      { AGENT_HTTP_ADDR: '::1:8099' },
      /AGENT_HTTP_ADDR: .* is not HOST:PORT/,
    ],
    ['AGENT_HTTP_ADDR control bytes', { AGENT_HTTP_ADDR: '\u0001:1' }, /AGENT_HTTP_ADDR: "\\x01:1" is not/],
    [
      'AGENT_RUN_DEADLINE not a duration',
      { AGENT_RUN_DEADLINE: '10' },
      /AGENT_RUN_DEADLINE: "10" is not a duration from 1s to 1h\. Fix: write it like 2m or 90s/,
    ],
    [
      'AGENT_RUN_DEADLINE too short',
      { AGENT_RUN_DEADLINE: '999ms' },
      /AGENT_RUN_DEADLINE: "999ms" is not a duration/,
    ],
    [
      'AGENT_RUN_DEADLINE too long',
      { AGENT_RUN_DEADLINE: '1h1s' },
      /AGENT_RUN_DEADLINE: "1h1s" is not a duration/,
    ],
  ];
  for (const [name, env, message] of cases)
    it(`exits 2 on ${name}`, async () => {
      const { code, stderr } = await runToExit(env);
      assert.equal(code, 2);
      assert.match(stderr, message);
    });

  it('exits 2 on a port in use, naming it', async () => {
    await using first = await startResident([good(Buffer.alloc(0), { nextMs: 86_400_000 })]);
    const { code, stderr } = await runToExit({ AGENT_HTTP_ADDR: `127.0.0.1:${first.port}` });
    assert.equal(code, 2);
    assert.match(stderr, /AGENT_HTTP_ADDR: "127\.0\.0\.1:\d+" is already in use \(EADDRINUSE\)/);
  });

  it('exits 2 without -- COMMAND', async () => {
    const { code, stderr } = await runToExit({}, ['/bin/false']);
    assert.equal(code, 2);
    assert.match(stderr, /usage: resident -- COMMAND/);
  });

  it('takes [IPv6]:PORT and 1m30s', async () => {
    await using r = await startResident([good(Buffer.alloc(0), { nextMs: 86_400_000 })], {
      env: { AGENT_HTTP_ADDR: '[::1]:0', AGENT_RUN_DEADLINE: '1m30s' },
    });
    assert.equal(r.host, '::1');
    assert.equal((await rawRequest(r.port, 'GET /healthz HTTP/1.1\r\n\r\n', { host: '::1' })).status, 200);
  });
});
