import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { SIDECAR_V8_FLAGS } from '../../agent/contract/sidecar-v8-flags.ts';
import { AGENT_PORT_LIMITS } from '../../agent/serve/health-server.ts';
import { DEFAULT_MEMORY_LIMIT, nodeOptions } from '../../webhook/agent-sizing.ts';
import { WEBHOOK_SETTINGS } from '../../webhook/config/settings.ts';
import { MOTO_ENV, motoSecrets, startMoto, type Moto } from '../support/moto.ts';
import { AGENT_JS, eventually, memoryDir, startAgent, type RunningAgent } from '../support/run-agent.ts';
import { siege } from './port-siege.ts';

const MiB = 1048576;
/** What podman's default_ulimits give the agent container here (images/podman/containers.conf). */
const CONTAINER_NOFILE = 4096;
const FLOOD = 12_000;
const REASONS = ['per-source', 'full', 'no-request'];

/** RssAnon: the process's own memory, what its working set is but for the Node binary's shared pages. */
function rssAnon(pid: number): number {
  const kb = /^RssAnon:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  if (kb === undefined) throw new Error(`no RssAnon in /proc/${pid}/status`);
  return Number(kb) * 1024;
}

const openFds = (pid: number) => readdirSync(`/proc/${pid}/fd`).length;

describe(
  'the agent’s port under a siege of idle connections (the built agent, in sidecar mode)',
  { timeout: 240_000 },
  () => {
    let moto: Moto;
    let agent: RunningAgent;
    let port: number;
    let dir: ReturnType<typeof memoryDir>;

    before(async () => {
      dir = memoryDir();
      moto = await startMoto();
      const secrets = motoSecrets(moto.endpoint);
      await secrets.put('siege/db', 'not-a-secret-just-a-value');
      secrets.destroy();
      // As the webhook runs it: its V8 flags and NODE_OPTIONS for the default limit.
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
      // The container's open-file limit, so that running out of descriptors would show here as there.
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
    });
    after(async () => {
      await agent?.stop();
      await moto?.stop();
    });

    it("12000 idle connections from one pod, more from eight others and a slow sender: /healthz answers ≥ 95 % of the kubelet's probes, memory and descriptors stay bounded", async (t) => {
      const host = '127.0.0.1';
      let peakFds = 0;
      const result = await siege({
        healthz: `http://${host}:${port}/healthz`,
        floods: [
          {
            host,
            port,
            sources: [
              { from: '127.0.0.2', count: FLOOD },
              ...Array.from({ length: 8 }, (_, i) => ({ from: `127.0.0.${3 + i}`, count: 200 })),
              { from: '127.0.0.11', count: 20, slow: true },
            ],
          },
        ],
        sampleMemory: () => {
          peakFds = Math.max(peakFds, openFds(agent.pid));
          return rssAnon(agent.pid);
        },
        // Past the first-request deadline, so the connections the port held are closed while it is probed.
        holdMs: AGENT_PORT_LIMITS.firstRequestMs + 2000,
      });

      const [main] = result.floods;
      t.diagnostic(
        `probes ${result.answered}/${result.probes}; RssAnon ${(result.baselineMemory / MiB).toFixed(1)} → peak ${(result.peakMemory / MiB).toFixed(1)} MiB; ` +
          `fds peak ${peakFds}; flood ${JSON.stringify(main)}`,
      );
      assert.equal(main!.opened + main!.failed, FLOOD + 8 * 200 + 20);
      assert.ok(
        main!.opened >= FLOOD * 0.9,
        `only ${main!.opened} of ${FLOOD} connections were opened: not a flood`,
      );
      assert.ok(
        result.answered >= result.probes * 0.95,
        `/healthz answered ${result.answered} of ${result.probes} probes (${result.failures.join(', ')})`,
      );
      assert.ok(
        result.peakMemory < 64 * MiB,
        `RssAnon peaked at ${(result.peakMemory / MiB).toFixed(1)} MiB`,
      );
      assert.ok(
        result.peakMemory - result.baselineMemory < 16 * MiB,
        `RssAnon grew by ${((result.peakMemory - result.baselineMemory) / MiB).toFixed(1)} MiB`,
      );
      // Never near the container's open-file limit: accept cannot fail with EMFILE. What the port may hold
      // at once: its places, newcomers within their grace, one turn's accepts.
      const mostHeld =
        AGENT_PORT_LIMITS.maxConnections + AGENT_PORT_LIMITS.maxInGrace + AGENT_PORT_LIMITS.listenBacklog;
      assert.ok(peakFds < mostHeld + 64, `${peakFds} open descriptors`);
      assert.ok(mostHeld + 64 < CONTAINER_NOFILE / 2, 'the port’s most is far from the open-file limit');

      // Every flood connection the port closed, it closed unanswered (none sent a complete request) and
      // counted: as many refusals as the flood saw closed by the port by the end of the hold. Not as many
      // as it opened: a connection the kernel completed but dropped from a full accept queue (a loaded
      // machine) or still held in it never reached the agent (CI, the tenth review's run: short of 13,620).
      const closedByPort = result.floodsAtEnd.reduce((n, f) => n + f.closedByServer, 0);
      const stillOpen = result.floodsAtEnd.reduce((n, f) => n + f.open, 0);
      t.diagnostic(`closed by the port ${closedByPort}, still open at the end ${stillOpen}`);
      assert.ok(
        closedByPort >= FLOOD * 0.9,
        `the port closed ${closedByPort} of the flood's connections (${stillOpen} still open): not closed unanswered`,
      );
      const refusals = async () => {
        const text = await (await fetch(`http://${host}:${port}/metrics`)).text();
        const lines = text.matchAll(
          /^secret_agent_http_connections_refused_total\{reason="([^"]*)"\} (\d+)$/gm,
        );
        return Object.fromEntries([...lines].map((m) => [m[1]!, Number(m[2])]));
      };
      const by = await eventually(
        async () => {
          const now = await refusals();
          const counted = Object.values(now).reduce((n, v) => n + v, 0);
          return counted >= closedByPort ? now : undefined;
        },
        `${closedByPort} refusals`,
        30_000,
      );
      t.diagnostic(`refused by reason ${JSON.stringify(by)}`);
      for (const reason of Object.keys(by)) assert.ok(REASONS.includes(reason), `label value ${reason}`);
      // Most were one pod's beyond its share; what the port still held at the end (the slow sender's
      // among them) was closed at the deadline.
      assert.ok(by['per-source']! >= FLOOD - AGENT_PORT_LIMITS.maxConnections * 10, 'per-source refusals');
      assert.ok(by['no-request']! > 0, 'closed for sending no complete request in time');
    });
  },
);
