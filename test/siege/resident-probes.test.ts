import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { describe, it, type TestContext } from 'node:test';
import { encodeOutcome, step } from '../resident/run-plan.ts';
import { residentKiB, startResident } from '../resident/resident-process.ts';
import {
  describeSiege,
  probeSiege,
  tenants,
  type TenantShape,
  PORT_CLIENT_TIMEOUT_SECONDS,
} from './kubelet-probes.ts';

/**
 * Issue 37: the small sidecar's port (agent/native/resident.c, built from source) while tenants' pods
 * keep connections to it from many addresses, each reopened as soon as it is closed: the kubelet's
 * probes of /healthz and /readyz, each on its own connection, its request written at once or arriving
 * 5 or 50 ms after the handshake (a node's network), with the rendered probes' 3 s timeout, are answered ≥ 99 %, and the
 * resident's memory and descriptors stay bounded. Before, a full port closed its oldest silent
 * connection for each newcomer, and a probe accepted before its request arrived was closed in the same
 * round (2.8 to 85 % answered; here 9 to 77 % with requests 5 or 50 ms behind their handshake).
 *
 * Dribbling connections (a request's start, then a byte every 20 to 199 ms, never finished) are a
 * battery of their own: the grace was counted from a connection's last byte, so each looked new when
 * accepted, and with every place in its grace the port stopped accepting while the probes waited
 * behind them in the kernel's queue (0 of 208 answered within 1 s, all late).
 */

const IDLE = [step('write', encodeOutcome({ ready: true, nextMs: 86_400_000 }))];
/** The resident's places (MAX_CONNS): its descriptors are those, the listener, pipes and stdio. */
const PLACES = 64;
const ANSWERED = 0.99;
/** The kubelet's default timeoutSeconds, which the rendered probes raise to 3 s: reported, not asserted. */
const KUBELET_DEFAULT_TIMEOUT_MS = 1000;

interface Siege {
  readonly shape: TenantShape;
  readonly lanes: number;
  /** For dribbling lanes: each byte after [min, max] ms. */
  readonly dribbleMs?: readonly [number, number];
}

const SHAPES: Siege[] = [
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

/** Dribbling lanes, from one address to 253, a byte every 20 to 199 ms; alone and among silent ones. */
const DRIBBLING: Siege[] = (
  [
    // The attacker's: 1,012 and 2,024 connections, a byte every 100 to 190 ms.
    [tenants([253, 4, 'dribble']), [100, 190]],
    [tenants([253, 8, 'dribble']), [100, 190]],
    // Just under the grace, from few addresses, each past its share.
    [tenants([8, 32, 'dribble']), [180, 199]],
    // Fast: many bytes before any deadline.
    [tenants([64, 8, 'dribble']), [20, 60]],
    // One address.
    [tenants([1, 256, 'dribble']), [100, 190]],
    // Among silent connections, which do have the grace.
    [tenants([128, 4, 'dribble'], [128, 4, 'idle']), [100, 190]],
  ] as const
).map(([shape, dribbleMs]) => ({
  shape,
  lanes: shape.sources.reduce((n, s) => n + s.count, 0),
  dribbleMs,
}));

/** Probes the resident while `siege` floods it; asserts what the issue asks of its port. */
async function probedUnderSiege(t: TestContext, { shape, lanes, dribbleMs }: Siege): Promise<void> {
  await using r = await startResident(IDLE);
  await r.until('the first run', async () => (await r.get('/readyz')).status === 200);
  const pid = r.child.pid!;
  const idleKiB = residentKiB(pid);
  const f = await probeSiege({
    target: { host: r.host, port: r.port, timeoutMs: PORT_CLIENT_TIMEOUT_SECONDS * 1000 },
    floods: [{ host: r.host, port: r.port, sources: shape.sources, ...(dribbleMs && { dribbleMs }) }],
    paths: ['/healthz', '/readyz', '/healthz', '/readyz', '/healthz', '/readyz'],
    // Written at once, or arriving 5 or 50 ms after the handshake, as across a node's network.
    requestDelaysMs: [0, 0, 5, 5, 50, 50],
    everyMs: 50,
    probes: 200,
    maxMs: 20_000,
    sample: () => ({ rssKiB: residentKiB(pid), fds: readdirSync(`/proc/${pid}/fd`).length }),
  });
  const withinDefault = f.answeredMs.filter((ms) => ms <= KUBELET_DEFAULT_TIMEOUT_MS).length;
  t.diagnostic(
    `${describeSiege(shape.name, f)}; within 1 s ${withinDefault}/${f.probes}; VmRSS before ${idleKiB} KiB`,
  );

  const opened = f.floods.reduce((n, x) => n + x.opened, 0);
  const closed = f.floods.reduce((n, x) => n + x.closedByServer, 0);
  assert.ok(opened >= lanes, `the flood opened ${opened} of its ${lanes} connections`);
  // It pressed on the port: the port closed as many as the flood keeps (churn closes its own).
  if (shape.sources.some((s) => s.kind !== 'churn'))
    assert.ok(closed >= Math.min(lanes, PLACES), `the port closed ${closed} of the flood's connections`);
  assert.ok(f.probes >= 100, `only ${f.probes} probes were sent`);
  assert.ok(
    f.answered >= f.probes * ANSWERED,
    `${f.answered} of ${f.probes} probes answered (${withinDefault} within 1 s): ${JSON.stringify(f.failures)}`,
  );
  assert.ok(f.peak.rssKiB! < 2048, `VmRSS reached ${f.peak.rssKiB} KiB: the issue asks for under 2 MiB`);
  assert.ok(f.peak.fds! <= PLACES + 16, `${f.peak.fds} descriptors open`);
  assert.equal(r.child.exitCode, null, 'the resident exited');
}

describe(
  'the small sidecar’s port under tenants’ connections from many addresses',
  { timeout: 240_000 },
  () => {
    for (const siege of SHAPES)
      it(`${siege.shape.name} connections, each reopened as soon as closed: the kubelet's probes answered ≥ 99 %, memory and descriptors bounded`, (t) =>
        probedUnderSiege(t, siege));
  },
);

describe(
  'the small sidecar’s port under dribbling connections from many addresses',
  { timeout: 300_000 },
  () => {
    for (const siege of DRIBBLING)
      it(`${siege.shape.name} connections, a byte every ${siege.dribbleMs![0]} to ${siege.dribbleMs![1]} ms, each reopened as soon as closed: the kubelet's probes answered ≥ 99 % within the rendered timeout, memory and descriptors bounded`, (t) =>
        probedUnderSiege(t, siege));
  },
);
