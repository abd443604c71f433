/**
 * Debian's docker-registry on a free loopback port, plain HTTP, storing under a temp dir: the
 * registry a platform team pushes to, as the publish and release tests use it. skopeo runs against it.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { MissingToolError } from '../../images/container-engine.ts';
import { freePort } from '../support/moto.ts';
import { eventually } from '../support/run-agent.ts';

export const REGISTRY_INSTALL = 'apt-get install -y skopeo docker-registry (Debian; .ci/run installs them)';

export interface ToolRun {
  readonly status: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** A tool run to completion (bounded); a missing tool fails loudly with `install`. */
export function tool(
  command: string,
  args: readonly string[],
  options: {
    install?: string;
    env?: NodeJS.ProcessEnv;
    timeoutMs?: number;
    cwd?: string;
    input?: string;
  } = {},
): ToolRun {
  const r = spawnSync(command, args, {
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
    timeout: options.timeoutMs ?? 600_000,
    env: options.env ?? process.env,
    cwd: options.cwd,
    input: options.input,
  });
  if ((r.error as NodeJS.ErrnoException | undefined)?.code === 'ENOENT')
    throw new MissingToolError(`${command} is not installed`, options.install ?? REGISTRY_INSTALL);
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

export interface LocalRegistry {
  /** 127.0.0.1:PORT */
  readonly host: string;
  /** A directory of the test's own, removed by stop(). */
  readonly dir: string;
  /** sha256:… of what `ref` (host/path:tag or @digest) serves, or undefined when there is no such manifest. */
  digest(ref: string): string | undefined;
  stop(): void;
}

export async function startRegistry(): Promise<LocalRegistry> {
  tool('skopeo', ['--version']);
  tool('docker-registry', ['--version']);
  const dir = mkdtempSync('/var/tmp/secret-agent-registry-');
  const host = `127.0.0.1:${await freePort()}`;
  mkdirSync(join(dir, 'storage'));
  writeFileSync(
    join(dir, 'config.yml'),
    `version: 0.1\nlog: { level: error }\nstorage: { filesystem: { rootdirectory: ${join(dir, 'storage')} } }\nhttp: { addr: "${host}" }\n`,
  );
  const registry: ChildProcess = spawn('docker-registry', ['serve', join(dir, 'config.yml')], {
    stdio: 'ignore',
  });
  await eventually(
    async () =>
      (await fetch(`http://${host}/v2/`).catch(() => undefined))?.status === 200 ? true : undefined,
    'docker-registry answers /v2/',
    30_000,
  );
  return {
    host,
    dir,
    digest(ref) {
      const raw = tool('skopeo', ['inspect', '--raw', '--tls-verify=false', `docker://${ref}`]);
      if (raw.status !== 0) {
        if (/manifest unknown/.test(raw.stderr)) return undefined;
        throw new Error(`skopeo inspect ${ref}: ${raw.stderr}`);
      }
      return `sha256:${createHash('sha256').update(raw.stdout).digest('hex')}`;
    },
    stop() {
      registry.kill();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
