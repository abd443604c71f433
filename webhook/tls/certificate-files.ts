import { createPrivateKey, X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { createSecureContext } from 'node:tls';
import { watch } from 'chokidar';
import type { Logger } from '../../agent/log.ts';

export interface CertificatePair {
  readonly cert: string;
  readonly key: string;
  readonly notAfter: Date;
}

/**
 * Checks that a PEM chain and key belong together and make a secure context. A half-updated pair
 * (new cert, old key) fails here, so the server keeps the previous pair instead of serving a broken one.
 */
export function checkCertificatePair(cert: string, key: string): CertificatePair {
  const leaf = new X509Certificate(cert);
  if (!leaf.checkPrivateKey(createPrivateKey(key)))
    throw new Error('the private key does not match the certificate');
  createSecureContext({ cert, key });
  return { cert, key, notAfter: new Date(leaf.validTo) };
}

export function readCertificateFiles(certFile: string, keyFile: string): CertificatePair {
  return checkCertificatePair(readFileSync(certFile, 'utf8'), readFileSync(keyFile, 'utf8'));
}

export interface CertificateWatch {
  /** Resolves once the watcher is ready to see changes. */
  readonly ready: Promise<void>;
  close(): Promise<void>;
}

/**
 * Watches the directories holding the cert and key (a Kubernetes Secret volume swaps a `..data`
 * symlink rather than writing the files) and calls onPair with each new, consistent pair.
 */
export function watchCertificateFiles(
  certFile: string,
  keyFile: string,
  onPair: (pair: CertificatePair) => void,
  onError: (error: Error) => void,
  log: Logger,
): CertificateWatch {
  let current = '';
  let timer: NodeJS.Timeout | undefined;
  const reload = () => {
    timer = undefined;
    let pair: CertificatePair;
    try {
      pair = readCertificateFiles(certFile, keyFile);
    } catch (e) {
      // Often the writer is between the two files; the next event brings the matching half.
      onError(e as Error);
      return;
    }
    const identity = pair.cert + pair.key;
    if (identity === current) return;
    current = identity;
    onPair(pair);
  };
  try {
    const first = readCertificateFiles(certFile, keyFile);
    current = first.cert + first.key;
  } catch {
    current = '';
  }
  const dirs = [...new Set([dirname(certFile), dirname(keyFile)])];
  const watcher = watch(dirs, { ignoreInitial: true, depth: 1 });
  watcher.on('all', () => {
    if (timer) clearTimeout(timer);
    timer = setTimeout(reload, 50);
  });
  watcher.on('error', (e) =>
    log.warn({ err: { name: (e as Error).name, message: (e as Error).message } }, 'certificate watch error'),
  );
  const ready = new Promise<void>((resolve) => watcher.once('ready', () => resolve()));
  return {
    ready,
    close: async () => {
      if (timer) clearTimeout(timer);
      await watcher.close();
    },
  };
}
