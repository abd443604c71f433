import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SIDECAR_V8_FLAGS } from '../../agent/contract/sidecar-v8-flags.ts';
import {
  DEFAULT_MEMORY_LIMIT,
  MEASURED,
  nodeOptions,
  quantityBytes,
  v8HeapCapMiB,
} from '../../webhook/agent-sizing.ts';
import { WEBHOOK_SETTINGS } from '../../webhook/config/settings.ts';
import { builtImages, emptyDirOnTmpfs, runContainer } from './podman.ts';

const MiB = 1048576;
const VOLUME = WEBHOOK_SETTINGS.SECRETS_VOLUME_SIZE_LIMIT.default!;

/**
 * A Node in the agent image, with the flags and memory limit the webhook gives the agent, that fills
 * the volume to its size limit (tmpfs pages are charged to the container that writes them, as the
 * agent's files are), holds the native memory and buffers the agent was measured to keep outside its
 * V8 heap (this Node's own come on top), then lets its heap grow without end. It must die of V8's heap
 * limit, with V8's message, not be OOM-killed (137, no message) first: v8HeapCapMiB's promise
 * (webhook/agent-sizing.ts). The Node binary's pages, the rest of the reserve, are its own here,
 * which the kernel may reclaim; bench/agent-memory.ts measures what squeezing them costs.
 */
const LEAK = `
const fs = require('node:fs');
const v8 = require('node:v8');
fs.writeFileSync('/secrets/full', Buffer.alloc(${quantityBytes(VOLUME)}, 1));
const outside = Buffer.alloc(${Math.round(MEASURED.outsideHeapMiB.nativeAndBuffers * MiB)}, 1);
const keep = [outside];
let reported = 0;
for (;;) {
  keep.push(Array.from({ length: 1000 }, (_, i) => ({ i, s: 'leak' + i })));
  const used = v8.getHeapStatistics().used_heap_size;
  if (used - reported > 2 * ${MiB}) {
    reported = used;
    process.stdout.write('heap ' + Math.round(used / ${MiB}) + '\\n');
  }
}
`;

describe('the agent’s V8 heap cap, in the agent image under its memory limit', () => {
  it(`the default limit (${DEFAULT_MEMORY_LIMIT}) and volume (${VOLUME}) full: a heap that grows without end meets V8's cap, never the OOM killer`, async () => {
    const { manifest } = builtImages();
    using volume = emptyDirOnTmpfs();
    const run = await runContainer(
      {
        image: manifest.images.agent.ref,
        memory: String(quantityBytes(DEFAULT_MEMORY_LIMIT)),
        env: { NODE_OPTIONS: nodeOptions(DEFAULT_MEMORY_LIMIT, VOLUME) },
        mounts: [{ host: volume.path, container: '/secrets' }],
        entrypoint: ['/nodejs/bin/node', ...SIDECAR_V8_FLAGS, '-e', LEAK],
      },
      120_000,
    );
    const reached = Math.max(...run.stdout.split('\n').map((l) => Number(/^heap (\d+)$/.exec(l)?.[1] ?? 0)));
    assert.notEqual(run.code, 137, `OOM-killed with the heap at ${reached} MiB`);
    assert.match(
      run.stderr,
      /FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory/,
    );
    // V8's fatal handler ends the process with SIGABRT (134), or SIGSEGV (139) as Node 24's does here.
    assert.ok(run.code === 134 || run.code === 139, `exit ${run.code}`);
    const cap = v8HeapCapMiB(DEFAULT_MEMORY_LIMIT, VOLUME);
    assert.ok(reached >= cap - 8, `the heap got to ${reached} of its ${cap} MiB cap before it gave out`);
  });
});
