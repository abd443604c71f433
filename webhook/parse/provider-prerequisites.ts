import { ConfigError } from '../../agent/contract/errors.ts';
import { PREFIX } from '../annotations/annotation.ts';
import type { PodAnnotationName } from '../annotations/pod-annotations.ts';
import type { InjectionRequest } from '../injection-request.ts';
import type { PodShape } from '../pod-shape.ts';
import type { ParsedReference } from './parse-secret-files.ts';
import type { PodValues } from './read-annotations.ts';

/**
 * What each provider needs that a reference may not carry. Without it the agent fails in the pod, after
 * it exists; refused here, the user learns it from `kubectl apply` (or the ReplicaSet's events).
 */
export function checkProviderPrerequisites(
  references: readonly ParsedReference[],
  podValues: PodValues,
  providerEnv: InjectionRequest['providerEnv'],
  pod: PodShape,
  errors: ConfigError[],
): void {
  const provided = new Set(providerEnv.map((e) => e.name));
  const envValue = (name: string) => providerEnv.find((e) => e.name === name)?.value;
  const names = (refs: readonly ParsedReference[]) => refs.map((r) => r.annotation).join(', ');
  // An annotation that is set but invalid has its own error already.
  const lacks = (annotation: PodAnnotationName, env: string) =>
    !podValues.has(annotation) && !provided.has(env);
  const awsByName = references.filter((r) => r.ref.provider === 'aws' && r.ref.region === undefined);
  if (awsByName.length > 0 && lacks('aws-region', 'AWS_REGION'))
    errors.push(
      new ConfigError(
        `${PREFIX}aws-region`,
        `is not set and the webhook has no AGENT_AWS_REGION default, so ${names(awsByName)} (aws:NAME, which has no region) cannot be fetched`,
        `set ${PREFIX}aws-region to the secrets' region, e.g. eu-west-1, or reference them by ARN (an ARN carries its region); a cluster admin can set AGENT_AWS_REGION on the webhook for every pod`,
      ),
    );
  const gcpShort = references.filter((r) => r.ref.provider === 'gcp' && r.ref.project === undefined);
  if (gcpShort.length > 0 && lacks('gcp-project', 'GCP_PROJECT'))
    errors.push(
      new ConfigError(
        `${PREFIX}gcp-project`,
        `is not set and the webhook has no AGENT_GCP_PROJECT default, so ${names(gcpShort)} (gcp:SECRET, which has no project) cannot be fetched`,
        `set ${PREFIX}gcp-project to the project id, e.g. my-project, or write the references as projects/PROJECT/secrets/SECRET; a cluster admin can set AGENT_GCP_PROJECT on the webhook for every pod`,
      ),
    );
  const vault = references.filter((r) => r.ref.provider === 'vault');
  const certSecret = `${PREFIX}vault-client-cert-secret`;
  const vaultAddr = envValue('VAULT_ADDR');
  if (
    podValues.has('vault-client-cert-secret') &&
    vaultAddr !== undefined &&
    !vaultAddr.startsWith('https://')
  )
    errors.push(
      new ConfigError(
        certSecret,
        'is set, but the cluster’s AGENT_VAULT_ADDR is not https://, so no client certificate is ever sent',
        `remove ${certSecret}, or ask the cluster admin for Vault’s https:// address`,
      ),
    );
  if (vault.length === 0) return;
  // The agent logs in with what the pod has: an address, the method's role and identity
  // (agent/providers/vault/config.ts). An annotation set but invalid has its own error already.
  if (!provided.has('VAULT_ADDR'))
    errors.push(
      new ConfigError(
        vault[0]!.annotation,
        `${vault.length > 1 ? `this and ${vault.length - 1} more reference Vault` : 'references Vault'}, but the webhook has no Vault address (AGENT_VAULT_ADDR is not set), so the agent would try https://127.0.0.1:8200`,
        'ask the cluster admin to set AGENT_VAULT_ADDR on the webhook (docs/install/vault.md); a pod cannot choose the Vault address',
      ),
    );
  if (podValues.has('vault-auth-method') && !provided.has('VAULT_AUTH_METHOD')) return;
  const method = envValue('VAULT_AUTH_METHOD') ?? 'kubernetes';
  if ((method === 'kubernetes' || method === 'gcp') && lacks('vault-role', 'VAULT_ROLE'))
    errors.push(
      new ConfigError(
        `${PREFIX}vault-role`,
        `is not set and the webhook has no AGENT_VAULT_ROLE default, but ${names(vault)} read from Vault, where the agent logs in with ${method} auth, which needs a role`,
        `set ${PREFIX}vault-role to the Vault role bound to this pod's ${method === 'gcp' ? 'Google service account' : 'service account'} (docs/install/vault.md)`,
      ),
    );
  if ((method === 'kubernetes' || method === 'jwt') && pod.spec.automountServiceAccountToken === false)
    errors.push(
      new ConfigError(
        vault[0]!.annotation,
        `references Vault, but the pod sets automountServiceAccountToken: false, so the agent has no service-account token to log in with (${method} auth)`,
        `remove automountServiceAccountToken: false from the pod spec (or set it to true), or choose another ${PREFIX}vault-auth-method`,
      ),
    );
  if (method === 'cert' && !provided.has('VAULT_CLIENT_CERT'))
    errors.push(
      new ConfigError(
        `${PREFIX}vault-auth-method`,
        `is cert, but ${certSecret} is not set, so the agent has no certificate to log in with`,
        `set ${certSecret} to a kubernetes.io/tls Secret (e.g. cert-manager’s) whose certificate a Vault cert role trusts`,
      ),
    );
}
