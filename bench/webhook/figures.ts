import type { BodyMode } from './admission-request.ts';
import type { LoadResult } from './load.ts';

/** What the bench reports: each load run's latencies pooled over rounds, and ratios to the floor's. */

export interface RateFigures {
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
  /** Measured requests answered 200 with the expected body size. */
  readonly ok: number;
  /** Connection errors, other statuses, short bodies. */
  readonly errors: number;
  /** Requests sent per second over the measured part: the schedule kept. */
  readonly sentPerSec: number;
}

export interface MaxFigures {
  readonly reqPerSec: number;
  readonly p99Ms: number;
  readonly errors: number;
  /**
   * Server CPU time per answered request (µs): what a request costs, whatever else the machine is
   * doing; 1e6 / this is the ceiling of one dedicated core. Null where /proc is missing.
   */
  readonly cpuUsPerRequest: number | null;
}

/** One body mode: both load shapes, webhook and floor. */
export interface ModeFigures {
  readonly fixedRate: {
    readonly webhook: RateFigures;
    readonly floor: RateFigures;
    readonly p50VsFloor: number;
    readonly p99VsFloor: number;
    /** The webhook's p99 minus the floor's, at the same rate in the same rounds. */
    readonly p99OverFloorMs: number;
  };
  readonly max: {
    readonly webhook: MaxFigures;
    readonly floor: MaxFigures;
    readonly throughputVsFloor: number;
    readonly cpuPerRequestVsFloor: number | null;
  };
}

export interface WebhookFigures {
  readonly requestBytes: number;
  readonly responseBytes: number;
  readonly rounds: number;
  readonly rate: number;
  readonly connections: number;
  /** Measured seconds per server, mode and shape. */
  readonly seconds: number;
  readonly modes: Readonly<Record<BodyMode, ModeFigures>>;
  readonly targets: {
    readonly cpuPerAdmissionVsFloor: number;
    readonly p99OverFloorMsAtRate: number;
    readonly minReqPerSec: number;
  };
  /** 1-minute load average before and after, against the number of CPUs: how shared the machine was. */
  readonly machine: { readonly cpus: number; readonly loadAverage: readonly [number, number] };
}

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

const round3 = (x: number) => Math.round(x * 1000) / 1000;
const ratio = (a: number, b: number) => Math.round((a / b) * 100) / 100;

function pooled(results: readonly LoadResult[]) {
  const latencies = results.flatMap((r) => r.latencies).sort((a, b) => a - b);
  return {
    latencies,
    errors: results.reduce((n, r) => n + r.errors, 0),
    count: results.reduce((n, r) => n + r.count, 0),
    seconds: results.reduce((n, r) => n + r.seconds, 0),
  };
}

function rateFigures(results: readonly LoadResult[]): RateFigures {
  const p = pooled(results);
  return {
    p50Ms: round3(percentile(p.latencies, 50)),
    p99Ms: round3(percentile(p.latencies, 99)),
    maxMs: round3(p.latencies.at(-1) ?? NaN),
    ok: p.latencies.length,
    errors: p.errors,
    sentPerSec: Math.round(p.count / p.seconds),
  };
}

function maxFigures(results: readonly LoadResult[], cpuMs: number | undefined): MaxFigures {
  const p = pooled(results);
  return {
    reqPerSec: Math.round(p.count / p.seconds),
    p99Ms: round3(percentile(p.latencies, 99)),
    errors: p.errors,
    cpuUsPerRequest: cpuMs === undefined ? null : Math.round((cpuMs * 1000) / p.count),
  };
}

export function modeFigures(runs: Readonly<Record<RunName, LoadResult[]>>, cpu: CpuTotals): ModeFigures {
  const fixedWebhook = rateFigures(runs.pacedWebhook);
  const fixedFloor = rateFigures(runs.pacedFloor);
  const maxWebhook = maxFigures(runs.maxWebhook, cpu.Webhook);
  const maxFloor = maxFigures(runs.maxFloor, cpu.Floor);
  return {
    fixedRate: {
      webhook: fixedWebhook,
      floor: fixedFloor,
      p50VsFloor: ratio(fixedWebhook.p50Ms, fixedFloor.p50Ms),
      p99VsFloor: ratio(fixedWebhook.p99Ms, fixedFloor.p99Ms),
      p99OverFloorMs: round3(fixedWebhook.p99Ms - fixedFloor.p99Ms),
    },
    max: {
      webhook: maxWebhook,
      floor: maxFloor,
      throughputVsFloor: ratio(maxWebhook.reqPerSec, maxFloor.reqPerSec),
      cpuPerRequestVsFloor:
        maxWebhook.cpuUsPerRequest === null || maxFloor.cpuUsPerRequest === null
          ? null
          : ratio(maxWebhook.cpuUsPerRequest, maxFloor.cpuUsPerRequest),
    },
  };
}

export type Who = 'Floor' | 'Webhook';
export type RunName = `${'paced' | 'max'}${Who}`;
export type CpuTotals = Record<Who, number | undefined>;
