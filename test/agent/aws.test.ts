import {
  CreateSecretCommand,
  DeleteSecretCommand,
  PutSecretValueCommand,
  SecretsManagerClient,
} from '@aws-sdk/client-secrets-manager';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, beforeEach, describe, it } from 'node:test';
import { canary } from '../support/canary.ts';
import { FaultProxy } from '../support/fault-proxy.ts';
import { MOTO_ENV, startMoto, type Moto } from '../support/moto.ts';
import { memoryDir, runAgent } from '../support/run-agent.ts';

let moto: Moto;
let proxy: FaultProxy;
let sm: SecretsManagerClient;
const values: Record<string, string> = {};

async function createSecret(name: string, value: string | Uint8Array): Promise<string> {
  const out = await sm.send(
    new CreateSecretCommand(
      typeof value === 'string' ? { Name: name, SecretString: value } : { Name: name, SecretBinary: value },
    ),
  );
  return out.ARN!;
}

function agentEnv(dir: string, extra: Record<string, string>): Record<string, string> {
  return {
    ...MOTO_ENV,
    AWS_ENDPOINT_URL_SECRETS_MANAGER: proxy.endpoint,
    SECRETS_DIR: dir,
    INIT_DEADLINE: '20s',
    ...extra,
  };
}

const readText = (dir: string, name: string) => readFileSync(join(dir, name), 'utf8');

