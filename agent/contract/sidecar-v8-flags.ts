import { setFlagsFromString } from 'node:v8';

/**
 * V8 settings for the long-running sidecar. It runs the same few functions once per refresh: compiling
 * them to machine code saves microseconds a cycle, while the compilers cost megabytes (their code paged
 * in from the node binary, their output, their work areas), and V8's default heap growth lets RSS
 * creep. Measured against moto with the webhook's NODE_OPTIONS (128Mi limit), a rotation every 10 s
 * (idle node: 42 MiB):
 *   1 secret      72.7 -> 64.0 MiB
 *   100 secrets   81.9 (79.0 -> 84.6, rising) -> 65.0 MiB, flat
 *   CPU, 100 secrets refreshed every second: 1.23 -> 1.35 CPU-s a minute (means of 3 runs)
 * The WebAssembly ones: undici, which the HTTP-speaking notifiers load, parses HTTP in WebAssembly, and
 * its first rotation tiered that parser up to TurboFan's code: 1 secret with ROTATION_HTTP_URL went
 * 66 -> 84 MiB; kept at the baseline compiler (Liftoff) it stays at 69.5 MiB.
 * --jitless or --lite-mode would save a little more, but take WebAssembly away (undici and Node's own
 * fetch, which the GCP client uses, need it), and lite mode cost 70 % more CPU.
 *
 * NODE_OPTIONS refuses them, so they go on Node's command line: the webhook's SIDECAR_COMMAND, from the
 * process's first instruction (measured: 1.8 MiB less than setting them once the sidecar starts, as
 * the compilers no longer run while the bundle loads), and the image's compile cache is filled under
 * them (images/fill-compile-cache.ts), since V8 rejects a cache made under other flags. The agent
 * also sets them itself when the sidecar starts, before the first fill, for a sidecar run another way
 * (`node /app/agent.js`); where they are already set that changes nothing.
 */
export const SIDECAR_V8_FLAGS = [
  '--no-turbofan',
  '--no-maglev',
  '--no-sparkplug',
  '--optimize-for-size',
  '--no-wasm-tier-up',
  '--no-wasm-dynamic-tiering',
] as const;

/** Sets SIDECAR_V8_FLAGS in this process; a no-op where Node was started with them. */
export function applySidecarV8Flags(): void {
  for (const flag of SIDECAR_V8_FLAGS) setFlagsFromString(flag);
}
