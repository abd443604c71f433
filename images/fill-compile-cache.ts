/**
 * Fills the agent image's V8 compile cache. Dockerfile.agent runs it at build time as root, with the
 * image's own Node (the image has no shell). Node keeps one cache directory per uid
 * (`v24.x-x64-TAG-UID`) and never shares it, so every uid in COMPILE_CACHE_UIDS gets its own fill: a
 * child Node running as that uid imports every chunk, and writes the cache as it exits. The cache serves the
 * plain bundle, which only sidecars run (the init container starts from the snapshot), so the child
 * runs with the sidecar's V8 flags: V8 rejects a cache made under other flags. Dockerfile.agent mounts
 * the flags' module where the relative import below finds it.
 * The child runs so that two fills write the same bytes (or the image could not be rebuilt to the
 * same digest): V8's random generator seeded with a fixed value (--random-seed) and its garbage
 * collector and compilers on one thread, on a schedule of their own rather than the machine's load
 * (--predictable; seen otherwise: a field of a function's cached data set in one fill, 0 in the
 * next). V8 leaves both out of the flags a cache must be read with.
 * Usage: node fill-compile-cache.ts CACHE_DIR (the image's NODE_COMPILE_CACHE).
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, readdirSync } from 'node:fs';
import { SIDECAR_V8_FLAGS } from '../agent/contract/sidecar-v8-flags.ts';

const CACHE = process.argv[2] ?? '/app/compile-cache';
const CHUNKS = '/app/agent-chunks';
// In name order: a directory lists in its file system's hash order, which differs between two builds,
// and what one chunk's evaluation compiles of another depends on which was imported first. The cache
// is written when the process exits, once whatever the imports started has run.
const PREFILL = `import { readdirSync } from 'node:fs';
for (const f of readdirSync(${JSON.stringify(CHUNKS)}).sort()) if (f.endsWith('.js')) await import(${JSON.stringify(`${CHUNKS}/`)} + f);`;

const raw = process.env.COMPILE_CACHE_UIDS ?? '65532';
const uids = raw.split(/[\s,]+/).filter((u) => u !== '');
for (const uid of uids)
  if (!/^[1-9]\d{0,9}$/.test(uid) || Number(uid) > 2 ** 32 - 2)
    throw new Error(
      `COMPILE_CACHE_UIDS: "${uid}" is not a uid. Fix: list non-zero numeric uids, e.g. --build-arg COMPILE_CACHE_UIDS="65532 1000" (the agent never runs as root).`,
    );

// Each uid's child creates its own directory in here; it is closed again once all are filled.
mkdirSync(CACHE, { recursive: true });
chmodSync(CACHE, 0o1777);
for (const uid of new Set(uids.map(Number))) {
  const run = spawnSync(
    process.execPath,
    [...SIDECAR_V8_FLAGS, '--random-seed=1', '--predictable', '--input-type=module', '-e', PREFILL],
    {
      uid,
      gid: uid,
      env: { NODE_COMPILE_CACHE: CACHE, HOME: '/' },
      stdio: 'inherit',
    },
  );
  if (run.status !== 0) throw new Error(`filling the compile cache as uid ${uid} failed (${run.status})`);
  if (!readdirSync(CACHE).some((d) => d.endsWith(`-${uid}`)))
    throw new Error(`filling the compile cache as uid ${uid} left no cache directory in ${CACHE}`);
}
chmodSync(CACHE, 0o755);
