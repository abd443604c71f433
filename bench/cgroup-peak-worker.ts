/**
 * Samples one container's memory cgroup every few milliseconds, off the bench's main thread (which
 * serves the GCP and Vault fakes and must keep answering), and reports the highest working set,
 * anonymous memory and usage seen, the kernel's own recorded peak, and the process's VmHWM. For an init
 * run (gone in a few hundred ms) it waits for the container's cgroup to appear under its parent and
 * stops when it disappears; for a running sidecar it stops when told to.
 */
import { existsSync } from 'node:fs';
import { parentPort, workerData } from 'node:worker_threads';
import {
  containerCgroup,
  firstPid,
  readCpuSeconds,
  readMemory,
  readProcessRss,
  type CgroupLayout,
} from './memory-cgroup.ts';

export interface PeakRequest {
  readonly layout: CgroupLayout;
  /** The cgroup parent podman was given (relative to the hierarchy roots). */
  readonly parent: string;
  readonly periodMs: number;
  /** Int32Array over a SharedArrayBuffer: set [0] to 1 to stop. */
  readonly stop: SharedArrayBuffer;
}

export interface PeakFigures {
  readonly samples: number;
  readonly workingSetMiB: number;
  readonly anonMiB: number;
  readonly usageMiB: number;
  /** Page cache charged at the highest usage seen (shared file pages this cgroup faulted in first). */
  readonly cacheMiB: number;
  /** The kernel's recorded peak usage (max_usage_in_bytes / memory.peak), last read before the end. */
  readonly kernelPeakUsageMiB: number;
  /** The process's peak resident set (VmHWM), last read. */
  readonly rssPeakMiB: number;
  /** Over the watch (from the container's creation when it was seen being made): CPU time, major faults, file refaults. */
  readonly cpuSeconds: number;
  readonly majorFaults: number;
  readonly fileRefaults: number;
}

const { layout, parent, periodMs, stop } = workerData as PeakRequest;
const flag = new Int32Array(stop);
const sleep = (ms: number) => Atomics.wait(flag, 0, 0, ms);

parentPort!.postMessage('polling');
let cgroup = containerCgroup(layout, parent);
// Seen being made: its counters start at zero. Already running: they count from the first sample.
const fromCreation = cgroup === undefined;
const deadline = Date.now() + 120_000;
while (cgroup === undefined && Atomics.load(flag, 0) === 0) {
  if (Date.now() > deadline) throw new Error(`no container cgroup appeared under ${parent}`);
  sleep(1);
  cgroup = containerCgroup(layout, parent);
}
const peak = {
  samples: 0,
  workingSetMiB: 0,
  anonMiB: 0,
  usageMiB: 0,
  cacheMiB: 0,
  kernelPeakUsageMiB: 0,
  rssPeakMiB: 0,
  cpuSeconds: 0,
  majorFaults: 0,
  fileRefaults: 0,
};
let start: { cpu: number; majorFaults: number; fileRefaults: number } | undefined;
const memoryDir = `${layout.memoryRoot}/${cgroup}`;
while (cgroup !== undefined && existsSync(memoryDir)) {
  // A read can fail while runc is still making the container's cgroup in the other hierarchies
  // (cpuacct after memory), or once it is being removed: retried until the memory cgroup is gone.
  try {
    const m = readMemory(layout, memoryDir);
    const cpu = readCpuSeconds(layout, cgroup);
    start ??= fromCreation ? { cpu: 0, majorFaults: 0, fileRefaults: 0 } : { cpu, ...m };
    peak.samples++;
    peak.workingSetMiB = Math.max(peak.workingSetMiB, m.workingSetMiB);
    peak.anonMiB = Math.max(peak.anonMiB, m.anonMiB);
    if (m.usageMiB > peak.usageMiB) {
      peak.usageMiB = m.usageMiB;
      peak.cacheMiB = m.cacheMiB;
    }
    peak.kernelPeakUsageMiB = Math.max(peak.kernelPeakUsageMiB, m.peakUsageMiB ?? 0);
    peak.cpuSeconds = cpu - start.cpu;
    peak.majorFaults = m.majorFaults - start.majorFaults;
    peak.fileRefaults = m.fileRefaults - start.fileRefaults;
    // runc's short-lived set-up processes come and go in cgroup.procs before the agent's own.
    const pid = firstPid(layout, cgroup);
    if (pid !== undefined) peak.rssPeakMiB = Math.max(peak.rssPeakMiB, readProcessRss(pid).hwmMiB);
  } catch {
    // retried below, unless the cgroup is gone
  }
  if (Atomics.load(flag, 0) !== 0) break;
  sleep(periodMs);
}
parentPort!.postMessage(peak satisfies PeakFigures);
