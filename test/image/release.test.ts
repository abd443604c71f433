/**
 * `npm run release` as a platform team runs it, against Debian's docker-registry on the loopback with
 * a throwaway cosign key pair: both indexes pushed with their digests, signed, attested; then checked
 * as a cluster would, by cosign run separately (verify, verify-attestation), and by the webhook's
 * render taking the signed index digest as AGENT_IMAGE. What it must refuse, it refuses before pushing.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { isDeepStrictEqual } from 'node:util';
import { after, before, describe, it } from 'node:test';
import { COSIGN_INSTALL, cosignPath } from '../../images/cosign.ts';
import {
  IMAGE_NAMES,
  IMAGES_DIR,
  readImagesManifest,
  ROOT,
  type ImagesManifest,
} from '../../images/manifest.ts';
import type { ReleaseRecord } from '../../images/release.ts';
import { startRegistry, tool, type LocalRegistry, type ToolRun } from './local-registry.ts';

const PASSWORD = 'release-test-password';
const REGISTRY_FLAGS = ['--allow-insecure-registry', '--allow-http-registry'];

interface Statement {
  readonly predicateType: string;
  readonly subject: { digest: { sha256: string } }[];
  readonly predicate: Record<string, unknown>;
}

describe('npm run release: push, sign, attest, verify; refuse what does not match', () => {
  let registry: LocalRegistry;
  let manifest: ImagesManifest;
  let keys: string;
  let cosign: string;

  const release = (args: readonly string[], password = PASSWORD): ToolRun =>
    tool(process.execPath, [join(ROOT, 'images/release.ts'), ...args], {
      env: { ...process.env, COSIGN_PASSWORD: password },
      timeoutMs: 900_000,
    });
  /** cosign as a cluster's admission check runs it: on its own, with only the public key. */
  const verify = (command: 'verify' | 'verify-attestation', ref: string, pub: string, type?: string) =>
    tool(
      cosign,
      [
        command,
        ...(type ? ['--type', type] : []),
        '--key',
        pub,
        '--insecure-ignore-tlog',
        ...REGISTRY_FLAGS,
        ref,
      ],
      { install: COSIGN_INSTALL },
    );
  const statements = (run: ToolRun): Statement[] =>
    run.stdout
      .trim()
      .split('\n')
      .map((line) => {
        const { payload } = JSON.parse(line) as { payload: string };
        return JSON.parse(Buffer.from(payload, 'base64').toString()) as Statement;
      });
  const tagsUnder = (path: string) =>
    IMAGE_NAMES.map((name) => registry.digest(`${registry.host}/${path}/${name}:${manifest.version}`));

  /** Releases `dir` under `path` and checks it was refused before anything was pushed, saying `problem`. */
  const refusedBeforePush = (dir: string, path: string, problem: string) => {
    const run = release([
      '--registry',
      `${registry.host}/${path}`,
      '--key',
      join(keys, 'good/cosign.key'),
      '--insecure',
      '--images-dir',
      dir,
    ]);
    assert.equal(run.status, 2, run.stderr);
    assert.ok(run.stderr.includes(problem), run.stderr);
    assert.match(run.stderr, /Fix: npm run images/);
    assert.deepEqual(tagsUnder(path), [undefined, undefined], 'nothing was pushed, not even the agent');
  };

  before(async () => {
    manifest = readImagesManifest();
    cosign = cosignPath();
    registry = await startRegistry();
    keys = join(registry.dir, 'keys');
    for (const pair of ['good', 'wrong']) {
      mkdirSync(join(keys, pair), { recursive: true });
      const made = tool(cosign, ['generate-key-pair'], {
        cwd: join(keys, pair),
        env: { ...process.env, COSIGN_PASSWORD: PASSWORD },
        install: COSIGN_INSTALL,
      });
      assert.equal(made.status, 0, made.stderr);
    }
  });

  after(() => registry?.stop());

  it('pushes both indexes with the built digests; cosign verifies every signature and attestation', () => {
    const key = join(keys, 'good/cosign.key');
    const pub = join(keys, 'good/cosign.pub');
    const run = release(['--registry', `${registry.host}/secret-agent`, '--key', key, '--insecure']);
    assert.equal(run.status, 0, run.stderr);
    const record = JSON.parse(readFileSync(join(IMAGES_DIR, 'release.json'), 'utf8')) as ReleaseRecord;
    assert.equal(record.version, manifest.version);
    assert.deepEqual(record.signing, { mode: 'key', publicKey: readFileSync(pub, 'utf8'), tlog: false });
    for (const name of IMAGE_NAMES) {
      const built = manifest.images[name];
      const released = record.images[name]!;
      const repository = `${registry.host}/secret-agent/${name}`;
      assert.equal(released.reference, `${repository}:${manifest.version}`);
      assert.equal(released.pinned, `${repository}@${built.index}`);
      // The index pulled back by its tag is the one built: the digest AGENT_IMAGE pins.
      assert.equal(registry.digest(released.reference), built.index, `${name}: the registry's index`);
      assert.equal(released.index, built.index);

      const signed = verify('verify', released.pinned, pub);
      assert.equal(signed.status, 0, `${name} index: ${signed.stderr}`);
      const payloads = JSON.parse(signed.stdout) as {
        critical: { image: { 'docker-manifest-digest': string } };
      }[];
      assert.ok(payloads.some((p) => p.critical.image['docker-manifest-digest'] === built.index));

      const slsa = verify('verify-attestation', released.pinned, pub, 'slsaprovenance1');
      assert.equal(slsa.status, 0, `${name} provenance: ${slsa.stderr}`);
      const provenance = JSON.parse(readFileSync(join(ROOT, built.provenance), 'utf8')) as Statement;
      const attested = statements(slsa);
      assert.ok(
        attested.some(
          (s) =>
            s.predicateType === 'https://slsa.dev/provenance/v1' &&
            `sha256:${s.subject[0]?.digest.sha256}` === built.index &&
            isDeepStrictEqual(s.predicate, provenance.predicate),
        ),
        `${name}: the index's SLSA attestation is the build's provenance`,
      );

      assert.deepEqual(
        released.platforms.map((p) => [p.platform, p.digest]),
        built.platforms.map((p) => [p.platform, p.digest]),
      );
      for (const [i, platform] of built.platforms.entries()) {
        const ref = `${repository}@${platform.digest}`;
        assert.equal(registry.digest(ref), platform.digest, `${name} ${platform.platform}`);
        const one = verify('verify', ref, pub);
        assert.equal(one.status, 0, `${name} ${platform.platform}: ${one.stderr}`);
        const cdx = verify('verify-attestation', ref, pub, 'cyclonedx');
        assert.equal(cdx.status, 0, `${name} ${platform.platform} SBOM: ${cdx.stderr}`);
        const sbom = JSON.parse(readFileSync(join(ROOT, platform.sbom), 'utf8')) as { serialNumber: string };
        assert.ok(
          statements(cdx).some(
            (s) =>
              s.predicateType === 'https://cyclonedx.org/bom' &&
              `sha256:${s.subject[0]?.digest.sha256}` === platform.digest &&
              s.predicate.serialNumber === sbom.serialNumber,
          ),
          `${name} ${platform.platform}: its SBOM is attested on its manifest`,
        );
        const rec = released.platforms[i]!;
        assert.equal(registry.digest(rec.signature.ref), rec.signature.digest);
        assert.equal(registry.digest(rec.attestation.ref), rec.attestation.digest);
      }
      assert.equal(registry.digest(released.signature.ref), released.signature.digest);
      assert.equal(registry.digest(released.attestation.ref), released.attestation.digest);
    }

    // A cluster pins the agent by the signed index digest: render takes it as AGENT_IMAGE as it is.
    const pinned = record.images.agent!.pinned;
    const pod = readFileSync(join(ROOT, 'test/webhook/golden/render/pod.input.yaml'), 'utf8');
    const rendered = tool(process.execPath, [join(ROOT, 'dist/webhook.js'), 'render', '-f', '-'], {
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', AGENT_IMAGE: pinned },
      input: pod,
    });
    assert.equal(rendered.status, 0, rendered.stderr);
    assert.match(rendered.stdout, new RegExp(`image: ${pinned.replace(/[.]/g, '\\.')}\\n`));
  });

  it('a signature checked with another key does not verify', () => {
    const wrong = join(keys, 'wrong/cosign.pub');
    const index = `${registry.host}/secret-agent/agent@${manifest.images.agent.index}`;
    const signed = verify('verify', index, wrong);
    assert.notEqual(signed.status, 0);
    assert.match(signed.stderr, /no matching signatures/);
    const attested = verify('verify-attestation', index, wrong, 'slsaprovenance1');
    assert.notEqual(attested.status, 0);
    assert.match(attested.stderr, /no matching attestations/);
  });

  it('refuses a tampered archive before pushing anything, naming the file and the fix', () => {
    // A copy of dist/images whose webhook archive has one flipped byte in its largest blob.
    const dir = mkdtempSync(join(registry.dir, 'tampered-'));
    for (const file of readdirSync(IMAGES_DIR))
      if (file !== 'release.json') symlinkSync(join(IMAGES_DIR, file), join(dir, file));
    const webhook = join(dir, `webhook-${manifest.version}.oci.tar`);
    rmSync(webhook);
    const unpacked = join(registry.dir, 'unpacked');
    mkdirSync(unpacked);
    assert.equal(tool('tar', ['-xf', join(ROOT, manifest.images.webhook.archive), '-C', unpacked]).status, 0);
    const blobs = join(unpacked, 'blobs/sha256');
    const largest = readdirSync(blobs).sort(
      (a, b) => statSync(join(blobs, b)).size - statSync(join(blobs, a)).size,
    )[0]!;
    const data = readFileSync(join(blobs, largest));
    data[data.length >> 1]! ^= 0xff;
    writeFileSync(join(blobs, largest), data);
    assert.equal(tool('tar', ['-cf', webhook, '-C', unpacked, '.']).status, 0);

    refusedBeforePush(
      dir,
      'tampered',
      `${webhook}: blob sha256:${largest.slice(0, 12)}… is not the bytes its digest names`,
    );
  });

  it('refuses an archive whose layer is not what its media type says, before pushing anything, naming the image, platform, layer and fix', () => {
    // What a build after a pull-back wrote (issue 41): the arm64 webhook's layers plain tars labelled
    // tar+gzip, every blob its digest, the manifests, index and images.json consistent with them.
    const dir = mkdtempSync(join(registry.dir, 'mislabelled-'));
    for (const file of readdirSync(IMAGES_DIR))
      if (file !== 'release.json' && file !== 'images.json')
        symlinkSync(join(IMAGES_DIR, file), join(dir, file));
    const webhook = join(dir, `webhook-${manifest.version}.oci.tar`);
    rmSync(webhook);
    const unpacked = mkdtempSync(join(registry.dir, 'unpacked-'));
    assert.equal(tool('tar', ['-xf', join(ROOT, manifest.images.webhook.archive), '-C', unpacked]).status, 0);
    const blob = (digest: string) => join(unpacked, 'blobs/sha256', digest.replace(/^sha256:/, ''));
    const put = (data: Buffer) => {
      const digest = `sha256:${createHash('sha256').update(data).digest('hex')}`;
      writeFileSync(blob(digest), data);
      return { digest, size: data.length };
    };
    const json = <T>(digest: string) => JSON.parse(readFileSync(blob(digest), 'utf8')) as T;
    type Desc = { mediaType: string; digest: string; size: number; platform?: { architecture: string } };
    const top = JSON.parse(readFileSync(join(unpacked, 'index.json'), 'utf8')) as { manifests: Desc[] };
    const index = json<{ manifests: Desc[] }>(top.manifests[0]!.digest);
    const arm = index.manifests.findIndex((m) => m.platform?.architecture === 'arm64');
    assert.ok(arm >= 0, 'the webhook archive has an arm64 image');
    const platform = json<{ layers: Desc[] }>(index.manifests[arm]!.digest);
    const last = platform.layers.length - 1;
    const plain = put(gunzipSync(readFileSync(blob(platform.layers[last]!.digest))));
    platform.layers[last] = { ...platform.layers[last]!, ...plain };
    index.manifests[arm] = { ...index.manifests[arm]!, ...put(Buffer.from(JSON.stringify(platform))) };
    top.manifests[0] = { ...top.manifests[0]!, ...put(Buffer.from(JSON.stringify(index))) };
    writeFileSync(join(unpacked, 'index.json'), JSON.stringify(top));
    assert.equal(tool('tar', ['-cf', webhook, '-C', unpacked, '.']).status, 0);
    const images = JSON.parse(readFileSync(join(IMAGES_DIR, 'images.json'), 'utf8')) as {
      images: Record<string, { index: string; platforms: { platform: string; digest: string }[] }>;
    };
    images.images.webhook!.index = top.manifests[0]!.digest;
    images.images.webhook!.platforms.find((p) => p.platform === 'linux/arm64')!.digest =
      index.manifests[arm]!.digest;
    writeFileSync(join(dir, 'images.json'), JSON.stringify(images, null, 2));

    refusedBeforePush(
      dir,
      'mislabelled',
      `${webhook}: webhook (linux/arm64) layer ${last + 1} of ${last + 1} (${plain.digest}): it is labelled application/vnd.oci.image.layer.v1.tar+gzip, but its bytes are not compressed (no gzip magic)`,
    );
  });

  it('refuses a key its password does not open, keyless signing without the identity to verify, and a missing cosign', () => {
    const key = join(keys, 'good/cosign.key');
    const wrongPassword = release(
      ['--registry', `${registry.host}/badkey`, '--key', key, '--insecure'],
      'not-it',
    );
    assert.equal(wrongPassword.status, 2, wrongPassword.stderr);
    assert.ok(wrongPassword.stderr.includes(`--key ${key}: cosign cannot open it`), wrongPassword.stderr);
    assert.match(wrongPassword.stderr, /decryption failed\): .*COSIGN_PASSWORD is not its password/);
    const keyless = release(['--registry', `${registry.host}/badkey`, '--insecure']);
    assert.equal(keyless.status, 2, keyless.stderr);
    assert.match(keyless.stderr, /--key: is not given.*--certificate-identity and --certificate-oidc-issuer/);
    // No cosign anywhere: the install line, not a skip.
    const noCosign = tool(
      process.execPath,
      [join(ROOT, 'images/release.ts'), '--registry', `${registry.host}/badkey`, '--key', key, '--insecure'],
      {
        env: {
          PATH: '/nonexistent',
          COSIGN_HOME: join(registry.dir, 'no-cosign'),
          COSIGN_PASSWORD: PASSWORD,
        },
      },
    );
    assert.equal(noCosign.status, 2, noCosign.stderr);
    assert.match(noCosign.stderr, /cosign is not installed .*Install: .*\.ci\/install-cosign/);
    assert.deepEqual(tagsUnder('badkey'), [undefined, undefined]);
  });

  it('refuses a registry whose tag already holds other digests, before pushing anything', () => {
    // Someone else's image under the agent's tag: here the webhook's index.
    const taken = `${registry.host}/taken/agent:${manifest.version}`;
    const copy = tool('skopeo', [
      'copy',
      '--all',
      '--dest-tls-verify=false',
      `oci-archive:${join(ROOT, manifest.images.webhook.archive)}`,
      `docker://${taken}`,
    ]);
    assert.equal(copy.status, 0, copy.stderr);
    const run = release([
      '--registry',
      `${registry.host}/taken`,
      '--key',
      join(keys, 'good/cosign.key'),
      '--insecure',
    ]);
    assert.equal(run.status, 2, run.stderr);
    assert.ok(
      run.stderr.includes(
        `${taken}: the registry already holds this tag as ${manifest.images.webhook.index}, not this build's index ${manifest.images.agent.index}`,
      ),
      run.stderr,
    );
    assert.match(run.stderr, /Fix: a published version never changes/);
    assert.deepEqual(tagsUnder('taken'), [manifest.images.webhook.index, undefined]);
  });
});
