import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseDuration } from '../../agent/contract/duration.ts';
import { AGENT_SETTINGS } from '../../agent/contract/agent-settings.ts';
import {
  DEFAULT_CPU_REQUEST,
  DEFAULT_MEMORY_LIMIT,
  DEFAULT_MEMORY_REQUEST,
  DEFAULT_SMALL_SIDECAR_MEMORY_REQUEST,
  LIMIT_MARGIN,
  MEASURED,
  MEASURED_SMALL_SIDECAR,
  MIN_HEAP_MIB,
  nodeOptions,
  OUTSIDE_HEAP_RESERVE_MIB,
  quantityBytes,
  quantityValue,
  REQUEST_MARGIN,
  SMALL_SIDECAR_MIN_INTERVAL_MS,
  smallestGuardedLimitMiB,
  v8HeapCapMiB,
} from '../../webhook/agent-sizing.ts';
import { parseWebhookConfig } from '../../webhook/config/parse-webhook-config.ts';
import { WEBHOOK_SETTINGS } from '../../webhook/config/settings.ts';
import { admitThroughWebhook, AGENT_IMAGE, basicPod } from './fixtures.ts';

const MiB = (q: string) => quantityValue(q) / 1048576;

describe('agent resources: quantities', () => {
  it('reads the quantities annotations.ts accepts, in bytes (or cores)', () => {
    assert.equal(quantityBytes('128Mi'), 134_217_728);
    assert.equal(quantityBytes('1Gi'), 1_073_741_824);
    assert.equal(quantityBytes('256M'), 256_000_000);
    assert.equal(quantityBytes('0.5Gi'), 536_870_912);
    assert.equal(quantityBytes('64Ki'), 65_536);
    assert.equal(quantityBytes('1000'), 1000);
    assert.equal(quantityValue('15m'), 0.015);
    assert.equal(quantityValue('.5'), 0.5);
  });

  it('says NaN for what it cannot read, never a number', () => {
    for (const bad of ['', 'Mi', '.', '12Xi', '-1Mi', '1 Mi'])
      assert.ok(Number.isNaN(quantityValue(bad)), bad);
  });
});

describe('agent resources: defaults set from the measured figures', () => {
  it('are the webhook settings’ defaults, and what a config without them gets', () => {
    assert.equal(WEBHOOK_SETTINGS.AGENT_MEMORY_REQUEST.default, DEFAULT_MEMORY_REQUEST);
    assert.equal(WEBHOOK_SETTINGS.AGENT_MEMORY_LIMIT.default, DEFAULT_MEMORY_LIMIT);
    assert.equal(WEBHOOK_SETTINGS.AGENT_CPU_REQUEST.default, DEFAULT_CPU_REQUEST);
    assert.equal(
      WEBHOOK_SETTINGS.AGENT_SMALL_SIDECAR_MEMORY_REQUEST.default,
      DEFAULT_SMALL_SIDECAR_MEMORY_REQUEST,
    );
    const { resources } = parseWebhookConfig({ AGENT_IMAGE }).injection;
    assert.deepEqual(resources, {
      cpuRequest: DEFAULT_CPU_REQUEST,
      memoryRequest: DEFAULT_MEMORY_REQUEST,
      memoryLimit: DEFAULT_MEMORY_LIMIT,
      smallSidecarMemoryRequest: DEFAULT_SMALL_SIDECAR_MEMORY_REQUEST,
    });
    // Today's figures give these; a new bench that moves them changes the goldens with them.
    assert.deepEqual(
      [
        DEFAULT_MEMORY_REQUEST,
        DEFAULT_MEMORY_LIMIT,
        DEFAULT_CPU_REQUEST,
        DEFAULT_SMALL_SIDECAR_MEMORY_REQUEST,
      ],
      ['40Mi', '128Mi', '15m', '4Mi'],
    );
  });

  it('the small sidecar’s request covers its working set between refreshes with the margin, in one step', () => {
    const request = MiB(DEFAULT_SMALL_SIDECAR_MEMORY_REQUEST);
    const idle = MEASURED_SMALL_SIDECAR.idleWorkingSetMiB;
    assert.ok(request >= idle * REQUEST_MARGIN, `${request} MiB`);
    assert.ok(request < idle * REQUEST_MARGIN + 4, 'rounded up by less than one step');
    // The resident and what the runs leave are the working set, within a rounding.
    assert.ok(
      Math.abs(
        MEASURED_SMALL_SIDECAR.residentAloneWorkingSetMiB +
          MEASURED_SMALL_SIDECAR.runLeftoverKernelMiB -
          idle,
      ) < 0.05,
    );
  });

  it('the small sidecar’s floor on refresh intervals is below the agent’s default interval', () => {
    const interval = parseDuration(AGENT_SETTINGS.REFRESH_INTERVAL.default!)!;
    assert.ok(
      interval >= SMALL_SIDECAR_MIN_INTERVAL_MS,
      'a pod that sets no interval suits the small sidecar',
    );
  });

  it('the memory request covers the largest steady-state working set with its margin, and not much more', () => {
    const request = MiB(DEFAULT_MEMORY_REQUEST);
    assert.ok(request >= MEASURED.steadyWorkingSetMiB * REQUEST_MARGIN, `${request} MiB`);
    assert.ok(
      request < MEASURED.steadyWorkingSetMiB * REQUEST_MARGIN + 4,
      'rounded up by less than one step',
    );
    // Also every sidecar measured at a 1 s refresh, before or after a burst of rotations.
    assert.ok(request >= MEASURED.busyWorkingSetMiB, `${request} MiB`);
  });

  it('the memory limit is the worst case’s lowest clean limit with its margin', () => {
    const limit = MiB(DEFAULT_MEMORY_LIMIT);
    assert.ok(limit >= MEASURED.worstCaseCleanLimitMiB * LIMIT_MARGIN, `${limit} MiB`);
    assert.ok(
      limit < MEASURED.worstCaseCleanLimitMiB * LIMIT_MARGIN + 16,
      'rounded up by less than one step',
    );
    assert.ok(limit > MiB(DEFAULT_MEMORY_REQUEST));
  });

  it('the CPU request gets the slowest start measured done within INIT_DEADLINE when the node’s CPU is all taken', () => {
    const cores = quantityValue(DEFAULT_CPU_REQUEST);
    const deadlineSeconds = parseDuration(AGENT_SETTINGS.INIT_DEADLINE.default!)! / 1000;
    assert.ok(
      MEASURED.startCpuSeconds <= cores * deadlineSeconds + 1e-9,
      `${MEASURED.startCpuSeconds / cores} s`,
    );
    // The steady state is far below it.
    assert.ok(cores * 1000 >= 10 * MEASURED.steadyCpuMillicores);
  });
});

