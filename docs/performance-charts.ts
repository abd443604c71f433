/**
 * The charts of docs/performance.md and the README, to be drawn from the last committed bench run by
 * `npm run docs` into docs/figures/*.svg once one is committed (issue 38; bench/report/svg-chart.ts
 * draws): what a reader would rather look at than read. Each names the run it came from
 * (test/docs/figure-tables.test.ts).
 */
import { AGENT_SETTINGS } from '../agent/contract/agent-settings.ts';
import { barChart, lineChart } from '../bench/report/svg-chart.ts';
import { WEBHOOK_SETTINGS } from '../webhook/config/settings.ts';
import { FigureBook, MissingFigureError } from './figure-format.ts';

/**
 * The working set quoted for the Vault Agent Injector's sidecar when issue 38 asked for this chart: not
 * measured here (no Vault agent runs in the bench), so it is drawn as a band and labelled as quoted.
 */
export const VAULT_AGENT_QUOTED_MIB = { from: 13, to: 20 } as const;

/** "npm run bench · commit 1a2b3c4d5e6f · 2026-11-29 · 2 cores, load 0.4–1.6": the run, on every chart. */
export function chartCaption(b: FigureBook): string {
  const r = b.results;
  return `${r.command} · commit ${r.commit.slice(0, 12)} · ${r.date.slice(0, 10)} · ${r.machine.cores} cores, cgroup v${r.machine.cgroupVersion}, load ${r.machine.loadAverage.min}–${r.machine.loadAverage.max}`;
}

function series(b: FigureBook, id: string) {
  const s = b.results.series[id];
  if (!s) throw new MissingFigureError(`series ${id}`);
  return s.points;
}

const mebibytes = (quantity: string) => {
  const m = /^(\d+)Mi$/.exec(quantity);
  if (!m) throw new Error(`a memory request "${quantity}" not in Mi`);
  return Number(m[1]);
};

export function workingSetChart(b: FigureBook): string {
  return lineChart({
    title: 'The agent container’s working set over a few refreshes, as the kubelet counts it',
    caption: chartCaption(b),
    x: { label: 'Time since the containers were ready (refresh every 60 s, one AWS secret)', unit: 's' },
    y: { label: 'Working set', unit: 'MiB' },
    series: [
      { name: 'small sidecar (default): working set', points: series(b, 'timeline.small.workingSet') },
      { name: 'small sidecar: peak within each second (a run)', points: series(b, 'timeline.small.peak') },
      { name: 'Node sidecar', points: series(b, 'timeline.node.workingSet') },
      { name: 'an idle node (reference)', points: series(b, 'timeline.idleNode.workingSet') },
    ],
    bands: [{ name: 'Vault agent sidecar, as quoted (not measured here)', ...VAULT_AGENT_QUOTED_MIB }],
  });
}

export function costPerPodChart(b: FigureBook): string {
  const interval = AGENT_SETTINGS.REFRESH_INTERVAL.default!;
  return barChart({
    title: 'What a sidecar costs its node, by sidecar process',
    caption: chartCaption(b),
    unit: 'MiB',
    groups: [
      {
        name: 'Memory request (what the scheduler reserves)',
        bars: [
          {
            name: 'small sidecar',
            value: mebibytes(WEBHOOK_SETTINGS.AGENT_SMALL_SIDECAR_MEMORY_REQUEST.default!),
          },
          { name: 'Node sidecar', value: mebibytes(WEBHOOK_SETTINGS.AGENT_MEMORY_REQUEST.default!) },
        ],
      },
      {
        name: 'Working set between refreshes',
        bars: [
          { name: 'small sidecar', value: b.figure('smallSidecar.idle.small.workingSet').value },
          { name: 'Node sidecar', value: b.figure('smallSidecar.idle.node.workingSet').value },
        ],
      },
      {
        name: `CPU per hour, refresh every ${interval}`,
        unit: 'CPU-s',
        bars: [
          { name: 'small sidecar', value: b.figure('smallSidecar.cpu.small.perHourDefault').value },
          { name: 'Node sidecar', value: b.figure('smallSidecar.cpu.node.perHourDefault').value },
        ],
      },
      {
        name: 'CPU per hour, refresh every 60 s',
        unit: 'CPU-s',
        bars: [
          { name: 'small sidecar', value: b.figure('smallSidecar.cpu.small.perHour60s').value },
          { name: 'Node sidecar', value: b.figure('smallSidecar.cpu.node.perHour60s').value },
        ],
      },
    ],
  });
}

export function podStartChart(b: FigureBook): string {
  const ms = (id: string) => b.figure(`podStart.${id}`).value;
  return barChart({
    title: 'A pod’s start in podman, created → the app’s first line (median)',
    caption: chartCaption(b),
    unit: 'ms',
    groups: [
      {
        name: 'One AWS secret, the webhook’s own patch',
        bars: [
          { name: 'no injection', value: ms('floor') },
          { name: 'init container', value: ms('init') },
          { name: 'native sidecar, small (default)', value: ms('nativeSmall') },
          { name: 'native sidecar, Node', value: ms('nativeNode') },
        ],
      },
    ],
    reference: { name: 'the same pod without injection', value: ms('floor') },
  });
}

/** Every chart, by its file name under docs/figures/. */
export const PERFORMANCE_CHARTS: Readonly<Record<string, (b: FigureBook) => string>> = {
  'working-set.svg': workingSetChart,
  'cost-per-pod.svg': costPerPodChart,
  'pod-start.svg': podStartChart,
};
