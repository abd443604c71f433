/**
 * The linux/arm64 images, run on this machine under QEMU (binfmt_misc) by podman, hardened as the
 * other image tests run theirs. Focused on what differs per platform: the arm64 Node and the blobs
 * and caches it built; the agent's behaviour is the same code as amd64's (test/image/agent.test.ts).
 */
import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { platformImage, type PlatformImageRecord } from '../../images/manifest.ts';
import { requireEmulation, type Platform } from '../../images/platforms.ts';
import { GCP_INIT_COMMAND } from '../../webhook/render/agent-containers.ts';
import { canary } from '../support/canary.ts';
import { MOTO_ENV, motoSecrets, startMoto, type Moto, type MotoSecrets } from '../support/moto.ts';
import { basicPod, decodePatch, mutate, review, validatePod } from '../webhook/fixtures.ts';
import { call } from '../webhook/https-call.ts';
import { certDir, makeServingPair } from '../webhook/tls-certs.ts';
import { builtImages, emptyDirOnTmpfs, runContainer } from './podman.ts';
import { startWebhookImage } from './webhook-image.ts';

const ARM64: Platform = 'linux/arm64';
/** Under QEMU a run takes seconds; this bounds a hung one. */
const RUN_TIMEOUT = 180_000;

describe('the linux/arm64 images under QEMU (read-only root, no capabilities, no new privileges)', () => {
  let agent: PlatformImageRecord;
  let webhook: PlatformImageRecord;

  before(() => {
    requireEmulation(ARM64);
    const { manifest } = builtImages();
    agent = platformImage(manifest, 'agent', ARM64);
    webhook = platformImage(manifest, 'webhook', ARM64);
  });

  it('agent --version prints the version', async () => {
    const run = await runContainer({ image: agent.ref, platform: ARM64, args: ['--version'] }, RUN_TIMEOUT);
    assert.equal(run.code, 0, run.stderr);
    assert.equal(run.stdout, `secret-agent ${builtImages().manifest.version}\n`);
    assert.equal(run.stderr, '');
  });

  it('the agent starts from its own snapshots, built by the arm64 Node: not the plain bundle, not another platform’s blob', async () => {
    // --check-snapshot is the snapshot's own entry point (agent/snapshot.ts); the plain bundle refuses it.
    for (const [entrypoint, variant] of [
      [undefined, 'default'],
      [GCP_INIT_COMMAND, 'with-gcp'],
    ] as const) {
      const run = await runContainer(
        {
          image: agent.ref,
          platform: ARM64,
          args: ['--check-snapshot'],
          ...(entrypoint ? { entrypoint } : {}),
        },
        RUN_TIMEOUT,
      );
      assert.equal(run.code, 0, run.stderr);
      const [, , kind, , , arch] = run.stdout.trim().split(' ');
      assert.deepEqual([kind, arch], [variant, 'arm64'], run.stdout);
    }
    // Each blob says which Node built it, for which architecture.
    const headers = await runContainer(
      {
        image: agent.ref,
        platform: ARM64,
        entrypoint: [
          '/nodejs/bin/node',
          '-e',
          `const fs = require('fs'); for (const b of ['/app/agent.blob', '/app/agent-gcp.blob']) { const h = Buffer.alloc(64); fs.readSync(fs.openSync(b), h, 0, 64, 0); console.log(h.toString('latin1').replace(/[^\\x20-\\x7e]+/g, ' ')); }`,
        ],
      },
      RUN_TIMEOUT,
    );
    assert.equal(headers.code, 0, headers.stderr);
    const version = process.version.slice(1);
    // Not trimmed: the space that ends the last header is part of what is matched, and the bytes after
    // it vary with the blob's contents (unprintable ones become that space).
    const lines = headers.stdout.split('\n').filter((l) => l !== '');
    assert.equal(lines.length, 2, headers.stdout);
    for (const line of lines) assert.match(line, new RegExp(` ${version} arm64 linux `));
    // And a blob runs only on the binary that made it: the amd64 image's is refused here.
    const { manifest } = builtImages();
    if (manifest.platforms.includes('linux/amd64')) {
      const dir = mkdtempSync('/dev/shm/secret-agent-blob-');
      chmodSync(dir, 0o777);
      try {
        const amd64 = platformImage(manifest, 'agent', 'linux/amd64');
        const copy = await runContainer({
          image: amd64.ref,
          platform: 'linux/amd64',
          mounts: [{ host: dir, container: '/out' }],
          entrypoint: [
            '/nodejs/bin/node',
            '-e',
            "require('fs').copyFileSync('/app/agent.blob', '/out/x64.blob')",
          ],
        });
        assert.equal(copy.code, 0, copy.stderr);
        assert.ok(readFileSync(join(dir, 'x64.blob')).length > 1_000_000);
        const foreign = await runContainer(
          {
            image: agent.ref,
            platform: ARM64,
            mounts: [{ host: dir, container: '/out', readOnly: true }],
            entrypoint: ['/nodejs/bin/node', '--snapshot-blob', '/out/x64.blob', '--', '--version'],
          },
          RUN_TIMEOUT,
        );
        assert.notEqual(foreign.code, 0, foreign.stdout);
        assert.doesNotMatch(foreign.stdout, /secret-agent/);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    }
  });

  describe('against moto', () => {
    let moto: Moto;
    let secrets: MotoSecrets;
    before(async () => {
      moto = await startMoto();
      secrets = motoSecrets(moto.endpoint);
    });
    after(async () => {
      secrets?.destroy();
      await moto?.stop();
    });

    it('the agent fetches one secret as uid 65532 (--network host) into the tmpfs volume, file 0400, exit 0', async () => {
      const value = canary('arm64');
      await secrets.put('arm64/db', value);
      using volume = emptyDirOnTmpfs();
      const run = await runContainer(
        {
          image: agent.ref,
          platform: ARM64,
          network: 'host',
          user: 65532,
          env: {
            ...MOTO_ENV,
            AWS_ENDPOINT_URL_SECRETS_MANAGER: moto.endpoint,
            SECRETS_DIR: '/secrets',
            SECRET_0_REF: 'aws:arm64/db',
            SECRET_0_FILENAME: 'db-password',
          },
          mounts: [{ host: volume.path, container: '/secrets' }],
        },
        RUN_TIMEOUT,
      );
      assert.equal(run.code, 0, run.stderr);
      assert.equal(run.stderr, '');
      assert.ok(run.logs.some((l) => l.msg === 'secrets written'));
      assert.equal(readFileSync(join(volume.path, 'db-password'), 'utf8'), value);
      const file = statSync(join(volume.path, 'db-password'));
      assert.equal(file.mode & 0o777, 0o400);
      assert.equal(file.uid, 65532);
    });
  });

  it('the webhook serves /healthz over TLS and injects the agent by the index digest it was given (one digest for every node); render takes it too', async () => {
    const { manifest } = builtImages();
    // As a platform team's overlay sets it: the published index, by digest.
    const agentImage = `registry.example/secret-agent/agent@${manifest.images.agent.index}`;
    const pair = await makeServingPair();
    using tls = certDir();
    tls.write(pair);
    const { port, container } = await startWebhookImage({ AGENT_IMAGE: agentImage }, pair, tls.dir, {
      image: { ref: webhook.ref, platform: ARM64 },
    });
    try {
      const health = await call(port, pair.ca, '/healthz');
      assert.equal(health.status, 200);
      const pod = basicPod({
        'secret-agent.io/secret-db': 'aws:prod/db',
        'secret-agent.io/aws-region': 'eu-west-1',
      });
      const answer = JSON.parse(
        (await call(port, pair.ca, '/mutate', { body: JSON.stringify(review(pod)) })).body,
      ) as { response: { allowed: boolean; patch?: string } };
      assert.equal(answer.response.allowed, true);
      const patched = mutate(pod, decodePatch(answer.response));
      validatePod(patched);
      const all = [...(patched.spec.initContainers ?? []), ...patched.spec.containers];
      const injected = all.filter((c) => c.name !== 'app');
      assert.ok(injected.length > 0, 'the agent is injected');
      for (const c of injected) assert.equal(c.image, agentImage, String(c.name));
      await container.kill('SIGTERM');
      assert.equal(await container.exited, 0, container.output().stderr);
    } finally {
      await container.kill('SIGKILL');
      await container.exited.catch(() => undefined);
    }
    const deployment = [
      'apiVersion: apps/v1',
      'kind: Deployment',
      'metadata: { name: app, namespace: apps }',
      'spec:',
      '  selector: { matchLabels: { app: app } }',
      '  template:',
      '    metadata:',
      '      labels: { app: app, secret-agent.io/inject: "true" }',
      '      annotations: { secret-agent.io/inject: "true", secret-agent.io/secret-db: "aws:prod/db" }',
      '    spec:',
      '      containers: [{ name: app, image: registry.example/app:1.0 }]',
      '',
    ].join('\n');
    const render = await runContainer(
      {
        image: webhook.ref,
        platform: ARM64,
        env: { AGENT_IMAGE: agentImage, AGENT_AWS_REGION: 'eu-west-1' },
        args: ['render', '-f', '-'],
        stdin: deployment,
      },
      RUN_TIMEOUT,
    );
    assert.equal(render.code, 0, render.stderr);
    assert.ok(render.stdout.includes(`image: ${agentImage}`), render.stdout);
  });
});
