/**
 * Issue 37 ("Fortress"): many tenants at once, each sending the webhook a large pod that looks ordinary
 * (tens of thousands of volumes, args or env entries, 1.9 to 2.9 MB, some with an `oldObject` as
 * large, some past the JSON value limit), from an address of its own, all at once, staggered or
 * slowly; and the bodies that make admission hold the most, one after another on a full admission
 * cache. The built bundle (dist/webhook.js, `node images/build.ts`) runs with its Deployment's
 * NODE_OPTIONS; ordinary pods arrive from 127.0.0.1 every 100 ms, as the API server sends them (retried
 * on 429 Retry-After, within timeoutSeconds).
 *
 * Whatever the number of tenants, the webhook's peak resident set (VmHWM) stays within its stated worst
 * case (webhook/limits.ts), itself at most three quarters of the memory limit (192 MiB of 256Mi), and
 * with what its connections hold in the kernel's receive buffers (the container is charged for those
 * too) under the limit itself; at least 95 % of ordinary pods are injected in time; every large body
 * ends as the API server's call would (admitted, refused by name and limit, shed with 429 and
 * Retry-After at each try, or still waiting at its deadline, at most half of them: never a reset); and
 * nothing is logged as an error. A fresh webhook per run, so each peak is that run's.
 */
import assert from 'node:assert/strict';
import { Agent } from 'node:https';
import { describe, it, type TestContext } from 'node:test';
import { MAX_JSON_VALUES } from '../../webhook/admission/json-limits.ts';
import { MAX_CONTAINERS } from '../../webhook/admission/answer-limits.ts';
import { WORST_CASE_MIB } from '../../webhook/limits.ts';
import { served } from '../webhook/connection-attacks.ts';
import { deployedBundles } from './deployed-bundle.ts';
import { deployedWebhook } from '../webhook/deployed-webhook.ts';
import { basicPod, review } from '../webhook/fixtures.ts';
import { admissionCall, ordinaryBody, processMemory, type Answer } from '../webhook/hostile-load.ts';
import {
  runCrowd,
  worstBody,
  WORST_SHAPES,
  type CrowdFigures,
  type CrowdPlan,
  type TenantCall,
} from './tenant-crowd.ts';

const deployed = deployedWebhook();
const DEADLINE_MS = deployed.timeoutSeconds * 1000;
/** The peak every run must stay under: the stated worst case, which is at most 3/4 of the limit. */
const CEILING_MIB = Math.min(WORST_CASE_MIB, deployed.memoryLimitMiB * 0.75);
const SERVED_SHARE = 0.95;

const webhook = deployedBundles();

/** How a large body's call ended, for the report. */
function ending(c: TenantCall): string {
  if (c.status !== 0) return c.outcome;
  return c.shed > 0 ? `${c.outcome} after ${c.shed} × 429` : `${c.outcome} while ${c.stage ?? 'connecting'}`;
}

function describeCrowd(name: string, f: CrowdFigures): string {
  const by = new Map<string, number>();
  for (const c of f.calls) by.set(`${c.shape} ${ending(c)}`, (by.get(`${c.shape} ${ending(c)}`) ?? 0) + 1);
  const shed = f.calls.reduce((n, c) => n + c.shed, 0);
  const ms = f.ordinary.map((a) => a.ms).sort((x, y) => x - y);
  return [
    `${name}: peak RSS ${f.peakMiB.toFixed(0)} MiB (VmHWM; ${f.beforeMiB.toFixed(0)} before, ceiling ${CEILING_MIB}), peak private ${f.peakAnonymousMiB.toFixed(0)} MiB, kernel receive buffers ${f.peakSocketMiB.toFixed(0)} MiB${f.gone ? '; the webhook was GONE' : ''}`,
    `  ordinary served ${served(f.ordinary)}/${f.ordinary.length}, ms p50 ${ms[Math.floor(ms.length / 2)]?.toFixed(0)} max ${ms.at(-1)?.toFixed(0)}`,
    `  ${f.calls.length} large bodies (${(f.calls.reduce((n, c) => n + c.bytes, 0) / 1e6).toFixed(0)} MB), ${shed} answers 429, ${unanswered(f.calls).length} unanswered at the deadline: ${[...by].map(([k, v]) => `${v} ${k}`).join(', ')}`,
  ].join('\n');
}

