import { sourceKey, type VaultReference } from '../../contract/reference.ts';
import {
  contentVersion,
  namedVersion,
  fetchEach,
  ProviderError,
  type Provider,
  type ProviderFactory,
  type ProviderOptions,
  type SecretValue,
} from '../provider.ts';
import { createAuthenticator } from './auth.ts';
import { systemClock, type Clock } from './clock.ts';
import { parseVaultSettings } from './config.ts';
import { vaultError } from './errors.ts';
import { createVaultApi, VaultResponseError, type VaultEnvelope } from './http.ts';
import { KvMounts, type ReadPlan } from './kv.ts';
import { VaultSession } from './session.ts';

/**
 * HashiCorp Vault. A reference names a logical path (`vault:secret/data/app`, `vault:kv1/app`,
 * `vault:database/creds/app`); the bytes are the JSON of the secret's data object (KV v2: data.data),
 * so `#key`, split and dotenv work as for any JSON secret. The version is the KV v2 version, a
 * dynamic secret's lease id, or a content hash. See docs/vault.md.
 */

export interface VaultProvider extends Provider<VaultReference> {
  /** Token and lease lifecycle, for the sidecar: `start()` it to keep credentials alive. */
  readonly session: VaultSession;
}

export interface VaultProviderDeps {
  readonly env?: Readonly<Record<string, string | undefined>>;
  readonly clock?: Clock;
}

/** Reads at most this many paths at once. */
const CONCURRENCY = 8;

export const createVaultProvider: ProviderFactory<VaultReference> = (options) => openVaultProvider(options);

/** Throws a non-transient ProviderError when the Vault env is unusable. */
export function openVaultProvider(options: ProviderOptions, deps: VaultProviderDeps = {}): VaultProvider {
  const settings = parseVaultSettings(deps.env ?? process.env);
  const clock = deps.clock ?? systemClock;
  const api = createVaultApi(settings, userAgent(options));
  const session = new VaultSession(
    api,
    createAuthenticator(settings.auth, settings.authNamespace),
    clock,
    settings.authNamespace,
  );
  const mounts = new KvMounts(api, settings.kvVersion);
  // A saved session is used only by the same Vault, login and namespace (the env is the resident's, fixed).
  const identity = JSON.stringify([settings.addr.origin, settings.authNamespace, session.authDescription]);

  const readOne = async (ref: VaultReference, signal: AbortSignal): Promise<SecretValue> => {
    const key = sourceKey(ref);
    // A dynamic secret whose lease is still being renewed: fetching again would mint new credentials.
    const leased = session.leases.reusable(key);
    if (leased) return leased;
    const namespace = ref.namespace ?? settings.namespace;
    const token = await session.token(signal);
    const plan = await mounts.plan(ref, token, namespace, signal);
    let answer: VaultEnvelope;
    try {
      answer = await api.read(plan.apiPath, { token, namespace, signal });
    } catch (e) {
      if (e instanceof VaultResponseError && e.status === 403) await session.recheck(token, signal);
      throw readError(e, ref, plan, namespace, settings.authNamespace, session);
    }
    const value = toValue(answer, plan, ref);
    if (answer.lease_id && (answer.lease_duration ?? 0) > 0) {
      session.leases.track(
        key,
        answer.lease_id,
        namespace,
        answer.lease_duration!,
        answer.renewable === true,
        value,
      );
      session.reschedule();
    }
    return value;
  };

  /**
   * The version a reference would read now, without reading the value: KV v2 metadata
   * (`current_version`, needs `read` on <mount>/metadata/<key>). Anything else, or any error: undefined,
   * and the value is read as usual (a leased dynamic secret is then served from the lease, no call).
   */
  const metadataDenied = new Set<string>();
  const peekOne = async (ref: VaultReference, signal: AbortSignal): Promise<string | undefined> => {
    if (session.leases.reusable(sourceKey(ref))) return undefined;
    if (ref.version !== undefined) return String(ref.version); // a pinned KV v2 version never changes
    const namespace = ref.namespace ?? settings.namespace;
    const token = await session.token(signal);
    const plan = await mounts.plan(ref, token, namespace, signal);
    const mount = plan.mount;
    if (plan.shape !== 'kv2' || !mount || !plan.apiPath.startsWith(`${mount}data/`)) return undefined;
    const path = `${mount}metadata/${plan.apiPath.slice(mount.length + 5)}`;
    const deniedKey = `${namespace}\0${path}`;
    if (metadataDenied.has(deniedKey)) return undefined;
    let answer: VaultEnvelope;
    try {
      answer = await api.read(path, { token, namespace, signal });
    } catch (e) {
      // Without `read` on the metadata path, stop asking: a denied request every cycle only fills the audit log.
      if (e instanceof VaultResponseError && e.status === 403) metadataDenied.add(deniedKey);
      return undefined;
    }
    const current = isObject(answer.data) ? answer.data.current_version : undefined;
    return typeof current === 'number' ? String(current) : undefined;
  };

  return {
    session,
    fetch: (refs, ctx) => fetchEach(refs, CONCURRENCY, (ref) => readOne(ref, ctx.signal)),
    peekVersions: (refs, ctx) =>
      Promise.all(refs.map((ref) => peekOne(ref, ctx.signal).catch(() => undefined))),
    keepAlive(refetch) {
      session.subscribe((event) => {
        if (event.type === 'lease-ending') refetch(`lease of ${event.ref} ends (${event.reason})`);
      });
      session.start();
    },
    handOff: () => ({ state: session.save(identity), dueAt: session.nextDueAt() }),
    async resume(state) {
      if (session.restore(state, identity)) await session.maintain();
    },
    // Only a stopping sidecar calls this; an init run leaves token and leases to the app's use.
    async release(signal) {
      return settings.revokeOnShutdown ? session.release(signal) : [];
    },
    // Every request of a reference goes to VAULT_ADDR (a namespace is a header, not another host).
    endpoint: () => settings.addr.origin,
    close() {
      session.stop();
      api.close();
    },
  };
}

