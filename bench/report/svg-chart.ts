/**
 * The published performance charts (issue 38): pure functions from figures to SVG text, so `npm run docs`
 * can write them from the committed results file and a test can compare them byte for byte.
 *
 * Hand-written: nice ticks, lines, bars and text are a few hundred lines, where a charting library draws
 * through a DOM or a canvas (vega: ~26 packages; d3-scale: 7, for the ticks alone). Same input, same bytes:
 * coordinates rounded to 0.1, no clock, locale or random source. Colours live in classes redefined under
 * prefers-color-scheme: dark, because GitHub shows an SVG in an <img> with the reader's scheme.
 */

export type Axis = { readonly label: string; readonly unit: string };
export type Point = readonly [x: number, y: number];
export type Series = { readonly name: string; readonly points: readonly Point[] };
/** A horizontal range in y units, shaded behind the lines (a published figure to compare with). */
export type Band = { readonly name: string; readonly from: number; readonly to: number };
export type LineChartSpec = {
  readonly title: string;
  /** The run the figures came from: command, commit, date, machine. */
  readonly caption: string;
  readonly x: Axis;
  readonly y: Axis;
  readonly series: readonly Series[];
  readonly bands?: readonly Band[];
  /** Start the y axis at 0 (default true): a memory figure read against an axis cut at 12 MiB lies. */
  readonly yFromZero?: boolean;
};
export type Bar = { readonly name: string; readonly value: number; readonly note?: string };
/** `unit`: the group's own, when it differs from the chart's. Groups in one unit share a scale. */
export type BarGroup = { readonly name: string; readonly unit?: string; readonly bars: readonly Bar[] };
/** A dashed line across the bars (a floor or a target), in the chart's unit. */
export type Reference = { readonly name: string; readonly value: number };
export type BarChartSpec = {
  readonly title: string;
  readonly caption: string;
  readonly unit: string;
  readonly groups: readonly BarGroup[];
  readonly reference?: Reference;
};

const WIDTH = 720;
const MARGIN = 16;
/** Six colours, six dash patterns, six markers: past that, series stop being told apart. */
const MAX_SERIES = 6;
const PLOT_HEIGHT = 260;
const BAR_HEIGHT = 18;
// Okabe–Ito, ordered for contrast on each background (black and yellow swap: each is the one that
// vanishes on its own background). A series keeps its dash pattern and marker in both schemes.
const LIGHT_SERIES = ['#0072B2', '#D55E00', '#009E73', '#CC79A7', '#000000', '#E69F00'];
const DARK_SERIES = ['#56B4E9', '#E69F00', '#009E73', '#CC79A7', '#F0E442', '#D55E00'];
const DASHES = ['none', '8 4', '2 3', '10 3 2 3', '4 4', '1 3'];
/** GitHub's own light and dark page colours, so the chart sits on the page it is shown in. */
const LIGHT_THEME = { bg: '#ffffff', ink: '#1f2328', muted: '#59636e', grid: '#d1d9e0', band: '#8c959f' };
const DARK_THEME = { bg: '#0d1117', ink: '#e6edf3', muted: '#9198a1', grid: '#3d444d', band: '#9198a1' };
type Theme = typeof LIGHT_THEME;

/** Sizes, fonts and dashes: the same in both schemes. */
const STRUCTURE =
  'svg{font-family:system-ui,sans-serif}.title{font-size:16px;font-weight:600}' +
  '.caption,.legend,.axis-label{font-size:12px}.group-label{font-size:13px;font-weight:600}' +
  '.tick,.value{font-size:11px}.line{fill:none;stroke-width:2;stroke-linejoin:round}' +
  '.ref{stroke-width:1.5;stroke-dasharray:6 4}.band{fill-opacity:0.25}' +
  '.halo{stroke-width:3;stroke-linejoin:round;paint-order:stroke}' +
  DASHES.map((dash, i) => `.d${i}{stroke-dasharray:${dash}}`).join('');

