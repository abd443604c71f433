import type { VaultReference } from '../../contract/reference.ts';
import { ProviderError } from '../provider.ts';
import type { KvVersionSetting } from './config.ts';
import { vaultError } from './errors.ts';
import { VaultResponseError, type VaultApi, type VaultCall } from './http.ts';

/**
 * How to read a reference's path: which HTTP path, and where the value sits in the answer.
 *   kv2:   `<mount>/data/<key>` → value in data.data, version in data.metadata.version.
 *   plain: KV v1 and every other engine → value in data (leases for dynamic engines).
 *   guess: the mount is unknown (no access to the mount lookup): kv2 if the answer has its shape.
 * With VAULT_KV_VERSION=auto the mount's type and KV version come from
 * `GET sys/internal/ui/mounts/<path>`, as the vault CLI's `kv get` finds them, once per mount.
 * A KV v2 path written without `data/` (`secret/app`) gets it inserted after the mount, like `kv get`.
 * Mounts are per namespace (`secret/` in `team-a` is not `secret/` in the root namespace).
 */

export interface ReadPlan {
  readonly apiPath: string;
  readonly shape: 'kv2' | 'plain' | 'guess';
  /** The mount, e.g. `secret/`, when known. */
  readonly mount?: string;
}

interface MountInfo {
  readonly path: string;
  readonly kv2: boolean;
}

export class KvMounts {
  readonly #api: VaultApi;
  readonly #setting: KvVersionSetting;
  /** By namespace, then by mount path. */
  readonly #mounts = new Map<string, Map<string, MountInfo>>();

  constructor(api: VaultApi, setting: KvVersionSetting) {
    this.#api = api;
    this.#setting = setting;
  }

  /** `namespace`: where the reference is read. */
  async plan(ref: VaultReference, token: string, namespace: string, signal: AbortSignal): Promise<ReadPlan> {
    let plan: ReadPlan;
    if (this.#setting === '1') plan = { apiPath: ref.path, shape: 'plain' };
    else if (this.#setting === '2') {
      const [first] = ref.path.split('/');
      plan = kv2Plan(ref.path, `${first}/`);
    } else {
      const mount = await this.#mountOf(ref.path, { token, namespace, signal });
      if (!mount) plan = { apiPath: ref.path, shape: 'guess' };
      else if (mount.kv2) plan = kv2Plan(ref.path, mount.path);
      else plan = { apiPath: ref.path, shape: 'plain', mount: mount.path };
    }
    if (ref.version !== undefined) {
      if (plan.shape === 'plain') {
        throw new ProviderError(
          'invalid',
          `${ref.text}: ?version= applies to KV v2 secrets, and ${plan.mount ?? ref.path} is not a KV v2 mount`,
          'drop ?version=, or point the reference at a KV v2 mount (or set VAULT_KV_VERSION=2)',
          { transient: false },
        );
      }
      return { ...plan, apiPath: `${plan.apiPath}?version=${ref.version}` };
    }
    return plan;
  }

  async #mountOf(path: string, call: VaultCall): Promise<MountInfo | undefined> {
    let known = this.#mounts.get(call.namespace);
    if (!known) this.#mounts.set(call.namespace, (known = new Map()));
    let best: MountInfo | undefined;
    for (const m of known.values()) {
      if (`${path}/`.startsWith(m.path) && (!best || m.path.length > best.path.length)) best = m;
    }
    if (best) return best;
    try {
      const answer = await this.#api.read(`sys/internal/ui/mounts/${path}`, call);
      const data = answer.data ?? {};
      const mountPath = typeof data.path === 'string' ? data.path : undefined;
      if (!mountPath) return undefined;
      const options = data.options as { version?: unknown } | null | undefined;
      const type = typeof data.type === 'string' ? data.type : '';
      const info: MountInfo = {
        path: mountPath.endsWith('/') ? mountPath : `${mountPath}/`,
        kv2: (type === 'kv' || type === 'generic') && String(options?.version ?? '1') === '2',
      };
      known.set(info.path, info);
      return info;
    } catch (e) {
      // 404: a Vault older than the endpoint (KV v1, as the CLI assumes). 403: the token may read the
      // secret but not look up its mount; read it and judge by the answer.
      if (e instanceof VaultResponseError && e.status === 404) return { path: `${path}/`, kv2: false };
      const error = vaultError(e, `look up the mount of ${path}`, '');
      if (error.transient) throw error;
      return undefined;
    }
  }
}

function kv2Plan(path: string, mount: string): ReadPlan {
  const rest = path.slice(mount.length);
  if (!path.startsWith(mount) || rest === '') return { apiPath: path, shape: 'kv2', mount };
  return { apiPath: rest.startsWith('data/') ? path : `${mount}data/${rest}`, shape: 'kv2', mount };
}
