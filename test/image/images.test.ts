import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { IMAGE_NAMES, ROOT, type ImageName } from '../../images/manifest.ts';
import { PLATFORM_NAMES, type Platform } from '../../images/platforms.ts';
import { pinnedNode } from '../../images/pinned-node.ts';
import type { ProvenanceStatement } from '../../images/provenance.ts';
import { bundledPackages, type CycloneDx } from '../../images/sbom.ts';
import {
  blob,
  fromTar,
  layerEntries,
  layerFile,
  layerTar,
  readIndex,
  readPlatforms,
  sha256,
} from './oci-archive.ts';
import { builtImages, runContainer } from './podman.ts';

const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  version: string;
  license: string;
};

/** Runs `script` with the image's own Node, as the image's user, and parses what it prints. */
async function inside<T>(image: string, script: string, platform?: Platform): Promise<T> {
  const run = await runContainer(
    { image, entrypoint: ['/nodejs/bin/node', '-e', script], ...(platform ? { platform } : {}) },
    120_000,
  );
  assert.equal(run.code, 0, run.stderr);
  return JSON.parse(run.stdout) as T;
}

/** Every file under `dir` (relative path → sha256). */
function hashTree(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const entry of readdirSync(dir, { recursive: true, withFileTypes: true }))
    if (entry.isFile()) {
      const path = join(entry.parentPath, entry.name);
      out[path.slice(dir.length + 1)] = sha256(readFileSync(path));
    }
  return out;
}

