/**
 * Token and lease lifecycle of the Vault provider (VaultSession, LeaseTracker) against the fake Vault.
 * Provider and fake share one ManualClock: tests advance it and call `maintain()` (or let `start()`'s
 * timers fire) instead of waiting, and Vault expires tokens and leases on the same clock.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, beforeEach, describe, it } from 'node:test';
import { parseReference, type VaultReference } from '../../agent/contract/reference.ts';
import type { SecretValue } from '../../agent/providers/provider.ts';
import { openVaultProvider, type VaultProvider } from '../../agent/providers/vault/vault-provider.ts';
import type { SessionEvent } from '../../agent/providers/vault/session.ts';
import { assertNoCanary, canary } from '../support/canary.ts';
import { FakeVault } from '../fakes/vault.ts';

const SEC = 1000;
let vault: FakeVault;
let files: string;
const open: VaultProvider[] = [];
const saJwt = canary('sa-jwt');

before(async () => {
  vault = await FakeVault.start();
  files = mkdtempSync(join(tmpdir(), 'vault-session-'));
  vault.mountKv('secret', 2);
  vault.putKv('secret/app', { password: canary('kv') });
  vault.mountDatabase('database');
  vault.databaseRole('database', 'app', {
    ttlSec: 3600,
    maxTtlSec: 7200,
    credentials: () => ({
      username: `v-${Math.random().toString(36).slice(2, 8)}`,
      password: canary('dynamic'),
    }),
  });
  vault.policy('app', { 'secret/data/app': ['read'], 'database/creds/app': ['read'] });
  // Logins live 600 s, renewable up to 1500 s.
  vault.kubernetesRole('kubernetes', 'web', { jwt: saJwt, policies: ['app'], ttlSec: 600, maxTtlSec: 1500 });
  vault.kubernetesRole('kubernetes', 'fixed', {
    jwt: saJwt,
    policies: ['app'],
    ttlSec: 600,
    renewable: false,
  });
});

after(async () => {
  for (const p of open) p.close?.();
  await vault.stop();
  rmSync(files, { recursive: true, force: true });
});

beforeEach(() => vault.reset());

function provider(env: Record<string, string>): { p: VaultProvider; events: SessionEvent[] } {
  const p = openVaultProvider(
    { pod: {}, agentVersion: '9' },
    { env: { VAULT_ADDR: vault.addr, ...env }, clock: vault.clock },
  );
  open.push(p);
  const events: SessionEvent[] = [];
  p.session.subscribe((e) => events.push(e));
  return { p, events };
}

function kubernetes(role = 'web'): { p: VaultProvider; events: SessionEvent[] } {
  const jwtFile = join(files, `sa-${role}`);
  writeFileSync(jwtFile, saJwt);
  return provider({ VAULT_ROLE: role, VAULT_AUTH_METHOD: 'kubernetes', VAULT_SA_TOKEN_FILE: jwtFile });
}

async function fetchValue(p: VaultProvider, text: string): Promise<SecretValue> {
  const [outcome] = await p.fetch([parseReference(text, 'SECRET_0_REF') as VaultReference], {
    signal: AbortSignal.timeout(10_000),
  });
  assert.ok(outcome!.ok, outcome!.ok ? '' : `${outcome!.error.reason}: ${outcome!.error.message}`);
  return outcome!.value;
}

/** Moves the shared clock and lets the session do what is due. */
async function advance(p: VaultProvider, ms: number): Promise<void> {
  vault.clock.advance(ms);
  await p.session.maintain();
}

const types = (events: SessionEvent[]) => events.map((e) => e.type);

