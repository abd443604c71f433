import { SignatureV4 } from '@smithy/signature-v4';
import { Sha256 } from '../../agent/providers/vault/aws-iam-login.ts';

/**
 * IAM users with access keys in a moto server, made through moto's IAM query API. Started with
 * INITIAL_NO_AUTH_ACTION_COUNT=N, moto lets the first N requests in unchecked and from then on
 * checks every request's SigV4 signature against the keys it issued: two requests per user here.
 */
export interface MotoIamUser {
  readonly arn: string;
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
}

export async function motoIamUser(endpoint: string, userName: string): Promise<MotoIamUser> {
  const created = await iamAction(endpoint, { Action: 'CreateUser', UserName: userName });
  const key = await iamAction(endpoint, { Action: 'CreateAccessKey', UserName: userName });
  const tag = (text: string, name: string): string => {
    const found = new RegExp(`<${name}>([^<]+)</${name}>`).exec(text)?.[1];
    if (!found) throw new Error(`moto's IAM answer has no ${name}`);
    return found;
  };
  return {
    arn: tag(created, 'Arn'),
    accessKeyId: tag(key, 'AccessKeyId'),
    secretAccessKey: tag(key, 'SecretAccessKey'),
  };
}

async function iamAction(endpoint: string, params: Record<string, string>): Promise<string> {
  const url = new URL(endpoint);
  const body = new URLSearchParams({ ...params, Version: '2010-05-08' }).toString();
  // Any key signs in the unchecked window; the signature only tells moto which service is asked.
  const signer = new SignatureV4({
    credentials: { accessKeyId: 'setup', secretAccessKey: 'setup' },
    region: 'us-east-1',
    service: 'iam',
    sha256: Sha256,
  });
  const signed = await signer.sign({
    method: 'POST',
    protocol: url.protocol,
    hostname: url.hostname,
    port: Number(url.port),
    path: '/',
    query: {},
    headers: { host: url.host, 'content-type': 'application/x-www-form-urlencoded; charset=utf-8' },
    body,
  });
  const res = await fetch(`${endpoint}/`, { method: 'POST', headers: signed.headers, body });
  const text = await res.text();
  if (!res.ok) throw new Error(`moto IAM ${params.Action}: HTTP ${res.status}`);
  return text;
}
