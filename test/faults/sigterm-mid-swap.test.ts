import assert from 'node:assert/strict';
import {
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  renameSync,
  rmSync,
  watch,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it, type TestContext } from 'node:test';
import { canary } from '../support/canary.ts';
import { memoryDir, startAgent, type RunningAgent } from '../support/run-agent.ts';
import { exited, httpPort, waitReady } from './backend.ts';

const SECRETS = 50;
const SECRET_BYTES = 500 * 1024;

/**
 * Where a process is, from /proc: `Z` means it has exited and only waits for this process to reap
 * it (the delay is on the test's side); otherwise its threads and the kernel function each sleeps in.
 */
function processState(pid: number): string {
  const read = (path: string) => {
    try {
      return readFileSync(path, 'utf8').trim();
    } catch {
      return '?';
    }
  };
  const state = read(`/proc/${pid}/stat`).split(') ')[1]?.split(' ')[0] ?? 'gone';
  if (state === 'Z' || state === 'gone') return `state ${state}`;
  let tasks: string[] = [];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    // gone meanwhile
  }
  const threads = tasks.map(
    (tid) => `${read(`/proc/${pid}/task/${tid}/comm`)}:${read(`/proc/${pid}/task/${tid}/wchan`)}`,
  );
  return `state ${state}; threads ${threads.join(', ')}`;
}

/**
 * 50 secrets of ~500 KB (file: provider) plus a small `generation` file: a rotation of the small
 * one makes the agent write a whole new 25 MB payload, a swap long enough to be interrupted.
 */