describe('Vault token lifecycle', () => {
  it('starts no timer in init mode: fetching never schedules anything', async () => {
    const { p } = kubernetes();
    await fetchValue(p, 'vault:secret/data/app');
    await fetchValue(p, 'vault:database/creds/app');
    assert.equal(vault.clock.pendingTimers, 0);
  });

  it('renews a login token at 2/3 of its TTL, then logs in again once renewal is capped at the max TTL', async () => {
    const { p, events } = kubernetes();
    const t0 = vault.clock.now();
    await fetchValue(p, 'vault:secret/data/app');
    assert.equal(p.session.tokenInfo().expiresAt, t0 + 600 * SEC);
    assert.equal(p.session.tokenInfo().renewAt, t0 + 400 * SEC);

    await advance(p, 399 * SEC);
    assert.equal(vault.count('POST', 'auth/token/renew-self'), 0, 'nothing is due before 2/3 of the TTL');
    await advance(p, 1 * SEC); // t = 400 s
    assert.equal(vault.count('POST', 'auth/token/renew-self'), 1);
    assert.equal(p.session.tokenInfo().expiresAt, t0 + 1000 * SEC);
    await advance(p, 400 * SEC); // t = 800 s: 700 s left under the cap, 600 granted
    assert.equal(vault.count('POST', 'auth/token/renew-self'), 2);
    assert.equal(p.session.tokenInfo().capped, false);
    await advance(p, 400 * SEC); // t = 1200 s: only 300 s left before the 1500 s max TTL
    assert.equal(vault.count('POST', 'auth/token/renew-self'), 3);
    assert.equal(p.session.tokenInfo().capped, true);
    assert.equal(p.session.tokenInfo().expiresAt, t0 + 1500 * SEC);
    assert.deepEqual(types(events), ['login', 'token-renewed', 'token-renewed', 'token-capped']);

    await advance(p, 200 * SEC); // t = 1400 s: 2/3 of the capped 300 s: log in again while the old token works
    assert.equal(vault.count('POST', 'auth/kubernetes/login'), 2);
    assert.equal(vault.count('POST', 'auth/token/renew-self'), 3);
    assert.equal(p.session.tokenInfo().capped, false);
    assert.equal(p.session.tokenInfo().expiresAt, t0 + 2000 * SEC);
    await advance(p, 200 * SEC); // the old token is dead now; the new one reads
    await fetchValue(p, 'vault:secret/data/app');
    assert.equal(vault.requests.at(-1)!.status, 200);
    assertNoCanary(JSON.stringify(events), 'session events');
  });

  it('does the same on its own with start(): timers at the due times, rescheduled after each', async () => {
    const { p } = kubernetes();
    await fetchValue(p, 'vault:secret/data/app');
    p.session.start();
    assert.equal(vault.clock.pendingTimers, 1);
    vault.clock.advance(400 * SEC);
    await p.session.maintain(); // the run the timer started
    assert.equal(vault.count('POST', 'auth/token/renew-self'), 1);
    assert.equal(vault.clock.pendingTimers, 1, 'the next renewal is scheduled');
    p.session.stop();
    assert.equal(vault.clock.pendingTimers, 0);
  });

  it('replaces a non-renewable login token at 2/3 of its TTL without trying to renew it', async () => {
    const { p } = kubernetes('fixed');
    await fetchValue(p, 'vault:secret/data/app');
    await advance(p, 400 * SEC);
    assert.equal(vault.count('POST', 'auth/token/renew-self'), 0);
    assert.equal(vault.count('POST', 'auth/kubernetes/login'), 2);
  });

  it('logs in again when renew-self is refused with 403 (token revoked)', async () => {
    const { p, events } = kubernetes();
    await fetchValue(p, 'vault:secret/data/app');
    vault.revokeLogins('kubernetes');
    await advance(p, 400 * SEC);
    assert.equal(vault.count('POST', 'auth/token/renew-self'), 1);
    assert.equal(vault.count('POST', 'auth/kubernetes/login'), 2);
    assert.equal(events.at(-1)!.type, 'login');
    await fetchValue(p, 'vault:secret/data/app');
  });

  it('retries a renewal that met a transient error soon, not at the next 2/3', async () => {
    const { p } = kubernetes();
    await fetchValue(p, 'vault:secret/data/app');
    vault.fail({ status: 503, path: 'auth/token/renew-self' });
    await advance(p, 400 * SEC);
    assert.equal(vault.count('POST', 'auth/token/renew-self'), 1);
    const retryAt = p.session.tokenInfo().renewAt!;
    assert.ok(retryAt > vault.clock.now() && retryAt <= vault.clock.now() + 30 * SEC);
    await advance(p, retryAt - vault.clock.now());
    assert.equal(vault.count('POST', 'auth/token/renew-self'), 2);
    assert.equal(vault.requests.at(-1)!.status, 200);
  });

  it('looks up a static token’s TTL at the first maintenance, renews it, and keeps using it once capped until Vault refuses it', async () => {
    const token = vault.createToken({ policies: ['app'], ttlSec: 600, maxTtlSec: 1000 });
    const { p, events } = provider({ VAULT_TOKEN: token });
    await fetchValue(p, 'vault:secret/data/app');
    assert.equal(vault.count('GET', 'auth/token/lookup-self'), 0, 'init fetches do not look the token up');
    await p.session.maintain();
    assert.equal(vault.count('GET', 'auth/token/lookup-self'), 1);
    assert.equal(p.session.tokenInfo().expiresAt, vault.clock.now() + 600 * SEC);
    await advance(p, 400 * SEC);
    assert.equal(vault.count('POST', 'auth/token/renew-self'), 1);
    await advance(p, 400 * SEC); // 200 s left of 1000
    assert.equal(vault.count('POST', 'auth/token/renew-self'), 2);
    assert.deepEqual(types(events), ['token-renewed', 'token-capped']);
    assert.equal(p.session.tokenInfo().renewAt, undefined, 'nothing more to do for a static token');
    await advance(p, 150 * SEC);
    await fetchValue(p, 'vault:secret/data/app');
    await advance(p, 50 * SEC); // past the max TTL
    const [outcome] = await p.fetch([parseReference('vault:secret/data/app', 'X') as VaultReference], {
      signal: AbortSignal.timeout(5000),
    });
    assert.ok(outcome && !outcome.ok);
    assert.equal(outcome.error.reason, 'permission-denied');
    assert.match(outcome.error.fix, /token expired or was revoked/);
    assert.ok(!outcome.error.message.includes(token) && !outcome.error.fix.includes(token));
  });
});