/** The colours of one scheme; both schemes come from this one list of classes. */
function colourRules(theme: Theme, series: readonly string[]): string {
  return (
    `.bg{fill:${theme.bg}}.halo{stroke:${theme.bg}}.ink{fill:${theme.ink}}.muted{fill:${theme.muted}}` +
    `.axis{stroke:${theme.muted}}.grid{stroke:${theme.grid}}.band{fill:${theme.band}}.ref{stroke:${theme.ink}}` +
    series.map((colour, i) => `.s${i}{stroke:${colour}}.f${i}{fill:${colour}}`).join('')
  );
}

const STYLE_SHEET = `<style>${STRUCTURE}${colourRules(LIGHT_THEME, LIGHT_SERIES)}@media (prefers-color-scheme: dark){${colourRules(DARK_THEME, DARK_SERIES)}}</style>`;

/**
 * Ticks at a nice step (1, 2, 2.5 or 5 × 10^n) from `min` or below to `max` or above (give or take a
 * billionth of a step: float noise must not add a step to the axis), 3 to `maxCount` of them: the step that
 * wastes the least of the axis, 2.5 only when it clearly wins (its labels need a decimal), more on a tie.
 */
export function niceTicks(min: number, max: number, maxCount: number): number[] {
  if (!(max > min)) throw new Error(`niceTicks: max ${max} must be above min ${min}`);
  const span = max - min;
  const top = Math.floor(Math.log10(span));
  let best: { ticks: number[]; score: number } | undefined;
  for (let exponent = top - 2; exponent <= top + 1; exponent++) {
    for (const mantissa of [1, 2, 2.5, 5]) {
      const step = mantissa * 10 ** exponent;
      const decimals = stepDecimals(step);
      // The epsilon keeps a bound that is already a multiple of the step from moving out a whole step.
      const first = Math.floor(min / step + 1e-9);
      const last = Math.ceil(max / step - 1e-9);
      const count = last - first + 1;
      if (count < 3 || count > maxCount) continue;
      const ticks = Array.from({ length: count }, (_, i) => Number(((first + i) * step).toFixed(decimals)));
      const score = 1 - span / (ticks[count - 1]! - ticks[0]!) + (mantissa === 2.5 ? 0.1 : 0) - count * 1e-4;
      if (!best || score < best.score) best = { ticks, score };
    }
  }
  if (!best) throw new Error(`niceTicks: no nice step gives 3 to ${maxCount} ticks over ${min}..${max}`);
  return best.ticks;
}

/** Decimals a multiple of `step` needs: 0 for 5 or 20, 1 for 2.5 or 0.5, 2 for 0.25. */
function stepDecimals(step: number): number {
  const exponent = Math.floor(Math.log10(step) + 1e-9);
  const mantissa = step / 10 ** exponent;
  return Math.max(0, -exponent + (Math.abs(mantissa - 2.5) < 1e-9 ? 1 : 0));
}

/** A coordinate, rounded to 0.1 so that float noise never changes a byte. */
function px(n: number): string {
  const rounded = Math.round(n * 10) / 10;
  return Object.is(rounded, -0) ? '0' : String(rounded);
}

/** A figure as a reader quotes it: three significant digits at most, no trailing zeros. */
export function formatFigure(value: number): string {
  const abs = Math.abs(value);
  const text = value.toFixed(abs >= 100 ? 0 : abs >= 10 ? 1 : 2);
  const trimmed = text.includes('.') ? text.replace(/0+$/, '').replace(/\.$/, '') : text;
  return trimmed === '-0' ? '0' : trimmed;
}

function withUnit(number: string, unit: string): string {
  return unit === '' ? number : `${number} ${unit}`;
}

/** A figure with its unit, as the labels and the description quote it. */
function figure(value: number, unit: string): string {
  return withUnit(formatFigure(value), unit);
}