/** The uncompressed layer `diffId` of the image `ref` podman holds. */
function baseLayerTar(ref: string, diffId: string): Buffer {
  const { podman } = builtImages();
  const dir = mkdtempSync(join(tmpdir(), 'secret-agent-base-layer-'));
  try {
    podman.run(['save', '-q', '--uncompressed', '--format', 'oci-dir', '-o', join(dir, 'layout'), ref]);
    return readFileSync(join(dir, 'layout/blobs/sha256', diffId.replace(/^sha256:/, '')));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * `ours` is `base` with /nodejs/bin/node made execute-only and nothing else: byte for byte the same
 * but one 512-byte tar header, whose entry is Node, now -r-x--x--x root's.
 */
function assertOnlyNodeMode(base: Buffer, ours: Buffer, at: string): void {
  assert.equal(ours.length, base.length, `${at}: as long as the base's`);
  const blocks = new Set<number>();
  for (let i = 0; i < base.length; i++) if (base[i] !== ours[i]) blocks.add(Math.floor(i / 512));
  assert.equal(blocks.size, 1, `${at}: differs from the base's in ${blocks.size} tar blocks, not one header`);
  const before = layerEntries(base);
  const after = layerEntries(ours);
  const changed = after.flatMap((e, i) =>
    JSON.stringify(e) === JSON.stringify(before[i]) ? [] : [[before[i], e]],
  );
  assert.equal(changed.length, 1, `${at}: one entry changed`);
  const [was, now] = changed[0]!;
  assert.match(now!.path, /^\/(\.\/)?nodejs\/bin\/node$/, `${at}: the entry changed is Node`);
  assert.deepEqual(
    [was!.mode, now!.mode, now!.size],
    ['-rwxr-xr-x', '-r-x--x--x', was!.size],
    `${at}: Node's mode`,
  );
}

describe('npm run images: the images and what a release job publishes', () => {
  const config = (ref: string) => {
    const { podman } = builtImages();
    return JSON.parse(podman.run(['image', 'inspect', '--format', '{{json .Config}}', ref]).stdout) as {
      User: string;
      Entrypoint: string[];
      Env: string[];
      WorkingDir: string;
      Labels: Record<string, string>;
    };
  };

  it('are named after package.json (secret-agent/<image>:<version>, and -<arch> per platform) and labelled with version, revision and licence', () => {
    const { manifest } = builtImages();
    assert.equal(manifest.version, pkg.version);
    assert.match(manifest.revision, /^[0-9a-f]{40}(-dirty)?$/);
    for (const name of IMAGE_NAMES) {
      const image = manifest.images[name];
      assert.ok(image.ref.endsWith(`secret-agent/${name}:${pkg.version}`), image.ref);
      assert.equal(image.id, image.platforms.find((p) => p.platform === manifest.primary)?.id);
      for (const p of image.platforms) {
        assert.ok(
          p.ref.endsWith(`secret-agent/${name}:${pkg.version}-${PLATFORM_NAMES[p.platform].arch}`),
          p.ref,
        );
        const labels = config(p.ref).Labels;
        assert.equal(labels['org.opencontainers.image.version'], pkg.version);
        assert.equal(labels['org.opencontainers.image.revision'], manifest.revision);
        assert.equal(labels['org.opencontainers.image.licenses'], pkg.license);
      }
    }
  });

  it('run Node 24 from /nodejs/bin/node as uid 65532, with no shell, no package manager and no build-machine trust store', async () => {
    const { manifest } = builtImages();
    for (const name of IMAGE_NAMES) {
      const image = manifest.images[name];
      const c = config(image.ref);
      assert.equal(c.User, '65532:65532');
      // The agent starts from its V8 start-up snapshot (test/image/agent.test.ts runs both ways).
      assert.deepEqual(
        c.Entrypoint,
        name === 'agent'
          ? ['/nodejs/bin/node', '--disable-sigusr1', '--snapshot-blob', '/app/agent.blob', '--']
          : ['/nodejs/bin/node', `/app/${name}.js`],
      );
      assert.equal(c.WorkingDir, '/app');
      // The build stage trusts this machine's CAs for npm; nothing of it reaches the image.
      assert.ok(!c.Env.some((e) => e.startsWith('NODE_EXTRA_CA_CERTS=')), c.Env.join(' '));
      const seen = await inside<{ version: string; uid: number; present: string[] }>(
        image.ref,
        `const fs = require('node:fs');
         const tools = ['/bin/sh', '/bin/bash', '/bin/dash', '/usr/bin/sh', '/usr/bin/env', '/usr/bin/apt', '/usr/bin/dpkg', '/usr/bin/npm', '/usr/local/bin/npm', '/usr/local/bin/node', '/usr/bin/curl', '/usr/bin/wget', '/busybox'];
         console.log(JSON.stringify({ version: process.version, uid: process.getuid(), present: tools.filter((t) => fs.existsSync(t)) }));`,
      );
      assert.match(seen.version, /^v24\./);
      assert.equal(seen.uid, 65532);
      assert.deepEqual(seen.present, [], `${name}: tools in the image`);
    }
  });

  it('hold nothing over their base but /app, on every platform: the bundle the tests run (byte for byte), its licence notices, the LICENSE, the compile cache, the start-up snapshots, the native sidecar’s postStart hook, the resident and env-exec', () => {
    const { podman, manifest } = builtImages();
    const expected: Record<ImageName, RegExp> = {
      agent:
        /^\/app(\/(agent\.js(\.LEGAL\.txt)?|agent(-gcp)?\.blob|wait-ready\.cjs|resident|env-exec|LICENSE|agent-chunks(\/[\w.-]+\.js(\.LEGAL\.txt)?)?|compile-cache(\/v24[\w.-]+-(65532|1000)(\/[0-9a-f]+)?)?))?$/,
      webhook: /^\/app(\/(webhook\.js(\.LEGAL\.txt)?|LICENSE))?$/,
    };
    const onHost = hashTree(join(ROOT, 'dist'));
    for (const name of IMAGE_NAMES) {
      const image = manifest.images[name];
      const archive = join(ROOT, image.archive);
      for (const { platform, manifest: oci, config } of readPlatforms(archive)) {
        const at = `${name} ${platform}`;
        // Read from the OCI archive, layer by layer: what the Dockerfile added over the base, without
        // mounting an image another test may be using.
        const baseLayers = JSON.parse(
          podman.run([
            'image',
            'inspect',
            '--format',
            '{{json .RootFS.Layers}}',
            manifest.runtimes[platform as 'linux/amd64']!.ref,
          ]).stdout,
        ) as string[];
        // npm run images makes the base's Node execute-only in its own layer (images/stamped-base.ts):
        // that layer differs from the base's by that one tar header, every other is the base's own.
        const ownBase = config.rootfs.diff_ids.slice(0, baseLayers.length);
        assert.equal(ownBase.length, baseLayers.length, `${at} is built on its runtime base`);
        for (const [i, diffId] of ownBase.entries())
          if (diffId !== baseLayers[i])
            assertOnlyNodeMode(
              baseLayerTar(manifest.runtimes[platform as 'linux/amd64']!.ref, baseLayers[i]!),
              layerTar(archive, oci.layers[i]!, diffId),
              `${at}: base layer ${i}`,
            );
        assert.equal(oci.layers.length, config.rootfs.diff_ids.length);
        const files: Record<string, Buffer> = {};
        const sawNative = new Set<string>();
        for (const [i, layer] of oci.layers.entries()) {
          if (i < baseLayers.length) continue;
          const tar = layerTar(archive, layer, config.rootfs.diff_ids[i]!);
          for (const { mode, size, path } of layerEntries(tar)) {
            assert.ok(!path.includes('/.wh.'), `${at}: the layer deletes ${path} from the base`);
            if (expected[name].test(path)) {
              const file = path.slice('/app/'.length);
              // Built per platform in the image, so not dist/'s: the cache, the blobs and the native
              // programs (test/image/resident.test.ts and env-exec.test.ts check they are the platform's).
              const native = file === 'resident' || file === 'env-exec';
              const perPlatform = file.startsWith('compile-cache/') || file.endsWith('.blob') || native;
              if (mode.startsWith('-') && !perPlatform) files[file] = layerFile(tar, path);
              if (native) sawNative.add(file);
              continue;
            }
            // buildah's RUN steps (the agent's compile cache and snapshots) leave their mount points
            // behind: empty, and what every runtime mounts over. Nothing else outside /app.
            const mountPoint =
              (mode.startsWith('d') && ['/dev', '/etc', '/proc', '/run', '/sys'].includes(path)) ||
              (size === '0' && ['/etc/hostname', '/etc/hosts', '/etc/resolv.conf'].includes(path));
            assert.ok(mountPoint, `${at}: added ${path} (${mode}, ${size} bytes)`);
          }
        }
        // The build stage runs on the build platform for every target: one bundle, the host's.
        assert.ok(`${name}.js` in files, `${at} holds /app/${name}.js`);
        if (name === 'agent')
          assert.ok('wait-ready.cjs' in files, `${at} holds the postStart hook the webhook renders`);
        if (name === 'agent')
          assert.deepEqual(
            [...sawNative].sort(),
            ['env-exec', 'resident'],
            `${at} holds /app/resident and /app/env-exec`,
          );
        for (const [file, data] of Object.entries(files))
          assert.equal(
            sha256(data),
            file === 'LICENSE' ? sha256(readFileSync(join(ROOT, 'LICENSE'))) : onHost[file],
            `${at}: /app/${file}`,
          );
      }
    }
  });

  it('LICENSE is the licence package.json names', () => {
    assert.equal(pkg.license, 'Apache-2.0');
    const text = readFileSync(join(ROOT, 'LICENSE'), 'utf8');
    assert.match(text, /^\s*Apache License\s+Version 2\.0, January 2004/);
    assert.match(text, /END OF TERMS AND CONDITIONS/);
  });

  it('CHANGELOG.md has a section for the version in package.json', () => {
    const changelog = readFileSync(join(ROOT, 'CHANGELOG.md'), 'utf8');
    assert.match(changelog, new RegExp(`^## ${pkg.version.replaceAll('.', '\\.')}\\b`, 'm'));
  });

  it('each OCI archive is one image index over every platform built: named by the version, each manifest with its platform, each config its image ID, every blob its digest', () => {
    const { manifest } = builtImages();
    for (const name of IMAGE_NAMES) {
      const image = manifest.images[name];
      const archive = join(ROOT, image.archive);
      assert.deepEqual(JSON.parse(fromTar(archive, 'oci-layout').toString()), {
        imageLayoutVersion: '1.0.0',
      });
      const { entry, index } = readIndex(archive);
      assert.equal(entry.mediaType, 'application/vnd.oci.image.index.v1+json');
      assert.equal(entry.annotations?.['org.opencontainers.image.ref.name'], pkg.version);
      assert.equal(entry.digest, image.index);
      assert.equal(index.mediaType, 'application/vnd.oci.image.index.v1+json');
      const platforms = readPlatforms(archive);
      assert.deepEqual(
        platforms.map((p) => p.platform),
        manifest.platforms,
      );
      for (const [i, p] of platforms.entries()) {
        const record = image.platforms[i]!;
        assert.equal(p.platform, record.platform);
        assert.equal(p.descriptor.mediaType, 'application/vnd.oci.image.manifest.v1+json');
        assert.equal(
          p.descriptor.digest,
          record.digest,
          `${name} ${p.platform}: the manifest digest images.json names`,
        );
        assert.equal(
          p.manifest.config.digest,
          `sha256:${record.id}`,
          `${name} ${p.platform}: the config is the image`,
        );
        assert.deepEqual(
          [p.config.os, p.config.architecture],
          ['linux', PLATFORM_NAMES[record.platform].arch],
        );
        // The commit's time, not the build's: the image can be built again to the same digest.
        assert.equal(Date.parse(p.config.created) / 1000, manifest.sourceDateEpoch);
        for (const layer of p.manifest.layers) {
          // Compressed here, so a registry is sent (and serves) exactly these blobs.
          assert.equal(layer.mediaType, 'application/vnd.oci.image.layer.v1.tar+gzip');
          blob(archive, layer.digest);
        }
      }
    }
  });

  it('the SBOMs, one per platform, list the Node runtime, the platform’s Debian packages and exactly the npm packages in the bundle', () => {
    const { manifest } = builtImages();
    for (const name of IMAGE_NAMES)
      for (const image of manifest.images[name].platforms) {
        const sbom = JSON.parse(readFileSync(join(ROOT, image.sbom), 'utf8')) as CycloneDx;
        assert.equal(sbom.bomFormat, 'CycloneDX');
        assert.equal(sbom.specVersion, '1.5');
        const component = sbom.metadata.component as {
          name: string;
          version: string;
          properties: { name: string; value: string }[];
        };
        assert.equal(component.name, `secret-agent/${name}`);
        assert.equal(component.version, pkg.version);
        assert.deepEqual(
          component.properties.map((p) => p.value),
          [image.id, image.digest, image.platform],
        );
        // The build's time, from the commit: the same image gives the same document.
        assert.equal(Date.parse(sbom.metadata.timestamp as string) / 1000, manifest.sourceDateEpoch);
        const node = sbom.components.find((c) => c.name === 'node');
        assert.equal(node?.version, pinnedNode().version);
        const npm = sbom.components.filter((c) => c.purl?.startsWith('pkg:npm/'));
        assert.deepEqual(
          new Set(npm.map((c) => c['bom-ref'])),
          new Set(bundledPackages(join(ROOT, `dist/${name}.meta.json`), ROOT).keys()),
        );
        for (const c of npm) assert.ok(c.licenses && c.licenses.length > 0, `${c['bom-ref']} has a licence`);
        const deb = sbom.components.filter((c) => c.purl?.startsWith('pkg:deb/'));
        for (const required of ['libc6', 'libstdc++6', 'ca-certificates'])
          assert.ok(
            deb.some((c) => c.name === required),
            required,
          );
        const arch = PLATFORM_NAMES[image.platform].arch;
        for (const c of deb)
          assert.match(c.purl!, new RegExp(`[?&]arch=(${arch}|all)(&|$)`), `${image.platform}: ${c.purl}`);
      }
    // Not shipped: the bundles stub axios out, and the agent's bundle never holds the webhook's TLS code.
    const agent = JSON.parse(readFileSync(join(ROOT, manifest.images.agent.sbom), 'utf8')) as CycloneDx;
    assert.ok(!agent.components.some((c) => c.name === 'axios' || c.name === '@peculiar/x509'));
  });

  it('the provenance of each image: an in-toto statement on the index and every platform’s manifest, with an SLSA v1 predicate naming the commit, every Debian package and Node package the bases hold, and no time but the commit’s', () => {
    const { manifest } = builtImages();
    for (const name of IMAGE_NAMES) {
      const image = manifest.images[name];
      const statement = JSON.parse(readFileSync(join(ROOT, image.provenance), 'utf8')) as ProvenanceStatement;
      assert.equal(statement._type, 'https://in-toto.io/Statement/v1');
      assert.equal(statement.predicateType, 'https://slsa.dev/provenance/v1');
      assert.deepEqual(
        statement.subject.map((s) => `sha256:${s.digest?.sha256}`),
        [image.index, ...image.platforms.map((p) => p.digest)],
      );
      const build = statement.predicate.buildDefinition;
      assert.deepEqual((build.externalParameters.source as { revision: string }).revision, manifest.revision);
      assert.deepEqual(build.externalParameters.platforms, manifest.platforms);
      assert.equal(build.internalParameters.sourceDateEpoch, manifest.sourceDateEpoch);
      const deps = build.resolvedDependencies;
      assert.ok(
        deps.some((d) => d.digest?.gitCommit === manifest.revision.replace(/-dirty$/, '')),
        'the commit',
      );
      for (const platform of manifest.platforms) {
        const base = manifest.runtimes[platform]!;
        assert.ok(
          deps.some((d) => d.digest?.sha256 === base.digest.replace(/^sha256:/, '')),
          `${platform} base`,
        );
        if (!base.inputs) continue;
        for (const deb of base.inputs.debian) {
          const found = deps.find((d) => {
            const { role, platform: at } = (d.annotations ?? {}) as { role?: string; platform?: string };
            return (
              role === 'runtime' &&
              at === platform &&
              d.uri ===
                `pkg:deb/debian/${deb.name}@${encodeURIComponent(deb.version)}?arch=${deb.architecture}`
            );
          });
          assert.equal(found?.digest?.sha256, deb.sha256, `${platform}: ${deb.name}`);
        }
        const node = deps.find((d) => d.uri === `pkg:npm/${base.inputs!.node.name}@${pinnedNode().version}`);
        assert.equal(
          (node?.annotations as { integrity?: string } | undefined)?.integrity,
          base.inputs.node.integrity,
          `${platform}: Node`,
        );
        assert.match(base.inputs.node.integrity, /^sha512-/);
        // The same packages the platform's SBOM finds in the image, at the same versions.
        const sbom = JSON.parse(
          readFileSync(join(ROOT, image.platforms.find((p) => p.platform === platform)!.sbom), 'utf8'),
        ) as CycloneDx;
        for (const c of sbom.components.filter((c) => c.purl?.startsWith('pkg:deb/')))
          assert.ok(
            base.inputs.debian.some((d) => d.name === c.name && d.version === c.version),
            `${platform}: ${c.name} ${c.version}`,
          );
      }
      // The agent's: the base each platform's resident was compiled on, and what it was made of.
      if (name === 'agent')
        for (const platform of manifest.platforms) {
          const native = manifest.natives[platform]!;
          const role = (d: (typeof deps)[number]) => (d.annotations as { role?: string } | undefined)?.role;
          assert.ok(
            deps.some(
              (d) =>
                role(d) === 'native build stage' &&
                d.digest?.sha256 === native.digest.replace(/^sha256:/, ''),
            ),
            `${platform} native build base`,
          );
          for (const deb of native.inputs?.debian ?? [])
            assert.ok(
              deps.some(
                (d) =>
                  role(d) === 'native build stage' &&
                  d.uri?.startsWith(`pkg:deb/debian/${deb.name}@`) &&
                  d.digest?.sha256 === deb.sha256,
              ),
              `${platform} native build: ${deb.name}`,
            );
          if (native.inputs)
            assert.ok(
              native.inputs.debian.some((d) => d.name === 'musl-tools'),
              `${platform}: the native build base holds musl-tools`,
            );
        }
      // Nothing varies between two builds of a commit (test/image/reproducible.test.ts compares them).
      assert.doesNotMatch(JSON.stringify(statement), /"(startedOn|finishedOn|invocationId)"/);
    }
  });

  it('the runtime base of every platform is what the Dockerfiles expect of distroless: its own Node, nonroot 65532, a home, a CA bundle, /tmp, hosts from files first', async () => {
    const { manifest } = builtImages();
    for (const platform of manifest.platforms) {
      const base = await inside<{
        arch: string;
        version: string;
        passwd: string;
        home: number;
        cas: number;
        tmp: number;
        nsswitch: string;
      }>(
        manifest.runtimes[platform]!.ref,
        `const fs = require('node:fs'); const { X509Certificate } = require('node:crypto');
         const pem = fs.readFileSync('/etc/ssl/certs/ca-certificates.crt', 'utf8').match(/-----BEGIN CERTIFICATE-----[^-]+-----END CERTIFICATE-----/g);
         console.log(JSON.stringify({ arch: process.arch, version: process.version, passwd: fs.readFileSync('/etc/passwd', 'utf8'), home: fs.statSync('/home/nonroot').uid,
           cas: pem.filter((p) => new X509Certificate(p).ca).length, tmp: fs.statSync('/tmp').mode & 0o7777,
           nsswitch: fs.readFileSync('/etc/nsswitch.conf', 'utf8') }));`,
        platform === manifest.primary ? undefined : platform,
      );
      assert.equal(base.arch, PLATFORM_NAMES[platform].nodeArch, platform);
      assert.equal(base.version, `v${pinnedNode().version}`, `${platform}: the pinned Node`);
      assert.match(base.passwd, /^nonroot:x:65532:65532:/m);
      assert.equal(base.home, 65532);
      assert.ok(base.cas > 100, `${base.cas} CA certificates`);
      assert.equal(base.tmp, 0o1777);
      assert.match(base.nsswitch, /^hosts:\s+files dns/m);
    }
  });

  it('both Dockerfiles take the same bases as build args, defaulting to the public images; the build stage runs on the build platform, the runtime stage on the target', () => {
    for (const file of ['Dockerfile.agent', 'Dockerfile.webhook']) {
      const text = readFileSync(join(ROOT, file), 'utf8');
      assert.match(text, /^ARG BUILD_IMAGE=docker\.io\/library\/node:24-bookworm-slim$/m, file);
      assert.match(text, /^ARG RUNTIME_IMAGE=gcr\.io\/distroless\/nodejs24-debian12:nonroot$/m, file);
      assert.match(text, /^FROM --platform=\$\{BUILDPLATFORM\} \$\{BUILD_IMAGE\} AS build$/m, file);
      assert.match(text, /^FROM --platform=\$\{TARGETPLATFORM\} \$\{RUNTIME_IMAGE\}$/m, file);
    }
    // The resident is compiled on the target platform: native code, unlike the build stage's output.
    const agent = readFileSync(join(ROOT, 'Dockerfile.agent'), 'utf8');
    assert.match(agent, /^ARG NATIVE_BUILD_IMAGE=docker\.io\/library\/node:24-bookworm-slim$/m);
    assert.match(agent, /^FROM --platform=\$\{TARGETPLATFORM\} \$\{NATIVE_BUILD_IMAGE\} AS native$/m);
    assert.match(agent, /^RUN node images\/build-native\.ts$/m, 'the flags the tests build with');
  });
});