describe('Vault lease lifecycle', () => {
  it('renews a lease at 2/3, reuses the credentials meanwhile, and asks for a re-fetch once capped at the max TTL', async () => {
    const root = vault.createToken({ policies: ['app'] });
    const { p, events } = provider({ VAULT_TOKEN: root });
    const t0 = vault.clock.now();
    const first = await fetchValue(p, 'vault:database/creds/app');
    assert.equal(first.backendVersion, first.version, 'a lease id is the version Vault names');
    assert.equal(p.session.tokenInfo().expiresAt, undefined);

    await advance(p, 2400 * SEC);
    assert.equal(vault.count('PUT', 'sys/leases/renew'), 1);
    assert.equal(vault.leaseTtl(first.version), 3600);
    const [renewed] = p.session.leases.deadlines();
    assert.equal(renewed!.expiresAt, t0 + 6000 * SEC);
    assert.equal(renewed!.mustRefetch, false);
    const again = await fetchValue(p, 'vault:database/creds/app');
    assert.equal(again.version, first.version, 'a live lease keeps its credentials');
    assert.deepEqual(Buffer.from(again.bytes), Buffer.from(first.bytes));
    assert.equal(vault.count('GET', 'database/creds/app'), 1);

    await advance(p, 2400 * SEC); // t = 4800 s: 2400 s left under the 7200 s max TTL
    assert.equal(vault.count('PUT', 'sys/leases/renew'), 2);
    const [capped] = p.session.leases.deadlines();
    assert.deepEqual(
      { mustRefetch: capped!.mustRefetch, reason: capped!.reason, expiresAt: capped!.expiresAt },
      { mustRefetch: true, reason: 'capped', expiresAt: t0 + 7200 * SEC },
    );
    const ending = events.find((e) => e.type === 'lease-ending');
    assert.ok(
      ending &&
        ending.type === 'lease-ending' &&
        ending.reason === 'capped' &&
        ending.leaseId === first.version,
    );
    await advance(p, 1000 * SEC);
    assert.equal(vault.count('PUT', 'sys/leases/renew'), 2, 'an ending lease is not renewed again');

    const fresh = await fetchValue(p, 'vault:database/creds/app');
    assert.notEqual(fresh.version, first.version);
    assert.equal(vault.count('GET', 'database/creds/app'), 2);
    assert.equal(p.session.leases.deadlines()[0]!.mustRefetch, false);
    assertNoCanary(JSON.stringify(events), 'session events');
  });

  it('reports a lease Vault no longer knows (400 lease not found) as ending now', async () => {
    const { p, events } = provider({ VAULT_TOKEN: vault.createToken({ policies: ['app'] }) });
    const v = await fetchValue(p, 'vault:database/creds/app');
    vault.revokeLease(v.version);
    await advance(p, 2400 * SEC);
    assert.equal(vault.count('PUT', 'sys/leases/renew'), 1);
    assert.equal(vault.requests.at(-1)!.status, 400);
    const [lease] = p.session.leases.deadlines();
    assert.equal(lease!.mustRefetch, true);
    assert.equal(lease!.reason, 'not-found');
    assert.equal(lease!.expiresAt, vault.clock.now());
    const ending = events.find((e) => e.type === 'lease-ending');
    assert.ok(ending && ending.type === 'lease-ending' && /lease not found/.test(ending.detail ?? ''));
  });

  it('renews a lease in the namespace it was issued in, and the token in the namespace of the login', async () => {
    vault.mountDatabase('team-a/database');
    vault.databaseRole('team-a/database', 'app', {
      ttlSec: 3600,
      maxTtlSec: 7200,
      credentials: () => ({ username: 'v-team-a', password: canary('ns-dynamic') }),
    });
    // A root token's default policy covers the root's sys/leases/renew, not team-a's.
    vault.policy('team-a-db', {
      'team-a/database/creds/app': ['read'],
      'team-a/sys/leases/renew': ['update'],
    });
    vault.kubernetesRole('kubernetes', 'platform', {
      jwt: saJwt,
      policies: ['team-a-db'],
      ttlSec: 3000,
      maxTtlSec: 30_000,
    });
    const jwtFile = join(files, 'sa-platform');
    writeFileSync(jwtFile, saJwt);
    const { p, events } = provider({
      VAULT_ROLE: 'platform',
      VAULT_AUTH_METHOD: 'kubernetes',
      VAULT_SA_TOKEN_FILE: jwtFile,
      VAULT_NAMESPACE: 'team-a',
      VAULT_AUTH_NAMESPACE: 'root',
    });
    const v = await fetchValue(p, 'vault:database/creds/app');
    await advance(p, 2000 * SEC); // the token (3000 s) is due
    await advance(p, 400 * SEC); // the lease (3600 s) is due
    const seen = (method: string, path: string) =>
      vault.requests
        .filter((r) => r.method === method && r.path === path)
        .map((r) => [r.namespace, r.status]);
    assert.deepEqual(seen('POST', 'auth/token/renew-self'), [['', 200]]);
    assert.deepEqual(seen('PUT', 'sys/leases/renew'), [['team-a', 200]]);
    assert.equal(vault.leaseTtl(v.version), 3600);
    assert.deepEqual(types(events), ['login', 'token-renewed', 'lease-renewed']);
    assertNoCanary(JSON.stringify(events), 'session events');
  });

  it('ends every lease by the old token’s expiry when the session logs in again (leases die with their token)', async () => {
    const { p } = kubernetes('fixed');
    const t0 = vault.clock.now();
    await fetchValue(p, 'vault:database/creds/app');
    await advance(p, 400 * SEC); // the non-renewable token is replaced
    assert.equal(vault.count('POST', 'auth/kubernetes/login'), 2);
    const [lease] = p.session.leases.deadlines();
    assert.equal(lease!.mustRefetch, true);
    assert.equal(lease!.reason, 'token-ending');
    assert.equal(lease!.expiresAt, t0 + 600 * SEC);
  });
});

