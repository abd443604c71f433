/**
 * How a bench figure reads in the docs, and the inline markers that put one in a sentence:
 *   <!-- fig:ID -->…<!-- /fig -->          the figure with its unit ("19.0 MiB")
 *   <!-- fig:ID:ratio -->…<!-- /fig -->    against its baseline in the same run ("3.57 ×")
 *   <!-- fig:ID:value -->…<!-- /fig -->    the number alone ("19.0")
 *   <!-- default:NAME -->…<!-- /default --> a webhook setting's default (AGENT_MEMORY_REQUEST → "40Mi")
 * `npm run docs` rewrites what is between them; a document that names a figure the results file does
 * not hold fails to render, naming it.
 */
import type { BenchResults, Figure } from '../bench/report/results-file.ts';
import { WEBHOOK_SETTINGS } from '../webhook/config/settings.ts';

/** A figure the docs name that the results file does not hold. */
export class MissingFigureError extends Error {
  constructor(id: string) {
    super(
      `the docs name the figure "${id}", which bench/results/latest.json does not hold. Fix: run \`npm run bench\` (or name a figure it holds)`,
    );
    this.name = 'MissingFigureError';
  }
}

const grouped = (n: number, digits = 0) =>
  n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });

/** The number alone, with the precision its unit is read at. */
export function formatNumber(f: Pick<Figure, 'value' | 'unit'>): string {
  const v = f.value;
  switch (f.unit) {
    case 'ms':
      return v >= 1000 ? grouped(v) : grouped(v, 1);
    case 'µs':
    case 'req/s':
    case 'instructions':
      return grouped(v);
    case 'count':
      return Number.isInteger(v) ? grouped(v) : grouped(v, 1);
    case 'MiB':
    case 's':
    case 'millicores':
      return grouped(v, 1);
    case '×':
    case 'CPU-s':
    case 'CPU-s/h':
      return grouped(v, 2);
  }
}

const UNIT_TEXT: Readonly<Record<Figure['unit'], string>> = {
  ms: ' ms',
  µs: ' µs',
  s: ' s',
  MiB: ' MiB',
  '×': ' ×',
  count: '',
  'CPU-s': ' CPU-s',
  'CPU-s/h': ' CPU-s/h',
  millicores: ' millicores',
  instructions: ' instructions',
  'req/s': ' req/s',
};

/** The figure as a reader reads it: "19.0 MiB", "1,289,952". */
export function formatFigure(f: Pick<Figure, 'value' | 'unit'>): string {
  return `${formatNumber(f)}${UNIT_TEXT[f.unit]}`;
}

/** Looks figures up by id in one results file, failing on an id it does not hold. */
export class FigureBook {
  readonly results: BenchResults;

  constructor(results: BenchResults) {
    this.results = results;
  }

  figure(id: string): Figure {
    const f = this.results.figures[id];
    if (!f) throw new MissingFigureError(id);
    return f;
  }

  /** Whether the run measured it (an optional row: the AWS CLI was not installed, a limit not tried). */
  has(id: string): boolean {
    return id in this.results.figures;
  }

  text(id: string): string {
    return formatFigure(this.figure(id));
  }

  number(id: string): string {
    return formatNumber(this.figure(id));
  }

  /** The figure over its baseline (or over `over`), as "3.57 ×". */
  ratio(id: string, over?: string): string {
    const f = this.figure(id);
    const base = over ?? f.baseline;
    if (!base) throw new Error(`the figure "${id}" has no baseline to be read against`);
    return formatFigure({ value: f.value / this.figure(base).value, unit: '×' });
  }

  /** "107.6 ms (3.57 ×)": the figure and its ratio to its baseline. */
  withRatio(id: string): string {
    return `${this.text(id)} (${this.ratio(id)})`;
  }
}

const INLINE = /<!-- (fig|default):([A-Za-z0-9._-]+)(?::(ratio|value))? -->[^<\n]*<!-- \/(fig|default) -->/g;

/** A document with every inline figure and default re-rendered from `book`. */
export function renderInline(text: string, book: FigureBook): string {
  return text.replace(INLINE, (whole, kind: string, id: string, form: string | undefined, end: string) => {
    if (kind !== end) throw new Error(`an inline marker opened as ${kind} and closed as ${end}: ${whole}`);
    if (kind === 'default') {
      const setting = (WEBHOOK_SETTINGS as Readonly<Record<string, { default?: string }>>)[id];
      if (setting?.default === undefined) throw new Error(`no webhook setting "${id}" with a default`);
      return `<!-- default:${id} -->${setting.default}<!-- /default -->`;
    }
    const shown = form === 'ratio' ? book.ratio(id) : form === 'value' ? book.number(id) : book.text(id);
    return `<!-- fig:${id}${form ? `:${form}` : ''} -->${shown}<!-- /fig -->`;
  });
}
