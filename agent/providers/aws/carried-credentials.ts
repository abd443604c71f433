import type { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';

/**
 * The small sidecar's AWS credentials from one run to the next. Each run is a new process, so the
 * SDK's own cache is empty and IRSA would cost an STS AssumeRoleWithWebIdentity call per refresh (EKS
 * Pod Identity a call to its agent). Temporary credentials the chain resolved are handed to the next
 * run (through the resident's memory only) and used while they have more than REFRESH_MARGIN_MS left,
 * as the SDK's own cache would; then the chain resolves new ones. Credentials without an expiry
 * (static keys in env) cost no call and are never handed on.
 */

/** The SDK refreshes web-identity credentials this long before they expire; so does this. */
const REFRESH_MARGIN_MS = 5 * 60_000;

interface Saved {
  /** Which identity settings they were resolved under: others are not used. */
  readonly identity: string;
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  readonly sessionToken?: string;
  readonly expiration: number;
}

type Credentials = {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
  expiration?: Date;
};

export class CarriedCredentials {
  readonly #identity: string;
  #current: Saved | undefined;

  constructor(env: Readonly<Record<string, string | undefined>>) {
    this.#identity = JSON.stringify(
      [
        'AWS_ROLE_ARN',
        'AWS_WEB_IDENTITY_TOKEN_FILE',
        'AWS_CONTAINER_CREDENTIALS_FULL_URI',
        'AWS_PROFILE',
      ].map((name) => env[name] ?? ''),
    );
  }

  /** Makes `client` use the carried credentials while they last, and remember what its chain resolves. */
  wrap(client: SecretsManagerClient): void {
    const config = client.config as unknown as {
      credentials: (props?: unknown) => Promise<Credentials>;
    };
    const chain = config.credentials;
    config.credentials = async (props?: unknown) => {
      const carried = this.#current;
      if (carried && carried.expiration - Date.now() > REFRESH_MARGIN_MS)
        return {
          accessKeyId: carried.accessKeyId,
          secretAccessKey: carried.secretAccessKey,
          ...(carried.sessionToken !== undefined ? { sessionToken: carried.sessionToken } : {}),
          expiration: new Date(carried.expiration),
        };
      const resolved = await chain(props);
      const expiration = resolved.expiration?.getTime();
      this.#current =
        expiration !== undefined && Number.isFinite(expiration)
          ? {
              identity: this.#identity,
              accessKeyId: resolved.accessKeyId,
              secretAccessKey: resolved.secretAccessKey,
              ...(resolved.sessionToken !== undefined ? { sessionToken: resolved.sessionToken } : {}),
              expiration,
            }
          : undefined;
      return resolved;
    };
  }

  /** What the next run may use: temporary credentials with time left, or nothing. */
  save(): Saved | undefined {
    const c = this.#current;
    return c && c.expiration - Date.now() > REFRESH_MARGIN_MS ? c : undefined;
  }

  /** Takes back what an earlier run saved, if it is of this identity and of the right shape. */
  restore(state: unknown): void {
    const s = (typeof state === 'object' && state !== null ? state : {}) as Partial<Saved>;
    if (
      s.identity === this.#identity &&
      typeof s.accessKeyId === 'string' &&
      typeof s.secretAccessKey === 'string' &&
      (s.sessionToken === undefined || typeof s.sessionToken === 'string') &&
      Number.isFinite(s.expiration)
    )
      this.#current = s as Saved;
  }
}
