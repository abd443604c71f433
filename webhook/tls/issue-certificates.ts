import './reflect-metadata.ts';
import { randomBytes, webcrypto } from 'node:crypto';
import {
  AuthorityKeyIdentifierExtension,
  BasicConstraintsExtension,
  cryptoProvider,
  ExtendedKeyUsage,
  ExtendedKeyUsageExtension,
  KeyUsageFlags,
  KeyUsagesExtension,
  SubjectAlternativeNameExtension,
  SubjectKeyIdentifierExtension,
  X509Certificate,
  X509CertificateGenerator,
} from '@peculiar/x509';

/** ECDSA P-256 with SHA-256: small, fast handshakes, accepted by every API server. */
const ALGORITHM = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;
/** Tolerates clocks a little behind ours. */
const BACKDATE_MS = 5 * 60_000;

type CryptoKey = webcrypto.CryptoKey;
type CryptoKeyPair = webcrypto.CryptoKeyPair;

cryptoProvider.set(webcrypto as unknown as Parameters<typeof cryptoProvider.set>[0]);

export interface IssuedCertificate {
  /** PEM. */
  readonly cert: string;
  /** PEM, PKCS#8. */
  readonly key: string;
  readonly notBefore: Date;
  readonly notAfter: Date;
}

function serialNumber(): string {
  const bytes = randomBytes(16);
  bytes[0]! &= 0x7f; // positive, as RFC 5280 requires
  return bytes.toString('hex');
}

async function exportKey(key: CryptoKey): Promise<string> {
  const der = Buffer.from(await webcrypto.subtle.exportKey('pkcs8', key));
  const lines = der
    .toString('base64')
    .match(/.{1,64}/g)!
    .join('\n');
  return `-----BEGIN PRIVATE KEY-----\n${lines}\n-----END PRIVATE KEY-----\n`;
}

async function importKey(pem: string): Promise<CryptoKey> {
  const der = Buffer.from(pem.replace(/-----[A-Z ]+-----/g, '').replace(/\s+/g, ''), 'base64');
  return webcrypto.subtle.importKey('pkcs8', der, ALGORITHM, true, ['sign']);
}

function generateKeys(): Promise<CryptoKeyPair> {
  return webcrypto.subtle.generateKey(ALGORITHM, true, ['sign', 'verify']) as Promise<CryptoKeyPair>;
}

/** A self-signed CA that may sign serving certificates only (pathLength 0). */
export async function issueCertificateAuthority(
  commonName: string,
  now: Date,
  validityMs: number,
): Promise<IssuedCertificate> {
  const keys = await generateKeys();
  const notBefore = new Date(now.getTime() - BACKDATE_MS);
  const notAfter = new Date(now.getTime() + validityMs);
  const cert = await X509CertificateGenerator.createSelfSigned({
    serialNumber: serialNumber(),
    name: `CN=${commonName}`,
    notBefore,
    notAfter,
    keys,
    signingAlgorithm: ALGORITHM,
    extensions: [
      new BasicConstraintsExtension(true, 0, true),
      new KeyUsagesExtension(KeyUsageFlags.keyCertSign | KeyUsageFlags.cRLSign, true),
      await SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  return { cert: cert.toString('pem') + '\n', key: await exportKey(keys.privateKey), notBefore, notAfter };
}

/** A serving certificate for `dnsNames`, signed by `ca`, never outliving it. */
export async function issueServingCertificate(
  ca: { readonly cert: string; readonly key: string },
  dnsNames: readonly string[],
  now: Date,
  validityMs: number,
  ipAddresses: readonly string[] = [],
): Promise<IssuedCertificate> {
  const caCert = new X509Certificate(ca.cert);
  const keys = await generateKeys();
  const notBefore = new Date(now.getTime() - BACKDATE_MS);
  const notAfter = new Date(Math.min(now.getTime() + validityMs, caCert.notAfter.getTime()));
  const cert = await X509CertificateGenerator.create({
    serialNumber: serialNumber(),
    subject: `CN=${dnsNames[0]}`,
    issuer: caCert.subject,
    notBefore,
    notAfter,
    publicKey: keys.publicKey,
    signingKey: await importKey(ca.key),
    signingAlgorithm: ALGORITHM,
    extensions: [
      new BasicConstraintsExtension(false, undefined, true),
      new KeyUsagesExtension(KeyUsageFlags.digitalSignature, true),
      new ExtendedKeyUsageExtension([ExtendedKeyUsage.serverAuth]),
      new SubjectAlternativeNameExtension([
        ...dnsNames.map((value) => ({ type: 'dns' as const, value })),
        ...ipAddresses.map((value) => ({ type: 'ip' as const, value })),
      ]),
      await AuthorityKeyIdentifierExtension.create(await caCert.publicKey.export()),
      await SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  return { cert: cert.toString('pem') + '\n', key: await exportKey(keys.privateKey), notBefore, notAfter };
}

/** The names the API server may use to reach a Service: svc, svc.ns, svc.ns.svc, and the FQDN. */
export function serviceDnsNames(service: string, namespace: string): string[] {
  return [
    `${service}.${namespace}.svc`,
    service,
    `${service}.${namespace}`,
    `${service}.${namespace}.svc.cluster.local`,
  ];
}
