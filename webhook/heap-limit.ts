import { totalmem } from 'node:os';
import { getHeapStatistics } from 'node:v8';
import type { Logger } from '../agent/log.ts';

const MiB = 1024 * 1024;

/** V8's heap may take this share of the container's memory limit; the rest is Node, buffers, TLS. */
const HEAP_SHARE = 3 / 4;

/** How large V8 lets the heap grow (young generation included), in MiB. */
export function heapLimitMiB(): number {
  return Math.round(getHeapStatistics().heap_size_limit / MiB);
}

/**
 * Warns at start when V8's heap may grow close to (or past) the container's memory limit: then the
 * kernel kills the webhook under load before V8 collects or refuses, and every replica can go down at
 * once. V8 sizes its heap from the machine's memory, not the container's, unless NODE_OPTIONS caps it.
 */
export function checkHeapLimit(log: Logger): void {
  const memory = process.constrainedMemory();
  // No limit, or one above the machine's memory: nothing to compare with.
  if (!(memory > 0 && memory < totalmem())) return;
  const heap = heapLimitMiB();
  const limit = Math.round(memory / MiB);
  if (heap <= limit * HEAP_SHARE) return;
  log.warn(
    {
      heapLimitMiB: heap,
      memoryLimitMiB: limit,
      fix: `set NODE_OPTIONS=--max-old-space-size=${Math.floor(limit / 2)} --max-semi-space-size=4 on the webhook container (half its memory limit, as deploy/base does)`,
    },
    'the V8 heap may grow past three quarters of the container memory limit; under load the kernel would kill the webhook',
  );
}
