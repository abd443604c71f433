import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { createLogger } from '../../agent/log.ts';
import { AtomicDir } from '../../agent/write/atomic-dir.ts';
import { watchCertificateFiles, type CertificatePair } from '../../webhook/tls/certificate-files.ts';
import { eventually, memoryDir } from '../support/run-agent.ts';
import { makeServingPair, type ServingPair } from './tls-certs.ts';

describe('serving certificate from a Kubernetes Secret volume', () => {
  it('is reloaded when kubelet swaps the volume’s ..data symlink (cert-manager renewals arrive this way)', async () => {
    using tmp = memoryDir();
    // AtomicDir lays files out exactly as kubelet's AtomicWriter does for Secret volumes.
    const volume = await AtomicDir.open(tmp.path, { requireMemoryFs: true });
    const put = (pair: ServingPair) =>
      volume.write([
        { path: 'tls.crt', bytes: Buffer.from(pair.cert), mode: 0o444 },
        { path: 'tls.key', bytes: Buffer.from(pair.key), mode: 0o400 },
      ]);
    const first = await makeServingPair();
    const second = await makeServingPair();
    await put(first);
    const seen: CertificatePair[] = [];
    const errors: Error[] = [];
    const watch = watchCertificateFiles(
      join(tmp.path, 'tls.crt'),
      join(tmp.path, 'tls.key'),
      (pair) => seen.push(pair),
      (e) => errors.push(e),
      createLogger('silent'),
    );
    try {
      await watch.ready;
      await put(second);
      await eventually(
        () => (seen.some((p) => p.cert === second.cert) ? true : undefined),
        'the renewed certificate',
      );
      assert.equal(seen.at(-1)!.key, second.key, 'cert and key are taken from the same swap');
      assert.deepEqual(errors, [], 'an atomic swap never shows a mismatched pair');
    } finally {
      await watch.close();
    }
  });
});
