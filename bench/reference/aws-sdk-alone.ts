/**
 * A reference, not the product: the AWS SDK (@aws-sdk/client-secrets-manager) used the plain way, with
 * nothing of ours around it. `init`: one GetSecretValue, the value written (temp file, rename), exit.
 * `sidecar`: the same once a second, and a /healthz server. bench/run.ts bundles it (one CommonJS
 * file: bench/reference/build-references.ts) and prints it beside the agent, so what the SDK alone
 * costs is measured in the same run as what the agent costs.
 * Env: the SDK's (AWS_REGION, credentials, AWS_ENDPOINT_URL_SECRETS_MANAGER), SECRETS_DIR, BENCH_SECRET_ID.
 */
import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { renameSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';

const dir = process.env.SECRETS_DIR ?? '';
const client = new SecretsManagerClient({});

async function fetchOnce(): Promise<void> {
  const { SecretString } = await client.send(
    new GetSecretValueCommand({ SecretId: process.env.BENCH_SECRET_ID ?? '' }),
  );
  writeFileSync(`${dir}/.one.tmp`, SecretString ?? '');
  renameSync(`${dir}/.one.tmp`, `${dir}/one`);
}

if (process.argv[2] === 'sidecar') {
  createServer((_req, res) => res.end('ok')).listen(0, '127.0.0.1');
  setInterval(() => void fetchOnce(), 1000);
} else void fetchOnce().then(() => client.destroy());
