import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { assertNoCanary } from '../support/canary.ts';
import { FaultInjectingProxy } from '../support/fault-injecting-proxy.ts';
import { MOTO_ENV, motoSecrets, startMoto, type Moto } from '../support/moto.ts';
import { eventually, type RunningAgent } from '../support/run-agent.ts';

/** moto behind a fault-injecting proxy, and a client that talks to moto directly (test set-up). */
export interface Backend {
  readonly proxy: FaultInjectingProxy;
  put(name: string, value: string): Promise<void>;
  /** Env for the built agent, its Secrets Manager endpoint being the proxy. */
  env(dir: string, extra: Record<string, string>): Record<string, string>;
  stop(): Promise<void>;
}

export async function startBackend(): Promise<Backend> {
  const moto: Moto = await startMoto();
  const proxy = await FaultInjectingProxy.start(moto.endpoint);
  const secrets = motoSecrets(moto.endpoint);
  return {
    proxy,
    put: secrets.put,
    env: (dir, extra) => ({
      ...MOTO_ENV,
      AWS_ENDPOINT_URL_SECRETS_MANAGER: proxy.endpoint,
      SECRETS_DIR: dir,
      ...extra,
    }),
    async stop() {
      secrets.destroy();
      await proxy.close();
      await moto.stop();
    },
  };
}

export function readSecret(dir: string, name: string): string | undefined {
  try {
    return readFileSync(join(dir, name), 'utf8');
  } catch {
    return undefined;
  }
}

/** The sidecar's probe port, from its start-up log line (AGENT_HTTP_ADDR asks for port 0). */
export async function httpPort(agent: RunningAgent): Promise<number> {
  const line = await agent.waitForLog((l) => l.msg === 'serving /healthz, /readyz, /metrics');
  return Number(String(line.addr).split(':').pop());
}

export async function httpGet(port: number, path: string): Promise<{ status: number; body: string }> {
  const res = await fetch(`http://127.0.0.1:${port}${path}`);
  const body = await res.text();
  assertNoCanary(body, `GET ${path}`);
  return { status: res.status, body };
}

export async function waitReady(port: number): Promise<void> {
  await eventually(
    async () => ((await httpGet(port, '/readyz')).status === 200 ? true : undefined),
    'readiness',
  );
}

/** One metric sample's value, or 0 when the series does not exist yet. */
export function metric(text: string, series: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line ? Number(line.slice(series.length + 1)) : 0;
}

/** Resolves once the process is gone (exited by itself): init mode ends on its own. */
export function exited(agent: RunningAgent, what: string, timeoutMs = 30_000): Promise<true> {
  return eventually(
    () => {
      try {
        process.kill(agent.pid, 0);
        return undefined;
      } catch {
        return true;
      }
    },
    what,
    timeoutMs,
  );
}
