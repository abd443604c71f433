import { createHash, createHmac, type Hash, type Hmac } from 'node:crypto';
import { defaultProvider } from '@aws-sdk/credential-provider-node';
import { SignatureV4 } from '@smithy/signature-v4';
import { ProviderError } from '../provider.ts';

/**
 * The credential of an `aws` auth login (iam type): an sts:GetCallerIdentity request signed with the
 * pod's AWS credentials. The agent never sends it to AWS; Vault does, and learns from STS's answer
 * which IAM principal signed it (Vault API docs, AWS auth method, `POST auth/aws/login`). The
 * credentials come from the AWS SDK's default chain: EKS Pod Identity, IRSA (web identity), env,
 * profile, IMDS. Loaded only when VAULT_AUTH_METHOD=aws.
 */

export interface AwsIamLoginSettings {
  /** The SigV4 signing region: STS's region, as Vault's auth/aws/config/client sts_region. */
  readonly region: string;
  /** The STS URL the request is signed for (and Vault's sts_endpoint must match). */
  readonly stsEndpoint: URL;
  /** X-Vault-AWS-IAM-Server-ID, signed, for a Vault with iam_server_id_header_value. */
  readonly serverId?: string;
}

/** The login fields Vault's iam login takes, every one base64 as the API asks. */
export interface AwsIamLoginFields {
  readonly iam_http_request_method: 'POST';
  readonly iam_request_url: string;
  readonly iam_request_body: string;
  readonly iam_request_headers: string;
}

/** The only request Vault accepts: STS's GetCallerIdentity, in the POST body. */
const GET_CALLER_IDENTITY = 'Action=GetCallerIdentity&Version=2011-06-15';
const SERVER_ID_HEADER = 'X-Vault-AWS-IAM-Server-ID';

/** SHA-256 and HMAC-SHA-256 in the shape @smithy/signature-v4 takes, on node:crypto. */
export class Sha256 {
  readonly #secret: string | Buffer | undefined;
  #hash: Hash | Hmac;
  constructor(secret?: string | ArrayBuffer | ArrayBufferView) {
    this.#secret = secret === undefined || typeof secret === 'string' ? secret : toBuffer(secret);
    this.#hash = this.#start();
  }
  #start(): Hash | Hmac {
    return this.#secret === undefined ? createHash('sha256') : createHmac('sha256', this.#secret);
  }
  update(data: string | ArrayBuffer | ArrayBufferView): void {
    this.#hash.update(typeof data === 'string' ? data : toBuffer(data));
  }
  digest(): Promise<Uint8Array> {
    return Promise.resolve(new Uint8Array(this.#hash.digest()));
  }
  reset(): void {
    this.#hash = this.#start();
  }
}

function toBuffer(data: ArrayBuffer | ArrayBufferView): Buffer {
  return ArrayBuffer.isView(data)
    ? Buffer.from(data.buffer, data.byteOffset, data.byteLength)
    : Buffer.from(data);
}

export interface AwsIamLogin {
  /** A freshly signed request (SigV4 signatures carry their time: each login signs anew). */
  fields(description: string, fix: string): Promise<AwsIamLoginFields>;
}

export function createAwsIamLogin(settings: AwsIamLoginSettings): AwsIamLogin {
  // The chain caches credentials and fetches new ones before they expire (IRSA, Pod Identity).
  const credentials = defaultProvider();
  const signer = new SignatureV4({ credentials, region: settings.region, service: 'sts', sha256: Sha256 });
  const url = settings.stsEndpoint;
  return {
    async fields(description, fix) {
      let signed;
      try {
        signed = await signer.sign({
          method: 'POST',
          protocol: url.protocol,
          hostname: url.hostname,
          ...(url.port ? { port: Number(url.port) } : {}),
          path: url.pathname,
          query: {},
          headers: {
            host: url.host,
            'content-type': 'application/x-www-form-urlencoded; charset=utf-8',
            ...(settings.serverId !== undefined ? { [SERVER_ID_HEADER]: settings.serverId } : {}),
          },
          body: GET_CALLER_IDENTITY,
        });
      } catch (e) {
        throw credentialsError(e, description, fix);
      }
      // Go's http.Header in JSON, as Vault decodes iam_request_headers.
      const headers = Object.fromEntries(Object.entries(signed.headers).map(([k, v]) => [k, [v]]));
      return {
        iam_http_request_method: 'POST',
        iam_request_url: base64(url.href),
        iam_request_body: base64(GET_CALLER_IDENTITY),
        iam_request_headers: base64(JSON.stringify(headers)),
      };
    },
  };
}

function base64(text: string): string {
  return Buffer.from(text, 'utf8').toString('base64');
}

/**
 * No credentials in the chain is a setup problem; anything else on the way (an STS or metadata
 * endpoint that does not answer) may pass. The SDK's messages name providers and files, never a key.
 */
function credentialsError(e: unknown, description: string, fix: string): ProviderError {
  const error = e as { name?: unknown; message?: unknown };
  const name = typeof error?.name === 'string' ? error.name : 'Error';
  const message = typeof error?.message === 'string' ? error.message : '';
  return new ProviderError(
    'auth',
    `${description}: no AWS credentials to sign sts:GetCallerIdentity with: ${name}: ${message}`,
    `give the pod an IAM role (EKS Pod Identity or IRSA on its service account) or AWS credentials the AWS SDK finds; then ${fix}`,
    { transient: name !== 'CredentialsProviderError' },
  );
}
