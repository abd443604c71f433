import { existsSync } from 'node:fs';
import { parseVaultNamespace } from '../../contract/reference.ts';
import { isLoopbackHost } from '../loopback.ts';
import { ProviderError } from '../provider.ts';
import { DEFAULT_SA_TOKEN_FILE } from './env.ts';

/**
 * The Vault provider's settings, read from the env variables env.ts declares. Names follow Vault's
 * own CLI and agent where they exist (VAULT_ADDR, VAULT_NAMESPACE, VAULT_CACERT,
 * VAULT_TLS_SERVER_NAME, VAULT_SKIP_VERIFY, VAULT_TOKEN); the rest name the auth method's inputs.
 */

export type AuthMethodName = 'token' | 'kubernetes' | 'jwt' | 'approle' | 'cert' | 'aws' | 'gcp';
export const AUTH_METHODS: readonly AuthMethodName[] = [
  'token',
  'kubernetes',
  'jwt',
  'approle',
  'cert',
  'aws',
  'gcp',
];
export type KvVersionSetting = 'auto' | '1' | '2';

export interface VaultSettings {
  readonly addr: URL;
  /** The namespace reads go to unless a reference names its own (`?namespace=`); '' is the root namespace. */
  readonly namespace: string;
  /** The namespace of the login, and so of the token (VAULT_AUTH_NAMESPACE, default VAULT_NAMESPACE). */
  readonly authNamespace: string;
  readonly caCertFile?: string;
  /** PEM CA certificates given inline (VAULT_CACERT_BYTES, as the webhook passes a cluster CA). */
  readonly caCertBytes?: string;
  /** A directory of PEM CA certificates (VAULT_CAPATH), trusted besides VAULT_CACERT. */
  readonly caPath?: string;
  /** The agent's TLS client certificate, for a Vault that requires one (VAULT_CLIENT_CERT / _KEY). */
  readonly clientCert?: { readonly certFile: string; readonly keyFile: string };
  readonly tlsServerName?: string;
  readonly skipVerify: boolean;
  readonly kvVersion: KvVersionSetting;
  readonly auth: AuthSettings;
  /** VAULT_REVOKE_ON_SHUTDOWN: a stopping sidecar revokes its login token (or its leases). */
  readonly revokeOnShutdown: boolean;
}

export type AuthSettings =
  | { readonly method: 'token'; readonly token?: string; readonly tokenFile?: string }
  | { readonly method: 'kubernetes'; readonly mount: string; readonly role: string; readonly jwtFile: string }
  | { readonly method: 'jwt'; readonly mount: string; readonly role?: string; readonly jwtFile: string }
  | {
      readonly method: 'approle';
      readonly mount: string;
      readonly roleId: string;
      readonly secretId?: string;
      readonly secretIdFile?: string;
    }
  /** TLS certificate auth: the certificate is VAULT_CLIENT_CERT, presented on every connection. */
  | { readonly method: 'cert'; readonly mount: string; readonly role?: string }
  /** AWS IAM (iam type): a signed sts:GetCallerIdentity request, signed for `region` and `stsEndpoint`. */
  | {
      readonly method: 'aws';
      readonly mount: string;
      readonly role?: string;
      readonly region: string;
      readonly stsEndpoint: URL;
      readonly serverId?: string;
    }
  /** GCP IAM (iam type): a JWT Google signs for the service account (IAM Credentials signJwt). */
  | {
      readonly method: 'gcp';
      readonly mount: string;
      readonly role: string;
      readonly serviceAccount?: string;
      readonly iamEndpoint: URL;
    };

type Env = Readonly<Record<string, string | undefined>>;

function invalid(field: string, problem: string, fix: string): ProviderError {
  return new ProviderError('invalid', `${field}: ${problem}`, fix, { transient: false });
}

/** An auth mount path as VAULT_AUTH_MOUNT takes it (without `auth/`); the webhook checks its settings with it too. */
export const MOUNT = /^[A-Za-z0-9_.-]+(?:\/[A-Za-z0-9_.-]+)*$/;