/** Tick labels with their unit, each with the decimals the step needs. */
function tickLabels(ticks: readonly number[], unit: string): string[] {
  const decimals = stepDecimals(ticks[1]! - ticks[0]!);
  return ticks.map((tick) => withUnit(tick.toFixed(decimals), unit));
}

function escapeXml(text: string): string {
  return text.replace(
    /[&<>"']/g,
    (c) => `&${{ '&': 'amp', '<': 'lt', '>': 'gt', '"': 'quot', "'": 'apos' }[c]};`,
  );
}

/** Width of `text` at `size` px, overestimated (DejaVu Sans is wide) so that nothing overlaps. */
function textWidth(text: string, size: number): number {
  return text.length * size * 0.6;
}

/** Words on lines of at most `width` px, for titles and captions longer than the chart is wide. */
function wrapText(text: string, size: number, width: number): string[] {
  const lines: string[] = [];
  for (const word of text.split(' ')) {
    const last = lines.at(-1);
    if (last !== undefined && textWidth(`${last} ${word}`, size) <= width)
      lines[lines.length - 1] = `${last} ${word}`;
    else lines.push(word);
  }
  return lines;
}

type Anchor = 'start' | 'middle' | 'end';

function text(x: number, y: number, classes: string, content: string, anchor: Anchor = 'start'): string {
  const anchorAttribute = anchor === 'start' ? '' : ` text-anchor="${anchor}"`;
  return `<text class="${classes}" x="${px(x)}" y="${px(y)}"${anchorAttribute}>${escapeXml(content)}</text>`;
}

function line(x1: number, y1: number, x2: number, y2: number, classes: string): string {
  return `<line class="${classes}" x1="${px(x1)}" y1="${px(y1)}" x2="${px(x2)}" y2="${px(y2)}"/>`;
}

/** Marker `index` centred on (x, y): a second cue beside colour and dash, for greyscale. */
function marker(index: number, x: number, y: number): string {
  const r = 3.5;
  const shapes = [
    `M${px(x - r)} ${px(y)}a${r} ${r} 0 1 0 ${px(2 * r)} 0a${r} ${r} 0 1 0 ${px(-2 * r)} 0Z`,
    `M${px(x - r)} ${px(y - r)}h${px(2 * r)}v${px(2 * r)}h${px(-2 * r)}Z`,
    `M${px(x)} ${px(y - r - 1)}L${px(x + r + 1)} ${px(y + r)}H${px(x - r - 1)}Z`,
    `M${px(x)} ${px(y - r - 1)}L${px(x + r + 1)} ${px(y)}L${px(x)} ${px(y + r + 1)}L${px(x - r - 1)} ${px(y)}Z`,
    `M${px(x)} ${px(y + r + 1)}L${px(x + r + 1)} ${px(y - r)}H${px(x - r - 1)}Z`,
    `M${px(x - r)} ${px(y - 1)}h${px(2 * r)}v2h${px(-2 * r)}ZM${px(x - 1)} ${px(y - r)}h2v${px(2 * r)}h-2Z`,
  ];
  return `<path class="f${index}" d="${shapes[index]}"/>`;
}

interface LegendEntry {
  /** The swatch, drawn with its left edge at x = 0 and its middle at y = 0. */
  readonly swatch: string;
  readonly label: string;
}

/** Legend entries flowing left to right in rows above the plot, where they never cover data. */
function legend(entries: readonly LegendEntry[], top: number): { svg: string; height: number } {
  const rowHeight = 20;
  const parts: string[] = [];
  let x = MARGIN;
  let row = 0;
  for (const entry of entries) {
    const width = 30 + textWidth(entry.label, 12);
    if (x > MARGIN && x + width > WIDTH - MARGIN) {
      x = MARGIN;
      row++;
    }
    const middle = top + row * rowHeight + rowHeight / 2;
    parts.push(`<g transform="translate(${px(x)} ${px(middle)})">${entry.swatch}</g>`);
    parts.push(text(x + 30, middle + 4, 'legend ink', entry.label));
    x += width + 18;
  }
  return { svg: `<g class="legend">${parts.join('')}</g>`, height: (row + 1) * rowHeight };
}

/** Title and caption lines; returns where the next element may start. */
function heading(title: string, caption: string): { svg: string; bottom: number } {
  const parts: string[] = [];
  let y = MARGIN;
  for (const titleLine of wrapText(title, 16, WIDTH - 2 * MARGIN))
    parts.push(text(MARGIN, (y += 20) - 4, 'title ink', titleLine));
  for (const captionLine of wrapText(caption, 12, WIDTH - 2 * MARGIN))
    parts.push(text(MARGIN, (y += 16) - 2, 'caption muted', captionLine));
  return { svg: parts.join(''), bottom: y + 8 };
}

function svgDocument(title: string, description: string, height: number, body: readonly string[]): string {
  const h = px(height);
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${h}" viewBox="0 0 ${WIDTH} ${h}" role="img">`,
    `<title>${escapeXml(title)}</title>`,
    `<desc>${escapeXml(description)}</desc>`,
    STYLE_SHEET,
    `<rect class="bg" width="${WIDTH}" height="${h}"/>`,
    ...body,
    '</svg>',
    '',
  ].join('\n');
}

