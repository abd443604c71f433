/**
 * The images, as `npm run images` built them: each one's size over the runtime base (what the
 * Dockerfiles add; the target is the bundle and nothing else), and a container's cold start, `podman
 * run` to exit with a read-only root, for the agent image fetching one AWS secret from moto against
 * the base image running `node -e 0`, interleaved in the same run.
 */
import { spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { requirePodman } from '../images/container-engine.ts';
import { join } from 'node:path';
import { IMAGE_NAMES, readImagesManifest, ROOT } from '../images/manifest.ts';
import { readPlatforms } from '../test/image/oci-archive.ts';
import { podmanRunArgs } from '../test/image/podman.ts';

export interface ImageFigures {
  readonly engine: string;
  readonly baseMiB: number;
  readonly images: {
    readonly name: string;
    readonly MiB: number;
    readonly addedMiB: number;
    readonly vsBase: number;
  }[];
  /** Every platform of each image: its size, its base's, and what a node pulls (compressed layers and config). */
  readonly platforms: readonly {
    readonly name: string;
    readonly platform: string;
    readonly MiB: number;
    readonly baseMiB: number;
    readonly pulledMiB: number;
  }[];
  readonly coldStart: {
    readonly baseMs: number;
    readonly agentMs: number;
    readonly vsBase: number;
    readonly rounds: number;
  };
}

const mib = (bytes: number) => Number((bytes / 1048576).toFixed(1));

export async function benchImages(
  motoEndpoint: string,
  secretRef: string,
  rounds: number,
): Promise<ImageFigures> {
  const podman = requirePodman();
  const manifest = readImagesManifest();
  const volume = mkdtempSync('/dev/shm/secret-agent-bench-image-');
  chmodSync(volume, 0o777);
  // Exactly as the image tests run containers (read-only root, no capabilities, no new privileges).
  const runs = {
    base: podmanRunArgs(
      { image: manifest.runtime.ref, network: 'host', entrypoint: ['/nodejs/bin/node', '-e', '0'] },
      `secret-agent-bench-base-${process.pid}`,
    ),
    agent: podmanRunArgs(
      {
        image: manifest.images.agent.ref,
        network: 'host',
        mounts: [{ host: volume, container: '/secrets' }],
        env: {
          AWS_ACCESS_KEY_ID: 'bench',
          AWS_SECRET_ACCESS_KEY: 'bench',
          AWS_REGION: 'us-east-1',
          LOG_LEVEL: 'silent',
          AWS_ENDPOINT_URL_SECRETS_MANAGER: motoEndpoint,
          SECRETS_DIR: '/secrets',
          SECRET_0_REF: secretRef,
          SECRET_0_FILENAME: 'one',
        },
      },
      `secret-agent-bench-agent-${process.pid}`,
    ),
  };
  const time = (args: string[]) =>
    new Promise<number>((resolve, reject) => {
      const start = process.hrtime.bigint();
      const child = spawn('podman', args, { env: podman.env, stdio: ['ignore', 'ignore', 'pipe'] });
      let stderr = '';
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      child.on('close', (code) =>
        code === 0
          ? resolve(Number(process.hrtime.bigint() - start) / 1e6)
          : reject(new Error(`podman ${args.join(' ')} exited ${code}: ${stderr}`)),
      );
    });
  const samples = { base: [] as number[], agent: [] as number[] };
  try {
    await time(runs.base);
    await time(runs.agent);
    for (let i = 0; i < rounds; i++) {
      samples.base.push(await time(runs.base));
      samples.agent.push(await time(runs.agent));
    }
  } finally {
    rmSync(volume, { recursive: true, force: true });
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const baseMs = median(samples.base);
  const agentMs = median(samples.agent);
  return {
    engine: manifest.engine,
    baseMiB: mib(manifest.runtime.size),
    images: IMAGE_NAMES.map((name) => {
      const size = manifest.images[name].size;
      return {
        name,
        MiB: mib(size),
        addedMiB: mib(size - manifest.runtime.size),
        vsBase: Number((size / manifest.runtime.size).toFixed(3)),
      };
    }),
    platforms: IMAGE_NAMES.flatMap((name) => {
      const pulled = new Map(
        readPlatforms(join(ROOT, manifest.images[name].archive)).map((p) => [
          p.platform,
          p.manifest.config.size + p.manifest.layers.reduce((a, l) => a + l.size, 0),
        ]),
      );
      return manifest.images[name].platforms.map((p) => ({
        name,
        platform: p.platform,
        MiB: mib(p.size),
        baseMiB: mib(manifest.runtimes[p.platform]?.size ?? NaN),
        pulledMiB: mib(pulled.get(p.platform) ?? NaN),
      }));
    }),
    coldStart: {
      baseMs: Math.round(baseMs),
      agentMs: Math.round(agentMs),
      vsBase: Number((agentMs / baseMs).toFixed(2)),
      rounds,
    },
  };
}

export function formatImageFigures(f: ImageFigures): string {
  return [
    `images (${f.engine}), over the runtime base (${f.baseMiB} MiB)\n`,
    '| image | MiB | added | × base |\n| --- | ---: | ---: | ---: |',
    ...f.images.map((i) => `| ${i.name} | ${i.MiB} | ${i.addedMiB} | ${i.vsBase} |`),
    `\ncontainer cold start (podman run, read-only, to exit), ${f.coldStart.rounds} interleaved rounds, medians\n`,
    '| case | ms | × base |\n| --- | ---: | ---: |',
    `| base image, node -e 0 (floor) | ${f.coldStart.baseMs} | 1 |`,
    `| agent image, 1 AWS secret | ${f.coldStart.agentMs} | ${f.coldStart.vsBase} |`,
  ].join('\n');
}
