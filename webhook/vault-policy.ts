import { ConfigError, quote } from '../agent/contract/errors.ts';
import { parseVaultNamespace } from '../agent/contract/reference.ts';
import { MOUNT, normalizeAuthMount } from '../agent/providers/vault/config.ts';
import { WEBHOOK_VAULT_AUTH_METHODS, type WebhookVaultAuthMethod } from './annotations/values.ts';
import { DNS_LABEL } from './kubernetes-names.ts';

/**
 * What the platform lets a pod choose of its Vault login (webhook settings ALLOW_VAULT_AUTH_METHODS
 * and VAULT_NAMESPACE_PINS): which auth methods, at which mounts, and in which Vault namespaces. A pod
 * picks its method, role and namespaces by annotation; Vault's roles and policies decide what that
 * login may read, and this narrows what a pod can even ask for. Plain data: the admission cache hashes
 * the settings as JSON.
 */

/** An auth method pods may use, and the mount the agent logs in at (undefined: the cluster's, else the method's name). */
export interface AllowedVaultAuth {
  readonly method: WebhookVaultAuthMethod;
  readonly mount?: string;
}

/** A Kubernetes namespace (`*`: every other one) pinned to a Vault namespace; `{namespace}` is replaced by the Kubernetes one. */
export interface VaultNamespacePin {
  readonly namespace: string;
  readonly vaultNamespace: string;
}

export interface VaultPolicy {
  readonly authMethods: readonly AllowedVaultAuth[];
  /** Undefined: no pins, a pod picks any namespace. */
  readonly namespacePins?: readonly VaultNamespacePin[];
}

/** Comma-separated entries, blanks ignored. */
function entries(text: string): string[] {
  return text
    .split(',')
    .map((e) => e.trim())
    .filter((e) => e !== '');
}

/** ALLOW_VAULT_AUTH_METHODS: `kubernetes, jwt=jwt-k8s, aws`. */
export function parseAllowedVaultAuth(text: string, field: string): readonly AllowedVaultAuth[] {
  const fix = `list methods of ${WEBHOOK_VAULT_AUTH_METHODS.join(', ')}, each optionally =MOUNT, e.g. kubernetes,jwt=jwt-k8s`;
  const list = entries(text);
  if (list.length === 0) throw new ConfigError(field, 'names no auth method', fix);
  const allowed: AllowedVaultAuth[] = [];
  for (const entry of list) {
    const [method, mount, more] = entry.split('=').map((part) => part.trim());
    if (!(WEBHOOK_VAULT_AUTH_METHODS as readonly string[]).includes(method!))
      throw new ConfigError(
        field,
        `${quote(method!)} is not a Vault auth method the webhook can set up`,
        fix,
      );
    if (more !== undefined || (mount !== undefined && !MOUNT.test(normalizeAuthMount(mount))))
      throw new ConfigError(field, `${quote(entry)} does not name a mount path after =`, fix);
    if (allowed.some((a) => a.method === method))
      throw new ConfigError(field, `lists ${quote(method!)} twice`, 'list each method once');
    allowed.push({
      method: method as WebhookVaultAuthMethod,
      ...(mount !== undefined ? { mount: normalizeAuthMount(mount) } : {}),
    });
  }
  return allowed;
}

/** VAULT_NAMESPACE_PINS: `team-a=teams/a, *=tenants/{namespace}`. */
export function parseVaultNamespacePins(text: string, field: string): readonly VaultNamespacePin[] {
  const fix =
    'write KUBERNETES_NAMESPACE=VAULT_NAMESPACE entries separated by commas, e.g. team-a=teams/a,*=tenants/{namespace} (root: any namespace)';
  const list = entries(text);
  if (list.length === 0) throw new ConfigError(field, 'pins no namespace', fix);
  const pins: VaultNamespacePin[] = [];
  for (const entry of list) {
    const at = entry.indexOf('=');
    const namespace = at < 0 ? entry : entry.slice(0, at).trim();
    const target = at < 0 ? '' : entry.slice(at + 1).trim();
    if (namespace !== '*' && !DNS_LABEL.test(namespace))
      throw new ConfigError(field, `${quote(namespace)} is not a Kubernetes namespace or *`, fix);
    // Checked with a namespace in place of {namespace}: the rule a pin must follow for every name.
    const sample = parseVaultNamespace(target.replaceAll('{namespace}', 'team-a'));
    if (at < 0 || target === '' || typeof sample !== 'string')
      throw new ConfigError(
        field,
        `${quote(entry)} does not pin ${quote(namespace)} to a Vault namespace${typeof sample === 'string' ? '' : `: ${sample.problem}`}`,
        fix,
      );
    if (pins.some((p) => p.namespace === namespace))
      throw new ConfigError(field, `pins ${quote(namespace)} twice`, 'pin each Kubernetes namespace once');
    pins.push({ namespace, vaultNamespace: target });
  }
  return pins;
}

/**
 * Start-up checks across settings: a pod that names no method uses the cluster's, which must be one
 * pods may use, at one mount.
 */
export function checkVaultPolicy(
  policy: VaultPolicy,
  cluster: { readonly vaultAuthMethod?: string; readonly vaultAuthMount?: string },
): ConfigError[] {
  const method = cluster.vaultAuthMethod ?? 'kubernetes';
  const allowed = policy.authMethods.find((a) => a.method === method);
  if (allowed === undefined)
    return [
      new ConfigError(
        'ALLOW_VAULT_AUTH_METHODS',
        `does not list ${quote(method)}, the method of pods that name none (AGENT_VAULT_AUTH_METHOD${cluster.vaultAuthMethod === undefined ? ' is not set: kubernetes' : ''})`,
        `add ${method} to it, or set AGENT_VAULT_AUTH_METHOD to a method it lists`,
      ),
    ];
  if (
    allowed.mount !== undefined &&
    cluster.vaultAuthMount !== undefined &&
    allowed.mount !== normalizeAuthMount(cluster.vaultAuthMount)
  )
    return [
      new ConfigError(
        'ALLOW_VAULT_AUTH_METHODS',
        `gives ${quote(method)} the mount ${quote(allowed.mount)}, but AGENT_VAULT_AUTH_MOUNT says ${quote(cluster.vaultAuthMount)}`,
        `name the mount in one of them only, or the same in both`,
      ),
    ];
  return [];
}

/**
 * The Vault namespace a Kubernetes namespace is pinned to: a path ('' is root, i.e. anywhere), 'none'
 * when pins are set but none applies (its pods may not read Vault), or undefined when there are no pins.
 */
export function pinnedVaultNamespace(
  pins: readonly VaultNamespacePin[] | undefined,
  namespace: string,
): { readonly path: string } | { readonly invalid: string } | 'none' | undefined {
  if (pins === undefined) return undefined;
  const pin = pins.find((p) => p.namespace === namespace) ?? pins.find((p) => p.namespace === '*');
  if (pin === undefined) return 'none';
  const text = pin.vaultNamespace.replaceAll('{namespace}', namespace);
  const parsed = parseVaultNamespace(text);
  return typeof parsed === 'string' ? { path: parsed } : { invalid: text };
}

/** `namespace` is `pin` or inside it ('' is the root namespace: every namespace is inside it). */
export function insideVaultNamespace(namespace: string, pin: string): boolean {
  return pin === '' || namespace === pin || namespace.startsWith(`${pin}/`);
}
