/**
 * The bench results file (bench/report/): what a run measured becomes named figures, each with a
 * unit and a baseline that the file holds, and a file of another shape is refused naming its field.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { caseId, collectFigures, collectSeries, COLD_START_CASES } from '../../bench/report/figures.ts';
import { checkResults, ResultsFileError } from '../../bench/report/results-file.ts';
import { file, measured } from './measured-fixture.ts';

describe('bench results file', () => {
  it('names every figure a run measured, with a unit and a baseline the file holds', () => {
    const figures = collectFigures(measured);
    const results = checkResults(file(figures));
    assert.equal(results.figures['coldStart.snapshot.aws1']?.baseline, 'coldStart.floor');
    assert.equal(results.figures['coldStart.floor']?.baseline, undefined, 'a floor has no baseline');
    assert.equal(results.figures['smallSidecar.idle.small.workingSet']?.value, 2.1);
    assert.equal(
      results.figures['smallSidecar.idle.small.workingSet']?.baseline,
      'smallSidecar.idle.idleNode.workingSet',
    );
    assert.equal(
      results.figures['webhook.distinct.cpuPerRequest']?.baseline,
      'webhook.distinct.floorCpuPerRequest',
    );
    assert.equal(results.figures[`agentMemory.sidecar.aws-1-every5m.workingSet`]?.value, 19);
    assert.equal(results.figures['agentMemory.limit.96Mi.oomKills']?.value, 1);
    assert.equal(
      results.figures['agentMemory.limit.96Mi.init.seconds'],
      undefined,
      'what did not run is left out',
    );
    for (const [id, f] of Object.entries(figures)) {
      assert.ok(
        f.label.length > 0 && f.measuredBy.startsWith('bench/'),
        `${id}: a label and where it was measured`,
      );
      assert.ok(Number.isFinite(f.value), id);
    }
    assert.equal(
      Object.keys(figures).filter((id) => id.startsWith('coldStart.')).length,
      Object.keys(COLD_START_CASES).length,
    );
  });

  it('keeps the timeline as series the charts draw, one per container and measure', () => {
    const series = collectSeries(measured.smallSidecar);
    assert.deepEqual(Object.keys(series).sort(), [
      'timeline.node.workingSet',
      'timeline.small.peak',
      'timeline.small.workingSet',
    ]);
    assert.deepEqual(series['timeline.small.peak']?.points, [
      [1, 2.3],
      [2, 44.8],
    ]);
    assert.match(series['timeline.small.peak']!.measuredBy, /60s refresh interval/);
    checkResults({ ...file(collectFigures(measured)), series });
  });

  it('names an agent-memory case by what it is', () => {
    assert.equal(
      caseId({ backend: 'GCP', secrets: 100, notifier: true, first: true, refreshInterval: '1s' }),
      'gcp-100-notifier-every1s-first',
    );
    assert.equal(
      caseId({ backend: 'AWS', secrets: 60, valueBytes: 65_536, notifier: false, first: false }),
      'aws-60-64k',
    );
  });

  it('refuses a file of another shape, naming the field', () => {
    const bad = (change: (f: ReturnType<typeof file>) => unknown, field: string) => {
      const f = file(collectFigures(measured));
      assert.throws(
        () => checkResults(change(f)),
        (e: unknown) =>
          e instanceof ResultsFileError && e.field === field && /Fix: run `npm run bench`/.test(e.message),
        field,
      );
    };
    bad(() => null, 'the file');
    bad((f) => ({ ...f, schema: 0 }), 'schema');
    bad((f) => ({ ...f, commit: 'HEAD' }), 'commit');
    bad((f) => ({ ...f, date: 'yesterday' }), 'date');
    bad((f) => ({ ...f, machine: {} }), 'machine');
    bad(
      (f) => ({ ...f, figures: { a: { label: 'a', value: Number.NaN, unit: 'ms', measuredBy: 'bench/x' } } }),
      'figures.a.value',
    );
    bad(
      (f) => ({ ...f, figures: { a: { label: 'a', value: 1, unit: 'furlongs', measuredBy: 'bench/x' } } }),
      'figures.a.unit',
    );
    bad(
      (f) => ({
        ...f,
        figures: { a: { label: 'a', value: 1, unit: 'ms', baseline: 'b', measuredBy: 'bench/x' } },
      }),
      'figures.a.baseline',
    );
    bad(
      (f) => ({
        ...f,
        series: { s: { label: 's', unit: 'MiB', points: [[0, 'x']], measuredBy: 'bench/x' } },
      }),
      'series.s.points',
    );
  });
});
