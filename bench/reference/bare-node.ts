/**
 * A reference, not the product: the least a Node program can do for one AWS secret, with no library
 * at all. `init`: one signed-looking POST of GetSecretValue, the value written (temp file, rename),
 * exit. `sidecar`: the same once a second, and a /healthz server. What our agent costs beyond this
 * is the libraries' and our own code's; bench/run.ts and bench/sidecar-rss.ts print it beside the
 * agent. Not a real SigV4 signature (moto does not check one by default): the HMAC stands for the
 * work, and loads the crypto a real client needs.
 * Env: AWS_ENDPOINT_URL_SECRETS_MANAGER, SECRETS_DIR, BENCH_SECRET_ID.
 */
import { createHmac } from 'node:crypto';
import { renameSync, writeFileSync } from 'node:fs';
import { createServer, request } from 'node:http';

const endpoint = new URL(process.env.AWS_ENDPOINT_URL_SECRETS_MANAGER ?? '');
const dir = process.env.SECRETS_DIR ?? '';
const secretId = process.env.BENCH_SECRET_ID ?? '';

function fetchOnce(): void {
  const body = JSON.stringify({ SecretId: secretId });
  const signature = createHmac('sha256', 'bench').update(body).digest('hex');
  const req = request(
    {
      host: endpoint.hostname,
      port: endpoint.port,
      method: 'POST',
      path: '/',
      headers: {
        'content-type': 'application/x-amz-json-1.1',
        'x-amz-target': 'secretsmanager.GetSecretValue',
        authorization: `AWS4-HMAC-SHA256 Credential=bench/20261123/us-east-1/secretsmanager/aws4_request, SignedHeaders=host, Signature=${signature}`,
      },
    },
    (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const { SecretString } = JSON.parse(Buffer.concat(chunks).toString()) as { SecretString: string };
        writeFileSync(`${dir}/.one.tmp`, SecretString);
        renameSync(`${dir}/.one.tmp`, `${dir}/one`);
      });
    },
  );
  req.end(body);
}

if (process.argv[2] === 'sidecar') {
  createServer((_req, res) => res.end('ok')).listen(0, '127.0.0.1');
  setInterval(fetchOnce, 1000);
} else fetchOnce();
