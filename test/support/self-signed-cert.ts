import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * A throwaway self-signed ECDSA P-256 certificate for a local TLS fake, made with openssl (Debian's
 * openssl package, on every machine of this kind). `subjectAltName` in openssl's syntax, e.g.
 * `DNS:localhost,IP:127.0.0.1`. Fails loudly when openssl is missing. `rsa`: an RSA 2048 key
 * instead, as Google's service-account keys are.
 */
export function selfSignedCertificate(
  commonName: string,
  subjectAltName: string,
  keyType: 'ec' | 'rsa' = 'ec',
): { cert: string; key: string } {
  const dir = mkdtempSync(join(tmpdir(), 'test-cert-'));
  try {
    const args = ['req', '-x509', '-nodes'];
    args.push(
      ...(keyType === 'ec'
        ? ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1']
        : ['-newkey', 'rsa:2048']),
    );
    args.push('-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem'), '-days', '1');
    args.push('-subj', `/CN=${commonName}`, '-addext', `subjectAltName=${subjectAltName}`);
    const made = spawnSync('openssl', args, { encoding: 'utf8' });
    if (made.status !== 0) {
      throw new Error(
        `openssl (Debian package openssl) is needed for test certificates: ${made.stderr ?? made.error}`,
      );
    }
    return {
      cert: readFileSync(join(dir, 'cert.pem'), 'utf8'),
      key: readFileSync(join(dir, 'key.pem'), 'utf8'),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