// Input checks: the chart is generated from a results file, so a bad figure stops `npm run docs` with the
// field that is wrong rather than drawing a line to NaN.

function checkText(value: unknown, field: string): void {
  if (typeof value !== 'string' || value.trim() === '')
    throw new Error(`${field}: must be a non-empty string`);
  // Outside XML 1.0's Char production: no way to write these, escaped or not.
  if (/[^\t\n\r\u0020-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/u.test(value))
    throw new Error(
      `${field}: contains a character XML cannot carry (a control character or a lone surrogate)`,
    );
}

function checkNumber(value: unknown, field: string, min = -Infinity): void {
  if (typeof value !== 'number' || !Number.isFinite(value))
    throw new Error(`${field}: must be a finite number, got ${String(value)}`);
  if (value < min) throw new Error(`${field}: must be at least ${min}, got ${value}`);
}

function checkNames(names: readonly string[], field: string): void {
  if (names.length > MAX_SERIES)
    throw new Error(`${field}: ${names.length} names; at most ${MAX_SERIES} can be told apart`);
  const repeated = names.find((name, i) => names.indexOf(name) !== i);
  if (repeated !== undefined)
    throw new Error(`${field}: "${repeated}" appears twice; each needs its own name`);
}

function checkLineChart(spec: LineChartSpec): void {
  checkText(spec.title, 'title');
  checkText(spec.caption, 'caption');
  for (const axis of ['x', 'y'] as const) {
    checkText(spec[axis].label, `${axis}.label`);
    if (typeof spec[axis].unit !== 'string') throw new Error(`${axis}.unit: must be a string ('' for none)`);
  }
  if (spec.series.length === 0) throw new Error('series: empty; a line chart needs at least one series');
  spec.series.forEach((series, s) => {
    checkText(series.name, `series[${s}].name`);
    if (series.points.length === 0) throw new Error(`series[${s}].points: empty; give at least one point`);
    series.points.forEach(([x, y], p) => {
      checkNumber(x, `series[${s}].points[${p}][0] (x)`);
      checkNumber(y, `series[${s}].points[${p}][1] (y)`);
    });
  });
  const seriesNames = spec.series.map((series) => series.name);
  checkNames(seriesNames, 'series');
  (spec.bands ?? []).forEach((band, b) => {
    checkText(band.name, `bands[${b}].name`);
    checkNumber(band.from, `bands[${b}].from`);
    checkNumber(band.to, `bands[${b}].to`);
    if (band.from > band.to) throw new Error(`bands[${b}]: from ${band.from} is above to ${band.to}`);
  });
}

/** A line chart: series over x, bands shaded behind them, legend above, ticks with units. */
export function lineChart(spec: LineChartSpec): string {
  checkLineChart(spec);
  const bands = spec.bands ?? [];
  const xs = spec.series.flatMap((series) => series.points.map(([x]) => x));
  const ys = spec.series.flatMap((series) => series.points.map(([, y]) => y));
  const [xMin, xMax] = [Math.min(...xs), Math.max(...xs)];
  if (xMax === xMin) throw new Error(`x: every point has x = ${xMin}; a line needs x values that differ`);
  let yMin = Math.min(...ys, ...bands.map((band) => band.from), ...(spec.yFromZero === false ? [] : [0]));
  let yMax = Math.max(...ys, ...bands.map((band) => band.to), ...(spec.yFromZero === false ? [] : [0]));
  if (yMax === yMin) {
    // A flat line at v still needs an axis around it.
    const pad = Math.abs(yMin) / 10 || 1;
    [yMin, yMax] = [yMin - pad, yMax + pad];
  }
  const yTicks = niceTicks(yMin, yMax, Math.floor(PLOT_HEIGHT / 45) + 1);
  const yLabels = tickLabels(yTicks, spec.y.unit);

  const head = heading(spec.title, spec.caption);
  const entries: LegendEntry[] = [
    ...spec.series.map((series, i) => ({
      swatch: `${line(0, 0, 24, 0, `line s${i} d${i}`)}${marker(i, 12, 0)}`,
      label: series.name,
    })),
    ...bands.map((band) => ({
      swatch: '<rect class="band" x="0" y="-6" width="24" height="12"/>',
      label: `${band.name}: ${formatFigure(band.from)}–${figure(band.to, spec.y.unit)}`,
    })),
  ];
  const key = legend(entries, head.bottom);
  const yLabelBaseline = head.bottom + key.height + 18;
  const plotTop = yLabelBaseline + 12;
  const plotBottom = plotTop + PLOT_HEIGHT;
  const left = MARGIN + Math.max(...yLabels.map((label) => textWidth(label, 11))) + 8;
  const xLabelAllowance = textWidth(figure(xMax, spec.x.unit), 11) / 2 + 4;
  const right = WIDTH - MARGIN - xLabelAllowance;
  const xTicks = niceTicks(xMin, xMax, Math.floor((right - left) / 60) + 1);
  const xLabels = tickLabels(xTicks, spec.x.unit);
  const [x0, x1] = [xTicks[0]!, xTicks.at(-1)!];
  const [y0, y1] = [yTicks[0]!, yTicks.at(-1)!];
  const sx = (x: number): number => left + ((x - x0) / (x1 - x0)) * (right - left);
  const sy = (y: number): number => plotBottom - ((y - y0) / (y1 - y0)) * PLOT_HEIGHT;

  const body: string[] = [head.svg, key.svg];
  body.push(text(MARGIN, yLabelBaseline, 'axis-label ink', spec.y.label));
  for (const band of bands)
    body.push(
      `<rect class="band" x="${px(left)}" y="${px(sy(band.to))}" width="${px(right - left)}" height="${px(sy(band.from) - sy(band.to))}"/>`,
    );
  const yAxis = yTicks.map(
    (tick, i) =>
      `${line(left, sy(tick), right, sy(tick), 'grid')}${text(left - 6, sy(tick) + 4, 'tick muted', yLabels[i]!, 'end')}`,
  );
  body.push(`<g data-axis="y">${yAxis.join('')}</g>`);
  const xAxis = xTicks.map(
    (tick, i) =>
      `${line(sx(tick), plotBottom, sx(tick), plotBottom + 4, 'axis')}${text(sx(tick), plotBottom + 16, 'tick muted', xLabels[i]!, 'middle')}`,
  );
  body.push(`<g data-axis="x">${xAxis.join('')}</g>`);
  body.push(line(left, plotTop, left, plotBottom, 'axis'), line(left, plotBottom, right, plotBottom, 'axis'));
  spec.series.forEach((series, i) => {
    const points = series.points.map(([x, y]) => `${px(sx(x))},${px(sy(y))}`).join(' ');
    body.push(`<polyline class="line s${i} d${i}" points="${points}"/>`);
    // Markers on every point only while they stay apart; dense samples keep the dash as their cue.
    if (series.points.length <= 40) body.push(...series.points.map(([x, y]) => marker(i, sx(x), sy(y))));
  });
  body.push(text((left + right) / 2, plotBottom + 36, 'axis-label ink', spec.x.label, 'middle'));

  const description = [
    `Line chart: ${spec.title}. ${spec.caption}.`,
    `x: ${spec.x.label} from ${figure(xMin, spec.x.unit)} to ${figure(xMax, spec.x.unit)}; y: ${spec.y.label}.`,
    ...spec.series.map((series) => {
      const values = series.points.map(([, y]) => y);
      const [low, high, last] = [Math.min(...values), Math.max(...values), values.at(-1)!].map((v) =>
        figure(v, spec.y.unit),
      );
      return `${series.name}: ${values.length} points, min ${low}, max ${high}, last ${last}.`;
    }),
    ...bands.map(
      (band) => `${band.name} (shaded): ${formatFigure(band.from)} to ${figure(band.to, spec.y.unit)}.`,
    ),
  ].join(' ');
  return svgDocument(spec.title, description, plotBottom + 44 + MARGIN / 2, body);
}

function checkBarChart(spec: BarChartSpec): void {
  checkText(spec.title, 'title');
  checkText(spec.caption, 'caption');
  if (typeof spec.unit !== 'string') throw new Error(`unit: must be a string ('' for none)`);
  if (spec.groups.length === 0) throw new Error('groups: empty; a bar chart needs at least one group');
  spec.groups.forEach((group, g) => {
    checkText(group.name, `groups[${g}].name`);
    if (group.unit !== undefined && typeof group.unit !== 'string')
      throw new Error(`groups[${g}].unit: must be a string`);
    if (group.bars.length === 0) throw new Error(`groups[${g}].bars: empty; give at least one bar`);
    group.bars.forEach((bar, b) => {
      checkText(bar.name, `groups[${g}].bars[${b}].name`);
      // Bars start at zero: a negative cost has no length to draw.
      checkNumber(bar.value, `groups[${g}].bars[${b}].value`, 0);
      if (bar.note !== undefined) checkText(bar.note, `groups[${g}].bars[${b}].note`);
    });
    const barNames = group.bars.map((bar) => bar.name);
    checkNames(barNames, `groups[${g}].bars`);
  });
  checkNames(
    [...new Set(spec.groups.flatMap((group) => group.bars.map((bar) => bar.name)))],
    'groups[].bars names',
  );
  if (spec.reference) {
    checkText(spec.reference.name, 'reference.name');
    checkNumber(spec.reference.value, 'reference.value', 0);
  }
}

/**
 * Horizontal grouped bars: a heading per group, one bar per name (the same colour in every group, named
 * in the legend), each labelled with its name, value and unit. Groups in one unit share a scale, so that
 * a request and a working set compare; each unit gets an axis of its own.
 */
export function barChart(spec: BarChartSpec): string {
  checkBarChart(spec);
  const { groups, reference } = spec;
  const names = [...new Set(groups.flatMap((group) => group.bars.map((bar) => bar.name)))];
  const unitOf = (group: BarGroup): string => group.unit ?? spec.unit;
  const barLabel = (bar: Bar, unit: string): string =>
    `${bar.name}: ${figure(bar.value, unit)}${bar.note === undefined ? '' : ` (${bar.note})`}`;
  const referenceLabel = reference && `${reference.name}: ${figure(reference.value, spec.unit)}`;
  // What a group's scale must reach: its bars, and the reference when it is in the group's unit.
  const reach = (group: BarGroup): number[] => [
    ...group.bars.map((bar) => bar.value),
    ...(reference && unitOf(group) === spec.unit ? [reference.value] : []),
  ];
  const reachInUnit = (unit: string): number =>
    Math.max(...groups.filter((group) => unitOf(group) === unit).flatMap(reach)) || 1;
  const ticksAt = (width: number): number[][] =>
    groups.map((group) => niceTicks(0, reachInUnit(unitOf(group)), Math.floor(width / 60) + 1));
  // The first tick label is centred on the bars' left edge.
  const left =
    MARGIN + Math.max(4, ...groups.map((group) => textWidth(withUnit('0', unitOf(group)), 11) / 2));
  // The widest plot in which every bar's label still ends inside the chart; the ticks follow the width.
  let width = WIDTH - MARGIN - left;
  let ticks = ticksAt(width);
  for (let round = 0; round < 8 && width > 280; round++) {
    const room = (bar: Bar, unit: string): number =>
      WIDTH - MARGIN - left - 6 - textWidth(barLabel(bar, unit), 11);
    const fit = Math.min(
      ...groups.flatMap((group, g) =>
        group.bars
          .filter((bar) => bar.value > 0)
          .map((bar) => (room(bar, unitOf(group)) * ticks[g]!.at(-1)!) / bar.value),
      ),
    );
    if (fit >= width - 0.5) break;
    width = Math.max(280, fit);
    ticks = ticksAt(width);
  }

  const head = heading(spec.title, spec.caption);
  const entries: LegendEntry[] = [
    ...names.map((name, i) => ({
      swatch: `<rect class="f${i}" x="6" y="-6" width="12" height="12"/>`,
      label: name,
    })),
    ...(referenceLabel ? [{ swatch: line(0, 0, 24, 0, 'ref'), label: referenceLabel }] : []),
  ];
  const key = legend(entries, head.bottom);
  const behind: string[] = [head.svg, key.svg];
  const inFront: string[] = [];
  let y = head.bottom + key.height + 8;
  groups.forEach((group, g) => {
    const groupTicks = ticks[g]!;
    const scale = (v: number): number => left + (v / groupTicks.at(-1)!) * width;
    inFront.push(text(MARGIN, y + 14, 'group-label ink', group.name));
    const barsTop = (y += 20);
    for (const bar of group.bars) {
      const end = scale(bar.value);
      inFront.push(
        `<rect class="f${names.indexOf(bar.name)}" x="${px(left)}" y="${px(y)}" width="${px(end - left)}" height="${BAR_HEIGHT}"/>`,
        text(end + 6, y + BAR_HEIGHT / 2 + 4, 'value ink halo', barLabel(bar, unitOf(group))),
      );
      y += BAR_HEIGHT + 4;
    }
    // Grid and reference are drawn per group, so that neither crosses a group's heading; tick labels
    // under the last group of each run in one unit.
    behind.push(...groupTicks.map((tick) => line(scale(tick), barsTop - 4, scale(tick), y, 'grid')));
    if (reference && unitOf(group) === spec.unit)
      inFront.push(line(scale(reference.value), barsTop - 4, scale(reference.value), y, 'ref'));
    const next = groups[g + 1];
    if (next === undefined || unitOf(next) !== unitOf(group)) {
      const labels = tickLabels(groupTicks, unitOf(group));
      const marks = groupTicks.map((tick, i) =>
        text(scale(tick), y + 14, 'tick muted', labels[i]!, 'middle'),
      );
      behind.push(`<g data-axis="x">${marks.join('')}</g>`);
      y += 20;
    }
    y += 10;
  });
  const description = [
    `Bar chart: ${spec.title}. ${spec.caption}.`,
    ...groups.map(
      (group) => `${group.name}: ${group.bars.map((bar) => barLabel(bar, unitOf(group))).join('; ')}.`,
    ),
    ...(referenceLabel ? [`${referenceLabel} (dashed line).`] : []),
  ].join(' ');
  return svgDocument(spec.title, description, y + MARGIN, [...behind, ...inFront]);
}
