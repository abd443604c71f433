import { spawn } from 'node:child_process';
import { residentBinary } from '../resident/resident-process.ts';
import { assertNoCanary } from './canary.ts';
import { freePort } from './moto.ts';
import { AGENT_JS, eventually } from './run-agent.ts';

/** Which process stays in the sidecar between refreshes (secret-agent.io/sidecar-process). */
export type SidecarProcess = 'small' | 'node';

/** A sidecar serving its port on loopback, as the kubelet and Prometheus reach it. */
export interface ServingSidecar {
  readonly process: SidecarProcess;
  readonly port: number;
  get(path: string): Promise<{ status: number; body: string }>;
  /** A series' value in /metrics, or undefined when it is not there. */
  metric(series: string): Promise<number | undefined>;
  /** One read of /metrics: every series' value as of that moment. */
  sample(): Promise<(series: string) => number | undefined>;
  output(): { stdout: string; stderr: string };
  /** Resolves with the exit code once the sidecar has ended on its own. */
  readonly exited: Promise<number | null>;
  /** SIGTERM; the exit code once it is gone, its output checked for canaries. */
  stop(): Promise<number | null>;
}

/**
 * Starts the BUILT agent (dist/agent.js, `node images/build.ts`) as a sidecar, with nothing of this
 * machine's env but PATH: `small`, the resident (built from source) running it once per refresh, as
 * `/app/resident -- node …` does in the image; `node`, the Node agent itself in sidecar mode.
 */
export async function startServingSidecar(
  process_: SidecarProcess,
  env: Record<string, string>,
): Promise<ServingSidecar> {
  const port = await freePort();
  const argv =
    process_ === 'small'
      ? [residentBinary(), '--', process.execPath, AGENT_JS]
      : [process.execPath, AGENT_JS];
  const child = spawn(argv[0]!, argv.slice(1), {
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      AGENT_MODE: 'sidecar',
      AGENT_HTTP_ADDR: `127.0.0.1:${port}`,
      AGENT_RUN_DEADLINE: '30s',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  const get = async (path: string) => {
    const res = await fetch(`http://127.0.0.1:${port}${path}`);
    return { status: res.status, body: await res.text() };
  };
  await eventually(
    () =>
      get('/healthz').then(
        (r) => (r.status === 200 ? true : undefined),
        () => undefined,
      ),
    `the ${process_} sidecar to listen`,
  );
  const sample = async () => {
    const lines = (await get('/metrics')).body.split('\n');
    return (series: string) => {
      const line = lines.find((l) => l.startsWith(`${series} `));
      return line === undefined ? undefined : Number(line.slice(series.length + 1));
    };
  };
  return {
    process: process_,
    port,
    get,
    sample,
    metric: async (series) => (await sample())(series),
    output: () => ({ stdout, stderr }),
    exited,
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM');
      const code = await exited;
      assertNoCanary(stdout, `${process_} sidecar stdout`);
      assertNoCanary(stderr, `${process_} sidecar stderr`);
      return code;
    },
  };
}
