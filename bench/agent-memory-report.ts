/**
 * bench/agent-memory.ts's figures as the tables `npm run bench` prints, and the rows it adds to the
 * cost-per-pod table.
 */
import { WEBHOOK_SETTINGS } from '../webhook/config/settings.ts';
import {
  ROTATIONS,
  STEADY_SECONDS,
  type AgentMemoryFigures,
  type Case,
  type LimitTrial,
  type SidecarRow,
} from './agent-memory.ts';

const f1 = (n: number) => n.toFixed(1);
const who = (r: Case) =>
  `${r.first ? 'first agent on the node: ' : ''}${r.backend}, ${r.secrets} secret${r.secrets === 1 ? '' : 's'}${r.valueBytes === undefined ? '' : ` of ${r.valueBytes / 1024} KiB`}${r.notifier ? ', HTTP notifier' : ''}`;

function sidecarLine(r: SidecarRow): string {
  const s = r.steady;
  const a = r.afterBurst;
  const arrow = (x: number, y: number | undefined) => (y === undefined ? f1(x) : `${f1(x)} → ${f1(y)}`);
  const interval = r.refreshInterval === '1s' ? '' : `, every ${r.refreshInterval}`;
  const burst = r.burst ? `${f1(r.burst.workingSetMiB)}, ${f1(r.burst.anonMiB)}` : '';
  return `| ${who(r)}${interval} | ${arrow(s.workingSetMiB, a?.workingSetMiB)} | ${arrow(s.anonMiB, a?.anonMiB)} | ${arrow(s.rssMiB, a?.rssMiB)} (${f1(s.rssFileMiB)}) | ${f1(s.cacheMiB)} | ${f1(s.heapUsedMiB)} / ${f1(s.heapTotalMiB)}, ${f1(s.externalMiB)} | ${burst} | ${s.cpuMillicores.toFixed(1)} | ${r.start.cpuSeconds.toFixed(2)} | ${r.limitHits} / ${r.oomKills} |`;
}

export function formatAgentMemory(f: AgentMemoryFigures): string {
  const faults = (x: { majorFaults: number; fileRefaults: number }) => `${x.majorFaults} / ${x.fileRefaults}`;
  const trial = (t: LimitTrial) => {
    const i = t.init.row;
    const init = i
      ? `${i.seconds.toFixed(1)} s, ${i.peak.cpuSeconds.toFixed(2)} CPU-s, ${faults(i.peak)}, ${f1(i.peak.workingSetMiB)}`
      : `${t.init.outcome}${t.init.peak ? `, ${faults(t.init.peak)}` : ''}`;
    const head = `| ${t.memoryLimit} | ${t.nodeOptions.replace(' --max-semi-space-size=1', '')} | ${init}`;
    if (!t.row) return `${head} | ${t.outcome}${t.faults ? `, ${faults(t.faults)}` : ''} | | | | |`;
    const r = t.row;
    return `${head} | ${r.start.seconds.toFixed(1)} s, ${r.start.cpuSeconds.toFixed(2)} CPU-s | ${f1(r.steady.workingSetMiB)} / ${f1(r.steady.anonMiB)} / ${f1(r.steady.heapTotalMiB)}; ${f1(r.burst?.workingSetMiB ?? NaN)} | ${faults(r.steady)}; ${r.burst ? faults(r.burst) : ''} | ${r.steady.cpuMillicores.toFixed(1)} | ${r.limitHits} / ${r.oomKills} |`;
  };
  return [
    `agent containers in podman, each in its own memory cgroup (v${f.cgroupVersion}), as the webhook renders them (limit ${f.memoryLimit}, NODE_OPTIONS ${f.nodeOptions}); ${f.valueBytes}-byte values; MiB`,
    "working set = usage − inactive_file (the kubelet's figure); anonymous = the cgroup's anonymous pages; RSS = the process's VmRSS, which counts the shared Node binary in every process\n",
    '| init run, peak (sampled every 2 ms) | working set | anonymous | RSS (VmHWM) | usage (kernel peak) | of it page cache | CPU s |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: |',
    ...f.init.map(
      (r) =>
        `| ${who(r)} | ${f1(r.peak.workingSetMiB)} | ${f1(r.peak.anonMiB)} | ${f1(r.peak.rssPeakMiB)} | ${f1(r.peak.kernelPeakUsageMiB)} | ${f1(r.peak.cacheMiB)} | ${r.peak.cpuSeconds.toFixed(2)} |`,
    ),
    `\n| sidecar (REFRESH_INTERVAL=1s unless said), steady state after ${f.settleSeconds} s (median of ${STEADY_SECONDS} s) → after ${ROTATIONS} rotations of every secret | working set | anonymous | RSS (of it file-backed, shared) | page cache charged | V8 heap used / committed, external | burst peak: working set, anonymous | CPU m | start CPU s | limit hits / OOM kills |`,
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
    ...f.sidecars.map(sidecarLine),
    `\nthe Node binary's pages in the page cache: ${f1(f.nodeBinaryResidentMiB.before)} MiB before the first agent, ${f1(f.nodeBinaryResidentMiB.after)} MiB once it was ready`,
    ...(f.limitTrials.length === 0
      ? []
      : [
          '\nthe worst case alone, first on the node (image dropped from the page cache before each run): 100 GCP secrets, HTTP notifier; init run, then sidecar with 10 rotations; faults = major faults / file refaults (re-reading evicted pages: thrashing)\n',
          '| memory limit | V8 heap cap | init: time, CPU, faults, peak working set | sidecar: to ready | steady working set / anonymous / V8 heap; burst peak working set | faults: steady; burst | CPU m | limit hits / OOM kills |',
          '| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |',
          ...f.limitTrials.map(trial),
        ]),
  ].join('\n');
}

