import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { SIDECAR_V8_FLAGS } from '../../agent/contract/sidecar-v8-flags.ts';
import { AGENT_PORT_LIMITS } from '../../agent/serve/health-server.ts';
import { DEFAULT_MEMORY_LIMIT, nodeOptions } from '../../webhook/agent-sizing.ts';
import { WEBHOOK_SETTINGS } from '../../webhook/config/settings.ts';
import { MOTO_ENV, motoSecrets, startMoto, type Moto } from '../support/moto.ts';
import { AGENT_JS, eventually, memoryDir, startAgent, type RunningAgent } from '../support/run-agent.ts';
import {
  describeSiege,
  probeSiege,
  tenants,
  type TenantShape,
  PORT_CLIENT_TIMEOUT_SECONDS,
} from './kubelet-probes.ts';

/**
 * Issue 37, the Node sidecar: the built agent in sidecar mode (its V8 flags and NODE_OPTIONS for the
 * default memory limit, podman's open-file limit), while tenants' pods keep connections to its port
 * from many addresses, each reopened as soon as it is closed. The kubelet's probes of /healthz and
 * /readyz (each on its own connection, its request written at once or arriving 5 or 50 ms after the
 * handshake, the rendered probes' 3 s timeout) are answered ≥ 99 %,
 * its memory and descriptors stay bounded, and it neither dies nor restarts. One agent for every
 * shape, one after the other, as a pod would meet them.
 */

const MiB = 1048576;
/** What podman's default_ulimits give the agent container here (images/podman/containers.conf). */
const CONTAINER_NOFILE = 4096;
const ANSWERED = 0.99;
/** What the port may hold at once: its places, newcomers within their grace, one turn's accepts. */
const MOST_HELD =
  AGENT_PORT_LIMITS.maxConnections + AGENT_PORT_LIMITS.maxInGrace + AGENT_PORT_LIMITS.listenBacklog;

const SHAPES: TenantShape[] = [
  tenants([8, 16, 'idle']),
  tenants([32, 4, 'idle']),
  tenants([64, 2, 'idle']),
  tenants([128, 1, 'idle']),
  tenants([256, 2, 'idle']),
  tenants([64, 2, 'slow']),
  tenants([128, 2, 'churn']),
  tenants([16, 4, 'idle'], [16, 4, 'slow'], [16, 4, 'churn']),
  // A thousand GET /metrics written at once on one connection: each was rendered, and the heap ended.
  tenants([1, 1, 'pipelined']),
  tenants([4, 2, 'pipelined']),
  tenants([64, 1, 'pipelined']),
  // Connections asking /metrics as fast as answered, from many addresses or a few.
  tenants([253, 2, 'scrape']),
  tenants([32, 16, 'scrape']),
  tenants([16, 4, 'idle'], [16, 4, 'scrape'], [4, 1, 'pipelined']),
];

/** RssAnon: the process's own memory, what its working set is but for the Node binary's shared pages. */
function rssAnon(pid: number): number {
  const kb = /^RssAnon:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  if (kb === undefined) throw new Error(`no RssAnon in /proc/${pid}/status`);
  return Number(kb) * 1024;
}

