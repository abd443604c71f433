/**
 * The three Google endpoints a GKE pod's `gcp` (iam type) Vault login touches, on one loopback
 * HTTP server, speaking their documented shapes:
 *   - the GKE metadata server (Workload Identity), as google-auth-library asks it with
 *     GCE_METADATA_HOST: `GET /computeMetadata/v1/instance/service-accounts/default/{token,email}`
 *     and `/computeMetadata/v1/instance` (its presence check), each only with `Metadata-Flavor:
 *     Google` and answering with that header;
 *   - IAM Credentials `POST /v1/projects/-/serviceAccounts/{email}:signJwt` `{"payload": "<claims
 *     JSON>"}` → `{"keyId", "signedJwt"}`, RS256 with the service account's key, for a caller whose
 *     bearer token is the metadata server's; Google's error bodies `{"error": {code, message,
 *     status, details}}` (401 UNAUTHENTICATED, 403 PERMISSION_DENIED for another account, 400
 *     INVALID_ARGUMENT for a payload that is not JSON);
 *   - the service account's public certificates `GET /service_accounts/v1/metadata/x509/{email}`
 *     → `{"<kid>": "<PEM>"}`, what Vault's gcp auth fetches to check the JWT.
 */
import { createPrivateKey, randomBytes, sign } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { selfSignedCertificate } from '../support/self-signed-cert.ts';

/** What a signJwt call asked to have signed, and what it got. */
export interface SignedJwtRecord {
  readonly serviceAccount: string;
  readonly claims: Record<string, unknown>;
  readonly signedJwt: string;
}

export class FakeGoogleIam {
  readonly serviceAccount: string;
  /** The bearer token the metadata server hands out and signJwt demands. */
  readonly accessToken: string;
  readonly keyId = randomBytes(20).toString('hex');
  readonly signed: SignedJwtRecord[] = [];
  /** When false, the metadata server has no token to give (a pod without Workload Identity). */
  tokenAvailable = true;
  readonly #server: Server;
  readonly #key: ReturnType<typeof createPrivateKey>;
  readonly #cert: string;
  #origin = '';

  private constructor(server: Server, serviceAccount: string, accessToken: string) {
    this.#server = server;
    this.serviceAccount = serviceAccount;
    this.accessToken = accessToken;
    const made = selfSignedCertificate(serviceAccount, `email:${serviceAccount}`, 'rsa');
    this.#key = createPrivateKey(made.key);
    this.#cert = made.cert;
  }

  static async start(options: { serviceAccount: string; accessToken: string }): Promise<FakeGoogleIam> {
    const holder: { fake?: FakeGoogleIam } = {};
    const server = createServer((req, res) => void holder.fake!.#handle(req, res));
    const fake = new FakeGoogleIam(server, options.serviceAccount, options.accessToken);
    holder.fake = fake;
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    fake.#origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    return fake;
  }

  /** For GCE_METADATA_HOST. */
  get metadataHost(): string {
    return this.#origin.slice('http://'.length);
  }

  /** The IAM Credentials endpoint, and Vault's custom API endpoint for the public keys. */
  get endpoint(): string {
    return this.#origin;
  }

  async stop(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', this.#origin);
    const body = await new Promise<string>((resolve) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    });
    const json = (status: number, value: unknown): void => {
      res.writeHead(status, { 'content-type': 'application/json; charset=UTF-8' }).end(JSON.stringify(value));
    };
    const googleError = (code: number, status: string, message: string, details: unknown[] = []): void =>
      json(code, { error: { code, message, status, ...(details.length ? { details } : {}) } });

    if (url.pathname.startsWith('/computeMetadata/v1/')) {
      const metadata = (status: number, text: string, type = 'application/text'): void => {
        res.writeHead(status, { 'metadata-flavor': 'Google', 'content-type': type }).end(text);
      };
      if (req.headers['metadata-flavor'] !== 'Google') {
        res.writeHead(403, { 'content-type': 'text/html' }).end('Missing Metadata-Flavor:Google header.');
        return;
      }
      const path = url.pathname.slice('/computeMetadata/v1/'.length).replace(/\/$/, '');
      if (path === 'instance') return metadata(200, 'attributes/\nservice-accounts/\n');
      if (path === 'instance/service-accounts/default/email') return metadata(200, this.serviceAccount);
      if (path === 'instance/service-accounts/default/token' && this.tokenAvailable)
        return metadata(
          200,
          JSON.stringify({ access_token: this.accessToken, expires_in: 3599, token_type: 'Bearer' }),
          'application/json',
        );
      if (path === 'universe/universe-domain') return metadata(200, 'googleapis.com');
      return metadata(404, 'Not Found');
    }

    const keys = /^\/service_accounts\/v1\/metadata\/x509\/(.+)$/.exec(url.pathname);
    if (keys && req.method === 'GET') {
      if (decodeURIComponent(keys[1]!) !== this.serviceAccount)
        return googleError(404, 'NOT_FOUND', 'Not Found');
      return json(200, { [this.keyId]: this.#cert });
    }

    const signJwt = /^\/v1\/projects\/-\/serviceAccounts\/([^/:]+):signJwt$/.exec(url.pathname);
    if (signJwt && req.method === 'POST') {
      if (req.headers.authorization !== `Bearer ${this.accessToken}`)
        return googleError(
          401,
          'UNAUTHENTICATED',
          'Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project.',
        );
      const account = decodeURIComponent(signJwt[1]!);
      if (account !== this.serviceAccount)
        return googleError(
          403,
          'PERMISSION_DENIED',
          "Permission 'iam.serviceAccounts.signJwt' denied on resource (or it may not exist).",
          [
            {
              '@type': 'type.googleapis.com/google.rpc.ErrorInfo',
              reason: 'IAM_PERMISSION_DENIED',
              domain: 'iam.googleapis.com',
              metadata: { permission: 'iam.serviceAccounts.signJwt' },
            },
          ],
        );
      let claims: Record<string, unknown>;
      try {
        claims = JSON.parse((JSON.parse(body) as { payload: string }).payload) as Record<string, unknown>;
      } catch {
        return googleError(400, 'INVALID_ARGUMENT', 'Invalid JWT payload.');
      }
      const part = (value: unknown): string => Buffer.from(JSON.stringify(value)).toString('base64url');
      const unsigned = `${part({ alg: 'RS256', kid: this.keyId, typ: 'JWT' })}.${part(claims)}`;
      const signature = sign('RSA-SHA256', Buffer.from(unsigned), this.#key).toString('base64url');
      const signedJwt = `${unsigned}.${signature}`;
      this.signed.push({ serviceAccount: account, claims, signedJwt });
      return json(200, { keyId: this.keyId, signedJwt });
    }
    googleError(404, 'NOT_FOUND', `The requested URL ${url.pathname} was not found on this server.`);
  }
}
