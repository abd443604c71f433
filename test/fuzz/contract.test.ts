import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { describePinnedShare } from './pinned-share.ts';
import { durationModel } from './properties.ts';

describe('the duration reference model', () => {
  it('reads the grammar it documents, and nothing else', () => {
    const cases: [string, number | undefined][] = [
      ['0', 0],
      ['1m30s', 90_000],
      ['1.5h', 5_400_000],
      ['.5s', 500],
      ['250ms', 250],
      ['2µs', 0.002],
      ['1us1ns', 0.001001],
      ['007s', 7000],
      ['', undefined],
      ['00', undefined],
      ['1', undefined],
      ['1.s', undefined],
      ['+1s', undefined],
      ['2μs', undefined],
      ['1d', undefined],
      ['1s '.trim() + ' ', undefined],
      ['1s'.repeat(33), undefined],
    ];
    for (const [text, ms] of cases) assert.equal(durationModel(text), ms, JSON.stringify(text));
  });
});

describePinnedShare(
  'contract',
  'fuzz (seed-pinned share): agent env, references, durations, formats, config files',
);