/**
 * A large body's call ended as the API server's would: admitted, refused by name and limit, shed with
 * 429 and Retry-After at each try, or still waiting when its deadline passed (then failurePolicy Fail
 * refuses the pod). Never a connection reset or an error.
 */
function assertEnded(c: TenantCall): void {
  for (const after of c.retryAfter) assert.equal(after, '1', 'shed with Retry-After: 1');
  if (c.status === 0) {
    assert.equal(c.error, 'deadline', `${c.shape}: ${JSON.stringify(c)}`);
    return;
  }
  if (c.shape === 'volumes-59000') {
    assert.equal(c.status, 400, `${c.shape}: ${JSON.stringify(c)}`);
    assert.match(c.message, new RegExp(`the body holds more than ${MAX_JSON_VALUES} JSON values`));
    return;
  }
  assert.equal(c.status, 200, `${c.shape}: ${JSON.stringify(c)}`);
  assert.equal(c.outcome, 'allowed', `${c.shape}: ${c.message}`);
}

/** Calls that got no answer at all before the API server's deadline: not even a 429. */
const unanswered = (calls: readonly TenantCall[]) => calls.filter((c) => c.status === 0 && c.shed === 0);

/**
 * The share of large bodies that may reach the API server's deadline without any answer, not even a
 * 429: at most half. On an idle machine none does; on one whose two cores run other tests too, a body
 * read and waiting for its turn (a few hundred milliseconds each) can be answered after the deadline as
 * the crowd's process sees it (26 % of 128, once, at a load average of 5).
 */
const UNANSWERED_SHARE = 0.5;

/** Runs one crowd against a fresh webhook and asserts the issue's bounds on it. */
async function crowdOf(
  t: TestContext,
  name: string,
  plan: Omit<CrowdPlan, 'port' | 'ca' | 'deadlineMs'>,
): Promise<CrowdFigures> {
  const w = await webhook();
  const f = await runCrowd(w, { ...plan, deadlineMs: DEADLINE_MS }, 100);
  const report = describeCrowd(name, f);
  t.diagnostic(report);
  assert.equal(f.gone, false, `the webhook died:\n${report}\n${w.stderr()}`);
  assert.ok(f.peakMiB <= CEILING_MIB, `peak RSS over ${CEILING_MIB} MiB:\n${report}`);
  // The container is charged for what its connections hold in the kernel too: with its peak RSS,
  // still under the limit the kernel kills at.
  assert.ok(f.peakMiB + f.peakSocketMiB < deployed.memoryLimitMiB, `RSS and socket buffers:\n${report}`);
  assert.ok(f.ordinary.length >= 20, `the crowd lasted: ${report}`);
  assert.ok(
    served(f.ordinary) >= f.ordinary.length * SERVED_SHARE,
    `fewer than ${SERVED_SHARE * 100} % of ordinary pods were injected in time:\n${report}`,
  );
  assert.equal(f.calls.length, plan.callers * plan.rounds, 'every call ended');
  for (const c of f.calls) assertEnded(c);
  assert.ok(
    unanswered(f.calls).length <= f.calls.length * UNANSWERED_SHARE,
    `large bodies the webhook did not answer before the deadline:\n${report}`,
  );
  assert.equal(w.stderr(), '', 'nothing on stderr');
  assert.deepEqual(w.errors(), [], 'nothing logged as an error');
  await w.stop();
  return f;
}

