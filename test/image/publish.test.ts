/**
 * What a platform team does with the archives (docs/images.md): push one with `skopeo copy --all`
 * to its registry (here Debian's docker-registry on the loopback) and pull a platform's image from
 * it, or from the archive with `podman pull --arch`. Every digest must survive: the registry serves
 * the index and manifests the archive, images.json and the provenance name.
 */
import assert from 'node:assert/strict';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { podmanWithStorage } from '../../images/container-engine.ts';
import { IMAGE_NAMES, ROOT } from '../../images/manifest.ts';
import { PLATFORM_NAMES } from '../../images/platforms.ts';
import { startRegistry, tool, type LocalRegistry } from './local-registry.ts';
import { readIndex, sha256 } from './oci-archive.ts';
import { builtImages } from './podman.ts';

describe('publishing the archives: skopeo copy --all to a registry, podman pull --arch', () => {
  let registry: LocalRegistry;
  let dir: string;
  let host: string;

  before(async () => {
    builtImages();
    registry = await startRegistry();
    ({ dir, host } = registry);
  });

  after(() => registry?.stop());

  it('one tag serves every platform, by the digests the archive and images.json name', () => {
    const { manifest } = builtImages();
    for (const name of IMAGE_NAMES) {
      const image = manifest.images[name];
      const target = `docker://${host}/secret-agent/${name}:${manifest.version}`;
      const copy = tool('skopeo', [
        'copy',
        '--all',
        '--dest-tls-verify=false',
        `oci-archive:${join(ROOT, image.archive)}`,
        target,
      ]);
      assert.equal(copy.status, 0, copy.stderr);
      // The index, byte for byte: its digest is the one a kustomize overlay pins for every node.
      const raw = tool('skopeo', ['inspect', '--raw', '--tls-verify=false', target]);
      assert.equal(raw.status, 0, raw.stderr);
      assert.equal(`sha256:${sha256(raw.stdout)}`, image.index);
      assert.equal(readIndex(join(ROOT, image.archive)).entry.digest, image.index);
      const index = JSON.parse(raw.stdout) as {
        manifests: { digest: string; platform: { os: string; architecture: string } }[];
      };
      assert.deepEqual(
        index.manifests.map((m) => [`${m.platform.os}/${m.platform.architecture}`, m.digest]),
        image.platforms.map((p) => [p.platform, p.digest]),
      );
      for (const p of image.platforms) {
        // Each platform's manifest, by its digest: the bytes the archive holds.
        const byDigest = `docker://${host}/secret-agent/${name}@${p.digest}`;
        const one = tool('skopeo', ['inspect', '--raw', '--tls-verify=false', byDigest]);
        assert.equal(one.status, 0, one.stderr);
        assert.equal(`sha256:${sha256(one.stdout)}`, p.digest, `${name} ${p.platform}`);
        const config = tool('skopeo', ['inspect', '--config', '--raw', '--tls-verify=false', byDigest]);
        assert.equal(
          `sha256:${sha256(config.stdout)}`,
          `sha256:${p.id}`,
          `${name} ${p.platform}: its image ID`,
        );
        assert.equal(
          (JSON.parse(config.stdout) as { architecture: string }).architecture,
          PLATFORM_NAMES[p.platform].arch,
        );
      }
    }
  });

  it('podman pull --arch arm64 oci-archive:… takes the arm64 image', () => {
    const { podman, manifest } = builtImages();
    const arm64 = manifest.images.agent.platforms.find((p) => p.platform === 'linux/arm64');
    if (!arm64)
      assert.fail(
        'the linux/arm64 agent image was not built. Fix: unset IMAGE_PLATFORMS, then npm run images',
      );
    // A store of its own, so the pulled image's name does not land among the ones the tests run.
    const store = join(dir, 'pull');
    mkdirSync(join(store, 'graph'), { recursive: true });
    writeFileSync(
      join(store, 'storage.conf'),
      `[storage]\ndriver = "overlay"\ngraphroot = "${join(store, 'graph')}"\nrunroot = "/run/${dir.split('/').at(-1)}"\n`,
    );
    const scratch = podmanWithStorage(podman, join(store, 'storage.conf'));
    try {
      const pulled = scratch.run([
        'pull',
        '-q',
        '--arch',
        'arm64',
        `oci-archive:${join(ROOT, manifest.images.agent.archive)}`,
      ]);
      assert.equal(pulled.stdout.trim().split('\n').at(-1), arm64.id);
    } finally {
      scratch.run(['rmi', '--all', '--force'], { check: false });
      rmSync(`/run/${dir.split('/').at(-1)}`, { recursive: true, force: true });
    }
  });
});
