import { namedVersion, type SecretValue } from '../provider.ts';
import type { Clock } from './clock.ts';
import { vaultError } from './errors.ts';
import type { VaultApi } from './http.ts';

/**
 * Leases of dynamic secrets (database/creds/…, aws/creds/…): renewed at two thirds of their TTL
 * with `PUT sys/leases/renew`, asking for the lease's first duration again. Vault answers with
 * what it grants; less than asked means the role's max TTL is reached. From then on, and when
 * Vault no longer knows the lease, the credentials must be fetched anew before `expiresAt`: the
 * lease is reported as ending (event + `deadlines()`), and the next fetch of that reference gets
 * new credentials instead of the cached ones.
 */

export type LeaseEndReason = 'capped' | 'not-renewable' | 'not-found' | 'token-ending' | 'failed';

export interface LeaseDeadline {
  /** The reference as written (without #key). */
  readonly ref: string;
  readonly leaseId: string;
  /** When Vault revokes the credentials (ms since the epoch). */
  readonly expiresAt: number;
  /** True once renewal cannot extend the lease: fetch new credentials before expiresAt. */
  readonly mustRefetch: boolean;
  readonly reason?: LeaseEndReason;
}

export type LeaseEvent =
  | {
      readonly type: 'lease-renewed';
      readonly ref: string;
      readonly leaseId: string;
      readonly ttlSec: number;
    }
  | {
      readonly type: 'lease-ending';
      readonly ref: string;
      readonly leaseId: string;
      readonly expiresAt: number;
      readonly reason: LeaseEndReason;
      readonly detail?: string;
    };

interface Lease {
  readonly ref: string;
  readonly leaseId: string;
  /** Where the secret was read: a lease is known to Vault in its own namespace. */
  readonly namespace: string;
  readonly incrementSec: number;
  readonly renewable: boolean;
  readonly value: SecretValue;
  expiresAt: number;
  renewAt: number;
  ending?: LeaseEndReason;
}

/** A lease as the small sidecar hands it to its next run (VaultSession.save). */
export interface SavedLease {
  readonly ref: string;
  readonly leaseId: string;
  readonly namespace: string;
  readonly incrementSec: number;
  readonly renewable: boolean;
  /** The credentials the lease covers, base64: reused until the lease ends. */
  readonly value: string;
  readonly version: string;
  readonly expiresAt: number;
  readonly renewAt: number;
  readonly ending?: LeaseEndReason;
}

const RENEW_FRACTION = 2 / 3;
const MAX_RETRY_MS = 30_000;

export class LeaseTracker {
  readonly #clock: Clock;
  readonly #emit: (event: LeaseEvent) => void;
  readonly #leases = new Map<string, Lease>();

  constructor(clock: Clock, emit: (event: LeaseEvent) => void) {
    this.#clock = clock;
    this.#emit = emit;
  }

