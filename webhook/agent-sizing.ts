import { parseDuration } from '../agent/contract/duration.ts';
import { AGENT_SETTINGS } from '../agent/contract/agent-settings.ts';
import { quantityValue } from './annotations/values.ts';

/**
 * What the agent container reserves and may use: the defaults of AGENT_MEMORY_REQUEST,
 * AGENT_MEMORY_LIMIT and AGENT_CPU_REQUEST, and the V8 heap cap the webhook derives from a pod's
 * limit, all from what `npm run bench` measures of agent containers (bench/agent-memory.ts). It reads
 * each container's memory cgroup as the kubelet does: working set = usage − inactive_file, the figure
 * the scheduler's requests should cover. Not RSS: a process's RSS counts the ~45 MiB of the Node binary
 * it maps, pages that every agent on a node shares and only the first one to fault them in is charged
 * for. Re-run the bench when the agent changes and update MEASURED: the defaults follow, and
 * test/webhook/agent-sizing.test.ts checks the margins below.
 */

/**
 * Five runs of the bench on 2026-11-26 (Node 24.21, podman 4.3 + runc, cgroup v1, kernel 6.18), the
 * largest figure of the five: containers with the webhook's flags, 1 KiB values, AWS through moto,
 * GCP and Vault through the local fakes. Values of 64 KiB cost more (docs/webhook.md, What a pod costs).
 * test/webhook/agent-sizing-measured.test.ts holds each at or above what the committed run
 * (bench/results/latest.json) measured: a run that measures more fails it until these follow.
 */
export const MEASURED = {
  /**
   * The largest steady-state working set of a sidecar at the default REFRESH_INTERVAL (5m), over AWS,
   * GCP and Vault with 1 or 100 secrets, with or without an HTTP notifier: GCP, 100 secrets, HTTP
   * notifier (the smallest: Vault, 1 secret, 17.2–18.4 MiB; the issue saw 18–19 on a real node). 29.6 in
   * the committed run (bench/results/latest.json, 2026-11-29).
   */
  steadyWorkingSetMiB: 29.6,
  /** The same at REFRESH_INTERVAL=1s, before or after 10 rotations of every secret: GCP, 100 secrets, HTTP notifier. */
  busyWorkingSetMiB: 35.8,
  /**
   * The worst case, the first agent on a node (charged the Node binary's pages it faults in), 100
   * GCP secrets, HTTP notifier, its init run then its sidecar with 10 rotations of every secret, run
   * under limits from 80Mi to 128Mi (four runs): the lowest under which it barely thrashed (re-read the
   * Node binary's evicted pages): its init run took at most 1.34× the CPU it took under 128Mi, its
   * sidecar no more. At 104Mi up to 2×, at 96Mi 5–27×; at 88Mi and below it never finished. Never
   * an OOM kill: the kernel drops file pages first.
   */
  worstCaseCleanLimitMiB: 112,
  /**
   * What the worst case keeps resident besides its V8 heap: the Node binary's pages it maps
   * (RssFile), native memory and buffers (anonymous − V8 heap committed, the largest of any
   * configuration: Vault, 100 secrets, HTTP notifier), kernel memory (page tables, sockets).
   */
  outsideHeapMiB: { nodeBinary: 47.7, nativeAndBuffers: 14.8, kernel: 3.5 },
  /** The largest V8 heap committed by any configuration (GCP, 100 secrets, HTTP notifier). */
  heapCommittedMiB: 24.2,
  /** The most CPU a start took, `podman run` to every file written: the first agent on a node, 100 GCP secrets. */
  startCpuSeconds: 0.9,
  /**
   * Steady CPU at the default REFRESH_INTERVAL: 0.3–0.4 m idle, plus a refresh of 100 secrets (at most
   * 75 ms of CPU: Vault) every 5 minutes.
   */
  steadyCpuMillicores: 0.7,
} as const;

