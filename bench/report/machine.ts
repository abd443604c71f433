import { existsSync } from 'node:fs';
import { availableParallelism, loadavg, release, totalmem } from 'node:os';
import type { MachineFacts } from './results-file.ts';

/**
 * The machine a bench ran on, and the load it ran under: a figure from a busy machine reads
 * differently, so the load average is sampled through the whole run, not read once at its end.
 */
export class MachineWatch {
  readonly #loads: number[] = [];
  readonly #timer: NodeJS.Timeout;

  constructor(everyMs = 10_000) {
    this.#sample();
    this.#timer = setInterval(() => this.#sample(), everyMs);
    this.#timer.unref();
  }

  #sample(): void {
    this.#loads.push(loadavg()[0]!);
  }

  /** Stops sampling; the machine's facts with the load seen since the start. */
  stop(): MachineFacts {
    clearInterval(this.#timer);
    this.#sample();
    const loads = this.#loads;
    const round = (n: number) => Number(n.toFixed(2));
    return {
      cores: availableParallelism(),
      memoryMiB: Math.round(totalmem() / 1048576),
      kernel: release(),
      cgroupVersion: existsSync('/sys/fs/cgroup/cgroup.controllers') ? 2 : 1,
      node: process.version,
      arch: process.arch,
      loadAverage: {
        min: round(Math.min(...loads)),
        mean: round(loads.reduce((a, b) => a + b, 0) / loads.length),
        max: round(Math.max(...loads)),
        samples: loads.length,
      },
    };
  }
}
