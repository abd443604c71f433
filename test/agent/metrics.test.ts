/**
 * The sidecar's process metrics sample the event loop every EVENT_LOOP_SAMPLE_MS, not prom-client's
 * 10 ms (100 wake-ups a second of an otherwise idle process): a stall must still show in full.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { AgentMetrics, EVENT_LOOP_SAMPLE_MS } from '../../agent/serve/metrics.ts';

function gauge(text: string, name: string): number {
  const m = new RegExp(`^${name} (\\S+)$`, 'm').exec(text);
  assert.ok(m, `${name} is exported`);
  return Number(m[1]);
}

describe('the process metrics', () => {
  it('record an event-loop stall between two samples in full', async () => {
    const metrics = new AgentMetrics();
    await sleep(3 * EVENT_LOOP_SAMPLE_MS);
    // Block the loop for 4 sampling periods: the sample due meanwhile runs that much late.
    const blocked = 4 * EVENT_LOOP_SAMPLE_MS;
    const until = performance.now() + blocked;
    while (performance.now() < until);
    await sleep(2 * EVENT_LOOP_SAMPLE_MS);
    const text = await metrics.registry.metrics();
    const max = gauge(text, 'secret_agent_process_nodejs_eventloop_lag_max_seconds');
    // The sample due during the block records its delay: at least the block less one period.
    assert.ok(max >= (blocked - EVENT_LOOP_SAMPLE_MS) / 1000, `max lag ${max} s`);
    assert.ok(gauge(text, 'secret_agent_process_nodejs_eventloop_lag_p50_seconds') < max);
  });
});
