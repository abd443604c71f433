/**
 * One agent container as the webhook renders it, run by podman for bench/agent-memory.ts: the agent
 * image, read-only root, no capabilities (test/image/podman.ts), the memory limit and NODE_OPTIONS a pod
 * gets, the init or sidecar command, a tmpfs volume at /secrets, and its own cgroup parent, so its
 * memory cgroup can be found (and watched) from the moment podman creates it.
 */
import { spawn } from 'node:child_process';
import { Worker } from 'node:worker_threads';
import type { ContainerEngine } from '../images/container-engine.ts';
import { emptyDirOnTmpfs, podmanRunArgs } from '../test/image/podman.ts';
import { GCP_INIT_COMMAND, SIDECAR_COMMAND } from '../webhook/render/agent-containers.ts';
import { nodeOptions, quantityBytes } from '../webhook/agent-sizing.ts';
import type { PeakFigures, PeakRequest } from './cgroup-peak-worker.ts';
import type { CgroupLayout } from './memory-cgroup.ts';

export interface AgentSpec {
  readonly image: string;
  readonly mode: 'init' | 'sidecar';
  /** Whether the pod reads GCP: its init container then runs GCP_INIT_COMMAND. */
  readonly gcp: boolean;
  /** The container's memory limit (a quantity); NODE_OPTIONS follows it, as the webhook renders it. */
  readonly memoryLimit: string;
  /** The pod's secrets volume sizeLimit, which the webhook's NODE_OPTIONS also counts. */
  readonly volumeSizeLimit: string;
  readonly env: Readonly<Record<string, string>>;
  /** The container's command instead of the mode's (bench/small-sidecar.ts). */
  readonly command?: readonly string[];
  /** More host directories to mount. */
  readonly mounts?: readonly {
    readonly host: string;
    readonly container: string;
    readonly readOnly?: boolean;
  }[];
}

export interface AgentContainer {
  /** The cgroup parent (relative to each hierarchy's root) the container's cgroup is made in. */
  readonly parent: string;
  /** The host directory mounted at /secrets. */
  readonly volume: string;
  readonly exited: Promise<number | null>;
  ended(): boolean;
  stderr(): string;
  /** SIGTERM (as the kubelet stops a container) unless told otherwise, waits for the end, removes the volume. */
  stop(signal?: 'SIGTERM' | 'SIGKILL'): Promise<void>;
}

export function startAgentContainer(
  engine: ContainerEngine,
  spec: AgentSpec,
  parent: string,
  name: string,
): AgentContainer {
  const volume = emptyDirOnTmpfs();
  const entrypoint =
    spec.command ?? (spec.mode === 'sidecar' ? SIDECAR_COMMAND : spec.gcp ? GCP_INIT_COMMAND : undefined);
  const args = podmanRunArgs(
    {
      image: spec.image,
      network: 'host',
      env: {
        AGENT_MODE: spec.mode,
        SECRETS_DIR: '/secrets',
        LOG_LEVEL: 'warn',
        NODE_OPTIONS: nodeOptions(spec.memoryLimit, spec.volumeSizeLimit),
        ...spec.env,
      },
      mounts: [{ host: volume.path, container: '/secrets' }, ...(spec.mounts ?? [])],
      ...(entrypoint ? { entrypoint } : {}),
      // As the kubelet sets it: the limit, and no swap beyond it.
      memory: String(quantityBytes(spec.memoryLimit)),
    },
    name,
  );
  args.splice(1, 0, '--cgroup-parent', `/${parent}`);
  const child = spawn('podman', args, { env: engine.env, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  let ended = false;
  const exited = new Promise<number | null>((resolve) =>
    child.on('close', (code) => {
      ended = true;
      resolve(code);
    }),
  );
  return {
    parent,
    volume: volume.path,
    exited,
    ended: () => ended,
    stderr: () => stderr,
    async stop(signal = 'SIGTERM') {
      if (!ended) await engine.runAsync(['kill', '--signal', signal, name], { check: false });
      await exited;
      volume[Symbol.dispose]();
    },
  };
}

/**
 * Samples the cgroup of the container podman makes under `parent` every `periodMs`, in a worker
 * thread (cgroup-peak-worker.ts), until `stop()` or the container's end. Resolves once the worker
 * is polling, so a container started after it is seen from its first milliseconds.
 */
export async function watchPeak(
  layout: CgroupLayout,
  parent: string,
  periodMs: number,
): Promise<{ readonly result: Promise<PeakFigures>; stop(): Promise<PeakFigures> }> {
  const stop = new SharedArrayBuffer(4);
  const worker = new Worker(new URL('./cgroup-peak-worker.ts', import.meta.url), {
    workerData: { layout, parent, periodMs, stop } satisfies PeakRequest,
  });
  let ready!: () => void;
  const polling = new Promise<void>((r) => (ready = r));
  const result = new Promise<PeakFigures>((resolve, reject) => {
    worker.on('message', (m: PeakFigures | 'polling') => (m === 'polling' ? ready() : resolve(m)));
    worker.once('error', reject);
  });
  await Promise.race([polling, result]);
  return {
    result,
    stop: () => {
      const flag = new Int32Array(stop);
      Atomics.store(flag, 0, 1);
      Atomics.notify(flag, 0);
      return result;
    },
  };
}

/** The agent's V8 heap (used, committed) and external memory, as it reports them on /metrics (prom-client). */
export async function agentHeapFigures(
  port: number,
): Promise<{ heapUsedMiB: number; heapTotalMiB: number; externalMiB: number }> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const metric = (name: string) =>
    Number(new RegExp(`^secret_agent_process_${name} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN) / 1048576;
  return {
    heapUsedMiB: metric('nodejs_heap_size_used_bytes'),
    heapTotalMiB: metric('nodejs_heap_size_total_bytes'),
    externalMiB: metric('nodejs_external_memory_bytes'),
  };
}
