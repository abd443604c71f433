/**
 * The three backends an agent container reads in bench/agent-memory.ts, each serving the secrets of
 * one agent (its `label`) and able to rotate them: AWS through the real moto server, GCP and Vault
 * through the local wire-level fakes the tests use, all on this host's loopback (containers reach it
 * with --network host).
 */
import {
  CreateSecretCommand,
  PutSecretValueCommand,
  SecretsManagerClient,
} from '@aws-sdk/client-secrets-manager';
import { startGcpSecretManagerFake } from '../test/fakes/gcp-secret-manager.ts';
import { FakeVault } from '../test/fakes/vault.ts';
import type { Moto } from '../test/support/moto.ts';

export type BackendName = 'AWS' | 'GCP' | 'Vault';
export const BACKEND_NAMES: readonly BackendName[] = ['AWS', 'GCP', 'Vault'];

/** Each value's size unless said: a token or a small certificate, not a password. */
export const VALUE_BYTES = 1024;
/** The largest value AWS Secrets Manager (and GCP) store: 64 KiB. */
export const LARGE_VALUE_BYTES = 65_536;

/** Secret `i` of agent `label` at rotation `round` (0: as created), `bytes` long. */
export const secretValue = (label: string, i: number, round: number, bytes = VALUE_BYTES): string =>
  `${label}-${i}-r${round}-`.padEnd(bytes, 'x');

export interface Backend {
  readonly name: BackendName;
  /** Creates the `count` secrets of one agent, each `bytes` long. */
  create(label: string, count: number, bytes?: number): Promise<void>;
  /** The agent's env for them: references (SECRET_<i>_REF, FILENAME s<i>) and the backend's address. */
  env(label: string, count: number, mode: 'init' | 'sidecar'): Record<string, string>;
  /** Sets every secret of `label` to round `round`'s value. */
  rotate(label: string, count: number, round: number, bytes?: number): Promise<void>;
}

export interface Backends {
  readonly all: Readonly<Record<BackendName, Backend>>;
  stop(): Promise<void>;
}

const references = (count: number, ref: (i: number) => string) => {
  const env: Record<string, string> = {};
  for (let i = 0; i < count; i++) {
    env[`SECRET_${i}_REF`] = ref(i);
    env[`SECRET_${i}_FILENAME`] = `s${i}`;
  }
  return env;
};

export async function startBackends(moto: Moto): Promise<Backends> {
  const sm = new SecretsManagerClient({
    region: 'us-east-1',
    endpoint: moto.endpoint,
    credentials: { accessKeyId: 'bench', secretAccessKey: 'bench' },
  });
  // Ten requests at a time: moto answers one at a time anyway.
  const each = async (count: number, fn: (i: number) => Promise<unknown>) => {
    for (let i = 0; i < count; i += 10)
      await Promise.all(Array.from({ length: Math.min(10, count - i) }, (_, k) => fn(i + k)));
  };
  const aws: Backend = {
    name: 'AWS',
    create: (label, count, bytes) =>
      each(count, (i) =>
        sm.send(
          new CreateSecretCommand({
            Name: `mem/${label}/${i}`,
            SecretString: secretValue(label, i, 0, bytes),
          }),
        ),
      ),
    env: (label, count) => ({
      AWS_ACCESS_KEY_ID: 'bench',
      AWS_SECRET_ACCESS_KEY: 'bench',
      AWS_REGION: 'us-east-1',
      AWS_ENDPOINT_URL_SECRETS_MANAGER: moto.endpoint,
      ...references(count, (i) => `aws:mem/${label}/${i}`),
    }),
    rotate: (label, count, round, bytes) =>
      each(count, (i) =>
        sm.send(
          new PutSecretValueCommand({
            SecretId: `mem/${label}/${i}`,
            SecretString: secretValue(label, i, round, bytes),
          }),
        ),
      ),
  };

  const fake = await startGcpSecretManagerFake();
  const gcp: Backend = {
    name: 'GCP',
    create: async (label, count, bytes) => {
      for (let i = 0; i < count; i++)
        fake.addVersion('bench-project', `${label}-${i}`, secretValue(label, i, 0, bytes));
    },
    // Each mode's default transport, as the webhook leaves it: REST for init, gRPC for a sidecar.
    env: (label, count, mode) => ({
      GCP_SECRET_MANAGER_ENDPOINT: mode === 'init' ? fake.restEndpoint : fake.endpoint,
      GCE_METADATA_HOST: '127.0.0.1:9',
      GOOGLE_APPLICATION_CREDENTIALS: '/nonexistent/adc.json',
      ...references(count, (i) => `projects/bench-project/secrets/${label}-${i}`),
    }),
    rotate: async (label, count, round, bytes) => {
      for (let i = 0; i < count; i++)
        fake.addVersion('bench-project', `${label}-${i}`, secretValue(label, i, round, bytes));
    },
  };

  const vault = await FakeVault.start();
  vault.mountKv('secret', 2);
  vault.policy('bench', { 'secret/data/*': ['read'] });
  const token = vault.createToken({ policies: ['bench'], ttlSec: 86_400 });
  const vaultBackend: Backend = {
    name: 'Vault',
    create: async (label, count, bytes) => {
      for (let i = 0; i < count; i++)
        vault.putKv(`secret/${label}-${i}`, { value: secretValue(label, i, 0, bytes) });
    },
    env: (label, count) => ({
      VAULT_ADDR: vault.addr,
      VAULT_TOKEN: token,
      ...references(count, (i) => `vault:secret/data/${label}-${i}#value`),
    }),
    rotate: async (label, count, round, bytes) => {
      for (let i = 0; i < count; i++)
        vault.putKv(`secret/${label}-${i}`, { value: secretValue(label, i, round, bytes) });
    },
  };

  return {
    all: { AWS: aws, GCP: gcp, Vault: vaultBackend },
    async stop() {
      sm.destroy();
      await fake.stop();
      await vault.stop();
    },
  };
}
