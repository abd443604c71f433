/**
 * The Vault provider, through node-vault and the provider's transport, against the local fake Vault
 * (test/fakes/vault.ts): reference forms, KV version detection, dynamic secrets, auth methods and
 * error mapping. Token and lease renewal are in vault-session.test.ts; the built agent in
 * vault-agent.test.ts.
 */
import assert from 'node:assert/strict';
import { selfSignedCertificate } from '../support/self-signed-cert.ts';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, beforeEach, describe, it } from 'node:test';
import type { SecretSpec } from '../../agent/contract/agent-config.ts';
import { parseReference, type VaultReference } from '../../agent/contract/reference.ts';
import { renderFiles } from '../../agent/format/render-files.ts';
import { ProviderError, type FetchOutcome, type SecretValue } from '../../agent/providers/provider.ts';
import { openVaultProvider, type VaultProvider } from '../../agent/providers/vault/vault-provider.ts';
import { VAULT_ENV } from '../../agent/providers/vault/env.ts';
import { assertNoCanary, canary } from '../support/canary.ts';
import { FakeVault } from '../fakes/vault.ts';
import { FakeGoogleIam } from '../fakes/google-iam.ts';
import { startMoto, type Moto } from '../support/moto.ts';
import { motoIamUser, type MotoIamUser } from '../support/moto-iam.ts';

let vault: FakeVault;
let files: string;
const open: VaultProvider[] = [];
const db = { username: 'app', password: canary('db-password'), port: 5432 };
const legacy = { api_key: canary('kv1-api-key') };
const saJwt = canary('sa-jwt');
const otherJwt = canary('other-jwt');
const secretId = canary('approle-secret-id');
let rootToken: string;

function provider(env: Record<string, string>): VaultProvider {
  const p = openVaultProvider(
    { pod: { namespace: 'shop', name: 'web-1' }, agentVersion: '9.9.9' },
    { env: { VAULT_ADDR: vault.addr, ...env }, clock: vault.clock },
  );
  open.push(p);
  return p;
}

function ref(text: string): VaultReference {
  return parseReference(text, 'SECRET_0_REF') as VaultReference;
}

async function fetchAll(p: VaultProvider, ...texts: string[]): Promise<FetchOutcome[]> {
  return p.fetch(texts.map(ref), { signal: AbortSignal.timeout(10_000) });
}

async function value(p: VaultProvider, text: string): Promise<SecretValue> {
  const [outcome] = await fetchAll(p, text);
  assert.ok(outcome!.ok, outcome!.ok ? '' : `${outcome!.error.reason}: ${outcome!.error.message}`);
  return outcome!.value;
}

async function failure(p: VaultProvider, text: string): Promise<ProviderError> {
  const [outcome] = await fetchAll(p, text);
  assert.ok(!outcome!.ok, 'expected a failure');
  const error = outcome!.error;
  assertNoCanary(`${error.message} ${error.fix}`, 'a provider error');
  return error;
}

const json = (v: SecretValue): unknown => JSON.parse(Buffer.from(v.bytes).toString('utf8'));

function file(name: string, content: string): string {
  const path = join(files, name);
  writeFileSync(path, content);
  return path;
}

function spec(text: string, format: SecretSpec['format'] = 'raw'): SecretSpec {
  return { id: 'SECRET_0', ref: ref(text), filename: 'out', format, mode: 0o400, refreshIntervalMs: 60_000 };
}

before(async () => {
  vault = await FakeVault.start();
  files = mkdtempSync(join(tmpdir(), 'vault-test-'));
  vault.mountKv('secret', 2);
  vault.mountKv('kv1', 1);
  vault.mountKv('team/kv', 2);
  vault.mountDatabase('database');
  vault.databaseRole('database', 'app', {
    ttlSec: 3600,
    maxTtlSec: 86_400,
    credentials: () => ({ username: 'v-app-x1', password: canary('dynamic-password') }),
  });
  vault.putKv('secret/app', { ...db, password: canary('old-password') });
  vault.putKv('secret/app', db);
  vault.putKv('team/kv/nested/deep', { token: canary('deep') });
  vault.putKv('kv1/legacy', legacy);
  vault.policy('app-read', {
    'secret/data/app': ['read'],
    'kv1/legacy': ['read'],
    'database/creds/app': ['read'],
  });
  vault.policy('all', { '*': ['read', 'update'] });
  vault.kubernetesRole('k8s-prod', 'web', { jwt: saJwt, policies: ['app-read'], ttlSec: 600 });
  vault.jwtRole('jwt', 'web', { jwt: saJwt, policies: ['app-read'], ttlSec: 600 }, true);
  vault.appRole('approle', 'web', { roleId: 'role-1234', secretId, policies: ['app-read'], ttlSec: 600 });
  rootToken = vault.createToken({ policies: ['all'] });
});

after(async () => {
  for (const p of open) p.close?.();
  await vault.stop();
  rmSync(files, { recursive: true, force: true });
});

beforeEach(() => vault.reset());