  /** Records the lease of a fresh fetch of `ref`, replacing the one before (left to expire). */
  track(
    ref: string,
    leaseId: string,
    namespace: string,
    durationSec: number,
    renewable: boolean,
    value: SecretValue,
  ): void {
    const now = this.#clock.now();
    this.#leases.set(ref, {
      ref,
      leaseId,
      namespace,
      incrementSec: durationSec,
      renewable,
      value,
      expiresAt: now + durationSec * 1000,
      renewAt: now + durationSec * 1000 * RENEW_FRACTION,
    });
  }

  /** The credentials of a live lease that renewal still extends: fetching again would only mint new ones. */
  reusable(ref: string): SecretValue | undefined {
    const lease = this.#leases.get(ref);
    if (!lease || lease.ending || this.#clock.now() >= lease.expiresAt) return undefined;
    return lease.value;
  }

  deadlines(): LeaseDeadline[] {
    return [...this.#leases.values()].map((l) => ({
      ref: l.ref,
      leaseId: l.leaseId,
      expiresAt: l.expiresAt,
      mustRefetch: l.ending !== undefined,
      ...(l.ending ? { reason: l.ending } : {}),
    }));
  }

  /** Every lease Vault may still hold, with where it lives: what a shutdown can revoke. */
  live(): { ref: string; leaseId: string; namespace: string }[] {
    const now = this.#clock.now();
    return [...this.#leases.values()]
      .filter((l) => l.expiresAt > now)
      .map((l) => ({ ref: l.ref, leaseId: l.leaseId, namespace: l.namespace }));
  }

  /** Every lease still alive, for the next run of the small sidecar. */
  save(): SavedLease[] {
    const now = this.#clock.now();
    return [...this.#leases.values()]
      .filter((l) => l.expiresAt > now)
      .map((l) => ({
        ref: l.ref,
        leaseId: l.leaseId,
        namespace: l.namespace,
        incrementSec: l.incrementSec,
        renewable: l.renewable,
        value: Buffer.from(l.value.bytes).toString('base64'),
        version: l.value.version,
        expiresAt: l.expiresAt,
        renewAt: l.renewAt,
        ...(l.ending ? { ending: l.ending } : {}),
      }));
  }

  /** Takes back what an earlier run saved; an entry of the wrong shape is dropped (its value is fetched anew). */
  restore(saved: readonly unknown[]): void {
    for (const entry of saved) {
      const l = (typeof entry === 'object' && entry !== null ? entry : {}) as Partial<SavedLease>;
      if (
        typeof l.ref !== 'string' ||
        typeof l.leaseId !== 'string' ||
        typeof l.namespace !== 'string' ||
        typeof l.value !== 'string' ||
        typeof l.version !== 'string' ||
        !Number.isFinite(l.incrementSec) ||
        !Number.isFinite(l.expiresAt) ||
        !Number.isFinite(l.renewAt)
      )
        continue;
      this.#leases.set(l.ref, {
        ref: l.ref,
        leaseId: l.leaseId,
        namespace: l.namespace,
        incrementSec: l.incrementSec!,
        renewable: l.renewable === true,
        // A lease's version is its id, which Vault names.
        value: { bytes: Buffer.from(l.value, 'base64'), ...namedVersion(l.version) },
        expiresAt: l.expiresAt!,
        renewAt: l.renewAt!,
        ...(typeof l.ending === 'string' ? { ending: l.ending } : {}),
      });
    }
  }

  /** Forgets every lease (revoked, or gone with the token that made them). */
  clear(): void {
    this.#leases.clear();
  }

  nextDueAt(): number | undefined {
    let due: number | undefined;
    for (const l of this.#leases.values())
      if (!l.ending && (due === undefined || l.renewAt < due)) due = l.renewAt;
    return due;
  }

  /**
   * Leases live no longer than the token that created them: when the session replaces its token,
   * every lease ends by the old token's expiry at the latest.
   */
  tokenReplaced(oldTokenExpiresAt: number | undefined): void {
    for (const l of this.#leases.values()) {
      if (l.ending) continue;
      if (oldTokenExpiresAt !== undefined) l.expiresAt = Math.min(l.expiresAt, oldTokenExpiresAt);
      this.#end(l, 'token-ending');
    }
  }

  /** Renews every lease that is due. */
  async maintain(api: VaultApi, token: string, signal: AbortSignal): Promise<void> {
    const now = this.#clock.now();
    const due = [...this.#leases.values()].filter((l) => !l.ending && l.renewAt <= now);
    for (const lease of due) {
      if (!lease.renewable) {
        this.#end(lease, 'not-renewable');
        continue;
      }
      try {
        const answer = await api.renewLease(lease.leaseId, lease.incrementSec, {
          token,
          namespace: lease.namespace,
          signal,
        });
        if (this.#leases.get(lease.ref) !== lease) continue; // replaced by a fetch meanwhile
        const ttlSec = Number(answer.lease_duration) || 0;
        const at = this.#clock.now();
        lease.expiresAt = at + ttlSec * 1000;
        if (ttlSec < lease.incrementSec) this.#end(lease, 'capped');
        else if (answer.renewable === false) this.#end(lease, 'not-renewable');
        else {
          lease.renewAt = at + ttlSec * 1000 * RENEW_FRACTION;
          this.#emit({ type: 'lease-renewed', ref: lease.ref, leaseId: lease.leaseId, ttlSec });
        }
      } catch (e) {
        const error = vaultError(
          e,
          `renew lease of ${lease.ref}`,
          lease.namespace === ''
            ? 'allow `update` on sys/leases/renew (Vault’s default policy does)'
            : `allow \`update\` on sys/leases/renew in namespace ${JSON.stringify(lease.namespace)}: the default policy does for a token of that namespace; a parent namespace's token needs it on the path with the child's name in front (${lease.namespace}/sys/leases/renew from the root namespace)`,
        );
        if (error.transient) {
          const at = this.#clock.now();
          lease.renewAt = at + Math.min(MAX_RETRY_MS, Math.max(1000, (lease.expiresAt - at) / 3));
        } else if (error.reason === 'invalid') {
          // 400 "lease not found": revoked, expired, or its token is gone.
          lease.expiresAt = Math.min(lease.expiresAt, this.#clock.now());
          this.#end(lease, 'not-found', error.message);
        } else {
          this.#end(lease, 'failed', error.message);
        }
      }
    }
  }

  #end(lease: Lease, reason: LeaseEndReason, detail?: string): void {
    lease.ending = reason;
    this.#emit({
      type: 'lease-ending',
      ref: lease.ref,
      leaseId: lease.leaseId,
      expiresAt: lease.expiresAt,
      reason,
      ...(detail ? { detail } : {}),
    });
  }
}
