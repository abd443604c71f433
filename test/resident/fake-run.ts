/**
 * A fake agent run for the resident's tests: what the resident starts as RUN_ARGV. It reads the
 * state on the handoff fds, logs what it got, and does what step N of FAKE_RUN_PLAN says (N: the runs
 * before it, counted in FAKE_RUN_LOG; the last step repeats). The log is the test's own file.
 */
import { appendFileSync, closeSync, readFileSync, writeSync } from 'node:fs';
import type { RunStep } from './run-plan.ts';

const plan = JSON.parse(readFileSync(process.env.FAKE_RUN_PLAN ?? '', 'utf8')) as RunStep[];
const log = process.env.FAKE_RUN_LOG ?? '';
const [stateFd, outcomeFd] = (process.env.AGENT_HANDOFF_FDS ?? '').split(',').map(Number) as [number, number];
const index = readFileSync(log, 'utf8').split('\n').length - 1;
const step = plan[Math.min(index, plan.length - 1)]!;
const state = readFileSync(stateFd);
appendFileSync(log, `${JSON.stringify({ pid: process.pid, state: state.toString('base64') })}\n`);

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const bytes = Buffer.from(step.outcome ?? '', 'base64');

switch (step.kind) {
  case 'write':
    writeSync(outcomeFd, bytes);
    process.exitCode = step.code ?? 0;
    break;
  case 'slow':
    // One byte at a time with pauses: the resident must parse an outcome however it is cut.
    for (let i = 0; i < bytes.length; i += 7) {
      writeSync(outcomeFd, bytes.subarray(i, i + 7));
      await sleep(5);
    }
    break;
  case 'close-early':
    writeSync(outcomeFd, bytes);
    closeSync(outcomeFd);
    await sleep(300);
    break;
  case 'crash':
    writeSync(outcomeFd, bytes);
    process.kill(process.pid, 'SIGSEGV');
    await sleep(10_000);
    break;
  case 'hang':
    if (step.ignoreTerm === true) process.on('SIGTERM', () => {});
    setInterval(() => {}, 1000);
    break;
}