describe('Vault revocation when a sidecar stops (VAULT_REVOKE_ON_SHUTDOWN)', () => {
  const budget = () => AbortSignal.timeout(10_000);

  it('revokes the login token, an earlier one still alive, and with them their leases', async () => {
    const jwtFile = join(files, 'sa-revoke');
    writeFileSync(jwtFile, saJwt);
    const { p } = provider({
      VAULT_ROLE: 'fixed',
      VAULT_AUTH_METHOD: 'kubernetes',
      VAULT_SA_TOKEN_FILE: jwtFile,
      VAULT_REVOKE_ON_SHUTDOWN: 'true',
    });
    const first = await fetchValue(p, 'vault:database/creds/app');
    await advance(p, 400 * SEC); // the non-renewable token is replaced; the first one lives 200 s more
    assert.equal(vault.count('POST', 'auth/kubernetes/login'), 2);
    const second = await fetchValue(p, 'vault:database/creds/app');
    assert.notEqual(second.version, first.version);
    const outcomes = await p.release!(budget());
    assert.deepEqual(
      outcomes.map((o) => [o.what, o.ok]),
      [
        ['an earlier Vault token of kubernetes auth at auth/kubernetes as role "fixed" and its leases', true],
        ['Vault token of kubernetes auth at auth/kubernetes as role "fixed" and its leases', true],
      ],
    );
    assert.deepEqual(
      vault.revocations.map((r) => r.kind),
      ['token', 'token'],
    );
    assert.equal(vault.count('POST', 'auth/token/revoke-self'), 2);
    assert.equal(vault.leaseTtl(first.version), undefined, 'the leases went with their tokens');
    assert.equal(vault.leaseTtl(second.version), undefined);
    assert.deepEqual(p.session.leases.deadlines(), []);
    assertNoCanary(JSON.stringify(outcomes), 'release outcomes');
  });

  it('keeps a static token (not the agent’s to revoke) and revokes only the leases it made', async () => {
    vault.policy('revoker', { 'database/creds/app': ['read'], 'sys/leases/revoke': ['update'] });
    const token = vault.createToken({ policies: ['revoker'] });
    const { p } = provider({ VAULT_TOKEN: token, VAULT_REVOKE_ON_SHUTDOWN: 'true' });
    const lease = await fetchValue(p, 'vault:database/creds/app');
    const outcomes = await p.release!(budget());
    assert.deepEqual(outcomes, [{ what: 'lease of vault:database/creds/app', ok: true }]);
    assert.deepEqual(vault.revocations, [{ kind: 'lease', id: lease.version, namespace: '' }]);
    assert.equal(vault.count('POST', 'auth/token/revoke-self'), 0);
    assert.ok(vault.tokenValid(token), 'the token given to the agent still works');
  });

  it('reports a lease the token may not revoke, with the policy fix, and leaves it to expire', async () => {
    const token = vault.createToken({ policies: ['app'] });
    const { p } = provider({ VAULT_TOKEN: token, VAULT_REVOKE_ON_SHUTDOWN: 'true' });
    const lease = await fetchValue(p, 'vault:database/creds/app');
    const [outcome] = await p.release!(budget());
    assert.equal(outcome!.ok, false);
    assert.match(outcome!.detail!, /lease of vault:database\/creds\/app: HTTP 403: permission denied/);
    assert.match(outcome!.fix!, /`update` on sys\/leases\/revoke/);
    assert.equal(vault.leaseTtl(lease.version), 3600);
  });

  it('stops at the shutdown budget when Vault does not answer', async () => {
    const { p } = kubernetes('web');
    const revoking = provider({
      VAULT_ROLE: 'web',
      VAULT_AUTH_METHOD: 'kubernetes',
      VAULT_SA_TOKEN_FILE: join(files, 'sa-web'),
      VAULT_REVOKE_ON_SHUTDOWN: 'true',
    }).p;
    await fetchValue(p, 'vault:secret/data/app');
    await fetchValue(revoking, 'vault:secret/data/app');
    vault.fail({ status: 0, hang: true, path: 'auth/token/revoke-self' });
    const [outcome] = await revoking.release!(AbortSignal.timeout(200));
    assert.equal(outcome!.ok, false);
    assert.match(outcome!.detail!, /not done within the shutdown budget/);
    // Without VAULT_REVOKE_ON_SHUTDOWN nothing is asked at all.
    vault.reset();
    assert.deepEqual(await p.release!(budget()), []);
    assert.equal(vault.requests.length, 0);
  });
});

