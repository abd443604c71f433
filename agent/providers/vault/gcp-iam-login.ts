import { GoogleAuth } from 'google-auth-library';
import { setBackend } from 'google-logging-utils';
import { ProviderError } from '../provider.ts';

/**
 * The credential of a `gcp` auth login (iam type): a JWT `{"aud": "vault/<role>", "sub": <service
 * account>, "exp": …}` signed by Google for the pod's service account, through the IAM Credentials
 * API `projects/-/serviceAccounts/<email>:signJwt` (Vault API docs, GCP auth method, iam login).
 * The access token for that call comes from Application Default Credentials: on GKE, Workload
 * Identity's metadata server. The iam type rather than gce: gce identity tokens name a VM, and on
 * GKE with Workload Identity a pod has no VM identity of its own. Loaded only when
 * VAULT_AUTH_METHOD=gcp.
 */

export interface GcpIamLoginSettings {
  readonly role: string;
  /** The account to sign as; undefined: the credentials' own (the metadata server's email). */
  readonly serviceAccount?: string;
  /** IAM Credentials API origin (VAULT_GCP_IAM_CREDENTIALS_ENDPOINT). */
  readonly endpoint: URL;
}

export interface GcpIamLogin {
  /** A fresh signed JWT; Vault accepts one that expires within its role's max_jwt_exp. */
  jwt(description: string, fix: string, signal: AbortSignal): Promise<string>;
}

/**
 * Short-lived, well inside the 15 minutes Vault allows (and a role's max_jwt_exp), with room for
 * clock skew: the JWT is used at once.
 */
const JWT_LIFETIME_SEC = 5 * 60;
const SCOPE = 'https://www.googleapis.com/auth/cloud-platform';

export function createGcpIamLogin(settings: GcpIamLoginSettings): GcpIamLogin {
  // GOOGLE_SDK_NODE_LOGGING would make the auth client log token responses. Off for good.
  setBackend(null);
  const auth = new GoogleAuth({ scopes: [SCOPE] });
  return {
    async jwt(description, fix, signal) {
      let email: string;
      let accessToken: string;
      try {
        email = settings.serviceAccount ?? (await auth.getCredentials()).client_email ?? '';
        accessToken = (await auth.getAccessToken()) ?? '';
      } catch (e) {
        throw new ProviderError(
          'auth',
          `${description}: no Google credentials to call signJwt with: ${(e as Error).message}`,
          `give the pod Google credentials: GKE Workload Identity (its Kubernetes service account bound to a Google service account), or GOOGLE_APPLICATION_CREDENTIALS; then ${fix}`,
          // On GKE the metadata server can lag a starting pod.
          { transient: true },
        );
      }
      if (email === '')
        throw new ProviderError(
          'auth',
          `${description}: the Google credentials name no service account to sign as`,
          'set VAULT_GCP_SERVICE_ACCOUNT to the service account’s email',
          { transient: false },
        );
      const url = new URL(
        `/v1/projects/-/serviceAccounts/${encodeURIComponent(email)}:signJwt`,
        settings.endpoint,
      );
      const claims = {
        aud: `vault/${settings.role}`,
        sub: email,
        exp: Math.floor(Date.now() / 1000) + JWT_LIFETIME_SEC,
      };
      const what = `${description}: signJwt as ${email}`;
      let res: Response;
      try {
        res = await fetch(url, {
          method: 'POST',
          headers: { authorization: `Bearer ${accessToken}`, 'content-type': 'application/json' },
          body: JSON.stringify({ payload: JSON.stringify(claims) }),
          signal,
        });
      } catch (e) {
        throw new ProviderError(
          'unavailable',
          `${what}: ${(e as Error).name}: ${causeCode(e)}`,
          'check network reach to the IAM Credentials API (iamcredentials.googleapis.com, or VAULT_GCP_IAM_CREDENTIALS_ENDPOINT)',
        );
      }
      const body = (await res.json().catch(() => undefined)) as
        { signedJwt?: unknown; error?: { status?: unknown; message?: unknown } } | undefined;
      if (res.ok && typeof body?.signedJwt === 'string' && body.signedJwt !== '') return body.signedJwt;
      // Google's error bodies name a status and say what; never a token.
      const status = typeof body?.error?.status === 'string' ? ` ${body.error.status}` : '';
      const message = typeof body?.error?.message === 'string' ? `: ${body.error.message}` : '';
      const detail = `${what}: HTTP ${res.status}${status}${message}`;
      if (res.status === 401 || res.status === 403)
        throw new ProviderError(
          'auth',
          detail,
          `grant roles/iam.serviceAccountTokenCreator on ${email} to the pod's identity (with Workload Identity, to the service account itself), and check VAULT_GCP_SERVICE_ACCOUNT`,
          { transient: false },
        );
      if (res.status === 429)
        throw new ProviderError('throttled', detail, 'IAM Credentials quota reached; retried with backoff');
      if (res.status >= 500)
        throw new ProviderError('unavailable', detail, 'a Google server fault; retried with backoff');
      throw new ProviderError(
        'invalid',
        res.ok ? `${what}: the answer has no signedJwt` : detail,
        'check VAULT_GCP_IAM_CREDENTIALS_ENDPOINT: it must serve the IAM Credentials API v1',
        { transient: false },
      );
    },
  };
}

/** A network error's code (ECONNREFUSED, ENOTFOUND, …), which fetch keeps in `cause`. */
function causeCode(e: unknown): string {
  const cause = (e as { cause?: { code?: unknown; message?: unknown } }).cause;
  if (typeof cause?.code === 'string') return cause.code;
  return typeof cause?.message === 'string' ? cause.message : (e as Error).message;
}
