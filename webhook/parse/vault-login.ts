import { ConfigError, quote } from '../../agent/contract/errors.ts';
import { PREFIX } from '../annotations/annotation.ts';
import type { WebhookVaultAuthMethod } from '../annotations/values.ts';
import type { ClusterDefaults } from '../config/injection-defaults.ts';
import { insideVaultNamespace, pinnedVaultNamespace, type VaultPolicy } from '../vault-policy.ts';
import { parseVaultNamespace } from '../../agent/contract/reference.ts';
import type { ParsedReference } from './parse-secret-files.ts';

/**
 * The Vault login settings a pod's agent gets: the cluster's defaults, the pod's choices (method,
 * namespaces, each reference's `?namespace=`) where the cluster's policy allows them
 * (ALLOW_VAULT_AUTH_METHODS, VAULT_NAMESPACE_PINS), and a refusal naming the annotation, the setting
 * and the fix where it does not.
 */

export interface VaultLoginRequest {
  /** The pod's Kubernetes namespace. */
  readonly namespace: string;
  /** secret-agent.io/vault-auth-method, -namespace, -auth-namespace as parsed (undefined: unset or invalid). */
  readonly method?: WebhookVaultAuthMethod;
  readonly vaultNamespace?: string;
  readonly authNamespace?: string;
  /** The pod's references, each with the annotation it came from (vault: ones have their `?namespace=`). */
  readonly references: readonly ParsedReference[];
}

export interface VaultLogin {
  /** The agent's login settings: undefined where unset. */
  readonly env: {
    readonly VAULT_NAMESPACE?: string;
    readonly VAULT_AUTH_NAMESPACE?: string;
    readonly VAULT_AUTH_METHOD?: string;
    readonly VAULT_AUTH_MOUNT?: string;
  };
  readonly errors: readonly ConfigError[];
}

export function vaultLogin(
  request: VaultLoginRequest,
  cluster: ClusterDefaults,
  policy: VaultPolicy,
): VaultLogin {
  const errors: ConfigError[] = [];
  const clusterMethod = cluster.vaultAuthMethod ?? 'kubernetes';
  const method = request.method ?? clusterMethod;
  const allowed = policy.authMethods.find((a) => a.method === method);
  if (request.method !== undefined && allowed === undefined) {
    const listed = policy.authMethods.map((a) => a.method).join(', ');
    errors.push(
      new ConfigError(
        `${PREFIX}vault-auth-method`,
        `${quote(request.method)} is not a Vault auth method this cluster lets pods use (ALLOW_VAULT_AUTH_METHODS: ${listed})`,
        `use one of ${listed}, or remove it to log in with the cluster's ${clusterMethod}; a cluster admin can allow more in ALLOW_VAULT_AUTH_METHODS`,
      ),
    );
  }
  // The cluster's mount is its method's; a mount the policy names is that method's wherever it is used.
  const mount = allowed?.mount ?? (method === clusterMethod ? cluster.vaultAuthMount : undefined);

  const pinned = pinnedNamespaces(request, cluster, policy, errors);
  return {
    env: {
      VAULT_NAMESPACE: pinned.vaultNamespace,
      VAULT_AUTH_NAMESPACE: pinned.authNamespace,
      VAULT_AUTH_METHOD: request.method ?? cluster.vaultAuthMethod,
      VAULT_AUTH_MOUNT: mount,
    },
    errors,
  };
}

/** The namespaces, within the pin of the pod's Kubernetes namespace when VAULT_NAMESPACE_PINS has one. */
function pinnedNamespaces(
  request: VaultLoginRequest,
  cluster: ClusterDefaults,
  policy: VaultPolicy,
  errors: ConfigError[],
): { vaultNamespace?: string; authNamespace?: string } {
  const unpinned = {
    vaultNamespace: request.vaultNamespace ?? cluster.vaultNamespace,
    authNamespace: request.authNamespace ?? cluster.vaultAuthNamespace,
  };
  const pin = pinnedVaultNamespace(policy.namespacePins, request.namespace);
  if (pin === undefined) return unpinned;
  // Only a pod that reads Vault, or names a Vault namespace, is bound by the pins.
  const vault = request.references.flatMap(({ annotation, ref }) =>
    ref.provider === 'vault' ? [{ annotation, namespace: ref.namespace }] : [],
  );
  const first =
    vault[0]?.annotation ??
    (request.vaultNamespace !== undefined ? `${PREFIX}vault-namespace` : undefined) ??
    (request.authNamespace !== undefined ? `${PREFIX}vault-auth-namespace` : undefined);
  if (first === undefined) return unpinned;
  const k8s = quote(request.namespace);
  if (pin === 'none' || 'invalid' in pin) {
    errors.push(
      new ConfigError(
        first,
        pin === 'none'
          ? `reads Vault, but VAULT_NAMESPACE_PINS pins no Vault namespace for this pod's Kubernetes namespace ${k8s}, so its pods may not read Vault`
          : `reads Vault, but VAULT_NAMESPACE_PINS pins this pod's Kubernetes namespace ${k8s} to ${quote(pin.invalid)}, which is not a Vault namespace`,
        `ask the cluster admin to pin ${k8s} to its Vault namespace in VAULT_NAMESPACE_PINS (docs/security.md)`,
      ),
    );
    return unpinned;
  }
  // Every namespace is inside root (''): only a pin below it refuses anything.
  const shown = quote(pin.path);
  const outside = (text: string) => {
    const parsed = parseVaultNamespace(text);
    return typeof parsed === 'string' && !insideVaultNamespace(parsed, pin.path);
  };
  const fix = (what: string) =>
    `use ${shown} or a namespace inside it, or ${what}; the pin is VAULT_NAMESPACE_PINS, the cluster admin's`;
  if (request.vaultNamespace !== undefined && outside(request.vaultNamespace))
    errors.push(
      new ConfigError(
        `${PREFIX}vault-namespace`,
        `${quote(request.vaultNamespace)} is outside ${shown}, the Vault namespace this pod's Kubernetes namespace ${k8s} is pinned to`,
        fix('remove it (the pin is the default)'),
      ),
    );
  // The cluster's auth namespace is the platform's choice (often a parent, where the auth method is).
  const clusterAuth = cluster.vaultAuthNamespace && parseVaultNamespace(cluster.vaultAuthNamespace);
  if (
    request.authNamespace !== undefined &&
    outside(request.authNamespace) &&
    parseVaultNamespace(request.authNamespace) !== clusterAuth
  )
    errors.push(
      new ConfigError(
        `${PREFIX}vault-auth-namespace`,
        `${quote(request.authNamespace)} is outside ${shown}, the Vault namespace this pod's Kubernetes namespace ${k8s} is pinned to`,
        fix('remove it to log in where the cluster says (AGENT_VAULT_AUTH_NAMESPACE)'),
      ),
    );
  for (const ref of vault)
    if (ref.namespace !== undefined && !insideVaultNamespace(ref.namespace, pin.path))
      errors.push(
        new ConfigError(
          ref.annotation,
          `reads in a Vault namespace outside ${shown}, the one this pod's Kubernetes namespace ${k8s} is pinned to`,
          fix('drop ?namespace= from the reference'),
        ),
      );
  return {
    vaultNamespace: request.vaultNamespace ?? (pin.path === '' ? cluster.vaultNamespace : pin.path),
    authNamespace: unpinned.authNamespace,
  };
}
