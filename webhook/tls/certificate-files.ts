import { createPrivateKey, X509Certificate, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { createSecureContext } from 'node:tls';
import { watch } from 'chokidar';
import { ConfigError, ConfigErrors, quote } from '../../agent/contract/errors.ts';
import type { Logger } from '../../agent/log.ts';

export interface CertificatePair {
  readonly cert: string;
  readonly key: string;
  readonly notAfter: Date;
}

/** The settings that name the two files, which every error about them names too. */
const CERT_FIELD = 'TLS_CERT_FILE';
const KEY_FIELD = 'TLS_KEY_FILE';
const FILE_FIX =
  'mount the Secret with tls.crt and tls.key (cert-manager writes it) and point TLS_CERT_FILE / TLS_KEY_FILE at them, or use TLS_MODE=self-managed';

/**
 * Checks that a PEM chain and key belong together and make a secure context. A half-updated pair
 * (new cert, old key) fails here, so the server keeps the previous pair instead of serving a broken one.
 * Throws ConfigErrors naming TLS_CERT_FILE / TLS_KEY_FILE; never a byte of either file.
 */
export function checkCertificatePair(cert: string, key: string): CertificatePair {
  const errors: ConfigError[] = [];
  let leaf: X509Certificate | undefined;
  try {
    leaf = new X509Certificate(cert);
  } catch {
    errors.push(
      new ConfigError(
        CERT_FIELD,
        'does not hold a PEM certificate',
        'give the certificate chain, leaf first, as PEM (-----BEGIN CERTIFICATE-----)',
      ),
    );
  }
  let privateKey: KeyObject | undefined;
  try {
    privateKey = createPrivateKey(key);
  } catch {
    // The parser's message is about the bytes; ours says which setting and what to put there.
    errors.push(
      new ConfigError(
        KEY_FIELD,
        'does not hold a PEM private key',
        'give the unencrypted private key as PEM (-----BEGIN PRIVATE KEY----- or -----BEGIN EC/RSA PRIVATE KEY-----)',
      ),
    );
  }
  if (leaf && privateKey && !leaf.checkPrivateKey(privateKey))
    errors.push(
      new ConfigError(
        KEY_FIELD,
        `does not match the certificate in ${CERT_FIELD}`,
        'give the key the certificate was issued for (a Secret written in one piece, as cert-manager does, always has a matching pair)',
      ),
    );
  if (errors.length > 0 || !leaf) throw new ConfigErrors(errors);
  createSecureContext({ cert, key });
  return { cert, key, notAfter: new Date(leaf.validTo) };
}

/** Reads and checks both files; throws ConfigErrors naming each setting whose file is unusable. */
export function readCertificateFiles(certFile: string, keyFile: string): CertificatePair {
  const errors: ConfigError[] = [];
  const read = (field: string, path: string): string | undefined => {
    try {
      return readFileSync(path, 'utf8');
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      errors.push(
        new ConfigError(
          field,
          code === 'ENOENT'
            ? `${quote(path)} does not exist`
            : code === 'EACCES'
              ? `${quote(path)} is not readable by the webhook's user`
              : code === 'EISDIR'
                ? `${quote(path)} is a directory`
                : `${quote(path)} cannot be read (${code ?? 'unknown error'})`,
          FILE_FIX,
        ),
      );
      return undefined;
    }
  };
  const cert = read(CERT_FIELD, certFile);
  const key = read(KEY_FIELD, keyFile);
  if (cert === undefined || key === undefined) throw new ConfigErrors(errors);
  return checkCertificatePair(cert, key);
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
