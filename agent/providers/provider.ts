import { createHash } from 'node:crypto';
import type { AgentMode, PodIdentity } from '../contract/agent-config.ts';
import { mapLimited } from '../contract/map-limited.ts';
import type { SecretReference } from '../contract/reference.ts';

/**
 * The provider contract, after the Secrets Store CSI driver's: a provider turns references into
 * bytes plus a version and never touches the filesystem; the writer owns the volume.
 */

/** The Kubernetes Secret size limit, applied to every value and every file written. */
export const MAX_SECRET_BYTES = 1024 * 1024;

export interface SecretValue {
  readonly bytes: Uint8Array;
  /**
   * What tells this value from another of the same reference: the backend's version when it names one,
   * else contentVersion(). For the agent's own comparisons only: it may be a hash of the value.
   */
  readonly version: string;
  /**
   * The version as the backend names it (AWS VersionId, GCP version number, Vault KV v2 version, a Vault
   * lease id, an exec helper's `secret-agent-version:` line), or undefined when it names none. The only
   * version that leaves the agent's memory (logs, notifications, a restart annotation): a hash of a
   * value is never published, since a short value is guessed from its hash.
   */
  readonly backendVersion?: string;
}

/** A version the backend names: both the agent's comparisons and what may be published. */
export function namedVersion(version: string): Pick<SecretValue, 'version' | 'backendVersion'> {
  return { version, backendVersion: version };
}

/** The version of a value whose backend names none: a digest, for the agent's comparisons only. */
export function contentVersion(bytes: Uint8Array): Pick<SecretValue, 'version'> {
  return { version: `content:${createHash('sha256').update(bytes).digest('hex').slice(0, 16)}` };
}

/** Why a fetch failed, as a short stable word: used in summaries, logs and (later) metric labels. */
export type FailureReason =
  | 'not-found'
  | 'permission-denied'
  | 'auth'
  | 'deleted'
  | 'disabled'
  | 'invalid'
  | 'too-large'
  | 'throttled'
  | 'unavailable'
  | 'timeout'
  | 'internal';

/**
 * A failed fetch. `detail` is the backend's own message (backends do not echo secret values);
 * `fix` says what the user can do. `transient` failures are retried within the deadline.
 */
export class ProviderError extends Error {
  readonly reason: FailureReason;
  readonly transient: boolean;
  readonly fix: string;
  /** Server-requested wait before retrying (Retry-After), if any. */
  readonly retryAfterMs: number | undefined;

  constructor(
    reason: FailureReason,
    detail: string,
    fix: string,
    opts: { transient?: boolean; retryAfterMs?: number } = {},
  ) {
    super(detail.length > 400 ? `${detail.slice(0, 400)}…` : detail);
    this.name = 'ProviderError';
    this.reason = reason;
    this.transient =
      opts.transient ?? (reason === 'throttled' || reason === 'unavailable' || reason === 'timeout');
    this.fix = fix;
    this.retryAfterMs = opts.retryAfterMs;
  }
}

export type FetchOutcome =
  | { readonly ok: true; readonly value: SecretValue }
  | {
      readonly ok: false;
      readonly error: ProviderError;
      /** Where the provider asked (Provider.endpoint), for logs; filled in by fetchSecrets. */
      readonly endpoint?: string;
    };

export interface FetchContext {
  /** Aborted when the attempt's time is up. */
  readonly signal: AbortSignal;
  /**
   * The attempt's time budget (ms), a share of what is left of the deadline: a provider bounds its
   * own request timeouts by it, so one hung connection costs one attempt, not the whole deadline.
   */
  readonly timeoutMs?: number;
}

export interface Provider<R extends SecretReference = SecretReference> {
  /**
   * Fetches every reference, in order; one outcome per reference. A provider batches where its
   * backend allows (AWS BatchGetSecretValue); a failure of one reference does not fail the others.
   */
  fetch(refs: readonly R[], ctx: FetchContext): Promise<FetchOutcome[]>;
  /**
   * For a long-running agent: the version each reference would read now, learnt without reading the
   * value (GCP GetSecretVersion, Vault KV v2 metadata), so an unchanged secret costs no access.
   * `undefined` for a reference means "cannot tell cheaply": it is fetched. Never throws.
   */
  peekVersions?(refs: readonly R[], ctx: FetchContext): Promise<(string | undefined)[]>;
  /**
   * For a long-running agent: start background upkeep (token and lease renewal). `refetch` is called
   * when a value must be fetched again before it stops working (a lease that cannot be renewed).
   */
  keepAlive?(refetch: (reason: string) => void): void;
  /**
   * For the small sidecar, whose refreshes are separate processes: what this provider holds that the
   * next run must not have to obtain again (a token still valid, leases being renewed), as JSON, and
   * when the next run must come at the latest to keep it (a renewal due). The resident keeps `state`
   * in its memory only, and hands it to the next run's `resume`.
   */
  handOff?(): ProviderHandoff;
  /**
   * The next run's side of `handOff`: takes the state back, then does the upkeep due now (renewals)
   * within `signal`. A state it cannot use is ignored (a fresh login follows). Never throws.
   */
  resume?(state: unknown, signal: AbortSignal): Promise<void>;
  /**
   * Where `ref` is fetched from, for logs: the host or URL the provider talks to (the overridden
   * endpoint when one is set). Never a credential.
   */
  endpoint?(ref: R): string | undefined;
  /**
   * For a long-running agent that is stopping (a sidecar's SIGTERM), never at the end of an init run
   * (the app still uses what init wrote): give back what the backend holds for the agent, as the
   * settings ask (Vault: revoke its token and leases with VAULT_REVOKE_ON_SHUTDOWN). Stops at
   * `signal` (the shutdown budget). Never throws; resolves with what was done, for the log.
   */
  release?(signal: AbortSignal): Promise<readonly ReleaseOutcome[]>;
  /**
   * Releases clients, sockets and timers; resolves once they are gone, so nothing of the provider
   * keeps the process alive after an init run.
   */
  close?(): void | Promise<void>;
}

