/**
 * Issue 38: the agent's default requests follow from measured figures (webhook/agent-sizing.ts), typed
 * there from bench runs. This holds them to the last committed run (bench/results/latest.json): a run
 * that measures more than a sizing input says fails here, until the input (and the default it makes)
 * follows.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { readResults } from '../../bench/report/results-file.ts';
import {
  DEFAULT_MEMORY_REQUEST,
  DEFAULT_SMALL_SIDECAR_MEMORY_REQUEST,
  MEASURED,
  MEASURED_SMALL_SIDECAR,
  quantityMiB,
  REQUEST_MARGIN,
} from '../../webhook/agent-sizing.ts';

const { figures, date } = readResults();

/** The Node sidecar's working set in each measured configuration matching `interval`, 1 KiB values, not the first agent on a node. */
function sidecarWorkingSets(interval: 'every5m' | 'every1s'): [string, number][] {
  const found = Object.entries(figures)
    .filter(([id]) =>
      new RegExp(`^agentMemory\\.sidecar\\.[a-z]+-\\d+(-notifier)?-${interval}\\.workingSet$`).test(id),
    )
    .map(([id, f]): [string, number] => [id, f.value]);
  assert.ok(found.length >= 6, `the run measured ${found.length} sidecar configurations at ${interval}`);
  return found;
}

describe(`the agent's sizing inputs against the committed bench run (${date})`, () => {
  it('the steady working set at the default refresh covers every configuration the run measured, and the memory request a quarter over it', () => {
    for (const [id, value] of sidecarWorkingSets('every5m')) {
      assert.ok(
        value <= MEASURED.steadyWorkingSetMiB,
        `${id}: ${value.toFixed(2)} MiB > ${MEASURED.steadyWorkingSetMiB}`,
      );
      assert.ok(value * REQUEST_MARGIN <= quantityMiB(DEFAULT_MEMORY_REQUEST), id);
    }
  });

  it('the busy working set (REFRESH_INTERVAL=1s) covers every configuration the run measured', () => {
    for (const [id, value] of sidecarWorkingSets('every1s'))
      assert.ok(
        value <= MEASURED.busyWorkingSetMiB,
        `${id}: ${value.toFixed(2)} MiB > ${MEASURED.busyWorkingSetMiB}`,
      );
  });

  it("the small sidecar's working set between refreshes covers the run's, and its memory request a quarter over it", () => {
    const idle = figures['smallSidecar.idle.small.workingSet'];
    assert.ok(idle, 'the run measured the small sidecar between refreshes');
    assert.ok(idle.value <= MEASURED_SMALL_SIDECAR.idleWorkingSetMiB, `${idle.value.toFixed(2)} MiB`);
    assert.ok(idle.value * REQUEST_MARGIN <= quantityMiB(DEFAULT_SMALL_SIDECAR_MEMORY_REQUEST));
  });
});