describe('the session handed from one run of the small sidecar to the next', () => {
  it('the next run uses the token and lease as they were, and renews what is due before it fetches', async () => {
    const one = kubernetes();
    const first = await fetchValue(one.p, 'vault:database/creds/app');
    const handed = one.p.handOff!();
    assert.ok(handed.dueAt !== undefined, 'a renewal is due some time');
    // What goes to the resident is JSON: it must survive the trip.
    const state = JSON.parse(JSON.stringify(handed.state)) as unknown;
    one.p.close?.();

    // The next run comes when the token's renewal is due (2/3 of 600 s), before the lease's (2/3 of 3600 s).
    vault.clock.advance(handed.dueAt! - vault.clock.now());
    const two = kubernetes();
    await two.p.resume!(state, AbortSignal.timeout(10_000));
    assert.equal(vault.count('POST', 'auth/token/renew-self'), 1, 'the renewal that was due');
    assert.ok(two.events.some((e) => e.type === 'token-renewed'));
    const again = await fetchValue(two.p, 'vault:database/creds/app');
    assert.deepEqual(
      Buffer.from(again.bytes).toString(),
      Buffer.from(first.bytes).toString(),
      'the same lease',
    );
    assert.equal(vault.count('POST', 'auth/kubernetes/login'), 1, 'no second login');
    assert.equal(vault.count('GET', 'database/creds/app'), 1, 'no new credentials');
  });

  it('a state of the wrong shape, or for another Vault or login, is not used: the run logs in afresh', async () => {
    const one = kubernetes();
    await fetchValue(one.p, 'vault:secret/data/app');
    const good = JSON.parse(JSON.stringify(one.p.handOff!().state)) as Record<string, unknown>;
    const unusable: unknown[] = [
      undefined,
      null,
      42,
      'hvs.token',
      [],
      { ...good, identity: '["https://other:8200","","kubernetes"]' },
      { ...good, incrementSec: 'x' },
      { ...good, leases: {} },
    ];
    for (const state of unusable) {
      vault.reset();
      const next = kubernetes();
      await next.p.resume!(state, AbortSignal.timeout(10_000));
      await fetchValue(next.p, 'vault:secret/data/app');
      assert.equal(
        vault.count('POST', 'auth/kubernetes/login'),
        1,
        `state ${JSON.stringify(state)?.slice(0, 60)}`,
      );
    }
    // Bad entries in a good state are dropped, the rest used.
    vault.reset();
    const next = kubernetes();
    await next.p.resume!(
      { ...good, retired: [{ token: 5 }, null], leases: [{ ref: 1 }, null, 'x'] },
      AbortSignal.timeout(10_000),
    );
    await fetchValue(next.p, 'vault:secret/data/app');
    assert.equal(vault.count('POST', 'auth/kubernetes/login'), 0);
  });
});
