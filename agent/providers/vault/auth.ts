import { readFile } from 'node:fs/promises';
import { ProviderError } from '../provider.ts';
import type { AwsIamLogin } from './aws-iam-login.ts';
import type { AuthSettings } from './config.ts';
import type { GcpIamLogin } from './gcp-iam-login.ts';
import { loginError } from './errors.ts';
import type { VaultApi, VaultCall } from './http.ts';

/**
 * How the agent gets a Vault token: a static token (env or file), or a login with the pod's
 * identity (Kubernetes service-account token, a JWT, an AppRole, the TLS client certificate). Logins post to
 * `auth/<mount>/login` directly: node-vault's kubernetesLogin builds `/auth//login` when no
 * mount_point is given, and a mount is always known here.
 */

export interface IssuedToken {
  readonly token: string;
  /** Seconds the token lives from now; undefined until looked up (static tokens), 0 = no expiry. */
  readonly ttlSec: number | undefined;
  readonly renewable: boolean;
}

export interface Authenticator {
  /** `static`: a token given to us, kept until it fails. `login`: a token we can get again. */
  readonly kind: 'static' | 'login';
  /** Method, mount and role, for errors and logs; never a credential. */
  readonly description: string;
  /** The fix for a 403 on `path`: which policy must allow it. */
  deniedFix(path: string): string;
  obtain(api: VaultApi, signal: AbortSignal): Promise<IssuedToken>;
}

/**
 * `namespace` is where the login goes (VAULT_AUTH_NAMESPACE), and so the token's namespace: it is
 * valid there and in the namespaces below.
 */
