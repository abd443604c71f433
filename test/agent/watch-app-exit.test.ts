import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import { watchAppExit } from '../../agent/proc/watch-app-exit.ts';
import { eventually } from '../support/run-agent.ts';

/** A directory laid out like /proc: one PID directory with a comm file per process. */
function fakeProc() {
  const dir = mkdtempSync(join(tmpdir(), 'secret-agent-proc-'));
  return {
    dir,
    start(pid: number, comm: string) {
      mkdirSync(join(dir, String(pid)));
      writeFileSync(join(dir, String(pid), 'comm'), `${comm}\n`);
    },
    end(pid: number) {
      rmSync(join(dir, String(pid)), { recursive: true });
    },
    [Symbol.dispose]: () => rmSync(dir, { recursive: true, force: true }),
  };
}

function capturedLog() {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
      done();
    },
  });
  return { log: pino({ level: 'info' }, stream), lines };
}

describe('watchAppExit (EXIT_WITH_PROCESS)', () => {
  it('exits once the named process has been seen and has ended; other processes do not count', async () => {
    using proc = fakeProc();
    proc.start(1, 'pause');
    proc.start(7, 'python3');
    const { log, lines } = capturedLog();
    let exits = 0;
    const watch = watchAppExit('python3', log, () => exits++, { intervalMs: 10, procDir: proc.dir });
    try {
      await eventually(() => lines.find((l) => l.msg === 'watching the app; will exit when it ends'), 'seen');
      assert.equal(exits, 0);
      proc.end(7);
      await eventually(() => (exits > 0 ? true : undefined), 'exit after the app ended');
    } finally {
      watch.stop();
    }
  });

  it('samples at once: an app already running when the agent starts is seen without waiting an interval', async () => {
    using proc = fakeProc();
    proc.start(7, 'python3');
    const { log, lines } = capturedLog();
    const watch = watchAppExit('python3', log, () => undefined, { intervalMs: 3_600_000, procDir: proc.dir });
    try {
      await eventually(
        () => lines.find((l) => l.msg === 'watching the app; will exit when it ends'),
        'seen at once',
      );
    } finally {
      watch.stop();
    }
  });

  it('compares the first 15 bytes, as the kernel keeps a comm', async () => {
    using proc = fakeProc();
    proc.start(9, 'a-very-long-pro');
    const { log, lines } = capturedLog();
    const watch = watchAppExit('a-very-long-process-name', log, () => undefined, {
      intervalMs: 10,
      procDir: proc.dir,
    });
    try {
      await eventually(() => lines.find((l) => l.msg === 'watching the app; will exit when it ends'), 'seen');
    } finally {
      watch.stop();
    }
  });

  it('never seen: warns once, naming the processes it can see, and never exits', async () => {
    using proc = fakeProc();
    proc.start(1, 'pause');
    proc.start(12, 'MainThread');
    proc.start(13, 'MainThread');
    const { log, lines } = capturedLog();
    let exits = 0;
    const watch = watchAppExit('node', log, () => exits++, {
      intervalMs: 5,
      warnAfter: 3,
      procDir: proc.dir,
    });
    try {
      const warning = await eventually(() => lines.find((l) => l.level === 40), 'the warning');
      assert.deepEqual(warning.visible, ['MainThread', 'pause']);
      assert.equal(warning.process, 'node');
      assert.match(String(warning.msg), /check EXIT_WITH_PROCESS/);
      await new Promise((r) => setTimeout(r, 50));
      assert.equal(lines.filter((l) => l.level === 40).length, 1, 'warned once');
      assert.equal(exits, 0);
    } finally {
      watch.stop();
    }
  });

  it('says so when /proc cannot be listed, and keeps going', async () => {
    using proc = fakeProc();
    const { log, lines } = capturedLog();
    const watch = watchAppExit('python3', log, () => undefined, {
      intervalMs: 10,
      procDir: join(proc.dir, 'missing'),
    });
    try {
      const warning = await eventually(() => lines.find((l) => l.level === 40), 'the warning');
      assert.equal(warning.code, 'ENOENT');
      assert.match(String(warning.msg), /cannot list processes for EXIT_WITH_PROCESS/);
    } finally {
      watch.stop();
    }
  });
});
