import type { FailureReason, ReleaseOutcome } from '../provider.ts';
import type { Authenticator } from './auth.ts';
import type { Clock } from './clock.ts';
import { vaultError } from './errors.ts';
import { VaultResponseError, type VaultApi } from './http.ts';
import { LeaseTracker, type LeaseEvent, type SavedLease } from './leases.ts';

/**
 * The Vault token's life: obtained on first use; renewed with `auth/token/renew-self` at two thirds
 * of its TTL; when renewal stops extending it (not renewable, capped at the max TTL, or a 403), a
 * login method logs in again, while a static token keeps being used until Vault refuses it. Also
 * keeps the leases of dynamic secrets (LeaseTracker).
 *
 * Nothing runs on its own unless `start()` is called: init mode exits right after writing, the
 * sidecar starts the session. Tests call `maintain()` after advancing an injected clock.
 */

export type SessionEvent =
  | { readonly type: 'login'; readonly auth: string; readonly ttlSec: number }
  | { readonly type: 'token-renewed'; readonly ttlSec: number }
  | { readonly type: 'token-capped'; readonly ttlSec: number; readonly expiresAt: number }
  | { readonly type: 'token-problem'; readonly reason: FailureReason; readonly detail: string }
  | LeaseEvent;

export interface TokenInfo {
  readonly kind: 'static' | 'login';
  readonly obtained: boolean;
  /** Undefined: unknown (a static token not looked up yet) or no expiry. */
  readonly expiresAt?: number;
  readonly renewAt?: number;
  readonly renewable: boolean;
  /** Renewal reached the max TTL. */
  readonly capped: boolean;
}

/** The session as the small sidecar hands it to its next run: the token, its timers, the leases. */
export interface SavedSession {
  /** Which Vault and login this is for: a state from another is not used. */
  readonly identity: string;
  readonly token?: string;
  readonly incrementSec: number;
  readonly renewable: boolean;
  readonly capped: boolean;
  readonly expiresAt?: number;
  readonly renewAt?: number;
  readonly lookedUp: boolean;
  readonly retired: readonly { readonly token: string; readonly expiresAt?: number }[];
  readonly leases: readonly SavedLease[];
}

const RENEW_FRACTION = 2 / 3;
const MAX_RETRY_MS = 30_000;
const BACKGROUND_TIMEOUT_MS = 20_000;

export class VaultSession {
  readonly leases: LeaseTracker;
  readonly #api: VaultApi;
  readonly #auth: Authenticator;
  readonly #clock: Clock;
  /** The token's namespace (VAULT_AUTH_NAMESPACE): its own calls (lookup, renewal) go there. */
  readonly #namespace: string;
  readonly #listeners = new Set<(event: SessionEvent) => void>();

  #token: string | undefined;
  #incrementSec = 0;
  #renewable = false;
  #capped = false;
  #expiresAt: number | undefined;
  #renewAt: number | undefined;
  /** A static token's TTL is learned with lookup-self at the first maintenance, never on the init path. */
  #lookedUp = false;
  /** Login tokens replaced by a new login and not yet expired: still valid, so revoked at shutdown too. */
  #retired: { token: string; expiresAt: number | undefined }[] = [];
  #obtaining: Promise<string> | undefined;
  #maintaining: Promise<void> | undefined;
  #timer: { cancel(): void } | undefined;
  #started = false;

  constructor(api: VaultApi, auth: Authenticator, clock: Clock, namespace: string) {
    this.#api = api;
    this.#auth = auth;
    this.#clock = clock;
    this.#namespace = namespace;
    this.leases = new LeaseTracker(clock, (event) => {
      this.#emit(event);
    });
  }

