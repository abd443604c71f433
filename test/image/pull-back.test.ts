/**
 * Issue 41: once the archives have been pulled back into the engine's store (to run the arm64 images
 * under QEMU, say), podman 4.3 exports those images' plain tar layers labelled `tar+gzip`. An archive
 * written from that store must be the same bytes as the first build's, every layer what its media
 * type says. In a store of its own: every archive pulled back for every platform, then written again
 * with an empty layer cache.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { exportImage, writeIndexArchive } from '../../images/index-archive.ts';
import { IMAGE_NAMES, ROOT } from '../../images/manifest.ts';
import { MEDIA_TYPES } from '../../images/oci-layout.ts';
import { PLATFORM_NAMES } from '../../images/platforms.ts';
import { layerTar, readPlatforms } from './oci-archive.ts';
import { builtImages, scratchStore } from './podman.ts';

describe('an archive written after the archives were pulled back into the store', () => {
  it(
    'is the first build’s, byte for byte, for every image and platform, whatever the export labels its layers',
    { timeout: 20 * 60_000 },
    (t) => {
      const { podman, manifest } = builtImages();
      const dir = mkdtempSync('/var/tmp/secret-agent-pull-back-');
      const store = scratchStore(podman, dir);
      try {
        let mislabelled = 0;
        for (const name of IMAGE_NAMES) {
          const first = manifest.images[name];
          const archive = join(ROOT, first.archive);
          const pulled = first.platforms.map((p) => {
            const id = store
              .run(['pull', '-q', '--arch', PLATFORM_NAMES[p.platform].arch, `oci-archive:${archive}`])
              .stdout.trim()
              .split('\n')
              .at(-1)!;
            assert.equal(id, p.id, `${name} ${p.platform} keeps its image ID when pulled back`);
            return { platform: p.platform, ref: id };
          });
          // What the engine's export now says of each layer: the shape the issue found, for the record.
          for (const p of pulled) {
            const exported = exportImage(
              store,
              p.ref,
              join(dir, `export-${name}-${p.platform.replace('/', '-')}`),
            );
            for (const layer of exported.manifest.layers) {
              const bytes = readFileSync(exported.layout.blobPath(layer.digest)).subarray(0, 2);
              const gzip = bytes[0] === 0x1f && bytes[1] === 0x8b;
              if (layer.mediaType === MEDIA_TYPES.layerGzip && !gzip) mislabelled++;
            }
            rmSync(exported.layout.dir, { recursive: true, force: true });
          }
          const out = join(dir, `${name}.oci.tar`);
          const again = writeIndexArchive(store, pulled, out, {
            epoch: manifest.sourceDateEpoch,
            refName: manifest.version,
            cacheDir: join(dir, 'cache'),
          });
          assert.equal(again.index, first.index, `${name}: the index digest`);
          assert.deepEqual(
            first.platforms.map((p) => again.manifests[p.platform]),
            first.platforms.map((p) => p.digest),
            `${name}: each platform's manifest digest`,
          );
          assert.ok(readFileSync(out).equals(readFileSync(archive)), `${name}: the archive, byte for byte`);
          // Read as a registry's client would: every layer gzip'd as labelled, its tar its diff ID.
          for (const p of readPlatforms(out))
            p.manifest.layers.forEach((layer, i) => layerTar(out, layer, p.config.rootfs.diff_ids[i]!));
        }
        t.diagnostic(
          `layers the engine exported as plain tars labelled tar+gzip after the pull-back: ${mislabelled}`,
        );
      } finally {
        store.run(['rmi', '--all', '--force'], { check: false });
        rmSync(dir, { recursive: true, force: true });
        rmSync(`/run/${dir.split('/').at(-1)}`, { recursive: true, force: true });
      }
    },
  );
});