/**
 * The small sidecar (`secret-agent.io/sidecar-process: small`): /app/resident holds the port between
 * refreshes and runs each refresh as a short Node process. From the idle-resident measurement of issue
 * 31 (the resident with a refresh run every 5 minutes, its container's memory cgroup read as the kubelet
 * reads it) and bench/small-sidecar.ts; test/webhook/agent-sizing-measured.test.ts holds them at or
 * above what the committed run measured.
 */
export const MEASURED_SMALL_SIDECAR = {
  /**
   * The working set between refreshes: the resident's container alone (residentAloneWorkingSetMiB) and
   * the kernel memory the runs leave charged to the cgroup (page tables and slab freed lazily,
   * runLeftoverKernelMiB). Issue 31 measured 1.7; the committed run (bench/results/latest.json,
   * 2026-11-29) 2.03, the larger.
   */
  idleWorkingSetMiB: 2.04,
  /** The container with the resident alone, no run yet: a static C program, no heap to speak of. */
  residentAloneWorkingSetMiB: 0.86,
  /** Kernel memory the runs leave in the cgroup once they have exited. */
  runLeftoverKernelMiB: 1.17,
} as const;

/**
 * The shortest refresh interval a small sidecar takes: each run starts Node from the snapshot, 0.1–0.3
 * CPU-s (MEASURED.startCpuSeconds at worst), where a resident Node agent's refresh costs a few ms. At
 * 60 s that is at most 5 m of CPU on average, a few times the resident agent's ~1 m, for 15–30 MiB less
 * memory; under it the runs' CPU outweighs the memory saved, so such a pod keeps the Node agent.
 */
export const SMALL_SIDECAR_MIN_INTERVAL_MS = 60_000;

/** V8's young generation with --max-semi-space-size=1: two semi-spaces and the new large-object space. */
const YOUNG_GENERATION_MIB = 3;

const roundUp = (x: number, step: number) => Math.ceil(x / step) * step;

/**
 * The request covers the largest steady-state working set at the default REFRESH_INTERVAL with a
 * quarter more (what a rotation leaves, 1–3 MiB; a real node's extra, ~1 MiB on the issue's; run-to-run
 * variation), in steps of 4 MiB; that also covers every sidecar measured at a 1 s refresh.
 */
export const REQUEST_MARGIN = 1.25;
export const DEFAULT_MEMORY_REQUEST = `${roundUp(MEASURED.steadyWorkingSetMiB * REQUEST_MARGIN, 4)}Mi`;

/**
 * The small sidecar's request: its working set between refreshes with the same margin, in steps of 4
 * MiB. A refresh run peaks as an init run does (MEASURED: 32–50 MiB), above this request and within the
 * same limit as every agent container (DEFAULT_MEMORY_LIMIT), for the 0.2–1 s it lasts: memory above a
 * request is only at risk when the node runs short, and a run killed for it is a failed run, retried
 * while the files stay (docs/webhook.md, What a pod costs).
 */
export const DEFAULT_SMALL_SIDECAR_MEMORY_REQUEST = `${roundUp(MEASURED_SMALL_SIDECAR.idleWorkingSetMiB * REQUEST_MARGIN, 4)}Mi`;

/** The limit: a tenth over the lowest limit under which the worst case barely thrashes, in steps of 16 MiB. */
export const LIMIT_MARGIN = 1.1;
export const DEFAULT_MEMORY_LIMIT = `${roundUp(MEASURED.worstCaseCleanLimitMiB * LIMIT_MARGIN, 16)}Mi`;

/**
 * The CPU request is what the kernel guarantees a container when every container on the node uses
 * its whole request. The steady state needs far less (MEASURED.steadyCpuMillicores); the start is what
 * must not starve: with this request the slowest start measured gets its CPU within INIT_DEADLINE
 * (60 s), inside the 75 s a native sidecar's postStart hook waits. In steps of 5m.
 */
