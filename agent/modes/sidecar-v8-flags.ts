import { setFlagsFromString } from 'node:v8';

/**
 * V8 settings for the long-running sidecar. It runs the same few functions once per refresh: compiling
 * them to machine code saves microseconds a cycle, while the compilers cost megabytes (their code paged
 * in from the node binary, their output, their work areas), and V8's default heap growth lets RSS
 * creep. Measured against moto with the webhook's NODE_OPTIONS (128Mi limit), HTTP notifier on, a
 * rotation every 10 s, 120 s (idle node: 42 MiB):
 *   1 secret      72.7 -> 64.0 MiB
 *   100 secrets   81.9 (79.0 -> 84.6, rising) -> 64.8 MiB (65.1 -> 64.8, flat)
 *   CPU, 100 secrets refreshed every second: 1.23 -> 1.35 CPU-s a minute (means of 3 runs)
 * --jitless or --lite-mode would save a little more, but take WebAssembly away (Node's own fetch, which
 * the GCP client uses, parses HTTP with it), and lite mode cost 70 % more CPU.
 *
 * Set by the agent because NODE_OPTIONS refuses them, as soon as the sidecar's own code runs: before
 * the first fill, which is when the compilers first start on hot code. The providers and notifiers
 * load after this, and V8 rejects a compile cache made under other flags, so they compile from
 * source once (measured: under 10 ms of CPU).
 */
export const SIDECAR_V8_FLAGS = [
  '--no-turbofan',
  '--no-maglev',
  '--no-sparkplug',
  '--optimize-for-size',
] as const;

export function applySidecarV8Flags(): void {
  for (const flag of SIDECAR_V8_FLAGS) setFlagsFromString(flag);
}
