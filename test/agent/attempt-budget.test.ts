import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { attemptBudgetMs } from '../../agent/fetch/fetch-secrets.ts';

/**
 * Issue 10, R2: an attempt's time budget is a third of the deadline (at least 1 s, at most 15 s),
 * capped by what is left; the last attempt the deadline allows gets all that is left (up to 15 s).
 */
describe('attemptBudgetMs', () => {
  it('gives a short deadline room for three attempts', () => {
    assert.equal(attemptBudgetMs(6000, 6000), 2000);
    assert.equal(attemptBudgetMs(6000, 3700), 2000);
    // Not enough left for another attempt after this one: this one may use all of it.
    assert.equal(attemptBudgetMs(6000, 1300), 1300);
  });

  it('caps a long deadline at 15 s per attempt and floors a tiny one at 1 s', () => {
    assert.equal(attemptBudgetMs(60_000, 60_000), 15_000);
    assert.equal(attemptBudgetMs(600_000, 600_000), 15_000);
    assert.equal(attemptBudgetMs(2000, 2000), 1000);
    assert.equal(attemptBudgetMs(1000, 1000), 1000);
    assert.equal(attemptBudgetMs(500, 500), 500);
  });

  it('gives a single or last attempt everything left, up to 15 s', () => {
    assert.equal(attemptBudgetMs(30_000, 30_000, true), 15_000);
    assert.equal(attemptBudgetMs(6000, 6000, true), 6000);
    assert.equal(attemptBudgetMs(6000, 0, true), 1, 'an exhausted deadline still gets a valid timeout');
  });

  it('is a whole number of milliseconds, as AbortSignal.timeout requires', () => {
    assert.equal(attemptBudgetMs(20_000, 20_000), 6667);
    assert.equal(attemptBudgetMs(20_000, 1234.5, true), 1235);
    assert.doesNotThrow(() => AbortSignal.timeout(attemptBudgetMs(10_000, 9999.7)));
  });

  it('within one deadline of a hung backend, at least two attempts start', () => {
    for (const deadline of [2000, 3000, 6000, 10_000, 30_000, 60_000]) {
      // Every attempt hangs for its whole budget; retries wait the shortest backoff (125 ms, 250 ms, …).
      let elapsed = 0;
      let attempts = 0;
      while (elapsed < deadline) {
        attempts++;
        elapsed += attemptBudgetMs(deadline, deadline - elapsed) + 125 * 2 ** (attempts - 1);
      }
      assert.ok(attempts >= 2, `${attempts} attempt(s) within ${deadline} ms`);
    }
  });
});