const INIT_DEADLINE_SECONDS = parseDuration(AGENT_SETTINGS.INIT_DEADLINE.default!)! / 1000;
export const DEFAULT_CPU_REQUEST = `${roundUp((MEASURED.startCpuSeconds * 1000) / INIT_DEADLINE_SECONDS, 5)}m`;

/**
 * What the V8 heap cap leaves of the limit for the rest: everything the worst case keeps resident
 * besides its heap, a tenth more, and V8's young generation (the cap bounds the old generation only).
 */
export const OUTSIDE_HEAP_RESERVE_MIB =
  roundUp(
    (MEASURED.outsideHeapMiB.nodeBinary +
      MEASURED.outsideHeapMiB.nativeAndBuffers +
      MEASURED.outsideHeapMiB.kernel) *
      1.1,
    1,
  ) + YOUNG_GENERATION_MIB;

/** The heap cap's floor: the largest heap committed measured, a third more, in steps of 8 MiB. */
export const MIN_HEAP_MIB = roundUp(MEASURED.heapCommittedMiB * 1.3, 8);

export { quantityValue };

/** A memory quantity in MiB (fractional); NaN when unreadable. */
export function quantityMiB(text: string): number {
  return quantityValue(text) / 1048576;
}

/** A memory quantity in bytes, rounded down. */
export function quantityBytes(text: string): number {
  return Math.floor(quantityValue(text));
}

/**
 * The V8 old-generation cap (MiB) for an agent with this memory limit and secrets volume: what is left
 * of the limit once the volume (its tmpfs pages are charged to the agent that writes them) and
 * OUTSIDE_HEAP_RESERVE_MIB are taken out. So the heap reaches its cap, and the agent ends with V8's
 * "heap out of memory" naming the cause, before the container's memory could reach the limit and be
 * OOM-killed; and in the worst case before the Node binary's pages are squeezed out (thrashing).
 * Never below MIN_HEAP_MIB: a limit under MIN_HEAP_MIB + the reserve + the volume keeps that floor
 * and no longer has this guarantee (docs/webhook.md, "What a pod costs").
 */
export function v8HeapCapMiB(memoryLimit: string, volumeSizeLimit: string): number {
  const limitMiB = quantityMiB(memoryLimit);
  const volumeMiB = quantityMiB(volumeSizeLimit);
  // Both are validated before rendering, so never in practice.
  if (!Number.isFinite(limitMiB) || !Number.isFinite(volumeMiB)) return MIN_HEAP_MIB;
  return Math.max(MIN_HEAP_MIB, Math.floor(limitMiB - volumeMiB - OUTSIDE_HEAP_RESERVE_MIB));
}

/**
 * The smallest memory limit (MiB) under which v8HeapCapMiB still leaves the heap its floor with this
 * volume: below it the cap no longer keeps the container under its limit.
 */
export function smallestGuardedLimitMiB(volumeSizeLimit: string): number {
  return Math.ceil(quantityMiB(volumeSizeLimit)) + OUTSIDE_HEAP_RESERVE_MIB + MIN_HEAP_MIB;
}

/**
 * The agent's NODE_OPTIONS. V8 otherwise sizes its heap for the whole machine and grows it lazily, so
 * a long-running agent's RSS creeps toward the container's limit (measured: 125 -> 179 MiB over 10
 * minutes with 100 secrets, the live heap flat at 10-20 MiB). The cap (v8HeapCapMiB) bounds the old
 * generation, and a 1 MiB young generation keeps each scavenge small. These are the V8 flags
 * NODE_OPTIONS takes; the sidecar runs with the ones it refuses (no optimising compilers) on its command
 * line: agent/contract/sidecar-v8-flags.ts.
 */
export function nodeOptions(memoryLimit: string, volumeSizeLimit: string): string {
  return `--max-old-space-size=${v8HeapCapMiB(memoryLimit, volumeSizeLimit)} --max-semi-space-size=1`;
}
