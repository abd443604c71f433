import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { AGENT_PORT_LIMITS } from '../../agent/serve/health-server.ts';
import { startAgentContainer, type AgentContainer } from '../../bench/podman-agent.ts';
import {
  cgroupLayout,
  containerCgroup,
  firstPid,
  readLimitCounters,
  readMemory,
  removeCgroupTree,
  type CgroupLayout,
} from '../../bench/memory-cgroup.ts';
import { DEFAULT_MEMORY_LIMIT } from '../../webhook/agent-sizing.ts';
import { WEBHOOK_SETTINGS } from '../../webhook/config/settings.ts';
import { siege } from '../siege/port-siege.ts';
import { freePort, MOTO_ENV, motoSecrets, startMoto, type Moto } from '../support/moto.ts';
import { eventually } from '../support/run-agent.ts';
import { builtImages } from './podman.ts';

const FLOOD = 12_000;
const MAX_WORKING_SET_MIB = 64;

/**
 * The siege, on the agent image as the webhook renders the sidecar (its command, V8 flags,
 * NODE_OPTIONS and memory limit, 128Mi by default; read-only, no capabilities; podman's open-file
 * limit, 4096 here): 12,000 idle connections to its port from another address, while the kubelet's
 * probe comes from the node's. Its memory is read as the kubelet reads it: working set = usage −
 * inactive_file of its memory cgroup. Host networking, as the harness runs pods (moto is on loopback).
 */
describe('the agent image’s port under 12,000 idle connections', { timeout: 300_000 }, () => {
  let moto: Moto;
  let agent: AgentContainer;
  let layout: CgroupLayout;
  let cgroup: string;
  let port: number;
  const parent = `secret-agent-port-flood-${randomUUID().slice(0, 8)}`;

  before(async () => {
    const { podman, manifest } = builtImages();
    layout = cgroupLayout();
    moto = await startMoto();
    const secrets = motoSecrets(moto.endpoint);
    await secrets.put('siege/db', 'not-a-secret-just-a-value');
    secrets.destroy();
    port = await freePort();
    agent = startAgentContainer(
      podman,
      {
        image: manifest.images.agent.ref,
        mode: 'sidecar',
        gcp: false,
        memoryLimit: DEFAULT_MEMORY_LIMIT,
        volumeSizeLimit: WEBHOOK_SETTINGS.SECRETS_VOLUME_SIZE_LIMIT.default!,
        env: {
          ...MOTO_ENV,
          AWS_ENDPOINT_URL_SECRETS_MANAGER: moto.endpoint,
          AGENT_HTTP_ADDR: `0.0.0.0:${port}`,
          SECRET_0_REF: 'aws:siege/db',
          SECRET_0_FILENAME: 'db',
        },
      },
      parent,
      `secret-agent-port-flood-${process.pid}`,
    );
    await eventually(
      async () => {
        if (agent.ended()) throw new Error(`the agent ended: ${agent.stderr()}`);
        const res = await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => undefined);
        return res?.status === 200 ? true : undefined;
      },
      'the agent container to be ready',
      75_000,
    );
    cgroup = containerCgroup(layout, parent)!;
    assert.ok(cgroup, 'the container’s memory cgroup');
  });
  after(async () => {
    await agent?.stop();
    await moto?.stop();
    if (layout) removeCgroupTree(layout, parent);
  });

  it('12000 idle connections from one address, more from eight others: working set ≤ 64 MiB, /healthz answering', async (t) => {
    const memoryDir = join(layout.memoryRoot, cgroup);
    const pid = firstPid(layout, cgroup)!;
    const nofile = /^Max open files\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/limits`, 'utf8'))?.[1];
    t.diagnostic(`the agent's open-file limit: ${nofile}`);
    const host = '127.0.0.1';
    let peakKernel = 0;
    const result = await siege({
      healthz: `http://${host}:${port}/healthz`,
      floods: [
        {
          host,
          port,
          sources: [
            { from: '127.0.0.2', count: FLOOD },
            ...Array.from({ length: 8 }, (_, i) => ({ from: `127.0.0.${3 + i}`, count: 200 })),
          ],
        },
      ],
      sampleMemory: () => {
        const m = readMemory(layout, memoryDir);
        peakKernel = Math.max(peakKernel, m.kernelMiB);
        return m.workingSetMiB;
      },
      holdMs: AGENT_PORT_LIMITS.firstRequestMs + 2000,
    });
    // After the siege, the agent is still the same process, and still answers.
    await sleep(500);
    const health = await fetch(`http://${host}:${port}/healthz`);
    const counters = readLimitCounters(layout, cgroup);
    t.diagnostic(
      `probes ${result.answered}/${result.probes} (${result.failures.join(', ')}); working set ${result.baselineMemory.toFixed(1)} → peak ${result.peakMemory.toFixed(1)} MiB ` +
        `(kernel peak ${peakKernel.toFixed(1)} MiB); floods ${JSON.stringify(result.floods)}; limit hits ${counters.limitHits}, OOM kills ${counters.oomKills}`,
    );
    assert.equal(health.status, 200);
    assert.equal(firstPid(layout, cgroup), pid, 'the agent process was replaced');
    assert.equal(counters.oomKills, 0);
    assert.ok(result.floods[0]!.opened >= FLOOD * 0.9, `only ${result.floods[0]!.opened} connections opened`);
    assert.ok(
      result.peakMemory <= MAX_WORKING_SET_MIB,
      `working set peaked at ${result.peakMemory.toFixed(1)} MiB`,
    );
    assert.ok(
      result.answered >= result.probes * 0.95,
      `/healthz answered ${result.answered} of ${result.probes} probes (${result.failures.join(', ')})`,
    );
  });
});
