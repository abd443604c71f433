import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { describe, it } from 'node:test';
import { encodeOutcome, step } from '../resident/run-plan.ts';
import { residentKiB, startResident } from '../resident/resident-process.ts';
import { AGENT_PROBE_TIMEOUT_SECONDS } from '../../webhook/render/agent-containers.ts';
import { describeSiege, probeSiege, tenants, type TenantShape } from './kubelet-probes.ts';

/**
 * Issue 37: the small sidecar's port (agent/native/resident.c, built from source) while tenants' pods
 * keep connections to it from many addresses, each reopened as soon as it is closed: the kubelet's
 * probes of /healthz and /readyz, each on its own connection, its request written at once or arriving
 * 5 or 50 ms after the handshake (a node's network), with the rendered probes' 3 s timeout, are answered ≥ 99 %, and the
 * resident's memory and descriptors stay bounded. Before, a full port closed its oldest silent
 * connection for each newcomer, and a probe accepted before its request arrived was closed in the same
 * round (2.8 to 85 % answered; here 9 to 77 % with requests 5 or 50 ms behind their handshake).
 */

const IDLE = [step('write', encodeOutcome({ ready: true, nextMs: 86_400_000 }))];
/** The resident's places (MAX_CONNS): its descriptors are those, the listener, pipes and stdio. */
const PLACES = 64;
const ANSWERED = 0.99;

const SHAPES: { shape: TenantShape; lanes: number }[] = [
  tenants([8, 16, 'idle']),
  tenants([32, 4, 'idle']),
  tenants([64, 2, 'idle']),
  tenants([128, 1, 'idle']),
  // More than the kernel's queue of most servers: 4,096 connections waiting to be accepted.
  tenants([256, 16, 'idle']),
  tenants([64, 2, 'slow']),
  tenants([128, 2, 'churn']),
  tenants([16, 4, 'idle'], [16, 4, 'slow'], [16, 4, 'churn']),
].map((shape) => ({ shape, lanes: shape.sources.reduce((n, s) => n + s.count, 0) }));

describe(
  'the small sidecar’s port under tenants’ connections from many addresses',
  { timeout: 240_000 },
  () => {
    for (const { shape, lanes } of SHAPES)
      it(`${shape.name} connections, each reopened as soon as closed: the kubelet's probes answered ≥ 99 %, memory and descriptors bounded`, async (t) => {
        await using r = await startResident(IDLE);
        await r.until('the first run', async () => (await r.get('/readyz')).status === 200);
        const pid = r.child.pid!;
        const idleKiB = residentKiB(pid);
        const f = await probeSiege({
          target: { host: r.host, port: r.port, timeoutMs: AGENT_PROBE_TIMEOUT_SECONDS * 1000 },
          floods: [{ host: r.host, port: r.port, sources: shape.sources }],
          paths: ['/healthz', '/readyz', '/healthz', '/readyz', '/healthz', '/readyz'],
          // Written at once, or arriving 5 or 50 ms after the handshake, as across a node's network.
          requestDelaysMs: [0, 0, 5, 5, 50, 50],
          everyMs: 50,
          probes: 200,
          maxMs: 20_000,
          sample: () => ({ rssKiB: residentKiB(pid), fds: readdirSync(`/proc/${pid}/fd`).length }),
        });
        t.diagnostic(`${describeSiege(shape.name, f)}; VmRSS before ${idleKiB} KiB`);

        const opened = f.floods.reduce((n, x) => n + x.opened, 0);
        const closed = f.floods.reduce((n, x) => n + x.closedByServer, 0);
        assert.ok(opened >= lanes, `the flood opened ${opened} of its ${lanes} connections`);
        // It pressed on the port: the port closed as many as the flood keeps (churn closes its own).
        if (shape.sources.some((s) => s.kind !== 'churn'))
          assert.ok(
            closed >= Math.min(lanes, PLACES),
            `the port closed ${closed} of the flood's connections`,
          );
        assert.ok(f.probes >= 100, `only ${f.probes} probes were sent`);
        assert.ok(
          f.answered >= f.probes * ANSWERED,
          `${f.answered} of ${f.probes} probes answered: ${JSON.stringify(f.failures)}`,
        );
        assert.ok(
          f.peak.rssKiB! < 2048,
          `VmRSS reached ${f.peak.rssKiB} KiB: the issue asks for under 2 MiB`,
        );
        assert.ok(f.peak.fds! <= PLACES + 16, `${f.peak.fds} descriptors open`);
        assert.equal(r.child.exitCode, null, 'the resident exited');
      });
  },
);
