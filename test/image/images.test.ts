import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { describe, it } from 'node:test';
import { IMAGE_NAMES, ROOT, type ImageName } from '../../images/manifest.ts';
import { pinnedNode } from '../../images/pinned-node.ts';
import { bundledPackages, type CycloneDx } from '../../images/sbom.ts';
import { builtImages, runContainer } from './podman.ts';

const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  version: string;
  license: string;
};

/** Runs `script` with the image's own Node, as the image's user, and parses what it prints. */
async function inside<T>(image: string, script: string): Promise<T> {
  const run = await runContainer({ image, entrypoint: ['/nodejs/bin/node', '-e', script] });
  assert.equal(run.code, 0, run.stderr);
  return JSON.parse(run.stdout) as T;
}

const sha256 = (data: Buffer | string) => createHash('sha256').update(data).digest('hex');

/**
 * Every file under `dir` (relative path → sha256), as a script the image's Node runs. The compile
 * cache is left out: each uid's part is readable by that uid only.
 */
const HASH_TREE = (dir: string) => `
const fs = require('node:fs'), crypto = require('node:crypto');
const out = {};
for (const f of fs.readdirSync(${JSON.stringify(dir)}, { recursive: true })) {
  const p = ${JSON.stringify(dir)} + '/' + f;
  // Built in the image by its own Node, as the snapshot is (from dist/agent-snapshot.cjs): not on the host.
  if (f.startsWith('compile-cache/') || f.endsWith('.blob')) continue;
  if (fs.statSync(p).isFile()) out[f] = crypto.createHash('sha256').update(fs.readFileSync(p)).digest('hex');
}
console.log(JSON.stringify(out));`;

function hashTree(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const entry of readdirSync(dir, { recursive: true, withFileTypes: true }))
    if (entry.isFile()) {
      const path = join(entry.parentPath, entry.name);
      out[path.slice(dir.length + 1)] = sha256(readFileSync(path));
    }
  return out;
}