describe(
  'the Node sidecar’s port under tenants’ connections from many addresses',
  { timeout: 300_000 },
  () => {
    let moto: Moto;
    let agent: RunningAgent;
    let port: number;
    let baseline: number;
    let dir: ReturnType<typeof memoryDir>;

    before(async () => {
      assert.ok(existsSync(AGENT_JS), `${AGENT_JS} is missing: build it first with \`node images/build.ts\``);
      dir = memoryDir();
      moto = await startMoto();
      const secrets = motoSecrets(moto.endpoint);
      await secrets.put('siege/db', 'not-a-secret-just-a-value');
      secrets.destroy();
      agent = startAgent(
        {
          ...MOTO_ENV,
          AWS_ENDPOINT_URL_SECRETS_MANAGER: moto.endpoint,
          AGENT_MODE: 'sidecar',
          SECRETS_DIR: dir.path,
          AGENT_HTTP_ADDR: '127.0.0.1:0',
          SECRET_0_REF: 'aws:siege/db',
          SECRET_0_FILENAME: 'db',
          NODE_OPTIONS: nodeOptions(
            DEFAULT_MEMORY_LIMIT,
            WEBHOOK_SETTINGS.SECRETS_VOLUME_SIZE_LIMIT.default!,
          ),
        },
        { argv: [...SIDECAR_V8_FLAGS, AGENT_JS] },
      );
      const line = await agent.waitForLog((l) => l.msg === 'serving /healthz, /readyz, /metrics');
      port = Number(String(line.addr).split(':').pop());
      const limited = spawnSync(
        'prlimit',
        ['--pid', String(agent.pid), `--nofile=${CONTAINER_NOFILE}:${CONTAINER_NOFILE}`],
        {
          encoding: 'utf8',
        },
      );
      if (limited.error || limited.status !== 0)
        throw new Error(
          `prlimit failed (${limited.error?.message ?? limited.stderr}). Fix: apt-get install util-linux`,
        );
      await eventually(
        async () => ((await fetch(`http://127.0.0.1:${port}/readyz`)).status === 200 ? true : undefined),
        'the agent to be ready',
      );
      baseline = rssAnon(agent.pid);
    });
    after(async () => {
      await agent?.stop();
      await moto?.stop();
      dir?.[Symbol.dispose]();
    });

    for (const shape of SHAPES)
      it(`${shape.name} connections, each reopened as soon as closed: the kubelet's probes answered ≥ 99 %, memory and descriptors bounded`, async (t) => {
        const lanes = shape.sources.reduce((n, s) => n + s.count, 0);
        const f = await probeSiege({
          target: { host: '127.0.0.1', port, timeoutMs: PORT_CLIENT_TIMEOUT_SECONDS * 1000 },
          floods: [{ host: '127.0.0.1', port, sources: shape.sources }],
          paths: ['/healthz', '/readyz', '/healthz', '/readyz', '/healthz', '/readyz'],
          // Written at once, or arriving 5 or 50 ms after the handshake, as across a node's network.
          requestDelaysMs: [0, 0, 5, 5, 50, 50],
          everyMs: 50,
          probes: 200,
          maxMs: 20_000,
          sample: () => ({
            rssAnonMiB: rssAnon(agent.pid) / MiB,
            fds: readdirSync(`/proc/${agent.pid}/fd`).length,
          }),
        });
        t.diagnostic(`${describeSiege(shape.name, f)}; RssAnon at start ${(baseline / MiB).toFixed(1)} MiB`);

        const opened = f.floods.reduce((n, x) => n + x.opened, 0);
        const closed = f.floods.reduce((n, x) => n + x.closedByServer, 0);
        assert.ok(opened >= lanes, `the flood opened ${opened} of its ${lanes} connections`);
        if (shape.sources.some((s) => s.kind !== 'churn'))
          assert.ok(closed >= Math.min(lanes, AGENT_PORT_LIMITS.maxConnections), `the port closed ${closed}`);
        assert.ok(f.probes >= 100, `only ${f.probes} probes were sent`);
        assert.ok(
          f.answered >= f.probes * ANSWERED,
          `${f.answered} of ${f.probes} probes answered: ${JSON.stringify(f.failures)}`,
        );
        assert.ok(f.peak.rssAnonMiB! < 64, `RssAnon peaked at ${f.peak.rssAnonMiB!.toFixed(1)} MiB`);
        assert.ok(
          f.peak.rssAnonMiB! * MiB - baseline < 16 * MiB,
          `RssAnon grew by ${(f.peak.rssAnonMiB! - baseline / MiB).toFixed(1)} MiB`,
        );
        // Far from the container's open-file limit: accepting never fails for want of a descriptor.
        assert.ok(f.peak.fds! < MOST_HELD + 64, `${f.peak.fds} open descriptors`);
        assert.equal(agent.output().stderr, '', 'nothing on stderr');
        assert.equal((await fetch(`http://127.0.0.1:${port}/healthz`)).status, 200);
      });
  },
);
