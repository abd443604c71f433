/**
 * The published charts (issue 38, bench/report/svg-chart.ts): well-formed SVG that xmllint parses, the same
 * bytes for the same figures wherever they are rendered, every name escaped, nice ticks that cover the
 * data, every figure in the legend and the description, both colour schemes complete, bad input refused
 * with the field named.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  barChart,
  lineChart,
  niceTicks,
  type BarChartSpec,
  type LineChartSpec,
  type Point,
} from '../../bench/report/svg-chart.ts';

const XMLLINT_INSTALL = 'apt-get install -y libxml2-utils';
const CAPTION = 'npm run bench · commit abc1234 · 2026-11-29 · 2 cores';
/** Every character XML gives a meaning to, in one name. */
const AWKWARD = `<&">' Tom & "Jerry" </text><script>`;

/** The agent container's working set over three 60 s refreshes, as the bench samples it. */
function workingSet(): LineChartSpec {
  const sample = (step: number, at: (t: number) => number): Point[] =>
    Array.from({ length: 180 / step + 1 }, (_, i) => [i * step, at(i * step)] as const);
  return {
    title: 'Agent container working set over three refreshes',
    caption: CAPTION,
    x: { label: 'Time since the pod started', unit: 's' },
    y: { label: 'Working set', unit: 'MiB' },
    series: [
      { name: 'Small sidecar', points: sample(1, (t) => (t > 0 && t % 60 < 3 ? 45.3 - (t % 60) * 4 : 2.1)) },
      { name: 'Node sidecar', points: sample(2, (t) => 17.2 + Math.min(t / 60, 2) * 0.9) },
      { name: 'Idle node', points: sample(10, () => 15.1) },
    ],
    bands: [{ name: 'Vault agent (published)', from: 13, to: 20 }],
  };
}

function costPerPod(): BarChartSpec {
  const modes = (small: number, node: number) => [
    { name: 'Small sidecar', value: small },
    { name: 'Node sidecar', value: node, note: 'peak 59.6' },
  ];
  return {
    title: 'What one pod costs its node',
    caption: CAPTION,
    unit: 'MiB',
    groups: [
      { name: 'Memory request', bars: modes(4, 40) },
      { name: 'Working set', bars: modes(2.1, 19) },
      { name: 'CPU per hour', unit: 'CPU s', bars: modes(9.4, 21.7) },
    ],
  };
}

function podStart(): BarChartSpec {
  return {
    title: 'Start of a pod in podman',
    caption: CAPTION,
    unit: 's',
    groups: [
      {
        name: 'Median',
        bars: [
          { name: 'Not injected', value: 0.92 },
          { name: 'Injected', value: 1.41 },
        ],
      },
      {
        name: '90th percentile',
        bars: [
          { name: 'Not injected', value: 1.05 },
          { name: 'Injected', value: 1.63 },
        ],
      },
    ],
    reference: { name: 'Floor (pause image)', value: 2.2 },
  };
}

/** Every text field of the three specs set to AWKWARD (names kept apart where they must differ). */
function awkwardSpecs(): [LineChartSpec, BarChartSpec] {
  const line = workingSet();
  const bar = podStart();
  return [
    {
      ...line,
      title: AWKWARD,
      caption: AWKWARD,
      x: { label: AWKWARD, unit: AWKWARD },
      y: { label: AWKWARD, unit: AWKWARD },
      series: line.series.map((series, i) => ({ ...series, name: `${AWKWARD} ${i}` })),
      bands: [{ name: AWKWARD, from: 13, to: 20 }],
    },
    {
      title: AWKWARD,
      caption: AWKWARD,
      unit: AWKWARD,
      groups: bar.groups.map((group, g) => ({
        name: `${AWKWARD} ${g}`,
        bars: group.bars.map((b, i) => ({ ...b, name: `${AWKWARD} ${i}`, note: AWKWARD })),
      })),
      reference: { name: AWKWARD, value: 0.5 },
    },
  ];
}

function xmllint(svg: string): { ok: boolean; errors: string } {
  const run = spawnSync('xmllint', ['--noout', '-'], { input: svg, encoding: 'utf8' });
  if (run.error) throw new Error(`xmllint could not run (${run.error.message}). Install: ${XMLLINT_INSTALL}`);
  return { ok: run.status === 0, errors: run.stderr };
}