/** A mount path as written (`/jwt-k8s/`, `auth/jwt-k8s`) as Vault's login path takes it: `jwt-k8s`. */
export function normalizeAuthMount(text: string): string {
  return text.replace(/^\/+|\/+$/g, '').replace(/^auth\//, '');
}
const AWS_REGION = /^[a-z]{2}(?:-[a-z]+)+-\d{1,2}$/;

/** Reads the settings; throws a non-transient ProviderError naming the variable. Never reads a secret's value into a message. */
export function parseVaultSettings(env: Env): VaultSettings {
  const get = (name: string): string | undefined => {
    const v = env[name];
    return v === undefined || v.trim() === '' ? undefined : v.trim();
  };
  const addrText = get('VAULT_ADDR') ?? 'https://127.0.0.1:8200';
  let addr: URL;
  try {
    addr = new URL(addrText);
  } catch {
    throw invalid(
      'VAULT_ADDR',
      `${JSON.stringify(addrText)} is not a URL`,
      'set it like https://vault.example.com:8200',
    );
  }
  if (addr.protocol !== 'http:' && addr.protocol !== 'https:')
    throw invalid(
      'VAULT_ADDR',
      `scheme ${JSON.stringify(addr.protocol)} is not http or https`,
      'use an http:// or https:// URL',
    );
  if (addr.username || addr.password || addr.search || addr.hash)
    throw invalid('VAULT_ADDR', 'has credentials, a query or a fragment', 'use scheme://host:port only');

  const skipText = (get('VAULT_SKIP_VERIFY') ?? 'false').toLowerCase();
  if (!['true', 'false', '1', '0'].includes(skipText))
    throw invalid(
      'VAULT_SKIP_VERIFY',
      `${JSON.stringify(skipText)} is not a boolean`,
      'set it to true or false',
    );
  const skipVerify = skipText === 'true' || skipText === '1';
  if (skipVerify && addr.protocol === 'https:' && !isLoopbackHost(addr.hostname)) {
    throw invalid(
      'VAULT_SKIP_VERIFY',
      `is true for the non-loopback address ${addr.host}`,
      'give the CA with VAULT_CACERT (and VAULT_TLS_SERVER_NAME if the name differs); skipping verification is allowed only for 127.0.0.1/localhost',
    );
  }

  const revokeText = (get('VAULT_REVOKE_ON_SHUTDOWN') ?? 'false').toLowerCase();
  if (!['true', 'false', '1', '0'].includes(revokeText))
    throw invalid(
      'VAULT_REVOKE_ON_SHUTDOWN',
      `${JSON.stringify(revokeText)} is not a boolean`,
      'set it to true or false',
    );

  const kvText = get('VAULT_KV_VERSION') ?? 'auto';
  if (kvText !== 'auto' && kvText !== '1' && kvText !== '2')
    throw invalid(
      'VAULT_KV_VERSION',
      `${JSON.stringify(kvText)} is not auto, 1 or 2`,
      'set it to auto, 1 or 2',
    );

  const namespace = namespaceSetting('VAULT_NAMESPACE', get('VAULT_NAMESPACE')) ?? '';
  const authNamespace = namespaceSetting('VAULT_AUTH_NAMESPACE', get('VAULT_AUTH_NAMESPACE')) ?? namespace;
  const caCertFile = get('VAULT_CACERT');
  const caCertBytes = get('VAULT_CACERT_BYTES');
  if (caCertBytes !== undefined && !caCertBytes.includes('-----BEGIN CERTIFICATE-----'))
    throw invalid(
      'VAULT_CACERT_BYTES',
      `holds no PEM certificate (${caCertBytes.length} characters)`,
      'set it to the PEM text of the CA certificate(s), -----BEGIN CERTIFICATE----- included',
    );
  const caPath = get('VAULT_CAPATH');
  const tlsServerName = get('VAULT_TLS_SERVER_NAME');
  const certFile = get('VAULT_CLIENT_CERT');
  const keyFile = get('VAULT_CLIENT_KEY');
  if ((certFile === undefined) !== (keyFile === undefined))
    throw invalid(
      certFile === undefined ? 'VAULT_CLIENT_CERT' : 'VAULT_CLIENT_KEY',
      `is not set, but ${certFile === undefined ? 'VAULT_CLIENT_KEY' : 'VAULT_CLIENT_CERT'} is`,
      'set both VAULT_CLIENT_CERT and VAULT_CLIENT_KEY (PEM files), or neither',
    );
  if (certFile !== undefined && addr.protocol !== 'https:')
    throw invalid(
      'VAULT_CLIENT_CERT',
      `is set, but VAULT_ADDR is ${addr.protocol}// and sends no certificate`,
      'use the https:// address of Vault',
    );
  return {
    addr,
    namespace,
    authNamespace,
    ...(caCertFile ? { caCertFile } : {}),
    ...(caCertBytes ? { caCertBytes } : {}),
    ...(caPath ? { caPath } : {}),
    ...(certFile && keyFile ? { clientCert: { certFile, keyFile } } : {}),
    ...(tlsServerName ? { tlsServerName } : {}),
    skipVerify,
    kvVersion: kvText,
    auth: parseAuth(get),
    revokeOnShutdown: revokeText === 'true' || revokeText === '1',
  };
}

function namespaceSetting(field: string, text: string | undefined): string | undefined {
  if (text === undefined) return undefined;
  const parsed = parseVaultNamespace(text);
  if (typeof parsed === 'string') return parsed;
  throw invalid(
    field,
    `${JSON.stringify(text)} is not a Vault namespace: ${parsed.problem}`,
    'set it to the namespace path as `vault namespace list` shows it, e.g. admin/team-a (root for the root namespace)',
  );
}

function parseAuth(get: (name: string) => string | undefined): AuthSettings {
  const saTokenFile = get('VAULT_SA_TOKEN_FILE') ?? DEFAULT_SA_TOKEN_FILE;
  const role = get('VAULT_ROLE');
  const methodText = get('VAULT_AUTH_METHOD') ?? (role && existsSync(saTokenFile) ? 'kubernetes' : 'token');
  if (!(AUTH_METHODS as readonly string[]).includes(methodText))
    throw invalid(
      'VAULT_AUTH_METHOD',
      `${JSON.stringify(methodText)} is not a supported method`,
      `use one of ${AUTH_METHODS.join(', ')}`,
    );
  const method = methodText as AuthMethodName;
  const mount = normalizeAuthMount(get('VAULT_AUTH_MOUNT') ?? method);
  if (method !== 'token' && !MOUNT.test(mount))
    throw invalid(
      'VAULT_AUTH_MOUNT',
      `${JSON.stringify(mount)} is not a mount path`,
      'use the path after auth/, e.g. kubernetes',
    );

  switch (method) {
    case 'token': {
      const token = get('VAULT_TOKEN');
      const tokenFile = get('VAULT_TOKEN_FILE');
      if (!token && !tokenFile)
        throw invalid(
          'VAULT_TOKEN',
          'no Vault credentials: VAULT_TOKEN and VAULT_TOKEN_FILE are unset and no login method is configured',
          'set VAULT_ROLE for Kubernetes auth (the usual setup in a pod), or VAULT_AUTH_METHOD=jwt|approle|cert|aws|gcp, or VAULT_TOKEN / VAULT_TOKEN_FILE',
        );
      return { method, ...(token ? { token } : {}), ...(tokenFile ? { tokenFile } : {}) };
    }
    case 'kubernetes':
      if (!role)
        throw invalid(
          'VAULT_ROLE',
          'is required for Kubernetes auth',
          'set it to the Vault role bound to the pod’s service account',
        );
      return { method, mount, role, jwtFile: saTokenFile };
    case 'jwt':
      return { method, mount, ...(role ? { role } : {}), jwtFile: get('VAULT_JWT_FILE') ?? saTokenFile };
    case 'approle': {
      const roleId = get('VAULT_ROLE_ID');
      const secretId = get('VAULT_SECRET_ID');
      const secretIdFile = get('VAULT_SECRET_ID_FILE');
      if (!roleId)
        throw invalid('VAULT_ROLE_ID', 'is required for AppRole auth', 'set it to the AppRole’s role id');
      return {
        method,
        mount,
        roleId,
        ...(secretId ? { secretId } : {}),
        ...(secretIdFile ? { secretIdFile } : {}),
      };
    }
    case 'cert':
      if (!get('VAULT_CLIENT_CERT'))
        throw invalid(
          'VAULT_CLIENT_CERT',
          'is required for cert auth (VAULT_AUTH_METHOD=cert)',
          'set VAULT_CLIENT_CERT and VAULT_CLIENT_KEY to the PEM certificate and key a certificate role on the cert auth mount trusts',
        );
      return { method, mount, ...(role ? { role } : {}) };
    case 'aws': {
      const regionText = get('VAULT_AWS_REGION') ?? 'us-east-1';
      const region = regionText === 'auto' ? (get('AWS_REGION') ?? get('AWS_DEFAULT_REGION')) : regionText;
      if (region === undefined)
        throw invalid(
          'VAULT_AWS_REGION',
          'is auto, but AWS_REGION and AWS_DEFAULT_REGION are unset',
          'set VAULT_AWS_REGION to the STS region Vault is configured for (sts_region), e.g. us-east-1',
        );
      if (!AWS_REGION.test(region))
        throw invalid(
          regionText === 'auto' ? 'AWS_REGION' : 'VAULT_AWS_REGION',
          `${JSON.stringify(region)} is not an AWS region`,
          'set it like us-east-1 or eu-west-1',
        );
      const endpointText =
        get('VAULT_AWS_STS_ENDPOINT') ??
        (region === 'us-east-1' ? 'https://sts.amazonaws.com' : `https://sts.${region}.amazonaws.com`);
      let stsEndpoint: URL;
      try {
        stsEndpoint = new URL(endpointText);
      } catch {
        throw invalid(
          'VAULT_AWS_STS_ENDPOINT',
          `${JSON.stringify(endpointText)} is not a URL`,
          'set it like https://sts.eu-west-1.amazonaws.com',
        );
      }
      if (
        (stsEndpoint.protocol !== 'https:' && stsEndpoint.protocol !== 'http:') ||
        stsEndpoint.username ||
        stsEndpoint.password ||
        stsEndpoint.search ||
        stsEndpoint.hash
      )
        throw invalid(
          'VAULT_AWS_STS_ENDPOINT',
          `${JSON.stringify(endpointText)} is not an http(s) URL without credentials, query or fragment`,
          'set it like https://sts.eu-west-1.amazonaws.com',
        );
      const serverId = get('VAULT_AWS_IAM_SERVER_ID');
      return {
        method,
        mount,
        ...(role ? { role } : {}),
        region,
        stsEndpoint,
        ...(serverId ? { serverId } : {}),
      };
    }
    case 'gcp': {
      if (!role)
        throw invalid(
          'VAULT_ROLE',
          'is required for GCP auth',
          'set it to the Vault gcp role (type iam) bound to the service account',
        );
      const serviceAccount = get('VAULT_GCP_SERVICE_ACCOUNT');
      if (serviceAccount !== undefined && !/^[^@\s]+@[^@\s]+$/.test(serviceAccount))
        throw invalid(
          'VAULT_GCP_SERVICE_ACCOUNT',
          `${JSON.stringify(serviceAccount)} is not a service account email`,
          'set it like vault-auth@my-project.iam.gserviceaccount.com, or unset it to sign as the pod’s own account',
        );
      const endpointText =
        get('VAULT_GCP_IAM_CREDENTIALS_ENDPOINT') ?? 'https://iamcredentials.googleapis.com';
      let iamEndpoint: URL | undefined;
      try {
        iamEndpoint = new URL(endpointText);
      } catch {
        iamEndpoint = undefined;
      }
      // The access token rides on this request: never in clear text past loopback.
      if (
        !iamEndpoint ||
        !(
          iamEndpoint.protocol === 'https:' ||
          (iamEndpoint.protocol === 'http:' && isLoopbackHost(iamEndpoint.hostname))
        ) ||
        iamEndpoint.username ||
        iamEndpoint.password ||
        iamEndpoint.search ||
        iamEndpoint.hash ||
        iamEndpoint.pathname !== '/'
      )
        throw invalid(
          'VAULT_GCP_IAM_CREDENTIALS_ENDPOINT',
          `${JSON.stringify(endpointText)} is not an https:// origin (http:// only on loopback)`,
          'set it like https://iamcredentials.googleapis.com, or unset it',
        );
      return {
        method,
        mount,
        role,
        ...(serviceAccount ? { serviceAccount } : {}),
        iamEndpoint,
      };
    }
  }
}