/** Vault's audit log can record the User-Agent header (sys/config/auditing/request-headers). */
function userAgent(options: ProviderOptions): string {
  const pod =
    options.pod.namespace && options.pod.name ? ` (pod ${options.pod.namespace}/${options.pod.name})` : '';
  return `secret-agent/${options.agentVersion}${pod}`;
}

type Json = Record<string, unknown>;

function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function looksLikeKv2(data: Json | null | undefined): boolean {
  return !!data && Object.hasOwn(data, 'data') && isObject(data.metadata) && 'version' in data.metadata;
}

function toValue(answer: VaultEnvelope, plan: ReadPlan, ref: VaultReference): SecretValue {
  const data = answer.data;
  if (plan.shape === 'kv2' || (plan.shape === 'guess' && looksLikeKv2(data))) {
    const inner = data?.data;
    const metadata = isObject(data?.metadata) ? data.metadata : {};
    if (!isObject(inner)) {
      throw new ProviderError(
        'invalid',
        `${plan.apiPath} did not answer with a KV v2 secret (data.data is ${inner === null ? 'null' : typeof inner})`,
        'check that the mount is KV v2, or set VAULT_KV_VERSION=1 for a KV v1 mount',
        { transient: false },
      );
    }
    const bytes = Buffer.from(JSON.stringify(inner), 'utf8');
    const version = metadata.version;
    return {
      bytes,
      ...(typeof version === 'number' || typeof version === 'string'
        ? namedVersion(String(version))
        : contentVersion(bytes)),
    };
  }
  if (!isObject(data)) {
    throw new ProviderError(
      'invalid',
      `${plan.apiPath} answered without a data object`,
      `reference a path that returns a secret (${ref.text} may be a write-only or list endpoint)`,
      { transient: false },
    );
  }
  const bytes = Buffer.from(JSON.stringify(data), 'utf8');
  return { bytes, ...(answer.lease_id ? namedVersion(answer.lease_id) : contentVersion(bytes)) };
}

function readError(
  e: unknown,
  ref: VaultReference,
  plan: ReadPlan,
  namespace: string,
  tokenNamespace: string,
  session: VaultSession,
): ProviderError {
  const inNamespace = namespace === '' ? '' : ` in namespace ${JSON.stringify(namespace)}`;
  const where = `read ${plan.apiPath}${inNamespace}${plan.mount ? ` (mount ${plan.mount}${plan.shape === 'kv2' ? ', KV v2' : ''})` : ''}`;
  const path = plan.apiPath.replace(/\?.*$/, '');
  const policyPath = pathForPolicies(namespace, tokenNamespace, path);
  const denied =
    policyPath !== undefined
      ? session.deniedFix(policyPath)
      : `the token is from namespace ${JSON.stringify(tokenNamespace || 'root')} (VAULT_AUTH_NAMESPACE, default VAULT_NAMESPACE), and Vault accepts a token only in its own namespace and the ones below it: log in in ${JSON.stringify(namespace || 'root')} or a parent of it`;
  if (e instanceof VaultResponseError) {
    if (e.status === 404) {
      const metadata = (
        e.body as { data?: { metadata?: { deletion_time?: unknown; destroyed?: unknown } } } | undefined
      )?.data?.metadata;
      if (
        metadata &&
        (metadata.destroyed === true ||
          (typeof metadata.deletion_time === 'string' && metadata.deletion_time !== ''))
      ) {
        const destroyed = metadata.destroyed === true;
        return new ProviderError(
          'deleted',
          `${where}: the KV v2 version is ${destroyed ? 'destroyed' : `deleted (since ${metadata.deletion_time as string})`}`,
          destroyed
            ? 'write a new version, or reference another ?version='
            : 'undelete it (`vault kv undelete -versions=N`), write a new version, or reference another ?version=',
          { transient: false },
        );
      }
      return new ProviderError(
        'not-found',
        `${where}: no secret at this path`,
        plan.shape === 'kv2'
          ? `check the path and version: \`vault kv get${ref.version ? ` -version=${ref.version}` : ''} ${ref.path}\` must find it`
          : `check the path: \`vault read ${ref.path}\` must find it (for KV v2 write the mount first, e.g. secret/data/app or secret/app)`,
        { transient: false },
      );
    }
    if (e.status === 403) {
      return vaultError(e, `${where} with ${session.authDescription}`, denied);
    }
  }
  return vaultError(e, where, denied);
}

/**
 * `path` in namespace `namespace` as the policies of a token from `tokenNamespace` name it: a
 * parent namespace's policy writes a child's paths with the child's name in front
 * (`team-a/secret/data/app`). Undefined when the token's namespace is neither that one nor a parent.
 */
function pathForPolicies(namespace: string, tokenNamespace: string, path: string): string | undefined {
  if (namespace === tokenNamespace) return path;
  if (tokenNamespace === '') return `${namespace}/${path}`;
  if (namespace.startsWith(`${tokenNamespace}/`))
    return `${namespace.slice(tokenNamespace.length + 1)}/${path}`;
  return undefined;
}
