import { readFileSync } from 'node:fs';

/**
 * What one `npm run bench` leaves: every figure it measured, each with its unit and, where it has one,
 * the baseline measured in the same run; the machine and the load it ran under; the commit it
 * measured. bench/results/latest.json is the last committed run; the README's and docs/performance.md's
 * figures and charts are rendered from it (docs/performance-tables.ts), never typed by hand.
 */

export const RESULTS_SCHEMA = 1;
export const RESULTS_PATH = new URL('../results/latest.json', import.meta.url).pathname;

/** Units a figure may have; the docs format each the same way everywhere. */
export const UNITS = [
  'ms',
  'µs',
  's',
  'MiB',
  '×',
  'count',
  'CPU-s',
  'CPU-s/h',
  'millicores',
  'instructions',
  'req/s',
] as const;
export type Unit = (typeof UNITS)[number];

export interface Figure {
  /** What was measured, in words a reader of the docs understands. */
  readonly label: string;
  readonly value: number;
  readonly unit: Unit;
  /** The id of the figure this one is measured against in the same run (a floor, a reference). */
  readonly baseline?: string;
  /** The bench module and step that measured it, e.g. "bench/small-sidecar.ts › between refreshes". */
  readonly measuredBy: string;
}

/** Samples over time, for the charts: x in seconds from the series' start. */
export interface Series {
  readonly label: string;
  readonly unit: Unit;
  readonly points: readonly (readonly [number, number])[];
  readonly measuredBy: string;
}

export interface MachineFacts {
  readonly cores: number;
  readonly memoryMiB: number;
  readonly kernel: string;
  readonly cgroupVersion: 1 | 2;
  readonly node: string;
  readonly arch: string;
  /** The 1-minute load average, sampled through the run. */
  readonly loadAverage: {
    readonly min: number;
    readonly mean: number;
    readonly max: number;
    readonly samples: number;
  };
}

export interface BenchResults {
  readonly schema: typeof RESULTS_SCHEMA;
  /** The commit measured, and whether the tree held uncommitted changes. */
  readonly commit: string;
  readonly dirty: boolean;
  /** When the run ended (ISO 8601), and how long it took. */
  readonly date: string;
  readonly durationSeconds: number;
  /** The command that made it and the settings it ran with (BENCH_* env). */
  readonly command: string;
  readonly settings: Readonly<Record<string, string | number>>;
  readonly machine: MachineFacts;
  readonly figures: Readonly<Record<string, Figure>>;
  readonly series: Readonly<Record<string, Series>>;
}

/** A results file that is not what this code reads, named with the field that is wrong. */
export class ResultsFileError extends Error {
  readonly field: string;

  constructor(field: string, problem: string) {
    super(`${RESULTS_PATH}: ${field} ${problem}. Fix: run \`npm run bench\` to write it again`);
    this.name = 'ResultsFileError';
    this.field = field;
  }
}

const isNumber = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);

/** Checks the shape of a parsed results file; returns it typed, or throws naming the first bad field. */
export function checkResults(parsed: unknown): BenchResults {
  const r = parsed as Partial<BenchResults> | null;
  if (typeof r !== 'object' || r === null) throw new ResultsFileError('the file', 'is not a JSON object');
  if (r.schema !== RESULTS_SCHEMA) throw new ResultsFileError('schema', `is not ${RESULTS_SCHEMA}`);
  if (typeof r.commit !== 'string' || !/^[0-9a-f]{7,40}$/.test(r.commit))
    throw new ResultsFileError('commit', 'is not a commit id');
  if (typeof r.date !== 'string' || Number.isNaN(Date.parse(r.date)))
    throw new ResultsFileError('date', 'is not a date');
  if (typeof r.machine !== 'object' || r.machine === null || !isNumber(r.machine.cores))
    throw new ResultsFileError('machine', 'does not say the machine');
  if (typeof r.figures !== 'object' || r.figures === null)
    throw new ResultsFileError('figures', 'is missing');
  for (const [id, f] of Object.entries(r.figures)) {
    if (!isNumber(f?.value)) throw new ResultsFileError(`figures.${id}.value`, 'is not a finite number');
    if (!(UNITS as readonly string[]).includes(f.unit))
      throw new ResultsFileError(`figures.${id}.unit`, `is not one of ${UNITS.join(', ')}`);
    if (f.baseline !== undefined && !(f.baseline in r.figures))
      throw new ResultsFileError(
        `figures.${id}.baseline`,
        `names "${f.baseline}", which the file does not hold`,
      );
  }
  if (typeof r.series !== 'object' || r.series === null) throw new ResultsFileError('series', 'is missing');
  for (const [id, s] of Object.entries(r.series))
    if (!Array.isArray(s?.points) || s.points.some((p) => !isNumber(p[0]) || !isNumber(p[1])))
      throw new ResultsFileError(`series.${id}.points`, 'are not [seconds, value] pairs');
  return r as BenchResults;
}

export function readResults(path = RESULTS_PATH): BenchResults {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    throw new ResultsFileError('the file', 'is missing');
  }
  return checkResults(JSON.parse(text));
}
