import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { BenchProgress, formatDuration } from '../../bench/progress.ts';

/** An output that keeps what was written, and a clock the test moves. */
function harness(isTTY: boolean) {
  const written: string[] = [];
  let now = 1_000_000;
  const progress = new BenchProgress(
    [
      { name: 'cold start', estimateSeconds: 60 },
      { name: 'sidecar soak', estimateSeconds: 600 },
      { name: 'webhook', estimateSeconds: 120 },
    ],
    { isTTY, write: (t: string) => written.push(t) },
    () => now,
  );
  return {
    progress,
    written,
    advance: (seconds: number) => (now += seconds * 1000),
  };
}

describe('bench progress', () => {
  it('formats durations as a reader reads them', () => {
    assert.equal(formatDuration(5), '5s');
    assert.equal(formatDuration(75), '1m15s');
    assert.equal(formatDuration(600), '10m00s');
    assert.equal(formatDuration(3700), '1h01m');
    assert.equal(formatDuration(-3), '0s');
  });

  it('off a terminal: plain lines naming each step, how far it is and what is left', () => {
    const h = harness(false);
    assert.match(h.written[0]!, /^bench: 3 steps, about 13m00s: cold start, sidecar soak, webhook\n$/);
    h.progress.begin('cold start');
    assert.equal(h.written.at(-1), '[1/3] cold start: started (about 1m00s; 13m00s left in all)\n');
    h.advance(30);
    h.progress.note('round 3 of 15');
    assert.equal(h.written.at(-1), '[1/3] cold start: round 3 of 15\n');
    assert.equal(h.progress.leftSeconds(), 30 + 600 + 120);
    h.advance(50); // over its estimate: nothing of it is counted as left
    h.progress.begin('sidecar soak');
    assert.deepEqual(h.written.slice(-2), [
      '[1/3] cold start: done in 1m20s\n',
      '[2/3] sidecar soak: started (about 10m00s; 12m00s left in all)\n',
    ]);
    h.advance(600);
    h.progress.begin('webhook');
    h.advance(100);
    assert.equal(h.progress.finish(), 780);
    assert.deepEqual(h.written.slice(-2), ['[3/3] webhook: done in 1m40s\n', 'bench: done in 13m00s\n']);
    assert.ok(
      h.written.every((l) => !l.includes('\r') && !l.includes('\x1b')),
      'no terminal codes in plain output',
    );
  });

  it('on a terminal: one status line redrawn in place, finished lines above it', () => {
    const h = harness(true);
    h.progress.begin('cold start');
    h.advance(12);
    h.progress.note('round 2 of 15');
    const status = h.written.at(-1)!;
    assert.ok(status.startsWith('\r\x1b[2K'), 'the status line is redrawn in place');
    assert.ok(!status.endsWith('\n'), 'and is not a finished line');
    assert.match(status, /\[1\/3\] cold start 12s\/1m00s · round 2 of 15 · 12s elapsed, about 12m48s left/);
    h.progress.finish();
    assert.equal(h.written.at(-1), '\r\x1b[2Kbench: done in 12s\n');
  });

  it('refuses a step it was not told of, or one out of order', () => {
    const h = harness(false);
    assert.throws(() => h.progress.begin('images'), /no step "images"/);
    h.progress.begin('sidecar soak');
    assert.throws(() => h.progress.begin('cold start'), /no step "cold start" after step 2/);
    h.progress.finish();
  });
});
