import type { ConfigError } from '../../agent/contract/errors.ts';
import type { InjectionDefaults } from '../config/injection-defaults.ts';
import { VAULT_CLIENT_CERT_DIR } from '../injected-names.ts';
import type { InjectionRequest } from '../injection-request.ts';
import type { PodShape } from '../pod-shape.ts';
import { inheritCloudIdentity } from './inherit-cloud-identity.ts';
import type { ParsedReference } from './parse-secret-files.ts';
import type { PodValueReader } from './read-annotations.ts';
import { vaultLogin } from './vault-login.ts';

/**
 * The env the agent's providers get: the cluster's defaults, with what a pod may choose (its AWS
 * region, GCP project, Vault role and service account, its Vault login where the cluster's policy
 * allows it, a client certificate), and the AWS identity EKS gave the app. What only the cluster sets
 * (the Vault address, its CA and server name, the aws method's STS settings) no annotation can change.
 */

export type ProviderEnv = Pick<
  InjectionRequest,
  'providerEnv' | 'identityMounts' | 'vaultClientCertSecret' | 'warnings'
>;

export function providerEnv(
  pod: PodShape,
  namespace: string,
  read: PodValueReader,
  references: readonly ParsedReference[],
  defaults: Pick<InjectionDefaults, 'cluster' | 'vaultPolicy'>,
  errors: ConfigError[],
): ProviderEnv {
  const cluster = defaults.cluster;
  const vaultClientCertSecret = read('vault-client-cert-secret');
  const method = read('vault-auth-method');
  const vaultNamespace = read('vault-namespace');
  const authNamespace = read('vault-auth-namespace');
  const login = vaultLogin(
    { namespace, method, vaultNamespace, authNamespace, references },
    cluster,
    defaults.vaultPolicy,
  );
  errors.push(...login.errors);
  const env = [
    ['AWS_REGION', read('aws-region') ?? cluster.awsRegion],
    ['GCP_PROJECT', read('gcp-project') ?? cluster.gcpProject],
    ['VAULT_ADDR', cluster.vaultAddr],
    ['VAULT_CACERT_BYTES', cluster.vaultCaCert],
    ['VAULT_TLS_SERVER_NAME', cluster.vaultTlsServerName],
    ['VAULT_NAMESPACE', login.env.VAULT_NAMESPACE],
    ['VAULT_AUTH_NAMESPACE', login.env.VAULT_AUTH_NAMESPACE],
    ['VAULT_AUTH_METHOD', login.env.VAULT_AUTH_METHOD],
    ['VAULT_ROLE', read('vault-role') ?? cluster.vaultRole],
    ['VAULT_AUTH_MOUNT', login.env.VAULT_AUTH_MOUNT],
    ...(vaultClientCertSecret !== undefined
      ? [
          ['VAULT_CLIENT_CERT', `${VAULT_CLIENT_CERT_DIR}/tls.crt`],
          ['VAULT_CLIENT_KEY', `${VAULT_CLIENT_CERT_DIR}/tls.key`],
        ]
      : []),
    ['VAULT_AWS_REGION', cluster.vaultAwsRegion],
    ['VAULT_AWS_STS_ENDPOINT', cluster.vaultAwsStsEndpoint],
    ['VAULT_AWS_IAM_SERVER_ID', cluster.vaultAwsIamServerId],
    ['VAULT_GCP_SERVICE_ACCOUNT', read('vault-gcp-service-account')],
    ['VAULT_REVOKE_ON_SHUTDOWN', read('vault-revoke-on-shutdown') ?? cluster.vaultRevokeOnShutdown],
  ]
    .filter((e): e is [string, string] => e[1] !== undefined)
    .map(([name, value]) => ({ name, value }));

  // EKS's identity webhook may have wired the app but not our containers: the agent inherits it.
  const identity = inheritCloudIdentity(pod);
  const own = new Set(env.map((e) => e.name));
  env.push(...identity.env.filter((e) => !own.has(e.name)));
  return {
    providerEnv: env,
    identityMounts: identity.volumeMounts,
    ...(vaultClientCertSecret !== undefined ? { vaultClientCertSecret } : {}),
    warnings: identity.warnings,
  };
}
