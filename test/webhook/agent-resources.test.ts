import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { quantityBytes, quantityValue } from '../../webhook/agent-resources.ts';

describe('agent resources: quantities', () => {
  it('reads the quantities annotations.ts accepts, in bytes (or cores)', () => {
    assert.equal(quantityBytes('128Mi'), 134_217_728);
    assert.equal(quantityBytes('1Gi'), 1_073_741_824);
    assert.equal(quantityBytes('256M'), 256_000_000);
    assert.equal(quantityBytes('0.5Gi'), 536_870_912);
    assert.equal(quantityBytes('64Ki'), 65_536);
    assert.equal(quantityBytes('1000'), 1000);
    assert.equal(quantityValue('15m'), 0.015);
    assert.equal(quantityValue('.5'), 0.5);
  });

  it('says NaN for what it cannot read, never a number', () => {
    for (const bad of ['', 'Mi', '.', '12Xi', '-1Mi', '1 Mi'])
      assert.ok(Number.isNaN(quantityValue(bad)), bad);
  });
});