function unescapeXml(text: string): string {
  return text
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&quot;/g, '"')
    .replace(/&apos;/g, "'")
    .replace(/&amp;/g, '&');
}

/** The text of every <text> in `fragment`, unescaped. */
function texts(fragment: string): string[] {
  return [...fragment.matchAll(/<text[^>]*>([^<]*)<\/text>/g)].map((m) => unescapeXml(m[1]!));
}

/** The tick labels of each axis group `<g data-axis="…">` (a bar chart has one per scale). */
function axes(svg: string, axis: 'x' | 'y'): string[][] {
  return [...svg.matchAll(new RegExp(`<g data-axis="${axis}">(.*?)</g>`, 'g'))].map((m) => texts(m[1]!));
}

function legendTexts(svg: string): string[] {
  const legend = svg.split('\n').find((line) => line.startsWith('<g class="legend">'));
  assert.ok(legend, 'the chart has a legend');
  return texts(legend);
}

function description(svg: string): string {
  const match = /<desc>([^<]*)<\/desc>/.exec(svg);
  assert.ok(match, 'the chart has a <desc>');
  return unescapeXml(match[1]!);
}

/** The numbers of tick labels such as "20 MiB", checking that each carries the unit. */
function tickValues(labels: readonly string[], unit: string): number[] {
  return labels.map((label) => {
    assert.ok(label.endsWith(` ${unit}`), `tick label "${label}" carries its unit ${unit}`);
    return Number(label.slice(0, -unit.length - 1));
  });
}

/** Ticks evenly spaced at 1, 2, 2.5 or 5 × 10^n (to float precision, which far from zero is coarser). */
function assertNiceSteps(ticks: readonly number[]): void {
  const step = (ticks.at(-1)! - ticks[0]!) / (ticks.length - 1);
  const exponent = Math.floor(Math.log10(step));
  const candidates = [exponent - 1, exponent, exponent + 1].flatMap((e) =>
    [1, 2, 2.5, 5].map((m) => m * 10 ** e),
  );
  assert.ok(
    candidates.some((nice) => Math.abs(step / nice - 1) < 1e-6),
    `step ${step} of [${ticks.join(', ')}] is 1, 2, 2.5 or 5 × 10^n`,
  );
  const precision = step * 1e-6 + Math.max(...ticks.map(Math.abs)) * 1e-12;
  ticks.forEach((tick, i) =>
    assert.ok(Math.abs(tick - (ticks[0]! + i * step)) < precision, `[${ticks.join(', ')}] evenly spaced`),
  );
}

