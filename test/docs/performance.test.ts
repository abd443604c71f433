/**
 * Issue 38: the published figures are the last committed bench run's. README.md and
 * docs/performance.md, and every chart under docs/figures/, are exactly what `npm run docs` renders
 * from bench/results/latest.json; a figure a document names that the run does not hold fails.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { readResults } from '../../bench/report/results-file.ts';
import { FigureBook } from '../../docs/figure-format.ts';
import { PERFORMANCE_CHARTS } from '../../docs/performance-charts.ts';
import { CHART_DIR, FIGURE_DOCS, renderFigureDoc } from '../../docs/figure-docs.ts';
import { PERFORMANCE_TABLES } from '../../docs/performance-tables.ts';

const at = (path: string) => new URL(`../../${path}`, import.meta.url);
const book = new FigureBook(readResults());

describe('published figures: from the last committed bench run', () => {
  it('the results file is a whole run of a commit of this repository', () => {
    const r = book.results;
    assert.ok(Object.keys(r.figures).length > 100, `${Object.keys(r.figures).length} figures`);
    assert.ok(r.machine.loadAverage.samples > 1, 'the load was sampled through the run');
    assert.ok(Object.keys(r.series).length >= 3, 'the timeline is there for the charts');
  });

  for (const doc of FIGURE_DOCS)
    it(`${doc} is what npm run docs renders from bench/results/latest.json`, async () => {
      const text = readFileSync(at(doc), 'utf8');
      assert.equal(
        text,
        await renderFigureDoc(text, at(doc).pathname, book),
        `${doc} is stale: run npm run docs`,
      );
    });

  it('every figures block is placed in a document, and every chart is drawn and shown', () => {
    const texts = FIGURE_DOCS.map((d) => readFileSync(at(d), 'utf8')).join('\n');
    for (const name of Object.keys(PERFORMANCE_TABLES))
      assert.ok(texts.includes(`<!-- figures:${name} -->`), `the block ${name} is in no document`);
    assert.deepEqual(readdirSync(at(CHART_DIR)).sort(), Object.keys(PERFORMANCE_CHARTS).sort());
    for (const [name, draw] of Object.entries(PERFORMANCE_CHARTS)) {
      assert.equal(
        readFileSync(at(`${CHART_DIR}/${name}`), 'utf8'),
        draw(book),
        `${name} is stale: run npm run docs`,
      );
      assert.ok(texts.includes(`figures/${name})`), `${name} is shown in no document`);
    }
  });

  it('no figure on the front page is typed by hand: each number in the Why and Figures sections is rendered', () => {
    const readme = readFileSync(at('README.md'), 'utf8');
    const why = readme.slice(readme.indexOf('## Why'), readme.indexOf('## Quick start'));
    const bare = why
      .replace(/<!-- (fig|default):[^>]+ -->[^<]*<!-- \/(fig|default) -->/g, '')
      .match(/\d+(\.\d+)?\s?(ms|MiB|Mi|s|µs|×|%)(?![A-Za-z])/g);
    assert.equal(bare, null, `figures typed by hand in the README's Why: ${bare?.join(', ')}`);
  });
});