describe('Vault references', () => {
  it('reads a KV v2 secret: the bytes are the JSON of data.data, the version is metadata.version', async () => {
    const p = provider({ VAULT_TOKEN: rootToken });
    const v = await value(p, 'vault:secret/data/app');
    assert.deepEqual(json(v), db);
    assert.equal(v.version, '2');
    assert.equal(v.backendVersion, '2', 'the version Vault names is the one published');
    assert.equal(vault.count('GET', 'secret/data/app'), 1);
  });

  it('gives #key, split and dotenv the secret as a JSON object (through the agent’s formatter)', async () => {
    const p = provider({ VAULT_TOKEN: rootToken });
    const v = await value(p, 'vault:secret/data/app#password');
    const [one] = renderFiles(spec('vault:secret/data/app#password'), v.bytes);
    assert.equal(Buffer.from(one!.bytes).toString(), db.password);
    const split = renderFiles(spec('vault:secret/data/app', 'split'), v.bytes);
    assert.deepEqual(
      split.map((f) => [f.path, Buffer.from(f.bytes).toString()]),
      [
        ['out/username', 'app'],
        ['out/password', db.password],
        ['out/port', '5432'],
      ],
    );
  });

  it('reads an explicit KV v2 version with ?version=N', async () => {
    const p = provider({ VAULT_TOKEN: rootToken });
    const v = await value(p, 'vault:secret/data/app?version=1');
    assert.equal(v.version, '1');
    assert.notEqual((json(v) as { password: string }).password, db.password);
    assert.equal(vault.requests.find((r) => r.path === 'secret/data/app')!.query, '?version=1');
  });

  it('inserts data/ into a KV v2 path written like `vault kv get` (secret/app), after detecting the mount once', async () => {
    const p = provider({ VAULT_TOKEN: rootToken });
    const [a, b] = await fetchAll(p, 'vault:secret/app#password', 'vault:secret/app?version=1');
    assert.ok(a?.ok && b?.ok);
    assert.deepEqual(json(a.value), db);
    assert.equal(b.value.version, '1');
    assert.equal(vault.count('GET', 'secret/data/app'), 2);
    // Two concurrent reads may both ask; a later read of the same mount never does.
    const asked = vault.requests.filter((r) => r.path.startsWith('sys/internal/ui/mounts/')).length;
    assert.ok(asked >= 1 && asked <= 2);
    await value(p, 'vault:secret/data/app');
    assert.equal(vault.requests.filter((r) => r.path.startsWith('sys/internal/ui/mounts/')).length, asked);
  });

  it('finds a KV v2 mount nested below the first segment (team/kv)', async () => {
    const p = provider({ VAULT_TOKEN: rootToken });
    const v = await value(p, 'vault:team/kv/nested/deep#token');
    assert.equal(vault.count('GET', 'team/kv/data/nested/deep'), 1);
    assert.equal(v.version, '1');
  });

  it('reads KV v1: the value is data, the version compared a content hash, none published', async () => {
    const p = provider({ VAULT_TOKEN: rootToken });
    const v = await value(p, 'vault:kv1/legacy');
    assert.deepEqual(json(v), legacy);
    assert.match(v.version, /^content:[0-9a-f]{16}$/);
    assert.equal(
      v.backendVersion,
      undefined,
      'KV v1 names no version, and a hash of a value is never published',
    );
    assert.equal(vault.count('GET', 'kv1/legacy'), 1);
    const again = await value(p, 'vault:kv1/legacy');
    assert.equal(again.version, v.version);
  });

  it('VAULT_KV_VERSION=1 reads paths as written, without asking for the mount', async () => {
    const p = provider({ VAULT_TOKEN: rootToken, VAULT_KV_VERSION: '1' });
    assert.deepEqual(json(await value(p, 'vault:kv1/legacy')), legacy);
    assert.equal(vault.requests.filter((r) => r.path.startsWith('sys/')).length, 0);
  });

  it('VAULT_KV_VERSION=2 treats the first segment as the mount, without asking', async () => {
    const p = provider({ VAULT_TOKEN: rootToken, VAULT_KV_VERSION: '2' });
    assert.deepEqual(json(await value(p, 'vault:secret/app')), db);
    assert.equal(vault.count('GET', 'secret/data/app'), 1);
    assert.equal(vault.requests.filter((r) => r.path.startsWith('sys/')).length, 0);
  });

  it('refuses ?version= on a path that is not KV v2', async () => {
    const p = provider({ VAULT_TOKEN: rootToken });
    const error = await failure(p, 'vault:kv1/legacy?version=2');
    assert.equal(error.reason, 'invalid');
    assert.equal(error.transient, false);
    assert.match(error.message, /KV v2/);
  });

  it('reads dynamic database credentials: the version is the lease id, and the lease is tracked', async () => {
    const p = provider({ VAULT_TOKEN: rootToken });
    const v = await value(p, 'vault:database/creds/app');
    const creds = json(v) as { username: string; password: string };
    assert.equal(creds.username, 'v-app-x1');
    assert.match(v.version, /^database\/creds\/app\//);
    const [lease] = p.session.leases.deadlines();
    assert.equal(lease!.ref, 'vault:database/creds/app');
    assert.equal(lease!.leaseId, v.version);
    assert.equal(lease!.expiresAt, vault.clock.now() + 3600_000);
    assert.equal(lease!.mustRefetch, false);
    assert.equal(vault.leaseTtl(v.version), 3600);
  });

  it('answers a deleted KV v2 version as `deleted`, like the real 404 with metadata', async () => {
    vault.putKv('secret/gone', { x: canary('gone') });
    vault.putKv('secret/gone', { x: canary('gone-2') });
    vault.deleteKvVersion('secret/gone', 2);
    const p = provider({ VAULT_TOKEN: rootToken });
    const error = await failure(p, 'vault:secret/data/gone');
    assert.equal(error.reason, 'deleted');
    assert.match(error.fix, /undelete/);
    assert.equal((await value(p, 'vault:secret/data/gone?version=1')).version, '1');
  });
});

describe('Vault errors', () => {
  it('maps 404 {"errors":[]} to not-found, permanent', async () => {
    const p = provider({ VAULT_TOKEN: rootToken });
    const error = await failure(p, 'vault:secret/data/missing');
    assert.equal(error.reason, 'not-found');
    assert.equal(error.transient, false);
    assert.match(error.message, /secret\/data\/missing/);
  });

  it('maps 403 permission denied to permission-denied, with the policy fix, never the token', async () => {
    const weak = vault.createToken({ policies: ['app-read'] });
    vault.putKv('secret/other', { x: canary('other') });
    const p = provider({ VAULT_TOKEN: weak });
    const error = await failure(p, 'vault:secret/data/other');
    assert.equal(error.reason, 'permission-denied');
    assert.equal(error.transient, false);
    assert.match(error.message, /permission denied/);
    assert.match(error.fix, /read.*secret\/data\/other/);
    assert.ok(!`${error.message}${error.fix}`.includes(weak), 'the token leaked into an error');
    // The token itself is fine (lookup-self answers), so it is kept: a denied path costs no new token.
    assert.equal(vault.count('GET', 'auth/token/lookup-self'), 1);
    await failure(p, 'vault:secret/data/other');
    assert.equal(vault.requests.filter((r) => r.path.startsWith('auth/') && r.status !== 200).length, 0);
  });

  it('maps 429 to throttled and 503 to unavailable, transient, honouring Retry-After', async () => {
    const p = provider({ VAULT_TOKEN: rootToken, VAULT_KV_VERSION: '2' });
    vault.fail({ status: 429, retryAfterSec: 7, path: 'secret/' });
    const throttled = await failure(p, 'vault:secret/data/app');
    assert.equal(throttled.reason, 'throttled');
    assert.equal(throttled.transient, true);
    assert.equal(throttled.retryAfterMs, 7000);
    assert.match(throttled.message, /rate limit quota exceeded/);
    vault.fail({ status: 503, path: 'secret/' });
    const sealed = await failure(p, 'vault:secret/data/app');
    assert.equal(sealed.reason, 'unavailable');
    assert.equal(sealed.transient, true);
    assert.match(sealed.message, /Vault is sealed/);
    vault.fail({ status: 500, path: 'secret/' });
    assert.equal((await failure(p, 'vault:secret/data/app')).reason, 'unavailable');
    assert.deepEqual(json(await value(p, 'vault:secret/data/app')), db);
  });

  it('maps a refused connection to a transient unavailable', async () => {
    const p = openVaultProvider(
      { pod: {}, agentVersion: '9.9.9' },
      { env: { VAULT_ADDR: 'http://127.0.0.1:1', VAULT_TOKEN: rootToken }, clock: vault.clock },
    );
    open.push(p);
    const error = await failure(p, 'vault:secret/data/app');
    assert.equal(error.reason, 'unavailable');
    assert.equal(error.transient, true);
  });

  it('refuses VAULT_SKIP_VERIFY for a non-loopback address and unusable settings, naming the variable', () => {
    const bad = (env: Record<string, string>, field: RegExp) => {
      assert.throws(
        () => openVaultProvider({ pod: {}, agentVersion: '9' }, { env }),
        (e: ProviderError) => e.reason === 'invalid' && !e.transient && field.test(e.message),
      );
    };
    bad(
      { VAULT_ADDR: 'https://vault.example.com', VAULT_SKIP_VERIFY: 'true', VAULT_TOKEN: 't' },
      /VAULT_SKIP_VERIFY/,
    );
    bad({ VAULT_ADDR: 'ftp://vault', VAULT_TOKEN: 't' }, /VAULT_ADDR/);
    bad({ VAULT_ADDR: 'http://127.0.0.1:8200' }, /VAULT_TOKEN/);
    bad({ VAULT_ADDR: 'http://127.0.0.1:8200', VAULT_AUTH_METHOD: 'kubernetes' }, /VAULT_ROLE/);
    bad({ VAULT_ADDR: 'http://127.0.0.1:8200', VAULT_TOKEN: 't', VAULT_KV_VERSION: '3' }, /VAULT_KV_VERSION/);
    bad({ VAULT_ADDR: 'http://127.0.0.1:8200', VAULT_AUTH_METHOD: 'ldap' }, /VAULT_AUTH_METHOD/);
    // Loopback may skip verification (local runs against a dev server).
    openVaultProvider(
      { pod: {}, agentVersion: '9' },
      { env: { VAULT_ADDR: 'https://127.0.0.1:8200', VAULT_SKIP_VERIFY: 'true', VAULT_TOKEN: 't' } },
    ).close?.();
  });
});

describe('Vault auth and identity', () => {
  it('logs in with Kubernetes auth at a custom mount (never auth//login), then reads with the issued token', async () => {
    const jwtFile = file('sa-token', `${saJwt}\n`);
    const p = provider({ VAULT_ROLE: 'web', VAULT_AUTH_MOUNT: 'k8s-prod', VAULT_SA_TOKEN_FILE: jwtFile });
    assert.deepEqual(json(await value(p, 'vault:secret/data/app')), db);
    assert.equal(vault.count('POST', 'auth/k8s-prod/login'), 1);
    assert.equal(vault.requests.filter((r) => r.path.includes('//')).length, 0);
    const login = vault.requests.find((r) => r.path === 'auth/k8s-prod/login')!;
    assert.equal(login.hasToken, false, 'a login carries no token');
    assert.ok(vault.requests.filter((r) => r.path !== 'auth/k8s-prod/login').every((r) => r.hasToken));
    // One login serves later fetches.
    await value(p, 'vault:kv1/legacy');
    assert.equal(vault.count('POST', 'auth/k8s-prod/login'), 1);
  });

  it('reports a refused Kubernetes login as auth, naming method, mount and role, never the JWT', async () => {
    const p = provider({
      VAULT_ROLE: 'web',
      VAULT_AUTH_METHOD: 'kubernetes',
      VAULT_AUTH_MOUNT: 'k8s-prod',
      VAULT_SA_TOKEN_FILE: file('wrong', otherJwt),
    });
    const error = await failure(p, 'vault:secret/data/app');
    assert.equal(error.reason, 'auth');
    assert.equal(error.transient, false);
    assert.match(error.message, /kubernetes auth at auth\/k8s-prod as role "web"/);
    assert.match(error.fix, /bound_service_account/);
    const missing = provider({
      VAULT_ROLE: 'web',
      VAULT_AUTH_METHOD: 'kubernetes',
      VAULT_SA_TOKEN_FILE: join(files, 'nope'),
    });
    const noFile = await failure(missing, 'vault:secret/data/app');
    assert.equal(noFile.reason, 'auth');
    assert.match(noFile.message, /VAULT_SA_TOKEN_FILE=.*nope \(ENOENT\)/);
  });

  it('logs in again after a 403 only when the token itself is dead, not for a path the policy lacks', async () => {
    vault.putKv('secret/forbidden', { x: canary('forbidden') });
    const p = provider({
      VAULT_ROLE: 'web',
      VAULT_AUTH_MOUNT: 'k8s-prod',
      VAULT_SA_TOKEN_FILE: file('sa-relogin', saJwt),
    });
    await value(p, 'vault:kv1/legacy');
    assert.equal((await failure(p, 'vault:secret/data/forbidden')).reason, 'permission-denied');
    await value(p, 'vault:kv1/legacy');
    assert.equal(vault.count('POST', 'auth/k8s-prod/login'), 1, 'a denied path keeps the token');
    vault.revokeLogins('k8s-prod');
    assert.equal((await failure(p, 'vault:kv1/legacy')).reason, 'permission-denied');
    await value(p, 'vault:kv1/legacy');
    assert.equal(
      vault.count('POST', 'auth/k8s-prod/login'),
      2,
      'a revoked token is replaced on the next fetch',
    );
  });

  it('defaults to Kubernetes auth when VAULT_ROLE is set and the service-account token exists', async () => {
    const p = provider({
      VAULT_ROLE: 'web',
      VAULT_AUTH_MOUNT: 'k8s-prod',
      VAULT_SA_TOKEN_FILE: file('sa-default', saJwt),
    });
    await value(p, 'vault:kv1/legacy');
    assert.equal(vault.count('POST', 'auth/k8s-prod/login'), 1);
  });

  it('logs in with JWT auth (default role when VAULT_ROLE is unset)', async () => {
    const p = provider({ VAULT_AUTH_METHOD: 'jwt', VAULT_JWT_FILE: file('jwt', saJwt) });
    assert.deepEqual(json(await value(p, 'vault:kv1/legacy')), legacy);
    assert.equal(vault.count('POST', 'auth/jwt/login'), 1);
    const bad = provider({
      VAULT_AUTH_METHOD: 'jwt',
      VAULT_ROLE: 'web',
      VAULT_JWT_FILE: file('jwt-bad', otherJwt),
    });
    const error = await failure(bad, 'vault:kv1/legacy');
    assert.equal(error.reason, 'auth');
    assert.match(error.message, /error validating token/);
  });

  it('logs in with AppRole from VAULT_SECRET_ID and from VAULT_SECRET_ID_FILE, never echoing the secret id', async () => {
    const fromEnv = provider({
      VAULT_AUTH_METHOD: 'approle',
      VAULT_ROLE_ID: 'role-1234',
      VAULT_SECRET_ID: secretId,
    });
    assert.deepEqual(json(await value(fromEnv, 'vault:kv1/legacy')), legacy);
    const fromFile = provider({
      VAULT_AUTH_METHOD: 'approle',
      VAULT_ROLE_ID: 'role-1234',
      VAULT_SECRET_ID_FILE: file('sid', secretId),
    });
    assert.deepEqual(json(await value(fromFile, 'vault:kv1/legacy')), legacy);
    assert.equal(vault.count('POST', 'auth/approle/login'), 2);
    const wrong = provider({
      VAULT_AUTH_METHOD: 'approle',
      VAULT_ROLE_ID: 'role-1234',
      VAULT_SECRET_ID: canary('wrong-sid'),
    });
    const error = await failure(wrong, 'vault:kv1/legacy');
    assert.equal(error.reason, 'auth');
    assert.match(error.message, /invalid role or secret ID/);
  });

  it('uses a static token from VAULT_TOKEN_FILE, and reads the file again after a 403', async () => {
    const token = vault.createToken({ policies: ['app-read'] });
    const tokenFile = file('vault-token', `${token}\n`);
    const p = provider({ VAULT_TOKEN_FILE: tokenFile });
    assert.deepEqual(json(await value(p, 'vault:kv1/legacy')), legacy);
    assert.equal(
      vault.requests.filter((r) => r.path.startsWith('auth/')).length,
      0,
      'no login, no lookup on the init path',
    );
    vault.revokeToken(token);
    assert.equal((await failure(p, 'vault:kv1/legacy')).reason, 'permission-denied');
    // Whoever writes the file (a Vault Agent, an operator) puts a new token there.
    writeFileSync(tokenFile, vault.createToken({ policies: ['app-read'] }));
    assert.deepEqual(json(await value(p, 'vault:kv1/legacy')), legacy);
  });

  it('sends a User-Agent naming the agent version and the pod', async () => {
    const p = provider({ VAULT_TOKEN: rootToken });
    await value(p, 'vault:kv1/legacy');
    assert.ok(vault.requests.length > 0);
    for (const r of vault.requests) assert.equal(r.userAgent, 'secret-agent/9.9.9 (pod shop/web-1)');
  });
});

describe('Vault namespaces (Enterprise, HCP)', () => {
  const teamA = { key: canary('team-a') };
  const teamB = { key: canary('team-b') };
  const hcp = { key: canary('hcp-team') };
  before(() => {
    vault.mountKv('team-a/secret', 2);
    vault.putKv('team-a/secret/app', teamA);
    vault.mountKv('team-b/secret', 2);
    vault.putKv('team-b/secret/app', teamB);
    vault.mountKv('admin/team-a/secret', 2);
    vault.putKv('admin/team-a/secret/app', hcp);
    // Logins inside team-a, with team-a's own policy.
    vault.policy('app-read', { 'secret/data/app': ['read'] }, 'team-a');
    vault.kubernetesRole('team-a/kubernetes', 'web', { jwt: saJwt, policies: ['app-read'], ttlSec: 600 });
    // A login in the root namespace whose policy reaches into the children by their names.
    vault.policy('children', {
      'team-a/secret/data/app': ['read'],
      'team-b/secret/data/app': ['read'],
      'secret/data/app': ['read'],
    });
    vault.kubernetesRole('kubernetes', 'platform', { jwt: saJwt, policies: ['children'], ttlSec: 600 });
    // HCP Vault: everything below `admin`, the login in `admin`, the secrets in `admin/team-a`.
    vault.policy('team-a', { 'team-a/secret/data/app': ['read'] }, 'admin');
    vault.appRole('admin/approle', 'ci', { roleId: 'role-hcp', secretId, policies: ['team-a'], ttlSec: 600 });
  });

  const namespaceOf = (path: string): string[] => [
    ...new Set(vault.requests.filter((r) => r.path.startsWith(path)).map((r) => r.namespace)),
  ];

  it('sends VAULT_NAMESPACE on the login and the reads; a namespaced mount is read through it', async () => {
    const p = provider({
      VAULT_NAMESPACE: 'team-a/',
      VAULT_ROLE: 'web',
      VAULT_AUTH_METHOD: 'kubernetes',
      VAULT_SA_TOKEN_FILE: file('sa-ns', saJwt),
    });
    assert.deepEqual(json(await value(p, 'vault:secret/app')), teamA);
    assert.ok(vault.requests.length >= 3);
    assert.ok(
      vault.requests.every((r) => r.namespace === 'team-a'),
      'every request carries the namespace',
    );
    // A root-namespace token is refused in a namespace its policies do not reach.
    const weak = vault.createToken({ policies: ['app-read'] });
    const elsewhere = provider({
      VAULT_TOKEN: weak,
      VAULT_NAMESPACE: 'team-a',
      VAULT_AUTH_NAMESPACE: 'root',
      VAULT_KV_VERSION: '2',
    });
    const error = await failure(elsewhere, 'vault:secret/app');
    assert.equal(error.reason, 'permission-denied');
    assert.match(error.message, /read secret\/data\/app in namespace "team-a"/);
    // The root policy must name the child's path with the child in front.
    assert.match(error.fix, /`read` on team-a\/secret\/data\/app/);
    assert.ok(!`${error.message}${error.fix}`.includes(weak), 'the token leaked into an error');
  });

  it('logs in in VAULT_AUTH_NAMESPACE and reads in VAULT_NAMESPACE: a parent’s token reads in its child', async () => {
    const p = provider({
      VAULT_NAMESPACE: 'team-a',
      VAULT_AUTH_NAMESPACE: 'root',
      VAULT_ROLE: 'platform',
      VAULT_AUTH_METHOD: 'kubernetes',
      VAULT_SA_TOKEN_FILE: file('sa-platform', saJwt),
    });
    assert.deepEqual(json(await value(p, 'vault:secret/data/app')), teamA);
    assert.deepEqual(namespaceOf('auth/kubernetes/login'), ['']);
    assert.deepEqual(namespaceOf('secret/'), ['team-a']);
    assert.deepEqual(namespaceOf('sys/internal/ui/mounts/'), ['team-a']);
  });

  it('HCP Vault: logs in in admin, reads in admin/team-a', async () => {
    const p = provider({
      VAULT_NAMESPACE: 'admin/team-a',
      VAULT_AUTH_NAMESPACE: 'admin',
      VAULT_AUTH_METHOD: 'approle',
      VAULT_ROLE_ID: 'role-hcp',
      VAULT_SECRET_ID: secretId,
    });
    assert.deepEqual(json(await value(p, 'vault:secret/app')), hcp);
    assert.deepEqual(namespaceOf('auth/approle/login'), ['admin']);
    assert.deepEqual(namespaceOf('secret/'), ['admin/team-a']);
  });

  it('reads a reference in the namespace its ?namespace= names, root included, with the one token', async () => {
    const p = provider({
      VAULT_NAMESPACE: 'team-a',
      VAULT_AUTH_NAMESPACE: 'root',
      VAULT_ROLE: 'platform',
      VAULT_AUTH_METHOD: 'kubernetes',
      VAULT_SA_TOKEN_FILE: file('sa-platform-refs', saJwt),
    });
    const [a, b, root] = await fetchAll(
      p,
      'vault:secret/app',
      'vault:secret/app?namespace=team-b',
      'vault:secret/data/app?namespace=root',
    );
    assert.ok(a?.ok && b?.ok && root?.ok);
    assert.deepEqual(json(a.value), teamA);
    assert.deepEqual(json(b.value), teamB);
    assert.deepEqual(json(root.value), db);
    assert.equal(vault.count('POST', 'auth/kubernetes/login'), 1, 'one login serves every namespace');
    assert.deepEqual(namespaceOf('secret/').sort(), ['', 'team-a', 'team-b']);
    // Mounts are per namespace: team-a's and team-b's `secret/` are looked up apart.
    assert.deepEqual(namespaceOf('sys/internal/ui/mounts/').sort(), ['', 'team-a', 'team-b']);
  });

  it('a token used outside its namespace and the ones below is refused, the fix naming both namespaces', async () => {
    const p = provider({
      VAULT_NAMESPACE: 'team-a',
      VAULT_ROLE: 'web',
      VAULT_AUTH_METHOD: 'kubernetes',
      VAULT_SA_TOKEN_FILE: file('sa-ns-wrong', saJwt),
    });
    const error = await failure(p, 'vault:secret/data/app?namespace=team-b');
    assert.equal(error.reason, 'permission-denied');
    assert.match(error.message, /in namespace "team-b"/);
    assert.match(error.fix, /token is from namespace "team-a".*log in in "team-b" or a parent of it/);
  });

  it('a login in a namespace without the auth mount fails as auth (403), pointing at VAULT_AUTH_NAMESPACE', async () => {
    const p = provider({
      VAULT_NAMESPACE: 'team-b',
      VAULT_ROLE: 'web',
      VAULT_AUTH_METHOD: 'kubernetes',
      VAULT_SA_TOKEN_FILE: file('sa-ns-nomount', saJwt),
    });
    const error = await failure(p, 'vault:secret/app');
    assert.equal(error.reason, 'auth');
    assert.equal(error.transient, false);
    assert.match(
      error.message,
      /kubernetes auth at auth\/kubernetes as role "web" in namespace "team-b": login failed: HTTP 403: permission denied/,
    );
    assert.match(error.fix, /VAULT_AUTH_NAMESPACE/);
  });

  it('refuses a malformed VAULT_NAMESPACE or VAULT_AUTH_NAMESPACE at start, naming the variable', () => {
    for (const [name, text] of [
      ['VAULT_NAMESPACE', 'team-a//x'],
      ['VAULT_AUTH_NAMESPACE', 'admin/sys'],
    ] as const) {
      assert.throws(
        () => provider({ VAULT_TOKEN: rootToken, [name]: text }),
        (e: ProviderError) =>
          e.reason === 'invalid' && !e.transient && e.message.startsWith(`${name}: `) && /root/.test(e.fix),
      );
    }
  });
});

describe('Vault over TLS', () => {
  let tls: FakeVault;
  let caFile: string;
  let token: string;
  const value1 = { v: canary('tls') };

  before(async () => {
    const keyFile = join(files, 'tls-key.pem');
    caFile = join(files, 'tls-cert.pem');
    const made = selfSignedCertificate('vault.internal', 'DNS:vault.internal');
    writeFileSync(keyFile, made.key);
    writeFileSync(caFile, made.cert);
    tls = await FakeVault.start({
      tls: made,
    });
    tls.mountKv('kv', 1);
    tls.putKv('kv/tls', value1);
    token = tls.createToken({ policies: ['reader'] });
    tls.policy('reader', { 'kv/*': ['read'] });
  });
  after(async () => {
    await tls?.stop();
  });

  const over = (env: Record<string, string>): VaultProvider => {
    const p = openVaultProvider(
      { pod: {}, agentVersion: '9' },
      { env: { VAULT_ADDR: tls.addr, VAULT_TOKEN: token, VAULT_KV_VERSION: '1', ...env } },
    );
    open.push(p);
    return p;
  };

  it('verifies Vault with VAULT_CACERT and VAULT_TLS_SERVER_NAME', async () => {
    assert.deepEqual(
      json(
        await value(over({ VAULT_CACERT: caFile, VAULT_TLS_SERVER_NAME: 'vault.internal' }), 'vault:kv/tls'),
      ),
      value1,
    );
  });

  it('trusts a CA given inline with VAULT_CACERT_BYTES (how the webhook passes its cluster CA)', async () => {
    const pem = readFileSync(caFile, 'utf8');
    const p = over({ VAULT_CACERT_BYTES: pem, VAULT_TLS_SERVER_NAME: 'vault.internal' });
    assert.deepEqual(json(await value(p, 'vault:kv/tls')), value1);
    assert.throws(
      () => over({ VAULT_CACERT_BYTES: 'not a certificate' }),
      (e: ProviderError) =>
        e.reason === 'invalid' && /^VAULT_CACERT_BYTES: holds no PEM certificate/.test(e.message),
    );
  });

  it('refuses an unverified certificate as a permanent configuration error naming VAULT_CACERT', async () => {
    const noCa = await failure(over({}), 'vault:kv/tls');
    assert.equal(noCa.reason, 'invalid');
    assert.equal(noCa.transient, false);
    assert.match(noCa.message, /TLS: DEPTH_ZERO_SELF_SIGNED_CERT/);
    assert.match(noCa.fix, /VAULT_CACERT/);
    const wrongName = await failure(over({ VAULT_CACERT: caFile }), 'vault:kv/tls');
    assert.match(wrongName.message, /TLS: ERR_TLS_CERT_ALTNAME_INVALID/);
  });

  it('skips verification for a loopback address when VAULT_SKIP_VERIFY=true', async () => {
    assert.deepEqual(json(await value(over({ VAULT_SKIP_VERIFY: 'true' }), 'vault:kv/tls')), value1);
    // node-vault on its own reads any non-empty VAULT_SKIP_VERIFY in process.env, "false" included, as true.
    process.env.VAULT_SKIP_VERIFY = 'false';
    try {
      const strict = await failure(over({ VAULT_SKIP_VERIFY: 'false' }), 'vault:kv/tls');
      assert.equal(strict.reason, 'invalid');
    } finally {
      delete process.env.VAULT_SKIP_VERIFY;
    }
  });
});

describe('Vault over mutual TLS (VAULT_CLIENT_CERT, VAULT_CLIENT_KEY) and VAULT_CAPATH', () => {
  let mtls: FakeVault;
  let token: string;
  let caDir: string;
  let clientCert: string;
  let clientKey: string;
  let strangerCert: string;
  let strangerKey: string;
  const secret = { v: canary('mtls') };

  before(async () => {
    const server = selfSignedCertificate('127.0.0.1', 'IP:127.0.0.1');
    const client = selfSignedCertificate('secret-agent', 'DNS:secret-agent');
    const stranger = selfSignedCertificate('someone-else', 'DNS:someone-else');
    // A CA directory as ops teams mount it: the CA among other files.
    caDir = join(files, 'mtls-cas');
    mkdirSync(caDir);
    writeFileSync(join(caDir, 'vault-ca.pem'), server.cert);
    writeFileSync(join(caDir, 'README'), 'not a certificate\n');
    [clientCert, clientKey, strangerCert, strangerKey] = [
      'client.pem',
      'client-key.pem',
      'x.pem',
      'x-key.pem',
    ].map((name) => join(files, `mtls-${name}`)) as [string, string, string, string];
    writeFileSync(clientCert, client.cert);
    writeFileSync(clientKey, client.key);
    writeFileSync(strangerCert, stranger.cert);
    writeFileSync(strangerKey, stranger.key);
    mtls = await FakeVault.start({ tls: { ...server, clientCa: client.cert } });
    mtls.mountKv('kv', 1);
    mtls.putKv('kv/mtls', secret);
    mtls.policy('reader', { 'kv/*': ['read'] });
    token = mtls.createToken({ policies: ['reader'] });
  });
  after(async () => {
    await mtls?.stop();
  });

  const over = (env: Record<string, string>): VaultProvider => {
    const p = openVaultProvider(
      { pod: {}, agentVersion: '9' },
      {
        env: {
          VAULT_ADDR: mtls.addr,
          VAULT_TOKEN: token,
          VAULT_KV_VERSION: '1',
          VAULT_CAPATH: caDir,
          ...env,
        },
      },
    );
    open.push(p);
    return p;
  };

  it('presents the client certificate and trusts the CA found in VAULT_CAPATH', async () => {
    const p = over({ VAULT_CLIENT_CERT: clientCert, VAULT_CLIENT_KEY: clientKey });
    assert.deepEqual(json(await value(p, 'vault:kv/mtls')), secret);
  });

  it('without a client certificate, or with one Vault does not trust, the handshake fails: not written', async () => {
    const none = await failure(over({}), 'vault:kv/mtls');
    assert.equal(none.reason, 'invalid');
    assert.equal(none.transient, false);
    assert.match(
      none.message,
      /TLS: ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED: Vault refused the connection/,
    );
    assert.match(none.fix, /VAULT_CLIENT_CERT and VAULT_CLIENT_KEY/);
    // An untrusted certificate: TLS 1.3 servers reject it after the client's side of the handshake is
    // done, so the agent sees a reset connection, retried as a network fault; nothing is read.
    const attempts: Record<string, string>[] = [
      {},
      { VAULT_CLIENT_CERT: strangerCert, VAULT_CLIENT_KEY: strangerKey },
    ];
    for (const env of attempts) {
      const e = await failure(over(env), 'vault:kv/mtls');
      assert.notEqual(e.reason, 'not-found');
      assertNoCanary(`${e.message} ${e.fix}`, 'a refused handshake');
    }
  });

  /** The settings are checked when the provider opens, the files when its TLS agent is made. */
  const refusal = async (env: Record<string, string>): Promise<ProviderError> => {
    try {
      return await failure(over(env), 'vault:kv/mtls');
    } catch (e) {
      assert.ok(e instanceof ProviderError, String(e));
      return e;
    }
  };

  it('refuses half a client certificate, a directory without certificates, and unreadable files, naming the variable', async () => {
    const half = await refusal({ VAULT_CLIENT_CERT: clientCert });
    assert.equal(half.reason, 'invalid');
    assert.match(half.message, /^VAULT_CLIENT_KEY: is not set, but VAULT_CLIENT_CERT is/);
    const empty = join(files, 'mtls-empty');
    mkdirSync(empty);
    const noCa = await refusal({ VAULT_CAPATH: empty });
    assert.match(noCa.message, /^VAULT_CAPATH: .* holds no PEM certificate/);
    const missing = await refusal({
      VAULT_CLIENT_CERT: join(files, 'nope.pem'),
      VAULT_CLIENT_KEY: clientKey,
    });
    assert.match(missing.message, /^VAULT_CLIENT_CERT: cannot read .*nope\.pem \(ENOENT\)/);
    assert.equal(missing.transient, false);
  });
});

describe('Vault cert auth (VAULT_AUTH_METHOD=cert)', () => {
  let tls: FakeVault;
  let caFile: string;
  const pair: Record<'cert' | 'key' | 'strangerCert' | 'strangerKey', string> = {
    cert: '',
    key: '',
    strangerCert: '',
    strangerKey: '',
  };
  let clientKeyPem: string;
  const secret = { v: canary('cert-auth') };

  before(async () => {
    const server = selfSignedCertificate('127.0.0.1', 'IP:127.0.0.1');
    const client = selfSignedCertificate('web.shop', 'DNS:web.shop');
    const stranger = selfSignedCertificate('someone-else', 'DNS:someone-else');
    clientKeyPem = client.key;
    caFile = join(files, 'cert-auth-ca.pem');
    writeFileSync(caFile, server.cert);
    for (const [name, text] of [
      ['cert', client.cert],
      ['key', client.key],
      ['strangerCert', stranger.cert],
      ['strangerKey', stranger.key],
    ] as const) {
      pair[name] = join(files, `cert-auth-${name}.pem`);
      writeFileSync(pair[name], text);
    }
    // Vault's default listener asks for a client certificate without requiring one; cert auth judges it.
    tls = await FakeVault.start({ tls: server, clock: vault.clock });
    tls.mountKv('kv', 1);
    tls.putKv('kv/app', secret);
    tls.policy('reader', { 'kv/app': ['read'] });
    tls.certRole('cert', 'web', { certificate: client.cert, policies: ['reader'], ttlSec: 600 });
    tls.certRole('cert', 'other', { certificate: stranger.cert, policies: [], ttlSec: 600 });
    tls.certRole('certs-prod', 'web', { certificate: client.cert, policies: ['reader'], ttlSec: 600 });
  });
  after(async () => {
    await tls?.stop();
  });
  beforeEach(() => tls.reset());

  const over = (env: Record<string, string>): VaultProvider => {
    const p = openVaultProvider(
      { pod: {}, agentVersion: '9' },
      {
        env: {
          VAULT_ADDR: tls.addr,
          VAULT_CACERT: caFile,
          VAULT_KV_VERSION: '1',
          VAULT_AUTH_METHOD: 'cert',
          VAULT_CLIENT_CERT: pair.cert,
          VAULT_CLIENT_KEY: pair.key,
          ...env,
        },
        clock: vault.clock,
      },
    );
    open.push(p);
    return p;
  };

  it('logs in with the TLS client certificate, as the named role or any role that trusts it, then reads', async () => {
    const named = over({ VAULT_ROLE: 'web', VAULT_AUTH_MOUNT: 'certs-prod' });
    assert.deepEqual(json(await value(named, 'vault:kv/app')), secret);
    assert.equal(tls.count('POST', 'auth/certs-prod/login'), 1);
    const login = tls.requests.find((r) => r.path === 'auth/certs-prod/login')!;
    assert.equal(login.hasToken, false, 'a login carries no token');
    const any = over({});
    assert.deepEqual(json(await value(any, 'vault:kv/app')), secret);
    assert.equal(tls.count('POST', 'auth/cert/login'), 1);
  });

  it('a certificate the named role does not trust fails as auth, naming the role and VAULT_CLIENT_CERT, never the key', async () => {
    const stranger = over({
      VAULT_CLIENT_CERT: pair.strangerCert,
      VAULT_CLIENT_KEY: pair.strangerKey,
      VAULT_ROLE: 'web',
    });
    const error = await failure(stranger, 'vault:kv/app');
    assert.equal(error.reason, 'auth');
    assert.equal(error.transient, false);
    assert.match(
      error.message,
      /^cert auth at auth\/cert as role "web": login failed: HTTP 400: invalid certificate or no client certificate supplied/,
    );
    assert.match(error.fix, /certificate role "web" on auth\/cert trusts VAULT_CLIENT_CERT/);
    const keyBody = clientKeyPem.split('\n')[1]!;
    for (const text of [error.message, error.fix])
      assert.ok(!text.includes(keyBody), 'key material in an error');
    assert.equal(tls.count('GET', 'kv/app'), 0, 'nothing is read without a token');
  });

  it('refuses cert auth without a client certificate at start, naming VAULT_CLIENT_CERT', () => {
    assert.throws(
      () =>
        openVaultProvider(
          { pod: {}, agentVersion: '9' },
          { env: { VAULT_ADDR: tls.addr, VAULT_AUTH_METHOD: 'cert' } },
        ),
      (e: ProviderError) =>
        e.reason === 'invalid' &&
        !e.transient &&
        /^VAULT_CLIENT_CERT: is required for cert auth/.test(e.message),
    );
  });
});

describe('Vault aws auth (VAULT_AUTH_METHOD=aws, iam)', () => {
  let moto: Moto;
  let web: MotoIamUser;
  let intruder: MotoIamUser;
  const saved = new Map<string, string | undefined>();
  const AWS_VARS = [
    'AWS_ACCESS_KEY_ID',
    'AWS_SECRET_ACCESS_KEY',
    'AWS_SESSION_TOKEN',
    'AWS_PROFILE',
    'AWS_SHARED_CREDENTIALS_FILE',
    'AWS_CONFIG_FILE',
    'AWS_WEB_IDENTITY_TOKEN_FILE',
    'AWS_CONTAINER_CREDENTIALS_FULL_URI',
    'AWS_CONTAINER_CREDENTIALS_RELATIVE_URI',
    'AWS_EC2_METADATA_DISABLED',
  ];
  /** The AWS SDK's credential chain reads the process environment, as it does in a pod. */
  const useCredentials = (user: { accessKeyId: string; secretAccessKey: string } | undefined): void => {
    for (const name of AWS_VARS) Reflect.deleteProperty(process.env, name);
    process.env.AWS_SHARED_CREDENTIALS_FILE = join(files, 'no-aws-credentials');
    process.env.AWS_CONFIG_FILE = join(files, 'no-aws-config');
    process.env.AWS_EC2_METADATA_DISABLED = 'true';
    if (user) {
      process.env.AWS_ACCESS_KEY_ID = user.accessKeyId;
      process.env.AWS_SECRET_ACCESS_KEY = user.secretAccessKey;
    }
  };

  before(async () => {
    for (const name of AWS_VARS) saved.set(name, process.env[name]);
    // moto checks every signature once the four set-up requests (two per user) are done.
    moto = await startMoto({ INITIAL_NO_AUTH_ACTION_COUNT: '4' });
    web = await motoIamUser(moto.endpoint, 'shop-web');
    intruder = await motoIamUser(moto.endpoint, 'intruder');
    // Vault's auth/aws/config/client: moto stands in for STS.
    vault.awsAuth('aws', { stsEndpoint: moto.endpoint, iamServerId: 'vault.shop.example' });
    vault.awsRole('aws', 'shop-web', {
      boundIamPrincipalArn: [web.arn],
      policies: ['app-read'],
      ttlSec: 600,
    });
    vault.awsAuth('aws-open', { stsEndpoint: moto.endpoint });
    vault.awsRole('aws-open', 'web', {
      boundIamPrincipalArn: ['arn:aws:iam::123456789012:user/shop-*'],
      policies: ['app-read'],
      ttlSec: 600,
    });
  });
  after(async () => {
    for (const [name, value] of saved)
      if (value === undefined) Reflect.deleteProperty(process.env, name);
      else process.env[name] = value;
    await moto?.stop();
  });

  it('logs in with an sts:GetCallerIdentity request signed with the pod’s credentials, which STS (moto) verifies', async () => {
    useCredentials(web);
    const p = provider({ VAULT_AUTH_METHOD: 'aws', VAULT_AWS_IAM_SERVER_ID: 'vault.shop.example' });
    assert.deepEqual(json(await value(p, 'vault:kv1/legacy')), legacy);
    assert.equal(vault.count('POST', 'auth/aws/login'), 1);
    // No VAULT_ROLE: Vault takes the IAM user's name as the role, as its docs say.
    assert.deepEqual(vault.awsLogins.at(-1), {
      arn: web.arn,
      role: 'shop-web',
      url: 'https://sts.amazonaws.com/',
    });
    const error = await failure(p, 'vault:secret/data/forbidden-aws');
    assert.ok(!`${error.message}${error.fix}`.includes(web.secretAccessKey), 'the secret key leaked');
  });

  it('signs for the region and STS endpoint asked, and names the role; a bound wildcard admits the user', async () => {
    useCredentials(web);
    const p = provider({
      VAULT_AUTH_METHOD: 'aws',
      VAULT_AUTH_MOUNT: 'aws-open',
      VAULT_ROLE: 'web',
      VAULT_AWS_REGION: 'eu-west-1',
    });
    await value(p, 'vault:kv1/legacy');
    assert.deepEqual(vault.awsLogins.at(-1), {
      arn: web.arn,
      role: 'web',
      url: 'https://sts.eu-west-1.amazonaws.com/',
    });
    const auto = provider({
      VAULT_AUTH_METHOD: 'aws',
      VAULT_AUTH_MOUNT: 'aws-open',
      VAULT_ROLE: 'web',
      VAULT_AWS_REGION: 'auto',
      AWS_REGION: 'ap-south-1',
      VAULT_AWS_STS_ENDPOINT: 'https://sts-vpce.example.internal',
    });
    await value(auto, 'vault:kv1/legacy');
    assert.equal(vault.awsLogins.at(-1)!.url, 'https://sts-vpce.example.internal/');
  });

  it('a wrong secret key fails at STS (moto’s SignatureDoesNotMatch) as auth, never showing the key', async () => {
    const wrongKey = canary('aws-secret-key');
    useCredentials({ accessKeyId: web.accessKeyId, secretAccessKey: wrongKey });
    const p = provider({ VAULT_AUTH_METHOD: 'aws', VAULT_AWS_IAM_SERVER_ID: 'vault.shop.example' });
    const error = await failure(p, 'vault:kv1/legacy');
    assert.equal(error.reason, 'auth');
    assert.equal(error.transient, false);
    assert.match(
      error.message,
      /^aws auth \(iam\) at auth\/aws: login failed: HTTP 400: error making upstream request: received error code 403 from STS: [\s\S]*SignatureDoesNotMatch/,
    );
    assert.match(error.fix, /bound_iam_principal_arn/);
  });

  it('refuses a principal the role does not bind, and a login without the server id Vault demands', async () => {
    useCredentials(intruder);
    const p = provider({
      VAULT_AUTH_METHOD: 'aws',
      VAULT_ROLE: 'shop-web',
      VAULT_AWS_IAM_SERVER_ID: 'vault.shop.example',
    });
    const notBound = await failure(p, 'vault:kv1/legacy');
    assert.equal(notBound.reason, 'auth');
    assert.match(notBound.message, /IAM Principal ".*user\/intruder" does not belong to the role "shop-web"/);
    useCredentials(web);
    const noId = await failure(provider({ VAULT_AUTH_METHOD: 'aws' }), 'vault:kv1/legacy');
    assert.match(
      noId.message,
      /error validating X-Vault-AWS-IAM-Server-ID header: missing header "X-Vault-AWS-IAM-Server-ID"/,
    );
    assert.match(noId.fix, /VAULT_AWS_IAM_SERVER_ID/);
  });

  it('without AWS credentials fails as auth before asking Vault, naming the SDK’s error and the fix', async () => {
    useCredentials(undefined);
    const p = provider({ VAULT_AUTH_METHOD: 'aws' });
    const error = await failure(p, 'vault:kv1/legacy');
    assert.equal(error.reason, 'auth');
    assert.equal(error.transient, false);
    assert.match(
      error.message,
      /no AWS credentials to sign sts:GetCallerIdentity with: CredentialsProviderError/,
    );
    assert.match(error.fix, /EKS Pod Identity or IRSA/);
    assert.equal(vault.count('POST', 'auth/aws/login'), 0);
  });

  it('refuses unusable region and endpoint settings at start, naming the variable', () => {
    const bad = (env: Record<string, string>, field: RegExp) =>
      assert.throws(
        () => provider({ VAULT_AUTH_METHOD: 'aws', ...env }),
        (e: ProviderError) => e.reason === 'invalid' && !e.transient && field.test(e.message),
      );
    bad({ VAULT_AWS_REGION: 'Europe' }, /^VAULT_AWS_REGION: "Europe" is not an AWS region/);
    bad({ VAULT_AWS_REGION: 'auto' }, /^VAULT_AWS_REGION: is auto, but AWS_REGION/);
    bad({ VAULT_AWS_STS_ENDPOINT: 'sts.amazonaws.com' }, /^VAULT_AWS_STS_ENDPOINT: .* is not a URL/);
    bad({ VAULT_AWS_STS_ENDPOINT: 'https://k:s@sts.amazonaws.com' }, /^VAULT_AWS_STS_ENDPOINT: /);
  });
});

describe('Vault gcp auth (VAULT_AUTH_METHOD=gcp, iam)', () => {
  const account = 'shop-web@my-project.iam.gserviceaccount.com';
  const accessToken = canary('gcp-access-token');
  let google: FakeGoogleIam;
  const saved = new Map<string, string | undefined>();
  const GOOGLE_VARS = [
    'GCE_METADATA_HOST',
    'GCE_METADATA_IP',
    'GOOGLE_APPLICATION_CREDENTIALS',
    'GOOGLE_CLOUD_PROJECT',
  ];

  before(async () => {
    for (const name of GOOGLE_VARS) saved.set(name, process.env[name]);
    google = await FakeGoogleIam.start({ serviceAccount: account, accessToken });
    // google-auth-library finds Workload Identity's metadata server here, as in a GKE pod.
    Reflect.deleteProperty(process.env, 'GOOGLE_APPLICATION_CREDENTIALS');
    Reflect.deleteProperty(process.env, 'GCE_METADATA_IP');
    process.env.GCE_METADATA_HOST = google.metadataHost;
    // Else the library asks `gcloud config config-helper` (installed on this machine, not in a pod).
    process.env.GOOGLE_CLOUD_PROJECT = 'my-project';
    vault.gcpAuth('gcp', { apiEndpoint: google.endpoint });
    vault.gcpRole('gcp', 'web', { boundServiceAccounts: [account], policies: ['app-read'], ttlSec: 600 });
    vault.gcpRole('gcp', 'other-team', {
      boundServiceAccounts: ['other@my-project.iam.gserviceaccount.com'],
      policies: ['app-read'],
      ttlSec: 600,
    });
    vault.gcpRole('gcp', 'strict', {
      boundServiceAccounts: [account],
      maxJwtExpSec: 120,
      policies: ['app-read'],
      ttlSec: 600,
    });
  });
  after(async () => {
    for (const [name, value] of saved)
      if (value === undefined) Reflect.deleteProperty(process.env, name);
      else process.env[name] = value;
    await google?.stop();
  });

  const gcp = (env: Record<string, string>): VaultProvider =>
    provider({ VAULT_AUTH_METHOD: 'gcp', VAULT_GCP_IAM_CREDENTIALS_ENDPOINT: google.endpoint, ...env });

  const noJwtIn = (text: string): void => {
    for (const { signedJwt } of google.signed) assert.ok(!text.includes(signedJwt), 'a signed JWT leaked');
  };

  it('logs in with a JWT Google signs for the pod’s service account (signJwt), which Vault verifies with its public key', async () => {
    const p = gcp({ VAULT_ROLE: 'web' });
    const before = Math.floor(Date.now() / 1000);
    assert.deepEqual(json(await value(p, 'vault:kv1/legacy')), legacy);
    assert.equal(vault.count('POST', 'auth/gcp/login'), 1);
    const { claims, serviceAccount } = google.signed.at(-1)!;
    assert.equal(serviceAccount, account, 'the account the metadata server names');
    assert.equal(claims.aud, 'vault/web');
    assert.equal(claims.sub, account);
    const lifetime = (claims.exp as number) - before;
    assert.ok(lifetime > 0 && lifetime <= 15 * 60, `exp ${lifetime}s ahead`);
  });

  it('a service account the role does not bind, or a JWT living longer than the role allows, fails as auth', async () => {
    const unbound = await failure(gcp({ VAULT_ROLE: 'other-team' }), 'vault:kv1/legacy');
    assert.equal(unbound.reason, 'auth');
    assert.equal(unbound.transient, false);
    assert.match(
      unbound.message,
      /^gcp auth \(iam\) at auth\/gcp as role "other-team": login failed: HTTP 400: service account shop-web@.* is not authorized for role/,
    );
    assert.match(unbound.fix, /bound_service_accounts naming the pod’s service account/);
    const strict = await failure(gcp({ VAULT_ROLE: 'strict' }), 'vault:kv1/legacy');
    assert.match(strict.message, /role requires that service account JWTs expire within 120 seconds/);
    assert.match(strict.fix, /max_jwt_exp allows 5 minutes/);
    for (const e of [unbound, strict]) noJwtIn(`${e.message} ${e.fix}`);
  });

  it('signJwt refused for another service account (403 PERMISSION_DENIED) fails as auth before Vault is asked', async () => {
    const p = gcp({
      VAULT_ROLE: 'web',
      VAULT_GCP_SERVICE_ACCOUNT: 'vault-auth@my-project.iam.gserviceaccount.com',
    });
    const error = await failure(p, 'vault:kv1/legacy');
    assert.equal(error.reason, 'auth');
    assert.equal(error.transient, false);
    assert.match(
      error.message,
      /signJwt as vault-auth@my-project.iam.gserviceaccount.com: HTTP 403 PERMISSION_DENIED: Permission 'iam.serviceAccounts.signJwt' denied/,
    );
    assert.match(error.fix, /roles\/iam.serviceAccountTokenCreator on vault-auth@/);
    assert.equal(vault.count('POST', 'auth/gcp/login'), 0);
  });

  it('without a token from the metadata server fails as auth, retried (GKE’s metadata server can lag a new pod)', async () => {
    google.tokenAvailable = false;
    try {
      const error = await failure(gcp({ VAULT_ROLE: 'web' }), 'vault:kv1/legacy');
      assert.equal(error.reason, 'auth');
      assert.equal(error.transient, true);
      assert.match(error.message, /no Google credentials to call signJwt with/);
      assert.match(error.fix, /Workload Identity/);
    } finally {
      google.tokenAvailable = true;
    }
  });

  it('refuses gcp without a role, an account that is no email, and a clear-text endpoint past loopback', () => {
    const bad = (env: Record<string, string>, field: RegExp) =>
      assert.throws(
        () => provider({ VAULT_AUTH_METHOD: 'gcp', ...env }),
        (e: ProviderError) => e.reason === 'invalid' && !e.transient && field.test(e.message),
      );
    bad({}, /^VAULT_ROLE: is required for GCP auth/);
    bad({ VAULT_ROLE: 'web', VAULT_GCP_SERVICE_ACCOUNT: 'shop-web' }, /^VAULT_GCP_SERVICE_ACCOUNT: /);
    bad(
      { VAULT_ROLE: 'web', VAULT_GCP_IAM_CREDENTIALS_ENDPOINT: 'http://iam.internal' },
      /^VAULT_GCP_IAM_CREDENTIALS_ENDPOINT: .*http:\/\/ only on loopback/,
    );
  });
});

describe('Vault documentation', () => {
  it('docs/vault.md lists exactly the variables the provider reads', () => {
    const doc = readFileSync(new URL('../../docs/vault.md', import.meta.url), 'utf8');
    const documented = [...doc.matchAll(/^\| `(VAULT_[A-Z_]+)`/gm)].map((m) => m[1]);
    assert.deepEqual(documented.sort(), VAULT_ENV.map((v) => v.name).sort());
  });
});