export function createAuthenticator(auth: AuthSettings, namespace: string): Authenticator {
  const where = namespace === '' ? '' : ` in namespace ${JSON.stringify(namespace)}`;
  const login = (
    api: VaultApi,
    path: string,
    body: Record<string, unknown>,
    description: string,
    fix: string,
    signal: AbortSignal,
  ): Promise<IssuedToken> =>
    loginAt(api, path, body, description, fix, { token: undefined, namespace, signal });
  switch (auth.method) {
    case 'token':
      return {
        kind: 'static',
        description: auth.token
          ? `token auth (VAULT_TOKEN)${where}`
          : `token auth (VAULT_TOKEN_FILE=${auth.tokenFile})${where}`,
        deniedFix: (path) =>
          `the policies of the Vault token must allow \`read\` on ${path}; if the token expired or was revoked, issue a new one`,
        async obtain() {
          const token =
            auth.token ??
            (await readCredential(
              auth.tokenFile!,
              'VAULT_TOKEN_FILE',
              'token auth',
              'mount the token file or set VAULT_TOKEN',
            ));
          return { token, ttlSec: undefined, renewable: false };
        },
      };
    case 'kubernetes':
    case 'jwt': {
      const role = auth.role;
      const description = `${auth.method} auth at auth/${auth.mount}${role ? ` as role ${JSON.stringify(role)}` : ''}${where}`;
      const fileVar = auth.method === 'kubernetes' ? 'VAULT_SA_TOKEN_FILE' : 'VAULT_JWT_FILE';
      const loginFix =
        auth.method === 'kubernetes'
          ? `check that Vault role ${JSON.stringify(role)} on auth/${auth.mount} binds this pod's service account and namespace (bound_service_account_names / bound_service_account_namespaces), that VAULT_AUTH_MOUNT names the mount in the login namespace (VAULT_AUTH_NAMESPACE, default VAULT_NAMESPACE), and that Vault can reach the Kubernetes TokenReview API`
          : `check the Vault role's bound_audiences / bound_claims / user_claim on auth/${auth.mount} against the JWT in ${fileVar}, and that VAULT_AUTH_MOUNT names the mount in the login namespace (VAULT_AUTH_NAMESPACE, default VAULT_NAMESPACE)`;
      return {
        kind: 'login',
        description,
        deniedFix: (path) =>
          `the policies of Vault role ${JSON.stringify(role ?? 'default_role')} (auth/${auth.mount}) must allow \`read\` on ${path}`,
        async obtain(api, signal) {
          const jwt = await readCredential(
            auth.jwtFile,
            fileVar,
            description,
            auth.method === 'kubernetes'
              ? 'mount the service-account token (automountServiceAccountToken or a projected volume) or set VAULT_SA_TOKEN_FILE'
              : 'mount the JWT or set VAULT_JWT_FILE',
          );
          return login(
            api,
            `auth/${auth.mount}/login`,
            { ...(role ? { role } : {}), jwt },
            description,
            loginFix,
            signal,
          );
        },
      };
    }
    case 'approle': {
      const description = `approle auth at auth/${auth.mount}${where}`;
      const loginFix =
        'check VAULT_ROLE_ID and the secret id (VAULT_SECRET_ID / VAULT_SECRET_ID_FILE): secret ids expire, have use limits and may be bound to CIDRs';
      return {
        kind: 'login',
        description,
        deniedFix: (path) =>
          `the policies of the AppRole (auth/${auth.mount}) must allow \`read\` on ${path}`,
        async obtain(api, signal) {
          const secretId =
            auth.secretId ??
            (auth.secretIdFile
              ? await readCredential(
                  auth.secretIdFile,
                  'VAULT_SECRET_ID_FILE',
                  description,
                  'mount the secret id file or set VAULT_SECRET_ID',
                )
              : undefined);
          return login(
            api,
            `auth/${auth.mount}/login`,
            { role_id: auth.roleId, ...(secretId !== undefined ? { secret_id: secretId } : {}) },
            description,
            loginFix,
            signal,
          );
        },
      };
    }
    case 'cert': {
      // The credential is the certificate of the TLS connection (VAULT_CLIENT_CERT); the body only picks a role.
      const description = `cert auth at auth/${auth.mount}${auth.role ? ` as role ${JSON.stringify(auth.role)}` : ''}${where}`;
      const loginFix = `check that ${auth.role ? `certificate role ${JSON.stringify(auth.role)}` : 'a certificate role'} on auth/${auth.mount} trusts VAULT_CLIENT_CERT (its certificate is the CA that signed it, or the certificate itself; allowed_common_names and the like match it), that the certificate is within its validity, and that VAULT_AUTH_MOUNT names the mount in the login namespace (VAULT_AUTH_NAMESPACE, default VAULT_NAMESPACE)`;
      return {
        kind: 'login',
        description,
        deniedFix: (path) =>
          `the policies of ${auth.role ? `certificate role ${JSON.stringify(auth.role)}` : 'the certificate role'} (auth/${auth.mount}) must allow \`read\` on ${path}`,
        obtain: (api, signal) =>
          login(
            api,
            `auth/${auth.mount}/login`,
            auth.role ? { name: auth.role } : {},
            description,
            loginFix,
            signal,
          ),
      };
    }
    case 'aws': {
      const description = `aws auth (iam) at auth/${auth.mount}${auth.role ? ` as role ${JSON.stringify(auth.role)}` : ''}${where}`;
      const loginFix = `check that Vault role ${auth.role ? JSON.stringify(auth.role) : '(named after the pod’s IAM role)'} on auth/${auth.mount} has auth_type=iam and a bound_iam_principal_arn matching the pod's IAM role, that auth/${auth.mount}/config/client names the STS the request is signed for (sts_endpoint ${auth.stsEndpoint.origin}, sts_region ${auth.region}: VAULT_AWS_STS_ENDPOINT, VAULT_AWS_REGION) and, if set, iam_server_id_header_value = VAULT_AWS_IAM_SERVER_ID, and that VAULT_AUTH_MOUNT names the mount in the login namespace (VAULT_AUTH_NAMESPACE, default VAULT_NAMESPACE)`;
      // The AWS SDK's credential chain loads only for this method.
      let signing: Promise<AwsIamLogin> | undefined;
      return {
        kind: 'login',
        description,
        deniedFix: (path) =>
          `the policies of Vault role ${JSON.stringify(auth.role ?? 'named after the IAM role')} (auth/${auth.mount}) must allow \`read\` on ${path}`,
        async obtain(api, signal) {
          signing ??= import('./aws-iam-login.ts').then((m) =>
            m.createAwsIamLogin({
              region: auth.region,
              stsEndpoint: auth.stsEndpoint,
              ...(auth.serverId !== undefined ? { serverId: auth.serverId } : {}),
            }),
          );
          const fields = await (await signing).fields(description, loginFix);
          return login(
            api,
            `auth/${auth.mount}/login`,
            { ...(auth.role ? { role: auth.role } : {}), ...fields },
            description,
            loginFix,
            signal,
          );
        },
      };
    }
    case 'gcp': {
      const description = `gcp auth (iam) at auth/${auth.mount} as role ${JSON.stringify(auth.role)}${where}`;
      const loginFix = `check that Vault role ${JSON.stringify(auth.role)} on auth/${auth.mount} has type=iam and bound_service_accounts naming ${auth.serviceAccount ?? 'the pod’s service account'} (VAULT_GCP_SERVICE_ACCOUNT), that its max_jwt_exp allows 5 minutes, and that VAULT_AUTH_MOUNT names the mount in the login namespace (VAULT_AUTH_NAMESPACE, default VAULT_NAMESPACE)`;
      // google-auth-library loads only for this method.
      let signing: Promise<GcpIamLogin> | undefined;
      return {
        kind: 'login',
        description,
        deniedFix: (path) =>
          `the policies of Vault role ${JSON.stringify(auth.role)} (auth/${auth.mount}) must allow \`read\` on ${path}`,
        async obtain(api, signal) {
          signing ??= import('./gcp-iam-login.ts').then((m) =>
            m.createGcpIamLogin({
              role: auth.role,
              endpoint: auth.iamEndpoint,
              ...(auth.serviceAccount !== undefined ? { serviceAccount: auth.serviceAccount } : {}),
            }),
          );
          const jwt = await (await signing).jwt(description, loginFix, signal);
          return login(
            api,
            `auth/${auth.mount}/login`,
            { role: auth.role, jwt },
            description,
            loginFix,
            signal,
          );
        },
      };
    }
  }
}

async function loginAt(
  api: VaultApi,
  path: string,
  body: Record<string, unknown>,
  description: string,
  fix: string,
  call: VaultCall,
): Promise<IssuedToken> {
  let answer;
  try {
    answer = await api.write(path, body, call);
  } catch (e) {
    throw loginError(e, `${description}: login failed`, fix);
  }
  const auth = answer.auth;
  if (!auth || typeof auth.client_token !== 'string' || auth.client_token === '') {
    throw new ProviderError('auth', `${description}: the login answer has no client token`, fix, {
      transient: false,
    });
  }
  return {
    token: auth.client_token,
    ttlSec: Number(auth.lease_duration) || 0,
    renewable: auth.renewable === true,
  };
}

/** Reads a credential file, trimmed. Errors name the variable and path, never the content. */
async function readCredential(
  path: string,
  variable: string,
  description: string,
  fix: string,
): Promise<string> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (e) {
    throw new ProviderError(
      'auth',
      `${description}: cannot read ${variable}=${path} (${(e as NodeJS.ErrnoException).code ?? 'error'})`,
      fix,
      { transient: false },
    );
  }
  const value = text.trim();
  if (value === '')
    throw new ProviderError('auth', `${description}: ${variable}=${path} is empty`, fix, {
      transient: false,
    });
  return value;
}