/** The rows bench/run.ts adds to its cost-per-pod table: the figures the defaults are set from, against them. */
export function agentMemoryCostRows(f: AgentMemoryFigures): [string, string, string][] {
  const request = WEBHOOK_SETTINGS.AGENT_MEMORY_REQUEST.default!;
  const next = f.sidecars.filter((r) => !r.first);
  const largest = (rows: SidecarRow[], value: (r: SidecarRow) => number) =>
    rows.reduce((a, b) => (value(b) > value(a) ? b : a));
  const idle = next.filter((r) => r.refreshInterval !== '1s');
  const busy = next.filter((r) => r.refreshInterval === '1s' && r.valueBytes === undefined);
  const after = (r: SidecarRow) => Math.max(r.steady.workingSetMiB, r.afterBurst?.workingSetMiB ?? 0);
  const rows: [string, string, string][] = [];
  const one = idle.find((r) => r.backend === 'AWS' && r.secrets === 1);
  if (one)
    rows.push([
      `sidecar, 1 AWS secret, every ${one.refreshInterval}: working set / anonymous / RSS (the node's figures / the process's)`,
      `${f1(one.steady.workingSetMiB)} / ${f1(one.steady.anonMiB)} / ${f1(one.steady.rssMiB)} MiB`,
      `≤ AGENT_MEMORY_REQUEST ${request}`,
    ]);
  if (idle.length > 0) {
    const r = largest(idle, (x) => x.steady.workingSetMiB);
    rows.push([
      `largest sidecar working set at the default REFRESH_INTERVAL (${who(r)})`,
      `${f1(r.steady.workingSetMiB)} MiB`,
      `≤ ${request}`,
    ]);
  }
  if (busy.length > 0) {
    const r = largest(busy, after);
    rows.push([
      `largest sidecar working set at REFRESH_INTERVAL=1s, before or after ${ROTATIONS} rotations (${who(r)})`,
      `${f1(after(r))} MiB`,
      `≤ ${request}`,
    ]);
  }
  const first = f.sidecars.find((r) => r.first);
  const twin =
    first &&
    next.find(
      (r) =>
        r.backend === first.backend &&
        r.secrets === first.secrets &&
        r.notifier === first.notifier &&
        r.refreshInterval === first.refreshInterval,
    );
  if (first && twin)
    rows.push([
      `the first agent on a node (charged the Node binary's pages) / the same agent after it (${who(twin)}): working set`,
      `${f1(first.steady.workingSetMiB)} / ${f1(twin.steady.workingSetMiB)} MiB`,
      '',
    ]);
  const atDefault = f.limitTrials.find((t) => t.memoryLimit === f.memoryLimit);
  if (atDefault?.row && atDefault.init.row)
    rows.push([
      `worst case under AGENT_MEMORY_LIMIT ${f.memoryLimit} (first on the node, 100 GCP secrets, HTTP notifier): init CPU, sidecar burst file refaults, OOM kills`,
      `${atDefault.init.row.peak.cpuSeconds.toFixed(2)} CPU-s, ${atDefault.row.burst?.fileRefaults ?? 0}, ${atDefault.row.oomKills}`,
      '0 OOM kills',
    ]);
  return rows;
}
