/**
 * The Vault provider end to end: the BUILT agent (dist/agent.js, node-vault bundled into its chunk)
 * run as the image runs it, against the fake Vault. Build first: `node images/build.ts`.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, beforeEach, describe, it } from 'node:test';
import { canary } from '../support/canary.ts';
import { eventually, memoryDir, runAgent, startAgent } from '../support/run-agent.ts';
import { FakeVault } from '../fakes/vault.ts';
import { FakeGoogleIam } from '../fakes/google-iam.ts';
import { startMoto } from '../support/moto.ts';
import { motoIamUser } from '../support/moto-iam.ts';

let vault: FakeVault;
let token: string;
const app = { username: 'app', password: canary('db-password') };
const saJwt = canary('sa-jwt');

function env(dir: string, extra: Record<string, string>): Record<string, string> {
  return {
    VAULT_ADDR: vault.addr,
    SECRETS_DIR: dir,
    INIT_DEADLINE: '20s',
    POD_NAMESPACE: 'shop',
    POD_NAME: 'web-1',
    ...extra,
  };
}

describe('Vault through the built agent', () => {
  before(async () => {
    vault = await FakeVault.start();
    vault.mountKv('secret', 2);
    vault.putKv('secret/app', app);
    vault.mountDatabase('database');
    vault.databaseRole('database', 'app', {
      ttlSec: 3600,
      maxTtlSec: 7200,
      credentials: () => ({ username: 'v-app', password: canary('dynamic') }),
    });
    vault.policy('app', { 'secret/data/app': ['read'], 'database/creds/app': ['read'] });
    vault.kubernetesRole('k8s-prod', 'web', { jwt: saJwt, policies: ['app'], ttlSec: 600 });
    token = vault.createToken({ policies: ['app'] });
  });
  after(async () => {
    await vault?.stop();
  });
  beforeEach(() => vault.reset());

  it('writes one key of a KV v2 secret with the default mode', async () => {
    using dir = memoryDir();
    const run = await runAgent(
      env(dir.path, {
        VAULT_TOKEN: token,
        SECRET_0_REF: 'vault:secret/data/app#password',
        SECRET_0_FILENAME: 'db/password',
      }),
    );
    assert.equal(run.code, 0, run.stderr);
    assert.equal(readFileSync(join(dir.path, 'db/password'), 'utf8'), app.password);
    assert.equal(statSync(join(dir.path, 'db/password')).mode & 0o777, 0o400);
    assert.equal(vault.count('GET', 'secret/data/app'), 1);
    assert.ok(vault.requests.every((r) => r.userAgent === 'secret-agent/0.1.0 (pod shop/web-1)'));
    const fetched = run.logs.find((l) => l.msg === 'fetched');
    assert.equal(fetched?.version, '1');
  });

  it('logs in with Kubernetes auth at a custom mount and writes dynamic credentials as dotenv', async () => {
    using dir = memoryDir();
    const credentials = mkdtempSync(join(tmpdir(), 'vault-sa-'));
    const jwtFile = join(credentials, 'token');
    writeFileSync(jwtFile, saJwt);
    try {
      const run = await runAgent(
        env(dir.path, {
          VAULT_ROLE: 'web',
          VAULT_AUTH_MOUNT: 'k8s-prod',
          VAULT_SA_TOKEN_FILE: jwtFile,
          SECRET_0_REF: 'vault:database/creds/app',
          SECRET_0_FILENAME: 'db.env',
          SECRET_0_FORMAT: 'dotenv',
        }),
      );
      assert.equal(run.code, 0, run.stderr);
      assert.match(
        readFileSync(join(dir.path, 'db.env'), 'utf8'),
        /^username='v-app'\npassword='CANARY7f3e-dynamic-[0-9a-f]+'\n$/,
      );
      assert.equal(vault.count('POST', 'auth/k8s-prod/login'), 1);
    } finally {
      rmSync(credentials, { recursive: true, force: true });
    }
  });

  it('exits 1 on a 403 with a summary naming SECRET_0 and the fix, writing nothing', async () => {
    using dir = memoryDir();
    vault.putKv('secret/admin', { root: canary('admin') });
    const run = await runAgent(
      env(dir.path, {
        VAULT_TOKEN: token,
        SECRET_0_REF: 'vault:secret/data/admin',
        SECRET_0_FILENAME: 'admin',
      }),
    );
    assert.equal(run.code, 1);
    assert.deepEqual(readdirSync(dir.path), [], 'nothing is written');
    assert.match(
      run.stderr,
      /SECRET_0 \(vault:secret\/data\/admin\): permission-denied: .*permission denied/,
    );
    assert.match(run.stderr, /fix: the policies of the Vault token must allow `read` on secret\/data\/admin/);
    assert.ok(!run.stderr.includes(token) && !run.stdout.includes(token), 'the token leaked');
    assert.equal(vault.count('GET', 'secret/data/admin'), 1, 'a permanent failure is not retried');
  });

  it('retries a sealed Vault (503 twice) and then writes', async () => {
    using dir = memoryDir();
    vault.fail({ status: 503, times: 2, path: 'secret/' });
    const run = await runAgent(
      env(dir.path, {
        VAULT_TOKEN: token,
        SECRET_0_REF: 'vault:secret/data/app#password',
        SECRET_0_FILENAME: 'password',
      }),
    );
    assert.equal(run.code, 0, run.stderr);
    assert.equal(readFileSync(join(dir.path, 'password'), 'utf8'), app.password);
    assert.equal(vault.count('GET', 'secret/data/app'), 3);
    const retries = run.logs.filter((l) => l.msg === 'transient backend errors; retrying');
    assert.equal(retries.length, 2);
    assert.deepEqual(retries[0]!.reasons, ['unavailable']);
  });

  it('logs in with aws auth (a SigV4-signed sts:GetCallerIdentity that STS, here moto, verifies)', async () => {
    const moto = await startMoto({ INITIAL_NO_AUTH_ACTION_COUNT: '2' });
    try {
      const user = await motoIamUser(moto.endpoint, 'shop-web');
      vault.awsAuth('aws', { stsEndpoint: moto.endpoint, iamServerId: 'vault.shop.example' });
      vault.awsRole('aws', 'shop-web', { boundIamPrincipalArn: [user.arn], policies: ['app'], ttlSec: 600 });
      using dir = memoryDir();
      const run = await runAgent(
        env(dir.path, {
          VAULT_AUTH_METHOD: 'aws',
          VAULT_AWS_IAM_SERVER_ID: 'vault.shop.example',
          AWS_ACCESS_KEY_ID: user.accessKeyId,
          AWS_SECRET_ACCESS_KEY: user.secretAccessKey,
          AWS_EC2_METADATA_DISABLED: 'true',
          SECRET_0_REF: 'vault:secret/data/app#password',
          SECRET_0_FILENAME: 'password',
        }),
      );
      assert.equal(run.code, 0, run.stderr);
      assert.equal(readFileSync(join(dir.path, 'password'), 'utf8'), app.password);
      assert.deepEqual(vault.awsLogins.at(-1), {
        arn: user.arn,
        role: 'shop-web',
        url: 'https://sts.amazonaws.com/',
      });
      for (const output of [run.stdout, run.stderr])
        assert.ok(!output.includes(user.secretAccessKey), 'the AWS secret key leaked into the output');
    } finally {
      await moto.stop();
    }
  });

  it('logs in with gcp auth (a JWT signed through IAM Credentials with the metadata server’s token), logging no credential', async () => {
    const account = 'shop-web@my-project.iam.gserviceaccount.com';
    const google = await FakeGoogleIam.start({ serviceAccount: account, accessToken: canary('gcp-token') });
    try {
      vault.gcpAuth('gcp', { apiEndpoint: google.endpoint });
      vault.gcpRole('gcp', 'web', { boundServiceAccounts: [account], policies: ['app'], ttlSec: 600 });
      using dir = memoryDir();
      const run = await runAgent(
        env(dir.path, {
          VAULT_AUTH_METHOD: 'gcp',
          VAULT_ROLE: 'web',
          VAULT_GCP_IAM_CREDENTIALS_ENDPOINT: google.endpoint,
          GCE_METADATA_HOST: google.metadataHost,
          GOOGLE_CLOUD_PROJECT: 'my-project',
          // The Google auth library's debug logging prints token responses: it must stay off.
          GOOGLE_SDK_NODE_LOGGING: '*',
          SECRET_0_REF: 'vault:secret/data/app#password',
          SECRET_0_FILENAME: 'password',
        }),
      );
      assert.equal(run.code, 0, run.stderr);
      assert.equal(readFileSync(join(dir.path, 'password'), 'utf8'), app.password);
      assert.equal(google.signed.length, 1);
      assert.equal(google.signed[0]!.claims.aud, 'vault/web');
      for (const output of [run.stdout, run.stderr])
        assert.ok(!output.includes(google.signed[0]!.signedJwt), 'the signed JWT leaked into the output');
    } finally {
      await google.stop();
    }
  });

  it('VAULT_REVOKE_ON_SHUTDOWN: a sidecar revokes its login token on SIGTERM; an init run leaves it valid', async () => {
    const credentials = mkdtempSync(join(tmpdir(), 'vault-sa-'));
    const jwtFile = join(credentials, 'token');
    writeFileSync(jwtFile, saJwt);
    const settings = {
      VAULT_ROLE: 'web',
      VAULT_AUTH_MOUNT: 'k8s-prod',
      VAULT_SA_TOKEN_FILE: jwtFile,
      VAULT_REVOKE_ON_SHUTDOWN: 'true',
      SECRET_0_REF: 'vault:database/creds/app',
      SECRET_0_FILENAME: 'db.env',
      SECRET_0_FORMAT: 'dotenv',
    };
    try {
      using initDir = memoryDir();
      const init = await runAgent(env(initDir.path, settings));
      assert.equal(init.code, 0, init.stderr);
      assert.equal(vault.count('POST', 'auth/token/revoke-self'), 0, 'init leaves the app its credentials');

      using dir = memoryDir();
      const agent = startAgent(
        env(dir.path, { ...settings, AGENT_MODE: 'sidecar', AGENT_HTTP_ADDR: '127.0.0.1:0' }),
      );
      await agent.waitForLog((l) => l.msg === 'serving /healthz, /readyz, /metrics');
      await eventually(
        () => (vault.count('GET', 'database/creds/app') === 2 ? true : undefined),
        'the fetch',
      );
      assert.equal((await agent.stop()).code, 0);
      assert.equal(vault.count('POST', 'auth/token/revoke-self'), 1);
      assert.deepEqual(
        vault.revocations.map((r) => r.kind),
        ['token'],
      );
      const released = agent.output().logs.find((l) => l.msg === 'released backend credentials');
      assert.deepEqual(
        { provider: released?.provider, what: released?.what },
        {
          provider: 'vault',
          what: 'Vault token of kubernetes auth at auth/k8s-prod as role "web" and its leases',
        },
      );
    } finally {
      rmSync(credentials, { recursive: true, force: true });
    }
  });

  it('reports unusable Vault settings as a configuration error naming the variable, without a request', async () => {
    using dir = memoryDir();
    const run = await runAgent(
      env(dir.path, { SECRET_0_REF: 'vault:secret/data/app', SECRET_0_FILENAME: 'x' }),
    );
    assert.equal(run.code, 2, run.stderr);
    assert.match(run.stderr, /invalid configuration\n {2}VAULT_TOKEN: no Vault credentials/);
    assert.match(run.stderr, /Fix: set VAULT_ROLE for Kubernetes auth/);
    assert.equal(vault.requests.length, 0);
  });
});