describe('SVG charts for the published figures', () => {
  it('renders well-formed XML that xmllint accepts (and xmllint rejects a broken one)', () => {
    const broken = xmllint('<svg xmlns="http://www.w3.org/2000/svg"><text>a & b</text></svg>');
    assert.equal(broken.ok, false, 'xmllint must reject a raw & or this check proves nothing');
    const flat: LineChartSpec = {
      ...workingSet(),
      series: [
        {
          name: 'flat',
          points: [
            [0, -3],
            [5, -3],
          ],
        },
      ],
      bands: [],
      yFromZero: false,
    };
    const charts = [lineChart(workingSet()), barChart(costPerPod()), barChart(podStart()), lineChart(flat)];
    const [awkwardLine, awkwardBar] = awkwardSpecs();
    charts.push(lineChart(awkwardLine), barChart(awkwardBar));
    for (const svg of charts) {
      const { ok, errors } = xmllint(svg);
      assert.ok(ok, `xmllint: ${errors}`);
      assert.match(
        svg,
        /^<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg" width="720" height="[\d.]+" viewBox="0 0 720 [\d.]+"/,
      );
      assert.match(
        svg,
        /^<svg[^>]*>\n<title>[^<]+<\/title>\n<desc>[^<]+<\/desc>\n<style>/,
        'title and desc first',
      );
      // Nothing outside the file: GitHub's <img> would not load it, and a reader's copy would differ.
      assert.doesNotMatch(svg, /href|url\(|@import|<image|<script|<foreignObject/i);
    }
  });

  it('gives the same bytes for the same figures, in another process with another locale and time zone', () => {
    const specs = [workingSet(), podStart()] as const;
    const here = [lineChart(specs[0]), barChart(specs[1])];
    assert.deepEqual([lineChart(structuredClone(specs[0])), barChart(structuredClone(specs[1]))], here);
    const module = new URL('../../bench/report/svg-chart.ts', import.meta.url).href;
    const child = spawnSync(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `import { lineChart, barChart } from ${JSON.stringify(module)};
         const [line, bar] = JSON.parse(process.argv[1]);
         process.stdout.write(JSON.stringify([lineChart(line), barChart(bar)]));`,
        JSON.stringify(specs),
      ],
      {
        encoding: 'utf8',
        env: { ...process.env, TZ: 'Pacific/Chatham', LANG: 'de_DE.UTF-8', LC_ALL: 'de_DE.UTF-8' },
      },
    );
    assert.equal(child.status, 0, child.stderr);
    assert.deepEqual(JSON.parse(child.stdout), here);
    // Coordinates are rounded, so float noise in a figure cannot change a byte.
    for (const svg of here) {
      const long = [...svg.matchAll(/ (?:x|y|x1|x2|y1|y2|width|height|points|d)="([^"]*)"/g)].flatMap(
        (m) => m[1]!.match(/\d+\.\d{2,}/g) ?? [],
      );
      assert.deepEqual(long, [], 'no coordinate with more than one decimal');
    }
  });

  it('escapes every name: markup characters never appear raw, and read back as given', () => {
    const [line, bar] = awkwardSpecs();
    for (const svg of [lineChart(line), barChart(bar)]) {
      assert.ok(!svg.includes('<&">'), 'the raw name is not in the SVG');
      assert.ok(!svg.includes('</text><script>'), 'a name cannot close an element');
      assert.ok(svg.includes('&lt;&amp;&quot;&gt;&apos;'), 'the escaped name is');
      assert.ok(
        texts(svg).some((t) => t.includes(AWKWARD)),
        'the name reads back unchanged',
      );
      assert.ok(description(svg).includes(AWKWARD));
    }
  });

  it('picks nice ticks (1, 2, 2.5 or 5 × 10^n) that cover any range, within the count asked for', () => {
    fc.assert(
      fc.property(
        fc.double({ min: -1e6, max: 1e6, noNaN: true }),
        fc.double({ min: 1e-3, max: 1e6, noNaN: true }),
        fc.integer({ min: 5, max: 12 }),
        (min, span, maxCount) => {
          const max = min + span;
          fc.pre(max > min);
          const ticks = niceTicks(min, max, maxCount);
          assert.ok(ticks.length >= 3 && ticks.length <= maxCount, `${ticks.length} ticks for ${maxCount}`);
          // Within a billionth of a step: float noise in a figure must not add a whole step to the axis.
          const noise = (ticks[1]! - ticks[0]!) * 1e-9;
          assert.ok(
            ticks[0]! <= min + noise && ticks.at(-1)! >= max - noise,
            `[${ticks.join(', ')}] covers ${min}..${max}`,
          );
          assertNiceSteps(ticks);
        },
      ),
    );
    assert.deepEqual(niceTicks(0, 180, 11), [0, 20, 40, 60, 80, 100, 120, 140, 160, 180]);
    assert.deepEqual(niceTicks(13, 20, 6), [12, 14, 16, 18, 20], '2 beats 2.5 when it wastes about as much');
  });

  it('draws axes whose ticks cover the data, the bands and the reference, each label with its unit', () => {
    const spec = workingSet();
    const svg = lineChart(spec);
    const ys = spec.series.flatMap((s) => s.points.map(([, y]) => y));
    const [yAxis] = axes(svg, 'y');
    const y = tickValues(yAxis!, 'MiB');
    assertNiceSteps(y);
    assert.equal(y[0], 0, 'memory is drawn from zero');
    assert.ok(y.at(-1)! >= Math.max(...ys, 20), `y ticks [${y.join(', ')}] reach the 45.3 MiB peak`);
    const x = tickValues(axes(svg, 'x')[0]!, 's');
    assertNiceSteps(x);
    assert.ok(x[0]! <= 0 && x.at(-1)! >= 180, `x ticks [${x.join(', ')}] cover 0..180 s`);
    const lifted = tickValues(
      axes(lineChart({ ...spec, bands: [{ name: 'high', from: 70, to: 90 }] }), 'y')[0]!,
      'MiB',
    );
    assert.ok(lifted.at(-1)! >= 90, `a band above the data lifts the axis: [${lifted.join(', ')}]`);

    const start = podStart();
    const [shared, ...more] = axes(barChart(start), 'x');
    assert.deepEqual(more, [], 'groups in one unit share one axis');
    const t = tickValues(shared!, 's');
    assertNiceSteps(t);
    assert.ok(t[0] === 0 && t.at(-1)! >= 2.2, `the axis [${t.join(', ')}] reaches the reference at 2.2 s`);
    const costSvg = barChart(costPerPod());
    const cost = axes(costSvg, 'x');
    assert.equal(cost.length, 2, 'one axis per unit: MiB (request and working set), then CPU s');
    const mib = tickValues(cost[0]!, 'MiB');
    assert.ok(mib.at(-1)! >= 40, `the MiB axis [${mib.join(', ')}] reaches the 40 MiB request`);
    const cpu = tickValues(cost[1]!, 'CPU s');
    assert.ok(cpu.at(-1)! >= 21.7 && cpu.at(-1)! < 40, `the CPU axis [${cpu.join(', ')}] fits its own bars`);
    // Request and working set share a scale, so their bars compare: 19 MiB is 19/40 of 40 MiB.
    const nodeBars = [...costSvg.matchAll(/<rect class="f1" x="[\d.]+" y="[\d.]+" width="([\d.]+)"/g)];
    const [requestBar, workingSetBar] = nodeBars.map((m) => Number(m[1]));
    assert.ok(
      Math.abs(workingSetBar! / requestBar! - 19 / 40) < 0.01,
      `bars ${workingSetBar} and ${requestBar} px`,
    );
  });

  it('names every series, band, bar and reference in the legend and, with its figures, in the description', () => {
    const line = workingSet();
    const svg = lineChart(line);
    const legend = legendTexts(svg);
    const words = description(svg);
    for (const series of line.series) {
      assert.ok(legend.includes(series.name), `legend has ${series.name}`);
      assert.ok(words.includes(series.name), `desc has ${series.name}`);
    }
    assert.ok(legend.includes('Vault agent (published): 13–20 MiB'), legend.join(' | '));
    assert.match(words, /Small sidecar: 181 points, min 2\.1 MiB, max 45\.3 MiB, last 45\.3 MiB\./);
    assert.match(words, /Vault agent \(published\) \(shaded\): 13 to 20 MiB\./);
    assert.ok(words.includes(CAPTION), 'desc names the run');
    assert.ok(texts(svg).includes(CAPTION), 'the caption is drawn');

    const cost = barChart(costPerPod());
    assert.deepEqual(legendTexts(cost), ['Small sidecar', 'Node sidecar']);
    for (const label of [
      'Small sidecar: 4 MiB',
      'Node sidecar: 19 MiB (peak 59.6)',
      'Node sidecar: 21.7 CPU s (peak 59.6)',
    ]) {
      assert.ok(texts(cost).includes(label), `bar labelled "${label}"`);
      assert.ok(description(cost).includes(label), `desc has "${label}"`);
    }
    const start = barChart(podStart());
    assert.ok(legendTexts(start).includes('Floor (pause image): 2.2 s'));
    assert.ok(description(start).includes('Floor (pause image): 2.2 s (dashed line)'));
    assert.match(start, /<line class="ref"/, 'the reference is drawn');
  });

  it('defines every class it uses, and gives every coloured class a colour in both schemes', () => {
    for (const svg of [lineChart(workingSet()), barChart(costPerPod()), barChart(podStart())]) {
      const style = /<style>(.*)<\/style>/.exec(svg)![1]!;
      const darkAt = style.indexOf('@media (prefers-color-scheme: dark){');
      assert.ok(darkAt > 0, 'a dark scheme');
      const [light, dark] = [style.slice(0, darkAt), style.slice(darkAt)];
      const rules = (css: string) =>
        [...css.matchAll(/([^{}]+)\{([^{}]*)\}/g)].map((m) => ({ selectors: m[1]!, body: m[2]! }));
      const classesIn = (css: string, colouring: boolean) =>
        new Set(
          rules(css)
            .filter((rule) => !colouring || /(?:^|;)(?:fill|stroke):#/.test(rule.body))
            .flatMap((rule) => [...rule.selectors.matchAll(/\.([\w-]+)/g)].map((m) => m[1]!)),
        );
      const lightColours = classesIn(light, true);
      const darkColours = classesIn(dark, true);
      assert.deepEqual(
        [...darkColours].sort(),
        [...lightColours].sort(),
        'the same classes get colours in both',
      );
      const defined = classesIn(light, false);
      const used = new Set([...svg.matchAll(/class="([^"]*)"/g)].flatMap((m) => m[1]!.split(' ')));
      assert.deepEqual(
        [...used].filter((c) => !defined.has(c)),
        [],
        'classes used but never defined',
      );
      // Anything drawn without a coloured class would keep its default (black) on the dark background.
      const uncoloured = [...svg.matchAll(/<(text|line|polyline|rect|path)\b[^>]*>/g)]
        .filter((m) => !(/class="([^"]*)"/.exec(m[0])?.[1] ?? '').split(' ').some((c) => darkColours.has(c)))
        .map((m) => m[0]);
      assert.deepEqual(uncoloured, [], 'elements without a colour in the dark scheme');
    }
  });

  it('refuses bad input with the field named', () => {
    const line = workingSet();
    const bar = podStart();
    const lineCases: [LineChartSpec, RegExp][] = [
      [{ ...line, series: [] }, /^series: empty/],
      [{ ...line, series: [{ name: 'a', points: [] }] }, /^series\[0\]\.points: empty/],
      [
        {
          ...line,
          series: [
            {
              name: 'a',
              points: [
                [0, 1],
                [1, NaN],
              ],
            },
          ],
        },
        /^series\[0\]\.points\[1\]\[1\] \(y\): .*NaN/,
      ],
      [
        { ...line, series: [{ name: 'a', points: [[Infinity, 1]] }] },
        /^series\[0\]\.points\[0\]\[0\] \(x\): .*Infinity/,
      ],
      [
        {
          ...line,
          series: [
            {
              name: 'a',
              points: [
                [5, 1],
                [5, 2],
              ],
            },
          ],
        },
        /^x: every point has x = 5/,
      ],
      [{ ...line, series: [line.series[0]!, line.series[0]!] }, /^series: "Small sidecar" appears twice/],
      [
        {
          ...line,
          series: Array.from({ length: 7 }, (_, i) => ({
            name: `s${i}`,
            points: [
              [0, 1],
              [1, 2],
            ] as Point[],
          })),
        },
        /^series: 7 names/,
      ],
      [{ ...line, bands: [{ name: 'b', from: 20, to: 13 }] }, /^bands\[0\]: from 20 is above to 13/],
      [{ ...line, bands: [{ name: 'b', from: NaN, to: 13 }] }, /^bands\[0\]\.from: .*NaN/],
      [{ ...line, title: ' ' }, /^title: must be a non-empty string/],
      [{ ...line, caption: 'run\u0000' }, /^caption: contains a character XML cannot carry/],
      [{ ...line, y: { label: 'y', unit: undefined as unknown as string } }, /^y\.unit: must be a string/],
    ];
    for (const [spec, error] of lineCases) assert.throws(() => lineChart(spec), { message: error });
    const barCases: [BarChartSpec, RegExp][] = [
      [{ ...bar, groups: [] }, /^groups: empty/],
      [{ ...bar, groups: [{ name: 'g', bars: [] }] }, /^groups\[0\]\.bars: empty/],
      [
        { ...bar, groups: [bar.groups[0]!, { name: 'g', bars: [{ name: 'b', value: NaN }] }] },
        /^groups\[1\]\.bars\[0\]\.value: .*NaN/,
      ],
      [
        { ...bar, groups: [{ name: 'g', bars: [{ name: 'b', value: -1 }] }] },
        /^groups\[0\]\.bars\[0\]\.value: must be at least 0/,
      ],
      [
        { ...bar, groups: [{ name: '', bars: [{ name: 'b', value: 1 }] }] },
        /^groups\[0\]\.name: must be a non-empty string/,
      ],
      [{ ...bar, reference: { name: 'floor', value: Infinity } }, /^reference\.value: .*Infinity/],
    ];
    for (const [spec, error] of barCases) assert.throws(() => barChart(spec), { message: error });
  });
});
