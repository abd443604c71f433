/**
 * The Node sidecar's own liveness check (agent/modes/sidecar/liveness-watchdog.ts): with no liveness
 * probe on the port, a refresh loop that stops is noticed by the sidecar, once, within a check.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { watchLiveness } from '../../agent/modes/sidecar/liveness-watchdog.ts';

describe('the sidecar’s liveness watchdog', () => {
  it('calls onStalled once, at the first check that finds the loop not live, and not before', async () => {
    let live = true;
    let stalled = 0;
    const watch = watchLiveness(
      () => live,
      () => stalled++,
      20,
    );
    await sleep(100);
    assert.equal(stalled, 0, 'a live loop is left alone');
    live = false;
    await sleep(100);
    assert.equal(stalled, 1, 'noticed within a few checks, and only once');
    live = true;
    await sleep(60);
    assert.equal(stalled, 1);
    watch.stop();
  });

  it('stop() ends the checks', async () => {
    let stalled = 0;
    const watch = watchLiveness(
      () => false,
      () => stalled++,
      20,
    );
    watch.stop();
    await sleep(80);
    assert.equal(stalled, 0);
  });
});