describe('AWS provider, through the built agent against moto', () => {
  let dbArn: string;
  before(async () => {
    moto = await startMoto();
    proxy = await FaultProxy.start(moto.endpoint);
    sm = new SecretsManagerClient({
      ...{ region: MOTO_ENV.AWS_REGION },
      endpoint: moto.endpoint,
      credentials: { accessKeyId: 'testing', secretAccessKey: 'testing' },
    });
    values.password = canary('db-password');
    dbArn = await createSecret(
      'prod/db',
      JSON.stringify({ username: 'app', password: values.password, port: 5432 }),
    );
    values.token = canary('token');
    await createSecret('api-token', values.token);
    for (let i = 0; i < 10; i++)
      await createSecret(`many/${i}`, canary(`many-${i}`).replace(/-[0-9a-f]+$/, `-${i}`));
  });
  after(async () => {
    sm?.destroy();
    await proxy?.close();
    await moto?.stop();
  });
  beforeEach(() => {
    proxy.reset();
  });

  it('writes one key of a JSON secret by ARN, with the default mode, through GetSecretValue', async () => {
    using dir = memoryDir();
    const run = await runAgent(
      agentEnv(dir.path, { SECRET_0_REF: `${dbArn}#password`, SECRET_0_FILENAME: 'db/password' }),
    );
    assert.equal(run.code, 0, run.stderr);
    assert.equal(readText(dir.path, 'db/password'), values.password);
    assert.equal(statSync(join(dir.path, 'db/password')).mode & 0o777, 0o400);
    assert.deepEqual(proxy.targets(), ['GetSecretValue']);
  });

  it('is a drop-in for the Flyte / aws-samples sidecar env (SECRET_ARN + SECRET_FILENAME), several containers sharing one volume', async () => {
    using dir = memoryDir();
    const tokenArn = (
      await sm.send(new PutSecretValueCommand({ SecretId: 'api-token', SecretString: values.token! }))
    ).ARN!;
    const first = await runAgent(agentEnv(dir.path, { SECRET_ARN: dbArn, SECRET_FILENAME: 'db.json' }));
    const second = await runAgent(agentEnv(dir.path, { SECRET_ARN: tokenArn, SECRET_FILENAME: 'token' }));
    assert.equal(first.code, 0, first.stderr);
    assert.equal(second.code, 0, second.stderr);
    assert.equal(JSON.parse(readText(dir.path, 'db.json')).password, values.password);
    assert.equal(readText(dir.path, 'token'), values.token);
  });

  it('fetches many secrets in one BatchGetSecretValue call and writes them together', async () => {
    using dir = memoryDir();
    const env: Record<string, string> = {};
    for (let i = 0; i < 10; i++) {
      env[`SECRET_${i}_REF`] = `aws:many/${i}`;
      env[`SECRET_${i}_FILENAME`] = `many-${i}`;
    }
    const run = await runAgent(agentEnv(dir.path, env));
    assert.equal(run.code, 0, run.stderr);
    for (let i = 0; i < 10; i++) assert.match(readText(dir.path, `many-${i}`), new RegExp(`-${i}$`));
    assert.deepEqual(proxy.targets(), ['BatchGetSecretValue']);
  });

  it('splits, dotenvs and keys one secret with a single fetch', async () => {
    using dir = memoryDir();
    const run = await runAgent(
      agentEnv(dir.path, {
        SECRET_0_REF: 'aws:prod/db',
        SECRET_0_FILENAME: 'db',
        SECRET_0_FORMAT: 'split',
        SECRET_1_REF: 'aws:prod/db',
        SECRET_1_FILENAME: 'db.env',
        SECRET_1_FORMAT: 'dotenv',
        SECRET_2_REF: 'aws:prod/db#username',
        SECRET_2_FILENAME: 'user',
        SECRET_2_MODE: '0440',
      }),
    );
    assert.equal(run.code, 0, run.stderr);
    assert.deepEqual(readdirSync(join(dir.path, 'db')).sort(), ['password', 'port', 'username']);
    assert.equal(readText(dir.path, 'db/password'), values.password);
    assert.equal(
      readText(dir.path, 'db.env'),
      `username='app'\npassword='${values.password}'\nport='5432'\n`,
    );
    assert.equal(statSync(join(dir.path, 'user')).mode & 0o777, 0o440);
    assert.deepEqual(proxy.targets(), ['GetSecretValue'], 'three files from one secret cost one call');
  });

  it('writes SecretBinary byte for byte', async () => {
    using dir = memoryDir();
    const bytes = Buffer.concat([Buffer.from([0, 1, 2, 255]), Buffer.from(canary('bin'))]);
    await createSecret('binary-blob', bytes);
    const run = await runAgent(
      agentEnv(dir.path, { SECRET_0_REF: 'aws:binary-blob', SECRET_0_FILENAME: 'blob' }),
    );
    assert.equal(run.code, 0, run.stderr);
    assert.deepEqual(readFileSync(join(dir.path, 'blob')), bytes);
  });

  it('selects AWSPREVIOUS and a version id, and logs each as the VersionId AWS names', async () => {
    using dir = memoryDir();
    const v1 = canary('v1');
    const v2 = canary('v2');
    const arn = await createSecret('rotating', v1);
    const put = await sm.send(new PutSecretValueCommand({ SecretId: arn, SecretString: v2 }));
    const run = await runAgent(
      agentEnv(dir.path, {
        SECRET_0_REF: 'aws:rotating',
        SECRET_0_FILENAME: 'current',
        SECRET_1_REF: 'aws:rotating?versionStage=AWSPREVIOUS',
        SECRET_1_FILENAME: 'previous',
        SECRET_2_REF: `aws:rotating?versionId=${put.VersionId}`,
        SECRET_2_FILENAME: 'by-id',
      }),
    );
    assert.equal(run.code, 0, run.stderr);
    assert.equal(readText(dir.path, 'current'), v2);
    assert.equal(readText(dir.path, 'previous'), v1);
    assert.equal(readText(dir.path, 'by-id'), v2);
    const logged = Object.fromEntries(
      run.logs.filter((l) => l.msg === 'fetched').map((l) => [l.file as string, l.version]),
    );
    assert.equal(logged.current, put.VersionId);
    assert.equal(logged['by-id'], put.VersionId);
    assert.match(String(logged.previous), /^[0-9a-f-]{36}$/);
    assert.notEqual(logged.previous, put.VersionId);
  });

  it('fails the whole run on a missing secret: exit 1, nothing written, a summary naming the secret and the fix', async () => {
    using dir = memoryDir();
    const run = await runAgent(
      agentEnv(dir.path, {
        SECRET_0_REF: 'aws:api-token',
        SECRET_0_FILENAME: 'token',
        SECRET_1_REF: 'aws:does-not-exist',
        SECRET_1_FILENAME: 'missing',
      }),
    );
    assert.equal(run.code, 1);
    assert.deepEqual(readdirSync(dir.path), [], 'nothing partial is written');
    assert.match(run.stderr, /1 of 2 secrets could not be delivered; nothing was written/);
    assert.match(run.stderr, /SECRET_1 \(aws:does-not-exist\): not-found: ResourceNotFoundException/);
    assert.match(run.stderr, /fix: check the secret name or ARN and that it exists in region us-east-1/);
    assert.ok(run.logs.some((l) => l.level === 'error' && l.id === 'SECRET_1' && l.reason === 'not-found'));
  });

  it('reports a secret scheduled for deletion with the restore hint', async () => {
    using dir = memoryDir();
    await createSecret('doomed', canary('doomed'));
    await sm.send(new DeleteSecretCommand({ SecretId: 'doomed', RecoveryWindowInDays: 7 }));
    const run = await runAgent(
      agentEnv(dir.path, { SECRET_0_REF: 'aws:doomed', SECRET_0_FILENAME: 'doomed' }),
    );
    assert.equal(run.code, 1);
    assert.match(run.stderr, /SECRET_0 \(aws:doomed\): deleted: InvalidRequestException.*delet/);
    assert.match(run.stderr, /restore-secret/);
    assert.deepEqual(readdirSync(dir.path), []);
  });

  it('retries throttling and server faults with backoff, then succeeds', async () => {
    using dir = memoryDir();
    proxy.throttle(2);
    proxy.failInternally(1);
    const run = await runAgent(
      agentEnv(dir.path, { SECRET_0_REF: 'aws:api-token', SECRET_0_FILENAME: 'token' }),
    );
    assert.equal(run.code, 0, run.stderr);
    assert.equal(readText(dir.path, 'token'), values.token);
    assert.deepEqual(proxy.targets(), [
      'GetSecretValue',
      'GetSecretValue',
      'GetSecretValue',
      'GetSecretValue',
    ]);
    const retries = run.logs.filter((l) => l.msg === 'transient backend errors; retrying');
    assert.deepEqual(
      retries.map((l) => [l.attempt, l.reasons]),
      [
        [1, ['throttled']],
        [2, ['throttled']],
        [3, ['unavailable']],
      ],
    );
    const delays = retries.map((l) => l.delayMs as number);
    // Equal jitter: attempt n waits between half and all of 250 ms · 2^(n-1).
    delays.forEach((d, i) => assert.ok(d >= 125 * 2 ** i && d <= 250 * 2 ** i, `delay ${i + 1} was ${d} ms`));
  });

  it('gives up on persistent throttling at the deadline, with the reason', async () => {
    using dir = memoryDir();
    proxy.throttle(100);
    const run = await runAgent(
      agentEnv(dir.path, { SECRET_0_REF: 'aws:api-token', SECRET_0_FILENAME: 'token', INIT_DEADLINE: '2s' }),
    );
    assert.equal(run.code, 1);
    assert.match(run.stderr, /SECRET_0 \(aws:api-token\): throttled: ThrottlingException: Rate exceeded/);
    const calls = proxy.requests.length;
    assert.ok(calls >= 2 && calls <= 6, `backoff bounds the calls within 2 s: made ${calls}`);
    assert.deepEqual(readdirSync(dir.path), []);
  });

  it('puts the pod identity in the user agent for the audit log', async () => {
    using dir = memoryDir();
    const run = await runAgent(
      agentEnv(dir.path, {
        SECRET_0_REF: 'aws:api-token',
        SECRET_0_FILENAME: 'token',
        POD_NAMESPACE: 'payments',
        POD_NAME: 'api-7d9f',
      }),
    );
    assert.equal(run.code, 0, run.stderr);
    const ua = String(proxy.requests.at(-1)?.headers['user-agent'] ?? '');
    assert.match(ua, /secret-agent\/\d+\.\d+\.\d+/);
    assert.match(ua, /k8s-pod\/payments\.api-7d9f/);
  });

  it('needs a region for a bare name: a configuration error (exit 2), found before any request', async () => {
    using dir = memoryDir();
    const env = agentEnv(dir.path, { SECRET_0_REF: 'aws:api-token', SECRET_0_FILENAME: 'token' });
    delete env.AWS_REGION;
    const before = proxy.requests.length;
    const run = await runAgent(env);
    assert.equal(run.code, 2, run.stderr);
    assert.match(
      run.stderr,
      /AWS_REGION: is not set, but secrets named without a region \(aws:NAME\) need it: SECRET_0\. Fix: set AWS_REGION .*or reference the secret by its full ARN/,
    );
    assert.equal(proxy.requests.length, before);
  });
});
