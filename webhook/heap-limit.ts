import { totalmem } from 'node:os';
import { getHeapStatistics } from 'node:v8';
import type { Logger } from '../agent/log.ts';

const MiB = 1024 * 1024;

/** V8's heap may take this share of the container's memory limit; the rest is Node, buffers, TLS. */
const HEAP_SHARE = 3 / 4;

/**
 * The V8 old space the Deployment gives the webhook, as a share of its memory limit: 48 MiB of 256Mi.
 * The worst bodies the JSON limits let through, one after another on a full admission cache, are
 * admitted in 32 MiB of it (test/siege/webhook-tenants.test.ts), and what V8 lets garbage take up to
 * its cap counts in the webhook's worst case (webhook/limits.ts). With 128 MiB of old space and 4 MiB
 * semi-spaces, 64 and 128 tenants sending 2 to 3 MB pods at once peaked at 162 to 170 MiB resident;
 * with these, at 128 to 149 MiB.
 */
export const OLD_SPACE_SHARE = 3 / 16;

/**
 * The young generation's semi-space the Deployment sets, MiB: V8's young generation is three of them.
 * Read buffers and a parse's garbage are collected sooner; the bench's CPU per admission was no higher
 * (238 and 1,271 µs against 248 and 1,362 at 4 MiB, replicas and distinct pods).
 */
export const SEMI_SPACE_MIB = 1;

/** The webhook container's memory limit in deploy/base, MiB: what its worst case (limits.ts) is held to. */
export const MEMORY_LIMIT_MIB = 256;

/** The old space NODE_OPTIONS gives for a container memory limit of `limitMiB`, MiB. */
export function oldSpaceMiB(limitMiB: number): number {
  return Math.floor(limitMiB * OLD_SPACE_SHARE);
}

/** NODE_OPTIONS for a container memory limit of `limitMiB`, as deploy/base sets it for MEMORY_LIMIT_MIB. */
export function heapOptions(limitMiB: number): string {
  return `--max-old-space-size=${oldSpaceMiB(limitMiB)} --max-semi-space-size=${SEMI_SPACE_MIB}`;
}

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
      fix: `set NODE_OPTIONS=${heapOptions(limit)} on the webhook container, as deploy/base does for its limit`,
    },
    'the V8 heap may grow past three quarters of the container memory limit; under load the kernel would kill the webhook',
  );
}