describe(
  'many tenants’ large pods at once, on the built webhook with its Deployment’s NODE_OPTIONS',
  {
    timeout: 240_000,
  },
  () => {
    for (const [callers, rounds] of [
      [8, 2],
      [32, 1],
      [64, 2],
    ] as const)
      it(`${callers} tenants, each from its own address, all at once, ${rounds} round${rounds > 1 ? 's' : ''}`, async (t) => {
        const f = await crowdOf(t, `${callers} at once`, { callers, rounds, timing: 'together' });
        // Not only shed: the lane admits large bodies while ordinary pods are served.
        assert.ok(
          f.calls.some((c) => c.outcome === 'allowed'),
          'some large bodies were admitted',
        );
      });

    it('128 tenants, all at once', async (t) => {
      await crowdOf(t, '128 at once', { callers: 128, rounds: 1, timing: 'together' });
    });

    it('64 tenants, one starting every 50 ms', async (t) => {
      await crowdOf(t, '64 staggered', { callers: 64, rounds: 1, timing: 'staggered', staggerMs: 50 });
    });

    it('64 tenants sending their bodies slowly, 64 KiB every 100 ms', async (t) => {
      await crowdOf(t, '64 slow', { callers: 64, rounds: 1, timing: 'slow', slowMs: 100 });
    });

    it('the bodies that make admission hold the most, one after another on a full admission cache: each answered, the heap holds them', async (t) => {
      const w = await webhook();
      const agent = new Agent({ keepAlive: true });
      try {
        // Decisions of about 100 KiB each (60 secrets of long references), until the cache holds 16 MiB.
        const filler = (n: number) => {
          const annotations: Record<string, string> = { 'secret-agent.io/aws-region': 'eu-west-1' };
          for (let i = 0; i < 60; i++)
            annotations[`secret-agent.io/secret-f${i}`] = `aws:prod/${'x'.repeat(500)}-${n}-${i}`;
          return Buffer.from(
            JSON.stringify(review(basicPod(annotations), { uid: `fill-${n}`, namespace: `fill-${n}` })),
          );
        };
        const answers: [string, Answer][] = [];
        for (const [round, shape] of WORST_SHAPES.entries()) {
          for (let n = 0; n < 160; n += 8)
            await Promise.all(
              Array.from({ length: 8 }, (_, j) =>
                admissionCall(w.port, w.ca, agent, filler(round * 1000 + n + j), DEADLINE_MS),
              ),
            );
          for (let n = 0; n < 2; n++)
            answers.push([
              shape,
              await admissionCall(w.port, w.ca, agent, worstBody(shape, round * 10 + n), DEADLINE_MS),
            ]);
          // An ordinary pod right after: answered, injected.
          const ordinary = await admissionCall(w.port, w.ca, agent, ordinaryBody(round), DEADLINE_MS);
          assert.equal(served([ordinary]), 1, JSON.stringify(ordinary));
        }
        const { peak } = processMemory(w.pid);
        t.diagnostic(
          `peak RSS ${peak.toFixed(0)} MiB (VmHWM, ceiling ${CEILING_MIB}); ${answers.map(([s, a]) => `${s} ${a.status} in ${a.ms.toFixed(0)} ms`).join(', ')}`,
        );
        for (const [shape, a] of answers) {
          assert.equal(a.status, 200, `${shape}: ${a.body.slice(0, 300)}`);
          const { response } = JSON.parse(a.body) as {
            response: { allowed: boolean; status?: { message: string } };
          };
          if (shape === 'containers')
            assert.match(
              response.status!.message,
              new RegExp(`over the webhook's limit of ${MAX_CONTAINERS}`),
            );
          else assert.equal(response.allowed, true, `${shape}: ${response.status?.message}`);
        }
        assert.ok(peak <= CEILING_MIB, `peak RSS ${peak} MiB`);
        assert.equal(w.stderr(), '', 'nothing on stderr: V8 never ran out of heap');
        assert.deepEqual(w.errors(), [], 'nothing logged as an error');
      } finally {
        agent.destroy();
        await w.stop();
      }
    });
  },
);