describe('agent resources: the V8 heap cap', () => {
  const volumes = ['4Mi', '8Mi', '32Mi'];
  const limits = ['64Mi', '96Mi', '128Mi', '160Mi', '256Mi', '512M', '1Gi', '4Gi'];

  it('leaves the volume and the measured reserve inside the limit, wherever the limit allows the floor', () => {
    for (const limit of limits)
      for (const volume of volumes) {
        const cap = v8HeapCapMiB(limit, volume);
        const room = MiB(limit) - MiB(volume) - OUTSIDE_HEAP_RESERVE_MIB;
        if (room >= MIN_HEAP_MIB) {
          assert.ok(
            cap + MiB(volume) + OUTSIDE_HEAP_RESERVE_MIB <= MiB(limit),
            `${limit}, ${volume}: ${cap}`,
          );
          assert.ok(cap > room - 1, `${limit}, ${volume}: all the room goes to the heap`);
        } else assert.equal(cap, MIN_HEAP_MIB, `${limit}, ${volume}: the floor`);
      }
  });

  it('rises with the limit and falls with the volume', () => {
    for (const volume of volumes)
      for (let i = 1; i < limits.length; i++)
        assert.ok(v8HeapCapMiB(limits[i]!, volume) >= v8HeapCapMiB(limits[i - 1]!, volume), `${limits[i]}`);
    for (const limit of limits)
      assert.ok(v8HeapCapMiB(limit, '4Mi') >= v8HeapCapMiB(limit, '32Mi'), `${limit}`);
  });

  it('the reserve holds what the worst case keeps outside its heap, a tenth more, and the young generation', () => {
    const outside = Object.values(MEASURED.outsideHeapMiB).reduce((a, b) => a + b, 0);
    assert.ok(OUTSIDE_HEAP_RESERVE_MIB >= outside * 1.1 + 3, `${OUTSIDE_HEAP_RESERVE_MIB}`);
    assert.ok(OUTSIDE_HEAP_RESERVE_MIB < outside * 1.1 + 4);
  });

  it('gives the default pod room for its heap: the floor is above the largest heap measured, the default cap above both', () => {
    assert.ok(MIN_HEAP_MIB >= MEASURED.heapCommittedMiB * 1.3);
    const cap = v8HeapCapMiB(DEFAULT_MEMORY_LIMIT, WEBHOOK_SETTINGS.SECRETS_VOLUME_SIZE_LIMIT.default!);
    assert.ok(cap >= MIN_HEAP_MIB && cap >= 1.75 * MEASURED.heapCommittedMiB, `${cap} MiB`);
  });

  it('is rendered as NODE_OPTIONS with a 1 MiB young generation', () => {
    assert.equal(nodeOptions('128Mi', '8Mi'), '--max-old-space-size=44 --max-semi-space-size=1');
    assert.equal(nodeOptions('256Mi', '8Mi'), '--max-old-space-size=172 --max-semi-space-size=1');
    assert.equal(nodeOptions('256Mi', '16Mi'), '--max-old-space-size=164 --max-semi-space-size=1');
    assert.equal(nodeOptions('1Gi', '8Mi'), '--max-old-space-size=940 --max-semi-space-size=1');
    assert.equal(nodeOptions('256M', '8Mi'), '--max-old-space-size=160 --max-semi-space-size=1');
    assert.equal(nodeOptions('64Mi', '8Mi'), '--max-old-space-size=32 --max-semi-space-size=1', 'the floor');
  });
});