/** What a provider hands to the next run of the small sidecar (Provider.handOff). */
export interface ProviderHandoff {
  /** JSON-serialisable; holds credentials, so it goes only to the resident's memory. */
  readonly state: unknown;
  /** When the next run must start at the latest (ms since the epoch); undefined: no deadline. */
  readonly dueAt: number | undefined;
}

/** One thing `release` gave back, or failed to. Names what it was; never a credential. */
export interface ReleaseOutcome {
  readonly what: string;
  readonly ok: boolean;
  /** Why it failed. */
  readonly detail?: string;
  readonly fix?: string;
}

export interface ProviderOptions {
  readonly pod: PodIdentity;
  /** The agent's version, for user agents. */
  readonly agentVersion: string;
  /** Where the pod's service-account token and ca.crt are (SERVICE_ACCOUNT_DIR); default DEFAULT_SERVICE_ACCOUNT_DIR. */
  readonly serviceAccountDir?: string;
  /** What the agent runs as (a provider may tune its transport to it); init when absent. */
  readonly mode?: AgentMode;
}

export type ProviderFactory<R extends SecretReference> = (options: ProviderOptions) => Provider<R>;

/** Runs one fetch per reference, at most `limit` at a time: for backends without a batch call. */
export async function fetchEach<R>(
  refs: readonly R[],
  limit: number,
  one: (ref: R) => Promise<SecretValue>,
): Promise<FetchOutcome[]> {
  return mapLimited(refs, limit, async (ref): Promise<FetchOutcome> => {
    try {
      return { ok: true, value: await one(ref) };
    } catch (e) {
      return { ok: false, error: toProviderError(e) };
    }
  });
}

/** Anything a provider throws that is not already a ProviderError: named, never with a payload. */
export function toProviderError(e: unknown): ProviderError {
  if (e instanceof ProviderError) return e;
  const err = e as { name?: string; code?: string; message?: string };
  const code = err?.code ?? err?.name ?? 'Error';
  // Network codes first: clients wrap a reset connection in a TimeoutError, but it is not one.
  if (NETWORK_CODES.includes(code)) {
    return new ProviderError(
      'unavailable',
      `${code}: ${err.message ?? ''}`,
      'check that the backend endpoint is reachable from the pod (network policy, DNS, proxy)',
    );
  }
  if (err?.name === 'AbortError' || err?.name === 'TimeoutError') {
    return new ProviderError(
      'timeout',
      'the request timed out',
      'check network reach to the backend; retried until the deadline',
    );
  }
  return new ProviderError('internal', errorDetail(e), 'see the message; report it if it persists', {
    transient: false,
  });
}

/**
 * `Name: message` of an error, for a summary or a log line. A parser's message quotes its input, and
 * a backend that answers with a bare value (a misrouted endpoint) would put the secret there, so for
 * a parse failure only the fact and the HTTP status are kept.
 */
export function errorDetail(e: unknown): string {
  const err = e as {
    name?: string;
    message?: string;
    $responseBodyText?: unknown;
    $metadata?: { httpStatusCode?: number };
  };
  const name = err?.name ?? 'Error';
  if (name === 'SyntaxError' || err?.$responseBodyText !== undefined) {
    const status = err?.$metadata?.httpStatusCode;
    return `${name}: the backend's answer could not be parsed${status ? ` (HTTP ${status})` : ''}`;
  }
  return `${name}: ${err?.message ?? String(e)}`;
}

const NETWORK_CODES = [
  'ECONNREFUSED',
  'ECONNRESET',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'UND_ERR_SOCKET',
  'UND_ERR_CONNECT_TIMEOUT',
];