/** One member of a tar archive, read with tar(1). */
function fromTar(archive: string, member: string): Buffer {
  const r = spawnSync('tar', ['-xOf', archive, member], { maxBuffer: 1024 * 1024 * 1024 });
  assert.equal(r.status, 0, `${archive}: ${member}: ${r.stderr}`);
  return r.stdout;
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

  it('are named after package.json (secret-agent/<image>:<version>) and labelled with version, revision and licence', () => {
    const { manifest } = builtImages();
    assert.equal(manifest.version, pkg.version);
    assert.match(manifest.revision, /^[0-9a-f]{40}(-dirty)?$/);
    for (const name of IMAGE_NAMES) {
      const image = manifest.images[name];
      assert.ok(image.ref.endsWith(`secret-agent/${name}:${pkg.version}`), image.ref);
      const labels = config(image.ref).Labels;
      assert.equal(labels['org.opencontainers.image.version'], pkg.version);
      assert.equal(labels['org.opencontainers.image.revision'], manifest.revision);
      assert.equal(labels['org.opencontainers.image.licenses'], pkg.license);
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
          ? ['/nodejs/bin/node', '--snapshot-blob', '/app/agent.blob', '--']
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

  it('hold nothing over their base but /app: the bundle the tests run (byte for byte), its licence notices, the LICENSE, the compile cache and the start-up snapshots', async () => {
    const { podman, manifest } = builtImages();
    const expected: Record<ImageName, RegExp> = {
      agent:
        /^\/app(\/(agent\.js(\.LEGAL\.txt)?|agent(-gcp)?\.blob|LICENSE|agent-chunks(\/[\w.-]+\.js(\.LEGAL\.txt)?)?|compile-cache(\/v24[\w.-]+-(65532|1000)(\/[0-9a-f]+)?)?))?$/,
      webhook: /^\/app(\/(webhook\.js(\.LEGAL\.txt)?|LICENSE))?$/,
    };
    const layers = (ref: string) =>
      JSON.parse(
        podman.run(['image', 'inspect', '--format', '{{json .RootFS.Layers}}', ref]).stdout,
      ) as string[];
    const baseLayers = layers(manifest.runtime.ref);
    for (const name of IMAGE_NAMES) {
      const image = manifest.images[name];
      // Read from the OCI archive, layer by layer: what the Dockerfile added over the base, without
      // mounting an image another test may be using.
      const imageLayers = layers(image.ref);
      assert.deepEqual(
        imageLayers.slice(0, baseLayers.length),
        baseLayers,
        `${name} is built on the runtime base`,
      );
      const archive = join(ROOT, image.archive);
      const index = JSON.parse(fromTar(archive, 'index.json').toString()) as {
        manifests: { digest: string }[];
      };
      const oci = JSON.parse(
        fromTar(archive, `blobs/sha256/${index.manifests[0]!.digest.slice('sha256:'.length)}`).toString(),
      ) as { layers: { digest: string; mediaType: string }[] };
      assert.equal(oci.layers.length, imageLayers.length);
      for (const layer of oci.layers.slice(baseLayers.length)) {
        const blob = fromTar(archive, `blobs/sha256/${layer.digest.slice('sha256:'.length)}`);
        const listing = spawnSync('tar', ['-tv'], {
          input: layer.mediaType.endsWith('+gzip') ? gunzipSync(blob) : blob,
          encoding: 'utf8',
          maxBuffer: 64 * 1024 * 1024,
        });
        assert.equal(listing.status, 0, listing.stderr);
        for (const line of listing.stdout.trim().split('\n')) {
          // drwxr-xr-x 0/0 0 2026-11-23 10:49 app/
          const [mode, , size, , , ...rest] = line.split(/\s+/);
          const path = `/${rest.join(' ').replace(/\/$/, '')}`;
          assert.ok(!path.includes('/.wh.'), `${name}: the layer deletes ${path} from the base`);
          if (expected[name].test(path)) continue;
          // buildah's RUN step (the agent's compile-cache fill) leaves its mount points behind: empty,
          // and what every runtime mounts over. Nothing else outside /app.
          const mountPoint =
            (mode!.startsWith('d') && ['/dev', '/etc', '/proc', '/run', '/sys'].includes(path)) ||
            (size === '0' && ['/etc/hostname', '/etc/hosts', '/etc/resolv.conf'].includes(path));
          assert.ok(mountPoint, `${name}: added ${path} (${mode}, ${size} bytes)`);
        }
      }
      const inImage = await inside<Record<string, string>>(image.ref, HASH_TREE('/app'));
      const onHost = hashTree(join(ROOT, 'dist'));
      const bundle = Object.keys(inImage).filter((f) => f !== 'LICENSE');
      assert.ok(bundle.includes(`${name}.js`));
      for (const file of bundle)
        assert.equal(inImage[file], onHost[file], `${name}: /app/${file} equals dist/${file}`);
      assert.equal(inImage.LICENSE, sha256(readFileSync(join(ROOT, 'LICENSE'))));
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

  it('the OCI archives hold exactly the built images: the config digest is the image ID, every blob matches its digest', () => {
    const { manifest } = builtImages();
    for (const name of IMAGE_NAMES) {
      const image = manifest.images[name];
      const archive = join(ROOT, image.archive);
      assert.equal(fromTar(archive, 'oci-layout').toString(), '{"imageLayoutVersion": "1.0.0"}');
      const index = JSON.parse(fromTar(archive, 'index.json').toString()) as {
        manifests: { digest: string }[];
      };
      assert.equal(index.manifests.length, 1);
      const blob = (digest: string) => {
        const data = fromTar(archive, `blobs/sha256/${digest.replace(/^sha256:/, '')}`);
        assert.equal(`sha256:${sha256(data)}`, digest, `${name}: blob ${digest}`);
        return data;
      };
      const ociManifest = JSON.parse(blob(index.manifests[0]!.digest).toString()) as {
        config: { digest: string };
        layers: { digest: string }[];
      };
      assert.equal(ociManifest.config.digest, `sha256:${image.id}`);
      blob(ociManifest.config.digest);
      assert.ok(ociManifest.layers.length > 0);
      for (const layer of ociManifest.layers) blob(layer.digest);
    }
  });

  it('the SBOMs list the Node runtime, the Debian packages of the base and exactly the npm packages in the bundle', () => {
    const { manifest } = builtImages();
    for (const name of IMAGE_NAMES) {
      const image = manifest.images[name];
      const sbom = JSON.parse(readFileSync(join(ROOT, image.sbom), 'utf8')) as CycloneDx;
      assert.equal(sbom.bomFormat, 'CycloneDX');
      assert.equal(sbom.specVersion, '1.5');
      const component = sbom.metadata.component as {
        name: string;
        version: string;
        properties: { value: string }[];
      };
      assert.equal(component.name, `secret-agent/${name}`);
      assert.equal(component.version, pkg.version);
      assert.equal(component.properties[0]!.value, image.id);
      const node = sbom.components.find((c) => c.name === 'node');
      assert.equal(node?.version, pinnedNode().version);
      const npm = sbom.components.filter((c) => c.purl?.startsWith('pkg:npm/'));
      assert.deepEqual(
        new Set(npm.map((c) => c['bom-ref'])),
        new Set(bundledPackages(join(ROOT, `dist/${name}.meta.json`), ROOT).keys()),
      );
      for (const c of npm) assert.ok(c.licenses && c.licenses.length > 0, `${c['bom-ref']} has a licence`);
      const deb = sbom.components.filter((c) => c.purl?.startsWith('pkg:deb/')).map((c) => c.name);
      for (const required of ['libc6', 'libstdc++6', 'ca-certificates'])
        assert.ok(deb.includes(required), required);
    }
    // Not shipped: the bundles stub axios out, and the agent's bundle never holds the webhook's TLS code.
    const agent = JSON.parse(readFileSync(join(ROOT, manifest.images.agent.sbom), 'utf8')) as CycloneDx;
    assert.ok(!agent.components.some((c) => c.name === 'axios' || c.name === '@peculiar/x509'));
  });

  it('the runtime base is what the Dockerfiles expect of distroless: nonroot 65532, a home, a CA bundle, /tmp, hosts from files first', async () => {
    const { manifest } = builtImages();
    const base = await inside<{ passwd: string; home: number; cas: number; tmp: number; nsswitch: string }>(
      manifest.runtime.ref,
      `const fs = require('node:fs'); const { X509Certificate } = require('node:crypto');
       const pem = fs.readFileSync('/etc/ssl/certs/ca-certificates.crt', 'utf8').match(/-----BEGIN CERTIFICATE-----[^-]+-----END CERTIFICATE-----/g);
       console.log(JSON.stringify({ passwd: fs.readFileSync('/etc/passwd', 'utf8'), home: fs.statSync('/home/nonroot').uid,
         cas: pem.filter((p) => new X509Certificate(p).ca).length, tmp: fs.statSync('/tmp').mode & 0o7777,
         nsswitch: fs.readFileSync('/etc/nsswitch.conf', 'utf8') }));`,
    );
    assert.match(base.passwd, /^nonroot:x:65532:65532:/m);
    assert.equal(base.home, 65532);
    assert.ok(base.cas > 100, `${base.cas} CA certificates`);
    assert.equal(base.tmp, 0o1777);
    assert.match(base.nsswitch, /^hosts:\s+files dns/m);
  });

  it('both Dockerfiles take the same bases as build args, defaulting to the public images', () => {
    for (const file of ['Dockerfile.agent', 'Dockerfile.webhook']) {
      const text = readFileSync(join(ROOT, file), 'utf8');
      assert.match(text, /^ARG BUILD_IMAGE=docker\.io\/library\/node:24-bookworm-slim$/m, file);
      assert.match(text, /^ARG RUNTIME_IMAGE=gcr\.io\/distroless\/nodejs24-debian12:nonroot$/m, file);
      assert.match(text, /^FROM \$\{BUILD_IMAGE\} AS build$/m, file);
      assert.match(text, /^FROM \$\{RUNTIME_IMAGE\}$/m, file);
    }
  });
});
