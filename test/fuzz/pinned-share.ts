import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { FuzzContext, propertiesOf, type FuzzGroup } from './properties.ts';

/** The seed of the share `npm test` runs: fixed, so a red run is the same red run everywhere. */
export const TEST_SEED = 0x5ec2e7;

/**
 * Runs one group of fuzz properties with the pinned seed and each property's small budget, and
 * checks the generators reached every outcome the property is meant to exercise.
 */
export function describePinnedShare(group: FuzzGroup, title: string): void {
  describe(title, () => {
    const ctx = new FuzzContext();
    after(() => ctx.close());
    for (const property of propertiesOf(group)) {
      it(`${property.name}: ${property.doc}`, async () => {
        const outcome = await property.check(ctx, { seed: TEST_SEED, numRuns: property.testRuns });
        assert.equal(outcome.failed, false, outcome.report);
        assert.equal(outcome.runs, property.testRuns);
        const missing = property.coverage.filter((label) => ctx.tally.get(property.name, label) === 0);
        assert.deepEqual(missing, [], `the generators never reached: ${missing.join(', ')}`);
      });
    }
  });
}
