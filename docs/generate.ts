import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { readResults } from '../bench/report/results-file.ts';
import { FigureBook } from './figure-format.ts';
import { PERFORMANCE_CHARTS } from './performance-charts.ts';
import { CHART_DIR, FIGURE_DOCS, renderFigureDoc } from './figure-docs.ts';
import { GENERATED_DOCS, renderGenerated } from './tables.ts';

const at = (path: string) => new URL(`../${path}`, import.meta.url);

for (const doc of GENERATED_DOCS) writeFileSync(at(doc), renderGenerated(readFileSync(at(doc), 'utf8')));

// The figures and charts: from the last committed bench run (bench/results/latest.json).
const book = new FigureBook(readResults());
for (const doc of FIGURE_DOCS)
  writeFileSync(at(doc), await renderFigureDoc(readFileSync(at(doc), 'utf8'), at(doc).pathname, book));
mkdirSync(at(CHART_DIR), { recursive: true });
for (const [name, draw] of Object.entries(PERFORMANCE_CHARTS))
  writeFileSync(at(`${CHART_DIR}/${name}`), draw(book));