describe('fault: SIGTERM (or a crash) while the agent writes a large set', () => {
  let sources: string;
  const big: string[] = [];

  before(() => {
    sources = mkdtempSync(join(tmpdir(), 'secret-agent-big-'));
    for (let i = 0; i < SECRETS; i++) {
      const line = `${canary(`big-${i}`)}\n`;
      big.push(line.repeat(Math.ceil(SECRET_BYTES / line.length)).slice(0, SECRET_BYTES));
      writeFileSync(join(sources, `big-${i}`), big[i]!);
    }
  });
  after(() => rmSync(sources, { recursive: true, force: true }));

  const rotate = (value: string) => {
    writeFileSync(join(sources, 'generation.tmp'), value);
    renameSync(join(sources, 'generation.tmp'), join(sources, 'generation'));
  };

  const env = (dir: string, mode: 'init' | 'sidecar'): Record<string, string> => {
    const e: Record<string, string> = { AGENT_MODE: mode, SECRETS_DIR: dir, REFRESH_INTERVAL: '1s' };
    if (mode === 'sidecar') e.AGENT_HTTP_ADDR = '127.0.0.1:0';
    for (let i = 0; i < SECRETS; i++) {
      e[`SECRET_${i}_REF`] = `file:${join(sources, `big-${i}`)}`;
      e[`SECRET_${i}_FILENAME`] = `big-${i}`;
    }
    e[`SECRET_${SECRETS}_REF`] = `file:${join(sources, 'generation')}`;
    e[`SECRET_${SECRETS}_FILENAME`] = 'generation';
    return e;
  };

  /** Sends `signals` (in order) the moment the agent creates a new payload directory: a swap has begun. */
  const onNextPayload = (dir: string, agent: RunningAgent, ...signals: NodeJS.Signals[]) => {
    const live = (() => {
      try {
        return readlinkSync(join(dir, '..data'));
      } catch {
        return undefined;
      }
    })();
    let done = false;
    return new Promise<string>((resolve) => {
      const watcher = watch(dir, (_event, name) => {
        if (!name || !/^\.\.data_\d/.test(name) || name === live) return;
        watcher.close();
        if (done) return; // one batch of events may name the directory twice
        done = true;
        for (const signal of signals) process.kill(agent.pid, signal);
        resolve(name);
      });
    });
  };

  /**
   * What a reader can see: `..data` names a payload holding every file whole, the big ones as
   * stored and `generation` one of the values it had; the user-visible links all resolve into it.
   * Returns the generation and the `..`-entries in the directory.
   */
  const assertCompleteSet = (dir: string, generations: readonly string[]) => {
    const live = readlinkSync(join(dir, '..data'));
    const payload = readdirSync(join(dir, live)).sort();
    assert.equal(payload.length, SECRETS + 1, `the live payload holds ${payload.length} files`);
    for (let i = 0; i < SECRETS; i++)
      assert.ok(readFileSync(join(dir, `big-${i}`), 'utf8') === big[i], `big-${i} is whole`);
    const generation = readFileSync(join(dir, 'generation'), 'utf8');
    assert.ok(generations.includes(generation), 'generation is one of the values it had');
    return {
      generation,
      live,
      dotted: readdirSync(dir)
        .filter((e) => e.startsWith('..'))
        .sort(),
    };
  };

  /**
   * The next start of the pod: an init run over the same volume. Its exit is checked when it comes.
   * Under heavy parallel load an init run was once seen (3 times in ~15 suite runs) to log 'secrets
   * written' and not exit for over 10 s (issue 10, R1). Its clients are now closed before that line
   * and nothing of the agent's is left open after it (test/faults/init-exit-under-load.test.ts checks
   * that mechanism 100 times under load); a slow exit here is still only a diagnostic, as it may be
   * this process being starved, but it now says which side was slow.
   */
  const nextStart = async (t: TestContext, dir: string) => {
    const agent = startAgent(env(dir, 'init'));
    try {
      await agent.waitForLog((l) => l.msg === 'secrets written', 30_000);
      const gone = await exited(agent, 'the init run to end', 10_000).catch(() => false);
      if (gone) assert.equal((await agent.stop()).code, 0, agent.output().stderr);
      else
        t.diagnostic(
          `the init run wrote its set but had not exited 10 s later (pid ${agent.pid}): ${processState(agent.pid)}; last lines: ${JSON.stringify(
            agent
              .output()
              .logs.slice(-2)
              .map((l) => l.msg),
          )}`,
        );
    } finally {
      await agent.stop('SIGKILL');
    }
  };

  it('sidecar, SIGTERM mid-swap: the swap finishes, exit 0, the new set is complete, no temporary payload is left', async (t: TestContext) => {
    // The signal must land while the payload is being written; a fast machine may finish first, so
    // up to three tries, and the test fails if none was mid-swap.
    let midSwap = false;
    for (let attempt = 1; attempt <= 3 && !midSwap; attempt++) {
      using dir = memoryDir();
      const g1 = canary('gen-1');
      const g2 = canary('gen-2');
      rotate(g1);
      const agent = startAgent(env(dir.path, 'sidecar'));
      try {
        await waitReady(await httpPort(agent));
        assert.equal(assertCompleteSet(dir.path, [g1]).generation, g1);
        const signalled = onNextPayload(dir.path, agent, 'SIGTERM');
        rotate(g2);
        const payload = await signalled;
        // stop() itself would send a second SIGTERM: wait for the agent to end on the first.
        await exited(agent, 'the agent to stop');
        const { code } = await agent.stop();
        assert.equal(code, 0, agent.output().stderr);
        const logs = agent.output().logs.map((l) => l.msg);
        midSwap = logs.indexOf('stopping') >= 0 && logs.indexOf('stopping') < logs.indexOf('rotated');
        t.diagnostic(`attempt ${attempt}: SIGTERM ${midSwap ? 'during' : 'after'} the swap`);
        const set = assertCompleteSet(dir.path, [g1, g2]);
        assert.equal(set.generation, g2, 'the swap in flight was finished, not cut');
        assert.equal(set.live, payload);
        assert.deepEqual(set.dotted, ['..data', payload], 'no temporary payload or link is left');
      } finally {
        await agent.stop();
      }
    }
    assert.ok(midSwap, 'in three tries, SIGTERM never arrived while the payload was being written');
  });

  it('sidecar, a second SIGTERM (or a SIGINT) while the swap finishes: still exit 0 with the new set', async () => {
    using dir = memoryDir();
    const g1 = canary('gen-1');
    const g2 = canary('gen-2');
    rotate(g1);
    const agent = startAgent(env(dir.path, 'sidecar'));
    try {
      await waitReady(await httpPort(agent));
      const signalled = onNextPayload(dir.path, agent, 'SIGTERM');
      rotate(g2);
      await signalled;
      // The second signal once the first is being handled (two at once would merge into one).
      await agent.waitForLog((l) => l.msg === 'stopping');
      process.kill(agent.pid, 'SIGTERM');
      await exited(agent, 'the agent to stop');
      const { code, signal } = await agent.stop();
      assert.deepEqual({ code, signal }, { code: 0, signal: null });
      assert.equal(assertCompleteSet(dir.path, [g1, g2]).generation, g2);
    } finally {
      await agent.stop();
    }
  });

  it('crash (SIGKILL) mid-swap: the old set stays whole and visible; the next start removes the partial payload', async (t: TestContext) => {
    using dir = memoryDir();
    const g1 = canary('gen-1');
    const g2 = canary('gen-2');
    rotate(g1);
    const agent = startAgent(env(dir.path, 'sidecar'));
    let partial: string;
    try {
      await waitReady(await httpPort(agent));
      const killed = onNextPayload(dir.path, agent, 'SIGKILL');
      rotate(g2);
      partial = await killed;
      assert.equal((await agent.stop()).signal, 'SIGKILL');
    } finally {
      await agent.stop();
    }
    const crashed = assertCompleteSet(dir.path, [g1, g2]);
    const leftOver = crashed.dotted.filter((e) => e !== '..data' && e !== crashed.live);
    t.diagnostic(
      `after the crash: generation ${crashed.generation === g1 ? 'old' : 'new'}, left over: ${JSON.stringify(leftOver)}`,
    );
    if (crashed.generation === g1)
      assert.deepEqual(leftOver, [partial], 'only the interrupted payload is left');

    // The next start (an init container of the restarted pod) writes a new set and cleans up.
    await nextStart(t, dir.path);
    const next = assertCompleteSet(dir.path, [g2]);
    assert.deepEqual(next.dotted, ['..data', next.live], 'the partial payload of the crash is gone');
  });

  it('init, SIGTERM mid-write: nothing partial is ever visible, and the next run cleans up', async (t: TestContext) => {
    using dir = memoryDir();
    const g = canary('gen-init');
    rotate(g);
    const agent = startAgent(env(dir.path, 'init'));
    const payload = await onNextPayload(dir.path, agent, 'SIGTERM');
    const { code, signal } = await agent.stop();
    t.diagnostic(`init on SIGTERM: code ${code}, signal ${signal}; payload ${payload}`);
    const visible = readdirSync(dir.path).filter((e) => !e.startsWith('..'));
    if (code === 0) {
      assertCompleteSet(dir.path, [g]);
    } else {
      // Killed before the swap: no ..data link, so no user-visible file points anywhere.
      assert.equal(signal, 'SIGTERM');
      assert.deepEqual(visible, [], 'no user-visible file from an unfinished write');
      assert.throws(() => readlinkSync(join(dir.path, '..data')));
    }
    await nextStart(t, dir.path);
    const next = assertCompleteSet(dir.path, [g]);
    assert.deepEqual(next.dotted, ['..data', next.live], 'leftovers of the interrupted run are gone');
  });
});
