/**
 * Sidecar figures against the real moto server (through a counting proxy):
 *   calls per unchanged cycle with 100 AWS secrets   (target ≤ 5: BatchGetSecretValue takes 20)
 *   rotation propagation: backend change → app told  (target ≤ interval + 250 ms)
 *   RSS and open fds of a sidecar with 100 secrets at a 1 s interval over a soak (target ≤ 60 MiB, flat)
 */
import {
  CreateSecretCommand,
  PutSecretValueCommand,
  SecretsManagerClient,
} from '@aws-sdk/client-secrets-manager';
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { FaultProxy } from '../test/support/fault-proxy.ts';
import type { Moto } from '../test/support/moto.ts';
import { WEBHOOK_SETTINGS } from '../webhook/config/settings.ts';
import { nodeOptions } from '../webhook/agent-sizing.ts';
import { SIDECAR_V8_FLAGS } from '../agent/contract/sidecar-v8-flags.ts';

const root = new URL('../', import.meta.url).pathname;
const INTERVAL_MS = 1000;

export interface SidecarFigures {
  readonly callsPerUnchangedCycle: number;
  readonly propagationMs: { readonly median: number; readonly max: number; readonly samples: number };
  readonly rss: {
    readonly startMiB: number;
    readonly endMiB: number;
    readonly maxMiB: number;
    readonly seconds: number;
  };
  readonly openFds: { readonly start: number; readonly end: number };
}

export async function benchSidecar(moto: Moto, soakSeconds: number): Promise<SidecarFigures> {
  const sm = new SecretsManagerClient({
    region: 'us-east-1',
    endpoint: moto.endpoint,
    credentials: { accessKeyId: 'bench', secretAccessKey: 'bench' },
  });
  for (let i = 0; i < 100; i++)
    await sm.send(new CreateSecretCommand({ Name: `soak/${i}`, SecretString: `soak-${i}-v0` }));
  const proxy = await FaultProxy.start(moto.endpoint);

  // The app: records when each rotation reached it.
  const told: number[] = [];
  const app = createServer((req, res) => {
    told.push(performance.now());
    req.resume();
    res.end();
  });
  await new Promise<void>((r) => app.listen(0, '127.0.0.1', r));

  const dir = mkdtempSync('/dev/shm/secret-agent-soak-');
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '',
    HOME: '/tmp',
    AWS_ACCESS_KEY_ID: 'bench',
    AWS_SECRET_ACCESS_KEY: 'bench',
    AWS_REGION: 'us-east-1',
    AWS_ENDPOINT_URL_SECRETS_MANAGER: proxy.endpoint,
    AGENT_MODE: 'sidecar',
    SECRETS_DIR: dir,
    REFRESH_INTERVAL: `${INTERVAL_MS}ms`,
    AGENT_HTTP_ADDR: '127.0.0.1:0',
    LOG_LEVEL: 'warn',
    // As the webhook renders the agent container: heap capped at half the default memory limit.
    NODE_OPTIONS: nodeOptions(
      WEBHOOK_SETTINGS.AGENT_MEMORY_LIMIT.default!,
      WEBHOOK_SETTINGS.SECRETS_VOLUME_SIZE_LIMIT.default!,
    ),
    ROTATION_HTTP_URL: `POST http://127.0.0.1:${(app.address() as AddressInfo).port}/reload`,
  };
  for (let i = 0; i < 100; i++) {
    env[`SECRET_${i}_REF`] = `aws:soak/${i}`;
    env[`SECRET_${i}_FILENAME`] = `s${i}`;
  }
  const agent = spawn(process.execPath, [...SIDECAR_V8_FLAGS, join(root, 'dist/agent.js')], {
    env,
    stdio: 'ignore',
  });
  const pid = agent.pid!;
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  const rssMiB = () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;
  const fds = () => readdirSync(`/proc/${pid}/fd`).length;

  try {
    while (readdirSync(dir).length < 101) await sleep(50);

    // Calls per unchanged cycle: count what reaches the backend over several cycles.
    await sleep(2 * INTERVAL_MS);
    proxy.reset();
    const cycles = 10;
    await sleep(cycles * INTERVAL_MS);
    const callsPerUnchangedCycle = proxy.requests.length / cycles;

    // Propagation: change one secret, time until the app is told.
    const propagation: number[] = [];
    for (let v = 1; v <= 8; v++) {
      const before = told.length;
      const start = performance.now();
      await sm.send(
        new PutSecretValueCommand({ SecretId: `soak/${v % 100}`, SecretString: `soak-${v % 100}-v${v}` }),
      );
      while (told.length === before) await sleep(5);
      propagation.push(told[before]! - start);
      await sleep(300);
    }

    // Soak: RSS and fds while it keeps refreshing (a rotation every 10 s keeps the write path hot).
    const started = Date.now();
    const rss: number[] = [];
    const startFds = fds();
    for (let tick = 0; Date.now() - started < soakSeconds * 1000; tick++) {
      rss.push(rssMiB());
      if (tick % 10 === 0)
        await sm.send(new PutSecretValueCommand({ SecretId: 'soak/99', SecretString: `soak-99-t${tick}` }));
      await sleep(1000);
    }
    const endFds = fds();
    const sorted = [...propagation].sort((a, b) => a - b);
    const settled = rss.slice(Math.min(10, Math.floor(rss.length / 4)));
    const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    const quarter = Math.max(1, Math.floor(settled.length / 4));
    return {
      callsPerUnchangedCycle,
      propagationMs: {
        median: round(sorted[Math.floor(sorted.length / 2)]!),
        max: round(sorted.at(-1)!),
        samples: sorted.length,
      },
      rss: {
        startMiB: round(mean(settled.slice(0, quarter))),
        endMiB: round(mean(settled.slice(-quarter))),
        maxMiB: round(Math.max(...rss)),
        seconds: soakSeconds,
      },
      openFds: { start: startFds, end: endFds },
    };
  } finally {
    agent.kill('SIGTERM');
    await new Promise((r) => agent.once('close', r));
    app.close();
    await proxy.close();
    sm.destroy();
    rmSync(dir, { recursive: true, force: true });
  }
}

const round = (x: number) => Math.round(x * 10) / 10;
