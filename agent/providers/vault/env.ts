import { DEFAULT_SERVICE_ACCOUNT_DIR } from '../../contract/service-account.ts';

/**
 * Every variable the Vault provider reads, declared as data: the agent's misspelling check, the docs
 * tables and `--help` list them (agent/providers/provider-env.ts joins them with the other providers'),
 * and config.ts parses them. Declarations only, so knowing them never loads the Vault client.
 */

export const DEFAULT_SA_TOKEN_FILE = `${DEFAULT_SERVICE_ACCOUNT_DIR}/token`;

/** Every env variable the provider reads, with its default and meaning: docs/vault.md lists the same. */
export const VAULT_ENV: readonly { name: string; default: string; doc: string }[] = [
  {
    name: 'VAULT_ADDR',
    default: '',
    doc: 'Required with vault: references: the Vault server address (http or https URL). The agent does not assume the Vault CLI’s https://127.0.0.1:8200; write it out if Vault listens in the pod.',
  },
  {
    name: 'VAULT_NAMESPACE',
    default: '',
    doc: 'Vault Enterprise / HCP namespace (e.g. `admin/team-a`), sent as X-Vault-Namespace on every read, and on the login unless VAULT_AUTH_NAMESPACE says otherwise. A reference’s `?namespace=` overrides it for that reference.',
  },
  {
    name: 'VAULT_AUTH_NAMESPACE',
    default: 'VAULT_NAMESPACE',
    doc: 'Namespace of the auth method the agent logs in with (`root` for the root namespace), when it differs from where the secrets are: a token from a parent namespace reads in its child namespaces. Token lookup and renewal go there too.',
  },
  {
    name: 'VAULT_CACERT',
    default: '',
    doc: 'PEM file of the CA that signed the Vault server certificate (instead of the system CAs).',
  },
  {
    name: 'VAULT_CACERT_BYTES',
    default: '',
    doc: 'PEM text of CA certificates trusted for Vault, given inline (the webhook passes its AGENT_VAULT_CACERT this way), together with VAULT_CACERT and VAULT_CAPATH.',
  },
  {
    name: 'VAULT_CAPATH',
    default: '',
    doc: 'Directory of PEM CA certificates (every file in it that holds one), trusted instead of the system CAs, together with VAULT_CACERT.',
  },
  {
    name: 'VAULT_CLIENT_CERT',
    default: '',
    doc: 'PEM client certificate the agent presents over TLS, for a Vault listener that requires one (with VAULT_CLIENT_KEY).',
  },
  {
    name: 'VAULT_CLIENT_KEY',
    default: '',
    doc: 'PEM private key of VAULT_CLIENT_CERT.',
  },
  {
    name: 'VAULT_TLS_SERVER_NAME',
    default: '',
    doc: 'Server name (SNI and certificate check) when it differs from the VAULT_ADDR host.',
  },
  {
    name: 'VAULT_SKIP_VERIFY',
    default: 'false',
    doc: '`true` skips TLS verification; accepted only for a loopback VAULT_ADDR, otherwise use VAULT_CACERT.',
  },
  {
    name: 'VAULT_AUTH_METHOD',
    default: 'kubernetes if VAULT_ROLE is set and the service-account token exists, else token',
    doc: '`token`, `kubernetes`, `jwt`, `approle`, `cert` (TLS certificate: VAULT_CLIENT_CERT / VAULT_CLIENT_KEY), `aws` (IAM: a signed sts:GetCallerIdentity) or `gcp` (IAM: a JWT Google signs for the service account).',
  },
  {
    name: 'VAULT_AUTH_MOUNT',
    default: 'the method name',
    doc: 'Path the auth method is mounted at, without `auth/` (e.g. `kubernetes-prod`).',
  },
  {
    name: 'VAULT_ROLE',
    default: '',
    doc: 'Vault role to log in as (kubernetes: required; jwt: optional, else the mount’s default_role; cert: optional, the certificate role to check against, else every role of the mount; aws: optional, else the name of the pod’s IAM role; gcp: required).',
  },
  {
    name: 'VAULT_SA_TOKEN_FILE',
    default: DEFAULT_SA_TOKEN_FILE,
    doc: 'kubernetes: the service-account token sent to Vault.',
  },
  {
    name: 'VAULT_JWT_FILE',
    default: 'VAULT_SA_TOKEN_FILE',
    doc: 'jwt: file holding the JWT (e.g. a projected service-account token with a Vault audience).',
  },
  { name: 'VAULT_TOKEN', default: '', doc: 'token: the Vault token.' },
  {
    name: 'VAULT_TOKEN_FILE',
    default: '',
    doc: 'token: file holding the Vault token, read at first use and again once Vault refuses the token.',
  },
  { name: 'VAULT_ROLE_ID', default: '', doc: 'approle: the role id.' },
  { name: 'VAULT_SECRET_ID', default: '', doc: 'approle: the secret id (prefer VAULT_SECRET_ID_FILE).' },
  { name: 'VAULT_SECRET_ID_FILE', default: '', doc: 'approle: file holding the secret id.' },
  {
    name: 'VAULT_AWS_REGION',
    default: 'us-east-1',
    doc: 'aws: the STS region the request is signed for (Vault’s sts_region); `auto` takes AWS_REGION / AWS_DEFAULT_REGION.',
  },
  {
    name: 'VAULT_AWS_STS_ENDPOINT',
    default: 'https://sts.amazonaws.com for us-east-1, else https://sts.REGION.amazonaws.com',
    doc: 'aws: the STS URL the request is signed for; Vault’s auth/aws/config/client sts_endpoint must name the same.',
  },
  {
    name: 'VAULT_AWS_IAM_SERVER_ID',
    default: '',
    doc: 'aws: value of the signed X-Vault-AWS-IAM-Server-ID header, for a Vault with iam_server_id_header_value (stops replay against another Vault).',
  },
  {
    name: 'VAULT_GCP_SERVICE_ACCOUNT',
    default: 'the credentials’ own (GKE: the Workload Identity service account)',
    doc: 'gcp: email of the service account the JWT is signed for (its sub); the pod’s identity needs roles/iam.serviceAccountTokenCreator on it.',
  },
  {
    name: 'VAULT_GCP_IAM_CREDENTIALS_ENDPOINT',
    default: 'https://iamcredentials.googleapis.com',
    doc: 'gcp: the IAM Credentials API the JWT is signed through (a private or restricted endpoint); http only on loopback.',
  },
  {
    name: 'VAULT_REVOKE_ON_SHUTDOWN',
    default: 'false',
    doc: '`true`: a sidecar that stops (SIGTERM) revokes its login token and with it the leases it created (auth/token/revoke-self), within 5 s; with VAULT_TOKEN / VAULT_TOKEN_FILE it revokes only its leases (needs `update` on sys/leases/revoke) and keeps the token. Never at the end of an init run.',
  },
  {
    name: 'VAULT_KV_VERSION',
    default: 'auto',
    doc: '`auto` asks Vault per mount (sys/internal/ui/mounts); `1` or `2` applies to every vault: reference.',
  },
];