describe('agent resources: a pod’s limit too small for the heap cap', () => {
  const db = { 'secret-agent.io/secret-db': 'aws:prod/db' };
  const CLUSTER = { AGENT_AWS_REGION: 'eu-west-1' };
  const warnings = (annotations: Record<string, string>) => {
    const result = admitThroughWebhook(basicPod({ ...db, ...annotations }), CLUSTER);
    assert.equal(result.outcome, 'injected', result.review.response.status?.message);
    return (result.review.response.warnings ?? []).filter((w) => w.includes('agent-memory-limit'));
  };

  it('is the floor of the heap plus the reserve plus the volume: 116Mi with the default 8Mi volume', () => {
    assert.equal(smallestGuardedLimitMiB('8Mi'), 116);
    assert.equal(smallestGuardedLimitMiB('64Mi'), 172);
    for (const volume of ['8Mi', '16Mi', '64Mi']) {
      const smallest = smallestGuardedLimitMiB(volume);
      assert.ok(v8HeapCapMiB(`${smallest}Mi`, volume) === MIN_HEAP_MIB);
      assert.ok(smallest - MiB(volume) - OUTSIDE_HEAP_RESERVE_MIB >= MIN_HEAP_MIB, volume);
      assert.ok(smallest - 1 - MiB(volume) - OUTSIDE_HEAP_RESERVE_MIB < MIN_HEAP_MIB, volume);
    }
  });

  it('is admitted with a warning naming the annotation, both sizes and the smallest limit that is guarded', () => {
    const [warning, ...rest] = warnings({ 'secret-agent.io/agent-memory-limit': '96Mi' });
    assert.deepEqual(rest, []);
    assert.match(
      warning!,
      /secret-agent\.io\/agent-memory-limit is 96Mi and the secrets volume 8Mi: below 116Mi/,
    );
    assert.match(warning!, /Set at least 116Mi, or leave it unset/);
    const [big] = warnings({ 'secret-agent.io/volume-size-limit': '64Mi' });
    assert.match(
      big!,
      /is 128Mi and the secrets volume 64Mi: below 172Mi/,
      'a large volume under the default limit',
    );
  });

  it('a limit that does not parse is one problem, however many steps read it', () => {
    const result = admitThroughWebhook(
      basicPod({
        ...db,
        'secret-agent.io/agent-memory-limit': 'lots',
        'secret-agent.io/volume-size-limit': 'big',
      }),
      CLUSTER,
    );
    assert.equal(result.outcome, 'denied');
    const message = result.review.response.status!.message;
    assert.match(message, /\(2 problems\)/);
    assert.equal(message.split('secret-agent.io/agent-memory-limit:').length - 1, 1, message);
    assert.equal(message.split('secret-agent.io/volume-size-limit:').length - 1, 1, message);
  });

  it('says nothing at or above that limit, or when the pod sets neither (the defaults are the cluster’s)', () => {
    assert.deepEqual(warnings({ 'secret-agent.io/agent-memory-limit': '116Mi' }), []);
    assert.deepEqual(warnings({ 'secret-agent.io/agent-memory-limit': '1Gi' }), []);
    assert.deepEqual(warnings({}), []);
    const small = admitThroughWebhook(basicPod(db), { ...CLUSTER, AGENT_MEMORY_LIMIT: '96Mi' });
    assert.equal(small.outcome, 'injected');
    assert.ok(!(small.review.response.warnings ?? []).some((w) => w.includes('agent-memory-limit')));
  });
});
