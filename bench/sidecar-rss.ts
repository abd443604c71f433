/**
 * A one-secret sidecar's resident memory against its floor: an idle Node (a timer, nothing loaded)
 * with the same NODE_OPTIONS the webhook renders, sampled the same way in the same run; beside it the
 * references (bench/reference/): a library-free Node sidecar, and the AWS SDK alone. Both settle
 * for a few seconds, then RSS is sampled once a second; the median is the figure.
 */
import { CreateSecretCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { Moto } from '../test/support/moto.ts';
import { WEBHOOK_SETTINGS } from '../webhook/config/settings.ts';
import { nodeOptions } from '../webhook/agent-sizing.ts';
import { SIDECAR_V8_FLAGS } from '../agent/contract/sidecar-v8-flags.ts';

const root = new URL('../', import.meta.url).pathname;

export interface SidecarRssFigures {
  readonly floorMiB: number;
  readonly oneSecretMiB: number;
  readonly oneSecretVsFloor: number;
  /** The references (bench/reference/), as sidecars with the same NODE_OPTIONS and V8 flags. */
  readonly bareNodeMiB: number;
  readonly bareNodeVsFloor: number;
  readonly awsSdkAloneMiB: number;
  readonly awsSdkAloneVsFloor: number;
  readonly seconds: number;
}

/** Median VmRSS (MiB) of a process, sampled once a second after `settleSeconds`. */
async function medianRss(
  argv: string[],
  env: Record<string, string>,
  settleSeconds: number,
  samples: number,
) {
  const child = spawn(process.execPath, argv, { env, stdio: 'ignore' });
  const rss = () =>
    Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'))![1]) / 1024;
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  try {
    await sleep(settleSeconds * 1000);
    const seen: number[] = [];
    for (let i = 0; i < samples; i++) {
      if (child.exitCode !== null)
        throw new Error(`${argv.join(' ')} exited ${child.exitCode} while measured`);
      seen.push(rss());
      await sleep(1000);
    }
    return seen.sort((a, b) => a - b)[Math.floor(seen.length / 2)]!;
  } finally {
    child.kill('SIGTERM');
  }
}

export async function benchSidecarRss(
  moto: Moto,
  references: { readonly bareNode: string; readonly awsSdkAlone: string },
  settleSeconds = 5,
  samples = 15,
): Promise<SidecarRssFigures> {
  const sm = new SecretsManagerClient({
    region: 'us-east-1',
    endpoint: moto.endpoint,
    credentials: { accessKeyId: 'bench', secretAccessKey: 'bench' },
  });
  await sm.send(new CreateSecretCommand({ Name: 'rss/one', SecretString: 'rss-one-v0' }));
  sm.destroy();
  const options = nodeOptions(
    WEBHOOK_SETTINGS.AGENT_MEMORY_LIMIT.default!,
    WEBHOOK_SETTINGS.SECRETS_VOLUME_SIZE_LIMIT.default!,
  );
  const dir = mkdtempSync('/dev/shm/secret-agent-rss-');
  // The references' own volume: the agent refuses to overwrite a file it did not create.
  const referenceDir = mkdtempSync('/dev/shm/secret-agent-rss-reference-');
  try {
    const floorMiB = await medianRss(
      ['-e', 'setInterval(() => {}, 1000)'],
      { PATH: process.env.PATH ?? '', NODE_OPTIONS: options },
      settleSeconds,
      samples,
    );
    const awsEnv = {
      PATH: process.env.PATH ?? '',
      HOME: '/tmp',
      NODE_OPTIONS: options,
      AWS_ACCESS_KEY_ID: 'bench',
      AWS_SECRET_ACCESS_KEY: 'bench',
      AWS_REGION: 'us-east-1',
      AWS_ENDPOINT_URL_SECRETS_MANAGER: moto.endpoint,
      SECRETS_DIR: dir,
      BENCH_SECRET_ID: 'rss/one',
    };
    // The references run as the agent does: same NODE_OPTIONS, same V8 flags.
    const reference = (script: string) =>
      medianRss(
        [...SIDECAR_V8_FLAGS, script, 'sidecar'],
        { ...awsEnv, SECRETS_DIR: referenceDir },
        settleSeconds,
        samples,
      );
    const bareNodeMiB = await reference(references.bareNode);
    const awsSdkAloneMiB = await reference(references.awsSdkAlone);
    // As the webhook runs a sidecar: the plain bundle (SIDECAR_COMMAND), with its NODE_OPTIONS.
    const oneSecretMiB = await medianRss(
      [...SIDECAR_V8_FLAGS, join(root, 'dist/agent.js')],
      {
        ...awsEnv,
        AGENT_MODE: 'sidecar',
        REFRESH_INTERVAL: '1s',
        AGENT_HTTP_ADDR: '127.0.0.1:0',
        LOG_LEVEL: 'silent',
        SECRET_0_REF: 'aws:rss/one',
        SECRET_0_FILENAME: 'one',
      },
      settleSeconds,
      samples,
    );
    const round = (n: number) => Number(n.toFixed(1));
    return {
      floorMiB: round(floorMiB),
      oneSecretMiB: round(oneSecretMiB),
      oneSecretVsFloor: Number((oneSecretMiB / floorMiB).toFixed(2)),
      bareNodeMiB: round(bareNodeMiB),
      bareNodeVsFloor: Number((bareNodeMiB / floorMiB).toFixed(2)),
      awsSdkAloneMiB: round(awsSdkAloneMiB),
      awsSdkAloneVsFloor: Number((awsSdkAloneMiB / floorMiB).toFixed(2)),
      seconds: settleSeconds + samples,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
    rmSync(referenceDir, { recursive: true, force: true });
  }
}
