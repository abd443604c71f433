/**
 * The performance tables and inline figures (docs/figure-format.ts, docs/performance-tables.ts) from a
 * results file: every block renders from what a run holds, a figure the docs name that the run does
 * not hold fails naming it, and inline markers are rewritten in place, whatever they held before.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { collectFigures, collectSeries } from '../../bench/report/figures.ts';
import { checkResults } from '../../bench/report/results-file.ts';
import { WEBHOOK_SETTINGS } from '../../webhook/config/settings.ts';
import { FigureBook, formatFigure, MissingFigureError, renderInline } from '../../docs/figure-format.ts';
import { chartCaption, PERFORMANCE_CHARTS } from '../../docs/performance-charts.ts';
import { PERFORMANCE_TABLES } from '../../docs/performance-tables.ts';
import { file, measured } from '../bench/measured-fixture.ts';

const results = checkResults({
  ...file(collectFigures(measured)),
  series: collectSeries(measured.smallSidecar),
  machine: {
    cores: 2,
    memoryMiB: 7944,
    kernel: '6.1.0',
    cgroupVersion: 2,
    node: 'v24.11.0',
    arch: 'x64',
    loadAverage: { min: 0.4, mean: 0.9, max: 1.6, samples: 180 },
  },
});
const book = new FigureBook(results);

describe('figures in the docs', () => {
  it('reads each unit at its precision', () => {
    assert.equal(formatFigure({ value: 107.64, unit: 'ms' }), '107.6 ms');
    assert.equal(formatFigure({ value: 1315.2, unit: 'ms' }), '1,315 ms');
    assert.equal(formatFigure({ value: 19, unit: 'MiB' }), '19.0 MiB');
    assert.equal(formatFigure({ value: 1_289_952, unit: 'count' }), '1,289,952');
    assert.equal(formatFigure({ value: 3.5714, unit: '×' }), '3.57 ×');
    assert.equal(formatFigure({ value: 2.4, unit: 'CPU-s/h' }), '2.40 CPU-s/h');
    assert.equal(formatFigure({ value: 12_787.4, unit: 'req/s' }), '12,787 req/s');
  });

  it('renders every block from the run, with the run named', () => {
    for (const [name, render] of Object.entries(PERFORMANCE_TABLES)) {
      const text = render(book);
      assert.ok(text.length > 0, name);
      assert.ok(!/undefined|NaN/.test(text), `${name}: ${text}`);
    }
    const run = PERFORMANCE_TABLES['bench-run']!(book);
    assert.match(run, /2026-11-29, commit `abc1234`/);
    assert.match(
      run,
      /2 cores, 7\.8 GiB, Linux 6\.1\.0, cgroup v2, Node 24\.11\.0; load average 0\.4–1\.6 \(mean 0\.9\)/,
    );
    assert.match(
      PERFORMANCE_TABLES['small-sidecar']!(book),
      /\| small sidecar .* \| 2\.1 MiB \| 0\.4 MiB \|/,
    );
    assert.match(
      PERFORMANCE_TABLES['pod-start']!(book),
      /native sidecar, small .* \| 1,650 ms \| 1\.27 × \|/,
    );
  });

  it('fails naming a figure the run does not hold', () => {
    const { ['podStart.nativeSmall']: _dropped, ...rest } = results.figures;
    const partial = new FigureBook({ ...results, figures: rest });
    assert.throws(
      () => PERFORMANCE_TABLES['readme-figures']!(partial),
      (e: unknown) =>
        e instanceof MissingFigureError &&
        /"podStart\.nativeSmall".*Fix: run `npm run bench`/.test(e.message),
    );
    assert.throws(() => renderInline('<!-- fig:no.such -->1 ms<!-- /fig -->', book), MissingFigureError);
  });

  it('rewrites inline figures and defaults in place, whatever they held', () => {
    const text = [
      'Between refreshes <!-- fig:smallSidecar.idle.small.workingSet -->99 MiB<!-- /fig --> of working set,',
      '<!-- fig:coldStart.snapshot.aws1:ratio -->old<!-- /fig --> the floor, <!-- fig:atomicity.torn:value --><!-- /fig --> torn;',
      'the scheduler reserves <!-- default:AGENT_MEMORY_REQUEST -->1Gi<!-- /default -->.',
    ].join('\n');
    const rendered = renderInline(text, book);
    assert.equal(
      rendered,
      [
        'Between refreshes <!-- fig:smallSidecar.idle.small.workingSet -->2.1 MiB<!-- /fig --> of working set,',
        `<!-- fig:coldStart.snapshot.aws1:ratio -->${book.ratio('coldStart.snapshot.aws1')}<!-- /fig --> the floor, <!-- fig:atomicity.torn:value -->0<!-- /fig --> torn;`,
        `the scheduler reserves <!-- default:AGENT_MEMORY_REQUEST -->${WEBHOOK_SETTINGS.AGENT_MEMORY_REQUEST.default}<!-- /default -->.`,
      ].join('\n'),
    );
    assert.equal(renderInline(rendered, book), rendered, 'rendering twice changes nothing');
    assert.throws(
      () => renderInline('<!-- default:NO_SUCH -->x<!-- /default -->', book),
      /no webhook setting "NO_SUCH"/,
    );
  });
});

describe('charts of the figures', () => {
  it('draws each chart from the run, naming the run and every series, bar and the quoted band', () => {
    const idle = {
      label: 'idle node: working set',
      unit: 'MiB' as const,
      points: [[1, 15] as const],
      measuredBy: 'bench/x',
    };
    const charts = new FigureBook({
      ...results,
      series: { ...results.series, 'timeline.idleNode.workingSet': idle },
    });
    for (const [name, draw] of Object.entries(PERFORMANCE_CHARTS)) {
      const svg = draw(charts);
      assert.ok(svg.startsWith('<svg'), name);
      assert.ok(svg.includes(chartCaption(charts)), `${name} names the run`);
      assert.ok(!/undefined|NaN/.test(svg), name);
    }
    const workingSet = PERFORMANCE_CHARTS['working-set.svg']!(charts);
    for (const text of [
      'small sidecar (default): working set',
      'Node sidecar',
      'an idle node (reference)',
      'as quoted (not measured here)',
    ])
      assert.ok(workingSet.includes(text), text);
    assert.ok(PERFORMANCE_CHARTS['pod-start.svg']!(charts).includes('native sidecar, small (default)'));
    // A series the run does not hold fails naming it, as a figure does.
    assert.throws(
      () => PERFORMANCE_CHARTS['working-set.svg']!(book),
      /"series timeline\.idleNode\.workingSet"/,
    );
  });
});
