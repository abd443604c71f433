/**
 * Builds the product's small programs not written in TypeScript: each `agent/native/<name>.c` into one
 * static executable `<outdir>/<name>` (musl, no other dependency), for this machine's architecture.
 * `node images/build-native.ts` writes dist/native/; the tests build through `buildNative` too.
 * Reproducible: the same source and compiler give the same bytes (no build id, no paths, no time).
 */
import { globSync, mkdirSync } from 'node:fs';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runTool } from './container-engine.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** The flags every native program builds with; a warning is an error. */
export const NATIVE_CFLAGS: readonly string[] = [
  '-std=c11',
  '-D_GNU_SOURCE',
  '-Os',
  '-static',
  '-s',
  '-Wall',
  '-Wextra',
  '-Werror',
  `-ffile-prefix-map=${ROOT}=.`,
  '-Wl,--build-id=none',
];

/** Compiles every agent/native/*.c into `outdir`; returns the executables written. */
export function buildNative(outdir = join(ROOT, 'dist/native')): string[] {
  mkdirSync(outdir, { recursive: true });
  return globSync('agent/native/*.c', { cwd: ROOT })
    .sort()
    .map((source) => {
      const out = join(outdir, basename(source, '.c'));
      runTool('musl-gcc', [...NATIVE_CFLAGS, '-o', out, source], {
        cwd: ROOT,
        install: 'apt-get install -y musl-tools (Debian; .ci/run installs it on a fresh machine)',
      });
      return out;
    });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  for (const out of buildNative()) console.log(`built ${out}`);
}
