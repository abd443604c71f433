import assert from 'node:assert/strict';
import { Agent } from 'node:https';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { served } from '../webhook/connection-attacks.ts';
import { deployedBundles } from './deployed-bundle.ts';
import { deployedWebhook } from '../webhook/deployed-webhook.ts';
import { admissionCall, ordinaryBody, processMemory, type Answer } from '../webhook/hostile-load.ts';
import { SERVER_NAME } from '../webhook/tls-certs.ts';
import { describeSiege, probeSiege, tenants, type TenantShape } from './kubelet-probes.ts';

/**
 * Issue 37, the webhook's port: tenants' pods keep connections to it from many addresses (idle before
 * or after TLS, slow-sending after TLS, connect-and-close), each reopened as soon as it is closed,
 * while the API server sends ordinary pods from its own address on keep-alive connections (127.0.0.1,
 * one every 50 ms, retried on 429 within timeoutSeconds) and the kubelet probes /healthz and /readyz
 * over HTTPS from the node's (127.0.0.254). The API server's calls are answered ≥ 99 %, the
 * kubelet's probes ≥ 99 %, and the webhook's peak resident set stays under three quarters of its
 * Deployment's memory limit. The built bundle, with the Deployment's NODE_OPTIONS; a fresh webhook per shape.
 */

const deployed = deployedWebhook();
const CEILING_MIB = deployed.memoryLimitMiB * 0.75;
const ANSWERED = 0.99;
/**
 * The kubelet's probes of the webhook, with the Deployment's timeoutSeconds (3 s: a dropped SYN is
 * retried after 1 s), are answered as the agent's are.
 */
const PROBES_ANSWERED = 0.99;
const NODE = '127.0.0.254';

/** A shape, and for its dribbling bodies: a byte every `slowMs`, bodies of `bodyBytes`. */
type LaneShape = TenantShape & { readonly slowMs?: number; readonly bodyBytes?: number };

const busy = (shape: TenantShape, slowMs: number, bodyBytes: number): LaneShape => ({
  ...shape,
  name: `${shape.name} (a byte every ${slowMs} ms of ${bodyBytes}-byte bodies)`,
  slowMs,
  bodyBytes,
});

const SHAPES: LaneShape[] = [
  tenants([8, 32, 'tls-idle']),
  tenants([32, 8, 'idle']),
  tenants([64, 4, 'tls-slow']),
  tenants([64, 4, 'churn']),
  tenants([16, 8, 'tls-idle'], [16, 8, 'idle'], [16, 4, 'tls-slow'], [16, 4, 'churn']),
  // Every connection busy with a request whose body dribbles in, the next one's headers sent with its
  // last byte: never silent, never idle, never past the request timeout. From one address, or a few.
  busy(tenants([1, 256, 'tls-busy']), 150, 40),
  busy(tenants([4, 64, 'tls-busy']), 50, 10),
  // Bodies that never end: each request cut at the request timeout, its connection reopened.
  busy(tenants([16, 16, 'tls-busy']), 300, 1000),
  busy(tenants([1, 128, 'tls-busy'], [8, 16, 'tls-idle'], [8, 8, 'churn']), 100, 40),
  // A keep-alive pool, one request each then idle, as the API server's, filling the port, while
  // newcomers that close themselves within their grace keep arriving: from a few addresses or many.
  tenants([5, 51, 'tls-pool'], [8, 32, 'blink']),
  tenants([255, 1, 'tls-pool'], [1, 256, 'blink']),
];

const webhook = deployedBundles();

describe('the webhook’s port under tenants’ connections from many addresses', { timeout: 300_000 }, () => {
  for (const shape of SHAPES)
    it(`${shape.name} connections, each reopened as soon as closed: the API server's calls answered ≥ 99 % and the kubelet's probes ≥ 99 %, memory bounded`, async (t) => {
      const w = await webhook();
      let gone = false;
      void w.gone.then(() => (gone = true));
      const calls: Answer[] = [];
      const f = await probeSiege({
        target: {
          host: '127.0.0.1',
          port: w.port,
          tls: true,
          from: NODE,
          timeoutMs: deployed.probeTimeoutSeconds * 1000,
        },
        floods: [
          {
            host: '127.0.0.1',
            port: w.port,
            sources: shape.sources,
            servername: SERVER_NAME,
            ...(shape.slowMs === undefined ? {} : { slowMs: shape.slowMs }),
            ...(shape.bodyBytes === undefined ? {} : { bodyBytes: shape.bodyBytes }),
          },
        ],
        paths: ['/healthz', '/readyz'],
        everyMs: 50,
        probes: 150,
        maxMs: 20_000,
        // The API server: its keep-alive pool, an ordinary pod every 50 ms while the probes go on.
        alongside: async (probing) => {
          const pool = new Agent({ keepAlive: true });
          const pending: Promise<void>[] = [];
          for (let n = 0; probing() && !gone; n++) {
            pending.push(
              admissionCall(w.port, w.ca, pool, ordinaryBody(n), deployed.timeoutSeconds * 1000).then((a) => {
                calls.push(a);
              }),
            );
            await sleep(50);
          }
          await Promise.all(pending);
          pool.destroy();
        },
        sample: () => ({ privateMiB: processMemory(w.pid).anonymous }),
      });
      const peakMiB = gone ? NaN : processMemory(w.pid).peak;
      const ms = calls.map((a) => a.ms).sort((a, b) => a - b);
      t.diagnostic(
        `${describeSiege(shape.name, f)}; API server's calls served ${served(calls)}/${calls.length}, ms p50 ${ms[Math.floor(ms.length / 2)]?.toFixed(0)} max ${ms.at(-1)?.toFixed(0)}; peak RSS ${peakMiB.toFixed(0)} MiB (VmHWM)`,
      );
      assert.equal(gone, false, `the webhook died: ${w.stderr()}`);
      const lanes = shape.sources.reduce((n, s) => n + s.count, 0);
      const opened = f.floods.reduce((n, x) => n + x.opened, 0);
      assert.ok(opened >= lanes, `the flood opened ${opened} of its ${lanes} connections`);
      assert.ok(calls.length >= 50 && f.probes >= 100, `${calls.length} calls and ${f.probes} probes`);
      assert.ok(
        served(calls) >= calls.length * ANSWERED,
        `${served(calls)} of ${calls.length} ordinary pods injected: ${JSON.stringify(calls.filter((a) => a.status !== 200).slice(0, 3))}`,
      );
      assert.ok(
        f.answered >= f.probes * PROBES_ANSWERED,
        `${f.answered} of ${f.probes} probes answered: ${JSON.stringify(f.failures)}`,
      );
      assert.ok(peakMiB < CEILING_MIB, `peak RSS ${peakMiB} MiB, past ${CEILING_MIB} MiB`);
      await w.stop();
    });
});
