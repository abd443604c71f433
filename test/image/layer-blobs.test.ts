/**
 * images/layer-blobs.ts on real tars and GNU gzip output: a layer is what its bytes are, never its
 * label. Each way a blob can differ from its descriptor or its config's diff ID is refused, naming the
 * image, the layer and what differs.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import {
  checkLayers,
  exportedTar,
  LayerBlobError,
  layerEncoding,
  type ImageLayers,
} from '../../images/layer-blobs.ts';
import { MEDIA_TYPES, type Descriptor } from '../../images/oci-layout.ts';

const sha256 = (data: Buffer) => `sha256:${createHash('sha256').update(data).digest('hex')}`;

describe('layer blobs are checked by their bytes, not their labels', () => {
  let dir: string;
  let tar: Buffer;
  let gz: Buffer;
  let other: Buffer;

  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'layer-blobs-'));
    mkdirSync(join(dir, 'root/app'), { recursive: true });
    writeFileSync(join(dir, 'root/app/a.txt'), 'a layer’s file\n'.repeat(500));
    const made = spawnSync('tar', ['--sort=name', '-C', join(dir, 'root'), '-cf', '-', '.'], {
      maxBuffer: 1 << 24,
    });
    assert.equal(made.status, 0, String(made.stderr));
    tar = made.stdout;
    const zipped = spawnSync('gzip', ['-n', '-6', '-c'], { input: tar, maxBuffer: 1 << 24 });
    assert.equal(zipped.status, 0, String(zipped.stderr));
    gz = zipped.stdout;
    other = spawnSync('gzip', ['-n', '-c'], { input: Buffer.concat([tar, Buffer.alloc(512)]) }).stdout;
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  /** A layout of the given blobs: each stored by its own digest unless `as` names another. */
  const image = (
    blobs: readonly { data: Buffer; mediaType: string; as?: string; size?: number }[],
    diffIds: readonly string[],
  ): ImageLayers => {
    const blobDir = mkdtempSync(join(dir, 'blobs-'));
    const layers: Descriptor[] = blobs.map((b) => {
      const digest = b.as ?? sha256(b.data);
      writeFileSync(join(blobDir, digest.slice(7)), b.data);
      return { mediaType: b.mediaType, digest, size: b.size ?? b.data.length };
    });
    return { image: 'webhook (linux/arm64)', layers, diffIds, blobPath: (d) => join(blobDir, d.slice(7)) };
  };
  const refused = (layers: ImageLayers, problem: RegExp) =>
    assert.throws(
      () => checkLayers(layers),
      (err: unknown) => {
        assert.ok(err instanceof LayerBlobError, String(err));
        assert.match(err.message, /^webhook \(linux\/arm64\)/);
        assert.match(err.problem, problem);
        return true;
      },
    );

  it('a gzip’d tar labelled tar+gzip, and a plain tar labelled tar, each its diff ID: accepted', () => {
    checkLayers(
      image(
        [
          { data: gz, mediaType: MEDIA_TYPES.layerGzip },
          { data: tar, mediaType: MEDIA_TYPES.layer },
        ],
        [sha256(tar), sha256(tar)],
      ),
    );
  });

  it('a plain tar labelled tar+gzip (what a build after a pull-back wrote): refused, naming the layer', () => {
    const layers = image(
      [
        { data: gz, mediaType: MEDIA_TYPES.layerGzip },
        { data: tar, mediaType: MEDIA_TYPES.layerGzip },
      ],
      [sha256(tar), sha256(tar)],
    );
    assert.throws(
      () => checkLayers(layers),
      new RegExp(
        `^LayerBlobError: webhook \\(linux/arm64\\) layer 2 of 2 \\(${sha256(tar)}\\): it is labelled ${MEDIA_TYPES.layerGzip.replace(/[.+]/g, '\\$&')}, but its bytes are not compressed \\(no gzip magic\\)$`,
      ),
    );
  });

  it('a gzip’d tar labelled plain tar, or zstd bytes, or a media type of neither: refused', () => {
    refused(image([{ data: gz, mediaType: MEDIA_TYPES.layer }], [sha256(tar)]), /bytes are gzip-compressed/);
    const zstd = Buffer.concat([Buffer.from([0x28, 0xb5, 0x2f, 0xfd]), tar]);
    refused(
      image([{ data: zstd, mediaType: MEDIA_TYPES.layerGzip }], [sha256(tar)]),
      /bytes are zstd-compressed/,
    );
    refused(
      image([{ data: gz, mediaType: 'application/vnd.oci.image.layer.v1.tar+zstd' }], [sha256(tar)]),
      /neither a tar nor a gzip'd tar/,
    );
  });

  it('a tar that is not the diff ID its config names: refused, naming both', () => {
    refused(
      image([{ data: other, mediaType: MEDIA_TYPES.layerGzip }], [sha256(tar)]),
      new RegExp(`tar hashes to sha256:[0-9a-f]{64}, not to the diff ID its config names, ${sha256(tar)}`),
    );
    refused(image([{ data: tar, mediaType: MEDIA_TYPES.layer }], [sha256(gz)]), /not to the diff ID/);
  });

  it('bytes that are not the digest or the size their descriptor says, or no blob: refused', () => {
    refused(
      image([{ data: gz, mediaType: MEDIA_TYPES.layerGzip, as: sha256(tar) }], [sha256(tar)]),
      /not to its digest/,
    );
    refused(
      image([{ data: gz, mediaType: MEDIA_TYPES.layerGzip, size: gz.length + 1 }], [sha256(tar)]),
      /its descriptor says/,
    );
    const gone = image([{ data: gz, mediaType: MEDIA_TYPES.layerGzip }], [sha256(tar)]);
    rmSync(gone.blobPath(gone.layers[0]!.digest));
    refused(gone, /blob is missing/);
  });

  it('gzip data with bytes after it, or cut short: refused', () => {
    refused(
      image(
        [{ data: Buffer.concat([gz, Buffer.from('trailing')]), mediaType: MEDIA_TYPES.layerGzip }],
        [sha256(tar)],
      ),
      /gzip cannot decompress it/,
    );
    refused(
      image([{ data: gz.subarray(0, gz.length - 9), mediaType: MEDIA_TYPES.layerGzip }], [sha256(tar)]),
      /gzip cannot decompress it/,
    );
  });

  it('as many layers as diff IDs, or refused', () => {
    refused(
      image([{ data: gz, mediaType: MEDIA_TYPES.layerGzip }], [sha256(tar), sha256(tar)]),
      /1 layers, its config 2 diff IDs/,
    );
  });

  it('exportedTar reads the bytes: a plain tar labelled tar+gzip is its own file; a gzip’d one is decompressed; either must be the diff ID', () => {
    const plain = image([{ data: tar, mediaType: MEDIA_TYPES.layerGzip }], [sha256(tar)]);
    const plainPath = plain.blobPath(plain.layers[0]!.digest);
    assert.equal(layerEncoding(plainPath), 'tar');
    assert.equal(exportedTar(plainPath, plain.layers[0]!, sha256(tar), 'layer 1'), plainPath);

    const zipped = image([{ data: gz, mediaType: MEDIA_TYPES.layer }], [sha256(tar)]);
    const zippedPath = zipped.blobPath(zipped.layers[0]!.digest);
    assert.equal(layerEncoding(zippedPath), 'gzip');
    const out = exportedTar(zippedPath, zipped.layers[0]!, sha256(tar), 'layer 1');
    assert.ok(readFileSync(out).equals(tar));

    assert.throws(
      () => exportedTar(zippedPath, zipped.layers[0]!, sha256(gz), 'webhook layer 1'),
      /^LayerBlobError: webhook layer 1: the engine exported a tar that hashes to sha256:[0-9a-f]{64}, not to its config's diff ID/,
    );
    assert.throws(
      () =>
        exportedTar(
          zippedPath,
          { ...zipped.layers[0]!, digest: sha256(tar) },
          sha256(tar),
          'webhook layer 1',
        ),
      /the engine exported bytes that do not hash to its digest/,
    );
  });
});
