import {
  CreateSecretCommand,
  PutSecretValueCommand,
  SecretsManagerClient,
} from '@aws-sdk/client-secrets-manager';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';

export interface Moto {
  readonly endpoint: string;
  readonly port: number;
  stop(): Promise<void>;
}

const INSTALL_HINT =
  "moto is not importable by python3. These tests need the real moto server: install it with `pip install 'moto[server]'` (it ships on this project's machines).";

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() =>
        typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port')),
      );
    });
  });
}

/**
 * Starts the real moto server on a free loopback port; fails loudly if moto is missing. `env` adds
 * moto settings, e.g. INITIAL_NO_AUTH_ACTION_COUNT to make it check SigV4 signatures (motoIamUser).
 */
export async function startMoto(env: Readonly<Record<string, string>> = {}): Promise<Moto> {
  const probe = spawnSync('python3', ['-c', 'import moto.server'], { encoding: 'utf8' });
  if (probe.status !== 0) throw new Error(`${INSTALL_HINT}\n${probe.stderr ?? ''}`);
  const port = await freePort();
  const child: ChildProcess = spawn('python3', ['-m', 'moto.server', '-H', '127.0.0.1', '-p', String(port)], {
    stdio: 'ignore',
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env },
  });
  const endpoint = `http://127.0.0.1:${port}`;
  const started = Date.now();
  for (;;) {
    if (child.exitCode !== null) throw new Error(`moto exited with ${child.exitCode} on start`);
    try {
      const res = await fetch(`${endpoint}/moto-api/`);
      await res.arrayBuffer();
      break;
    } catch {
      if (Date.now() - started > 20_000) {
        child.kill();
        throw new Error('moto did not start within 20 s');
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  return {
    endpoint,
    port,
    stop: () =>
      new Promise((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}

/** Credentials moto accepts; never real ones. */
export const MOTO_ENV = {
  AWS_ACCESS_KEY_ID: 'testing',
  AWS_SECRET_ACCESS_KEY: 'testing',
  AWS_REGION: 'us-east-1',
} as const;

/** Test set-up through the real SDK: stores secrets in moto (creating each on first use). */
export interface MotoSecrets {
  put(name: string, value: string): Promise<void>;
  destroy(): void;
}

export function motoSecrets(endpoint: string): MotoSecrets {
  const sm = new SecretsManagerClient({
    region: MOTO_ENV.AWS_REGION,
    endpoint,
    credentials: { accessKeyId: 'testing', secretAccessKey: 'testing' },
  });
  const known = new Set<string>();
  return {
    async put(name, value) {
      if (known.has(name)) await sm.send(new PutSecretValueCommand({ SecretId: name, SecretString: value }));
      else await sm.send(new CreateSecretCommand({ Name: name, SecretString: value }));
      known.add(name);
    },
    destroy: () => sm.destroy(),
  };
}