  /** Receives renewals, re-logins and leases that must be fetched anew; returns an unsubscribe. */
  subscribe(listener: (event: SessionEvent) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  get authDescription(): string {
    return this.#auth.description;
  }

  deniedFix(path: string): string {
    return this.#auth.deniedFix(path);
  }

  tokenInfo(): TokenInfo {
    return {
      kind: this.#auth.kind,
      obtained: this.#token !== undefined,
      ...(this.#expiresAt !== undefined ? { expiresAt: this.#expiresAt } : {}),
      ...(this.#renewAt !== undefined ? { renewAt: this.#renewAt } : {}),
      renewable: this.#renewable,
      capped: this.#capped,
    };
  }

  /** The token to send: logs in (or reads the static token) on first use, and again once a login token has expired. */
  async token(signal: AbortSignal): Promise<string> {
    if (this.#obtaining) return this.#obtaining;
    const expired =
      this.#auth.kind === 'login' && this.#expiresAt !== undefined && this.#clock.now() >= this.#expiresAt;
    if (this.#token !== undefined && !expired) return this.#token;
    return this.#obtain(signal);
  }

  /** Forgets the token after Vault refused it, so the next call logs in again (or re-reads VAULT_TOKEN_FILE). */
  invalidate(): void {
    if (this.#obtaining) return;
    this.#token = undefined;
    this.#lookedUp = false;
  }

  /**
   * After a 403 on a read: a policy that lacks the path, or a dead token (revoked, expired)? Asks
   * Vault (lookup-self) and forgets the token only if it is dead, so a denied path does not cost a
   * login per fetch.
   */
  async recheck(token: string, signal: AbortSignal): Promise<void> {
    try {
      await this.#api.lookupSelf({ token, namespace: this.#namespace, signal });
    } catch (e) {
      if (e instanceof VaultResponseError && e.status === 403 && this.#token === token) this.invalidate();
    }
  }

  /** When `maintain()` next has work, if ever. */
  nextDueAt(): number | undefined {
    const candidates = [this.leases.nextDueAt(), this.#token === undefined ? undefined : this.#renewAt];
    const due = candidates.filter((c): c is number => c !== undefined);
    return due.length > 0 ? Math.min(...due) : undefined;
  }

  /** What the next run of the small sidecar needs to go on without a new login. `identity`: see SavedSession. */
  save(identity: string): SavedSession {
    const now = this.#clock.now();
    return {
      identity,
      ...(this.#token !== undefined ? { token: this.#token } : {}),
      incrementSec: this.#incrementSec,
      renewable: this.#renewable,
      capped: this.#capped,
      ...(this.#expiresAt !== undefined ? { expiresAt: this.#expiresAt } : {}),
      ...(this.#renewAt !== undefined ? { renewAt: this.#renewAt } : {}),
      lookedUp: this.#lookedUp,
      retired: this.#retired
        .filter((t) => t.expiresAt === undefined || t.expiresAt > now)
        .map((t) => ({ token: t.token, ...(t.expiresAt !== undefined ? { expiresAt: t.expiresAt } : {}) })),
      leases: this.leases.save(),
    };
  }

  /**
   * Takes back what an earlier run saved, unless it is for another Vault or login, or of the wrong
   * shape: then nothing is taken and the session logs in as on a first run. Returns whether it took it.
   */
  restore(saved: unknown, identity: string): boolean {
    const s = saved as Partial<SavedSession> | undefined;
    const optionalNumber = (n: unknown) => n === undefined || Number.isFinite(n);
    if (
      typeof s !== 'object' ||
      s === null ||
      s.identity !== identity ||
      (s.token !== undefined && typeof s.token !== 'string') ||
      !Number.isFinite(s.incrementSec) ||
      !optionalNumber(s.expiresAt) ||
      !optionalNumber(s.renewAt) ||
      !Array.isArray(s.retired) ||
      !Array.isArray(s.leases)
    )
      return false;
    this.#token = s.token;
    this.#incrementSec = s.incrementSec!;
    this.#renewable = s.renewable === true;
    this.#capped = s.capped === true;
    this.#expiresAt = s.expiresAt;
    this.#renewAt = s.renewAt;
    this.#lookedUp = s.lookedUp === true;
    this.#retired = s.retired
      .filter((t) => typeof t?.token === 'string' && optionalNumber(t.expiresAt))
      .map((t) => ({ token: t.token, expiresAt: t.expiresAt }));
    this.leases.restore(s.leases);
    return true;
  }

  /** Does what is due now: learn a static token's TTL, renew or replace the token, renew leases. */
  maintain(): Promise<void> {
    this.#maintaining ??= this.#maintainOnce().finally(() => {
      this.#maintaining = undefined;
    });
    return this.#maintaining;
  }

  /** Keeps the token and leases alive with timers (which never hold the process open). */
  start(): void {
    this.#started = true;
    this.#schedule();
  }

  stop(): void {
    this.#started = false;
    this.#timer?.cancel();
    this.#timer = undefined;
  }

  /**
   * Shutdown of a sidecar with VAULT_REVOKE_ON_SHUTDOWN: a login token is the agent's own, so it is
   * revoked (`auth/token/revoke-self`, which revokes every lease it created as well), with any
   * earlier login token still alive. A static token (VAULT_TOKEN, VAULT_TOKEN_FILE) belongs to
   * whoever gave it and is kept; only the leases the agent made with it are revoked, one by one
   * (`sys/leases/revoke`). Afterwards the session holds nothing.
   */
  async release(signal: AbortSignal): Promise<ReleaseOutcome[]> {
    this.stop();
    const outcomes: ReleaseOutcome[] = [];
    const attempt = async (what: string, fix: string, call: () => Promise<unknown>): Promise<void> => {
      try {
        if (signal.aborted) throw signal.reason;
        await call();
        outcomes.push({ what, ok: true });
      } catch (e) {
        const error = vaultError(e, what, fix);
        const detail = signal.aborted
          ? `${what}: not done within the shutdown budget (${error.message})`
          : error.message;
        outcomes.push({
          what,
          ok: false,
          detail,
          fix: signal.aborted
            ? 'check that Vault answers in time; the credentials expire with their TTL'
            : fix,
        });
      }
    };
    const now = this.#clock.now();
    if (this.#auth.kind === 'login') {
      const alive = this.#retired.filter((t) => t.expiresAt === undefined || t.expiresAt > now);
      const tokens = [...alive.map((t) => t.token), ...(this.#token !== undefined ? [this.#token] : [])];
      for (const [i, token] of tokens.entries())
        await attempt(
          `${i < tokens.length - 1 ? 'an earlier ' : ''}Vault token of ${this.#auth.description} and its leases`,
          'Vault’s default policy allows auth/token/revoke-self; check that the role’s policies keep it',
          () => this.#api.revokeSelf({ token, namespace: this.#namespace, signal }),
        );
    } else if (this.#token !== undefined) {
      const token = this.#token;
      for (const lease of this.leases.live())
        await attempt(
          `lease of ${lease.ref}`,
          `allow \`update\` on sys/leases/revoke${lease.namespace === '' ? '' : ` in namespace ${JSON.stringify(lease.namespace)}`} in the token's policies (Vault's default policy does not); the token itself (${this.#auth.description}) is not the agent's to revoke`,
          () => this.#api.revokeLease(lease.leaseId, { token, namespace: lease.namespace, signal }),
        );
    }
    this.leases.clear();
    this.#retired = [];
    this.#token = undefined;
    return outcomes;
  }

  async #maintainOnce(): Promise<void> {
    const signal = AbortSignal.timeout(BACKGROUND_TIMEOUT_MS);
    try {
      await this.#maintainToken(signal);
      if (this.#token !== undefined) await this.leases.maintain(this.#api, this.#token, signal);
    } catch (e) {
      const error = vaultError(e, 'Vault session maintenance', this.#auth.deniedFix('the path'));
      this.#emit({ type: 'token-problem', reason: error.reason, detail: error.message });
    }
  }

  async #maintainToken(signal: AbortSignal): Promise<void> {
    const now = this.#clock.now();
    if (this.#token === undefined || this.#renewAt === undefined || now < this.#renewAt) return;
    if (this.#auth.kind === 'static' && !this.#lookedUp) {
      await this.#lookUp(signal);
      return;
    }
    if (this.#auth.kind === 'login' && (this.#capped || !this.#renewable)) {
      await this.#relogin(signal);
      return;
    }
    if (!this.#renewable || this.#capped) {
      this.#renewAt = undefined;
      return;
    }
    try {
      const answer = await this.#api.renewSelf(this.#incrementSec, {
        token: this.#token,
        namespace: this.#namespace,
        signal,
      });
      const ttlSec = Number(answer.auth?.lease_duration) || 0;
      const at = this.#clock.now();
      this.#expiresAt = ttlSec > 0 ? at + ttlSec * 1000 : undefined;
      this.#renewable = answer.auth?.renewable !== false;
      if (ttlSec < this.#incrementSec || !this.#renewable) {
        this.#capped = true;
        // A login method logs in again while the old token still works; a static token runs out.
        this.#renewAt =
          this.#auth.kind === 'login' && ttlSec > 0 ? at + ttlSec * 1000 * RENEW_FRACTION : undefined;
        this.#emit({ type: 'token-capped', ttlSec, expiresAt: this.#expiresAt ?? at });
      } else {
        this.#renewAt = at + ttlSec * 1000 * RENEW_FRACTION;
        this.#emit({ type: 'token-renewed', ttlSec });
      }
    } catch (e) {
      const error = vaultError(
        e,
        `${this.#auth.description}: renew-self`,
        'log in again or issue a new token',
      );
      if (error.transient) {
        this.#retryLater();
      } else if (this.#auth.kind === 'login') {
        await this.#relogin(signal);
      } else {
        this.#renewAt = undefined;
        this.#emit({ type: 'token-problem', reason: error.reason, detail: error.message });
      }
    }
  }

  async #lookUp(signal: AbortSignal): Promise<void> {
    try {
      const answer = await this.#api.lookupSelf({
        token: this.#token!,
        namespace: this.#namespace,
        signal,
      });
      const data = answer.data ?? {};
      const ttlSec = Number(data.ttl) || 0;
      const at = this.#clock.now();
      this.#lookedUp = true;
      this.#renewable = data.renewable === true && ttlSec > 0;
      this.#incrementSec = Number(data.creation_ttl) || ttlSec;
      this.#expiresAt = ttlSec > 0 ? at + ttlSec * 1000 : undefined;
      this.#renewAt = this.#renewable ? at + ttlSec * 1000 * RENEW_FRACTION : undefined;
    } catch (e) {
      const error = vaultError(
        e,
        `${this.#auth.description}: lookup-self`,
        'the token is invalid or expired, or lacks Vault’s default policy (auth/token/lookup-self)',
      );
      if (error.transient) {
        this.#retryLater();
        return;
      }
      this.#lookedUp = true;
      this.#renewAt = undefined;
      this.#emit({ type: 'token-problem', reason: error.reason, detail: error.message });
    }
  }

  async #relogin(signal: AbortSignal): Promise<void> {
    const oldExpiry = this.#expiresAt;
    const old = this.#token;
    try {
      await this.#obtain(signal);
      const now = this.#clock.now();
      this.#retired = this.#retired.filter((t) => t.expiresAt === undefined || t.expiresAt > now);
      if (old !== undefined) this.#retired.push({ token: old, expiresAt: oldExpiry });
      this.leases.tokenReplaced(oldExpiry);
    } catch (e) {
      const error = vaultError(e, `${this.#auth.description}: login`, 'see the login error');
      this.#emit({ type: 'token-problem', reason: error.reason, detail: error.message });
      this.#retryLater();
    }
  }

  #retryLater(): void {
    const now = this.#clock.now();
    const left = this.#expiresAt === undefined ? MAX_RETRY_MS : this.#expiresAt - now;
    this.#renewAt = now + Math.min(MAX_RETRY_MS, Math.max(1000, left / 3));
  }

  #obtain(signal: AbortSignal): Promise<string> {
    this.#obtaining = this.#auth
      .obtain(this.#api, signal)
      .then((issued) => {
        const now = this.#clock.now();
        this.#token = issued.token;
        this.#capped = false;
        this.#lookedUp = issued.ttlSec !== undefined;
        const ttlSec = issued.ttlSec ?? 0;
        this.#incrementSec = ttlSec;
        this.#renewable = issued.renewable && ttlSec > 0;
        this.#expiresAt = ttlSec > 0 ? now + ttlSec * 1000 : undefined;
        // A non-renewable login token is replaced at two thirds of its life as well; a static
        // token's TTL is looked up at the first maintenance.
        this.#renewAt = !this.#lookedUp ? now : ttlSec > 0 ? now + ttlSec * 1000 * RENEW_FRACTION : undefined;
        if (this.#auth.kind === 'login') this.#emit({ type: 'login', auth: this.#auth.description, ttlSec });
        this.#schedule();
        return issued.token;
      })
      .finally(() => {
        this.#obtaining = undefined;
      });
    return this.#obtaining;
  }

  /** Called after a fetch tracked a lease, so a started session renews it in time. */
  reschedule(): void {
    this.#schedule();
  }

  #schedule(): void {
    if (!this.#started) return;
    this.#timer?.cancel();
    this.#timer = undefined;
    const due = this.nextDueAt();
    if (due === undefined) return;
    this.#timer = this.#clock.setTimer(
      () => {
        this.#timer = undefined;
        void this.maintain().finally(() => this.#schedule());
      },
      Math.max(0, due - this.#clock.now()),
    );
  }

  #emit(event: SessionEvent): void {
    for (const listener of this.#listeners) {
      try {
        listener(event);
      } catch {
        // A listener's fault must not stop renewals.
      }
    }
  }
}
