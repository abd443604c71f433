import { chmodSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { issueCertificateAuthority, issueServingCertificate } from '../../webhook/tls/issue-certificates.ts';

export const SERVER_NAME = 'secret-agent-webhook.secret-agent.svc';

export interface ServingPair {
  readonly ca: string;
  readonly cert: string;
  readonly key: string;
}

/** A fresh CA and a serving certificate for the webhook's Service name. */
export async function makeServingPair(): Promise<ServingPair> {
  const now = new Date();
  const ca = await issueCertificateAuthority('test CA', now, 86_400_000);
  const leaf = await issueServingCertificate(ca, [SERVER_NAME], now, 3_600_000);
  return { ca: ca.cert, cert: leaf.cert, key: leaf.key };
}

/** A directory of cert files written the way tools replace them: a temp file renamed over the old one. */
export function certDir(mode = 0o755): {
  dir: string;
  cert: string;
  key: string;
  write(pair: ServingPair, order?: 'key-first' | 'cert-first'): void;
  [Symbol.dispose](): void;
} {
  const dir = mkdtempSync(join(tmpdir(), 'webhook-tls-'));
  chmodSync(dir, mode);
  const cert = join(dir, 'tls.crt');
  const key = join(dir, 'tls.key');
  const put = (path: string, text: string) => {
    const tmp = `${path}.tmp`;
    writeFileSync(tmp, text, { mode: 0o644 });
    renameSync(tmp, path);
  };
  return {
    dir,
    cert,
    key,
    write(pair, order = 'key-first') {
      if (order === 'key-first') {
        put(key, pair.key);
        put(cert, pair.cert);
      } else {
        put(cert, pair.cert);
        put(key, pair.key);
      }
    },
    [Symbol.dispose]: () => rmSync(dir, { recursive: true, force: true }),
  };
}
