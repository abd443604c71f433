import assert from 'node:assert/strict';
import { lstatSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { canary } from '../support/canary.ts';
import { freePort, MOTO_ENV, motoSecrets, startMoto, type Moto, type MotoSecrets } from '../support/moto.ts';
import { eventually, runAgent } from '../support/run-agent.ts';
import { GCP_INIT_COMMAND, SIDECAR_COMMAND } from '../../webhook/render/agent-containers.ts';
import { startGcpSecretManagerFake } from '../fakes/gcp-secret-manager.ts';
import { builtImages, emptyDirOnTmpfs, runContainer, startContainer, type ContainerSpec } from './podman.ts';

/** The image's user (distroless `nonroot`), and a pod's own runAsUser the webhook passes on. */
const IMAGE_UID = 65532;
const POD_UID = 1000;

describe('the agent image, run by podman (read-only root, no capabilities, no new privileges)', () => {
  let image: string;
  let moto: Moto;
  let secrets: MotoSecrets;
  let value: string;

  before(async () => {
    image = builtImages().manifest.images.agent.ref;
    moto = await startMoto();
    secrets = motoSecrets(moto.endpoint);
    value = canary('image');
    await secrets.put('prod/db', value);
  });
  after(async () => {
    secrets?.destroy();
    await moto?.stop();
  });

  const agent = (
    volume: string,
    env: Record<string, string> = {},
    extra: Partial<ContainerSpec> = {},
  ): ContainerSpec => ({
    image,
    network: 'host',
    env: {
      ...MOTO_ENV,
      AWS_ENDPOINT_URL_SECRETS_MANAGER: moto.endpoint,
      SECRETS_DIR: '/secrets',
      SECRET_0_REF: 'aws:prod/db',
      SECRET_0_FILENAME: 'db-password',
      ...env,
    },
    mounts: [{ host: volume, container: '/secrets' }],
    ...extra,
  });

  for (const uid of [IMAGE_UID, POD_UID])
    it(`init as uid ${uid}: fetches from moto into the tmpfs volume, files 0400 owned by ${uid}, exit 0`, async () => {
      using volume = emptyDirOnTmpfs();
      const run = await runContainer(agent(volume.path, {}, { user: uid }));
      assert.equal(run.code, 0, run.stderr);
      assert.equal(run.stderr, '');
      assert.ok(run.logs.some((l) => l.msg === 'secrets written'));
      assert.equal(readFileSync(join(volume.path, 'db-password'), 'utf8'), value);
      const file = statSync(join(volume.path, 'db-password'));
      assert.equal(file.mode & 0o777, 0o400);
      assert.equal(file.uid, uid);
      for (const entry of readdirSync(volume.path))
        assert.equal(lstatSync(join(volume.path, entry)).uid, uid, `${entry} belongs to the agent's user`);
    });

  it('--version, which the webhook Deployment’s agent-image init container runs: the version, no env or volume needed', async () => {
    // As deploy/base does: args after the image's entrypoint, which runs the start-up snapshot.
    const run = await runContainer({ image, args: ['--version'] });
    assert.equal(run.code, 0, run.stderr);
    assert.equal(run.stdout, `secret-agent ${builtImages().manifest.version}\n`);
    assert.equal(run.stderr, '');
  });

  describe('start-up snapshots (the entrypoint: node --snapshot-blob /app/agent.blob --; GCP_INIT_COMMAND) and their fallback', () => {
    it('the plain bundle, `node /app/agent.js`, fetches the same secret', async () => {
      using volume = emptyDirOnTmpfs();
      const run = await runContainer(agent(volume.path, {}, { entrypoint: SIDECAR_COMMAND }));
      assert.equal(run.code, 0, run.stderr);
      assert.equal(readFileSync(join(volume.path, 'db-password'), 'utf8'), value);
    });

    for (const [blob, entrypoint, variant] of [
      ['the entrypoint’s', undefined, 'default'],
      ['the GCP one’s (GCP_INIT_COMMAND)', GCP_INIT_COMMAND, 'with-gcp'],
    ] as const)
      it(`a run from ${blob} snapshot draws fresh randomness (no crypto pool or V8 random state was frozen into it) and is the ${variant} variant`, async () => {
        const draws = await Promise.all(
          [1, 2].map(() =>
            runContainer({ image, args: ['--check-snapshot'], ...(entrypoint ? { entrypoint } : {}) }),
          ),
        );
        // agent/snapshot.ts printSnapshotCheck: uuid, int, variant, Math.random, pid, arch, clock.
        for (const d of draws)
          assert.match(d.stdout, /^[0-9a-f-]{36} \d+ [\w-]+ 0\.\d+ [1-9]\d* \w+ \d{13}\n$/, d.stderr);
        const [a, b] = draws.map((d) => d.stdout.trim().split(' '));
        assert.notEqual(a![0], b![0], 'crypto.randomUUID');
        assert.notEqual(a![1], b![1], 'crypto.randomInt');
        // The blob is built with a fixed V8 random seed (images/build-snapshot.ts): a run's own is fresh.
        assert.notEqual(a![3], b![3], 'Math.random');
        assert.equal(a![2], variant);
      });

    it('GCP_INIT_COMMAND, what the webhook runs for a pod that reads GCP, fetches from GCP (the REST fake) and from AWS', async () => {
      const gcp = await startGcpSecretManagerFake();
      try {
        const gcpValue = canary('image-gcp');
        gcp.addVersion('image-project', 'api-key', gcpValue);
        using volume = emptyDirOnTmpfs();
        const run = await runContainer(
          agent(
            volume.path,
            {
              GCP_SECRET_MANAGER_ENDPOINT: gcp.restEndpoint,
              GCE_METADATA_HOST: '127.0.0.1:9',
              GOOGLE_APPLICATION_CREDENTIALS: '/nonexistent/adc.json',
              SECRET_1_REF: 'projects/image-project/secrets/api-key',
              SECRET_1_FILENAME: 'api-key',
            },
            { entrypoint: GCP_INIT_COMMAND },
          ),
        );
        assert.equal(run.code, 0, run.stderr);
        assert.equal(run.stderr, '');
        assert.equal(readFileSync(join(volume.path, 'api-key'), 'utf8'), gcpValue);
        assert.equal(readFileSync(join(volume.path, 'db-password'), 'utf8'), value);
        assert.ok(!run.stdout.includes(gcpValue) && !run.stdout.includes(value), 'no value in the logs');
      } finally {
        await gcp.stop();
      }
    });
  });

  // The plain bundle's: what a sidecar runs (the webhook's SIDECAR_COMMAND); the entrypoint's snapshot needs none.
  describe('V8 compile cache (NODE_COMPILE_CACHE=/app/compile-cache, keyed by uid)', () => {
    const plain = { entrypoint: SIDECAR_COMMAND };
    // NODE_DEBUG_NATIVE=COMPILE_CACHE makes Node say, per module, whether the cache was used.
    const accepted = /V8 code cache for ESM file:\/\/\/app\/agent-chunks\/\S+ was accepted/;

    it('the image holds a filled cache for 65532 and 1000 (COMPILE_CACHE_UIDS), and none for root', async () => {
      const run = await runContainer({
        image,
        entrypoint: [
          '/nodejs/bin/node',
          '-e',
          "console.log(JSON.stringify(require('fs').readdirSync('/app/compile-cache')))",
        ],
      });
      assert.equal(run.code, 0, run.stderr);
      const dirs = JSON.parse(run.stdout) as string[];
      assert.deepEqual(dirs.map((d) => d.split('-').at(-1)).sort(), ['1000', '65532']);
    });

    for (const uid of [IMAGE_UID, POD_UID])
      it(`a pod running the agent as ${uid} uses it`, async () => {
        using volume = emptyDirOnTmpfs();
        const run = await runContainer(
          agent(volume.path, { NODE_DEBUG_NATIVE: 'COMPILE_CACHE' }, { user: uid, ...plain }),
        );
        assert.equal(run.code, 0, run.stderr);
        assert.match(run.stderr, accepted);
        assert.doesNotMatch(run.stderr, /rejected/);
      });

    it('another uid (4242) runs just as well without it, and prints nothing about it', async () => {
      using volume = emptyDirOnTmpfs();
      const quiet = await runContainer(agent(volume.path, {}, { user: 4242, ...plain }));
      assert.equal(quiet.code, 0, quiet.stderr);
      assert.equal(quiet.stderr, '');
      using second = emptyDirOnTmpfs();
      const debug = await runContainer(
        agent(second.path, { NODE_DEBUG_NATIVE: 'COMPILE_CACHE' }, { user: 4242, ...plain }),
      );
      assert.equal(debug.code, 0, debug.stderr);
      assert.doesNotMatch(debug.stderr, accepted);
    });
  });

  it('cannot write anywhere but the volume: SECRETS_DIR elsewhere is refused with the SECRETS_DIR error (exit 2)', async () => {
    using volume = emptyDirOnTmpfs();
    const cases: [string, Partial<ContainerSpec>, RegExp][] = [
      // Root-owned in the image: refused for the user before the read-only root is even reached.
      [
        '/app',
        {},
        /SECRETS_DIR: "\/app" is not writable by the agent \(EACCES\)\. Fix: mount a writable emptyDir there/,
      ],
      ['/', {}, /SECRETS_DIR: "\/" is not writable by the agent \(EACCES\)/],
      // The default, for Flyte's contract: on a read-only root, only a mounted volume works there.
      ['/tmp', {}, /SECRETS_DIR: "\/tmp" is not writable by the agent \(EROFS\)/],
      [
        '/missing',
        {},
        /SECRETS_DIR: "\/missing" is not an existing directory\. Fix: mount the secrets volume there/,
      ],
      // The volume itself mounted read-only.
      [
        '/readonly-volume',
        { mounts: [{ host: volume.path, container: '/readonly-volume', readOnly: true }] },
        /SECRETS_DIR: "\/readonly-volume" is not writable by the agent \(EROFS\)/,
      ],
    ];
    for (const [dir, extra, message] of cases) {
      const run = await runContainer(agent(volume.path, { SECRETS_DIR: dir }, extra));
      assert.equal(run.code, 2, `${dir}: ${run.stderr}`);
      assert.match(run.stderr, message, dir);
    }
    assert.deepEqual(readdirSync(volume.path), [], 'nothing was written anywhere');
  });

  it('the container itself: every path but the volume refuses a write, whatever the process tries', async () => {
    using volume = emptyDirOnTmpfs();
    const probe = `
      const fs = require('node:fs');
      const out = {};
      for (const dir of ['/', '/app', '/app/agent-chunks', '/app/compile-cache', '/nodejs/bin', '/etc', '/usr/lib', '/home/nonroot', '/tmp', '/var/tmp', '/run', '/dev', '/secrets']) {
        try { fs.writeFileSync(dir + '/written-by-probe', 'x'); out[dir] = 'written'; } catch (e) { out[dir] = e.code; }
      }
      try { fs.appendFileSync('/app/agent.js', '//'); out['/app/agent.js'] = 'written'; } catch (e) { out['/app/agent.js'] = e.code; }
      console.log(JSON.stringify(out));`;
    const run = await runContainer(agent(volume.path, {}, { entrypoint: ['/nodejs/bin/node', '-e', probe] }));
    assert.equal(run.code, 0, run.stderr);
    const result = JSON.parse(run.stdout) as Record<string, string>;
    assert.equal(result['/secrets'], 'written', 'the volume is writable');
    for (const [path, outcome] of Object.entries(result)) {
      if (path === '/secrets') continue;
      assert.ok(['EROFS', 'EACCES', 'ENOENT', 'EPERM'].includes(outcome), `${path}: ${outcome}`);
    }
    assert.deepEqual(readdirSync(volume.path), ['written-by-probe']);
  });

  it('sidecar: ready once written, a rotation in moto reaches the files, SIGTERM to PID 1 exits 0 with the files intact', async (t) => {
    using volume = emptyDirOnTmpfs();
    const port = await freePort();
    await secrets.put('rotating', canary('before'));
    const container = startContainer(
      agent(volume.path, {
        AGENT_MODE: 'sidecar',
        AGENT_HTTP_ADDR: `127.0.0.1:${port}`,
        REFRESH_INTERVAL: '1s',
        SECRET_0_REF: 'aws:rotating',
      }),
    );
    const get = async (path: string) => {
      try {
        const res = await fetch(`http://127.0.0.1:${port}${path}`);
        return { status: res.status, body: await res.text() };
      } catch {
        return undefined;
      }
    };
    const read = () => readFileSync(join(volume.path, 'db-password'), 'utf8');
    try {
      await eventually(
        async () => ((await get('/readyz'))?.status === 200 ? true : undefined),
        'readyz 200',
        30_000,
      );
      assert.match(read(), /-before-/);
      const rotated = canary('after');
      await secrets.put('rotating', rotated);
      await eventually(
        () => (read() === rotated ? true : undefined),
        'the rotated value in the file',
        30_000,
      );
      assert.equal((await get('/healthz'))?.status, 200);
      assert.match((await get('/metrics'))!.body, /^secret_agent_rotations_total [1-9]\d*$/m);

      const stopping = Date.now();
      await container.kill('SIGTERM');
      const code = await container.exited;
      t.diagnostic(`SIGTERM to exit: ${Date.now() - stopping} ms (podman kill included)`);
      assert.equal(code, 0, container.output().stderr);
      assert.ok(container.logs().some((l) => l.msg === 'stopping' && l.why === 'SIGTERM'));
      assert.equal(read(), rotated, 'files stay after the stop');
    } finally {
      await container.kill('SIGKILL');
      await container.exited.catch(() => undefined);
    }
  });

  describe('bad input: the same errors and exit codes as the bundle', () => {
    const cases: [string, Record<string, string>][] = [
      ['no env at all', {}],
      ['a reference no provider understands', { SECRET_0_REF: 'nope:thing', SECRET_0_FILENAME: 'x' }],
      [
        'an escaping file name and a bad mode',
        { SECRET_0_REF: 'aws:db', SECRET_0_FILENAME: '../x', FILE_MODE: '9' },
      ],
      [
        'two forms at once and a bad duration',
        { SECRET_ARN: 'aws:db', SECRET_0_REF: 'aws:x', REFRESH_INTERVAL: 'fast' },
      ],
    ];
    for (const [name, env] of cases)
      it(name, async () => {
        using volume = emptyDirOnTmpfs();
        const [inImage, bundle] = await Promise.all([
          runContainer({ image, env, mounts: [{ host: volume.path, container: '/tmp' }] }),
          runAgent(env),
        ]);
        assert.equal(bundle.code, 2, bundle.stderr);
        assert.equal(inImage.code, bundle.code);
        assert.equal(inImage.stderr, bundle.stderr);
        assert.match(inImage.stderr, /^secret-agent: invalid configuration\n( {2}\S+: .+ Fix: .+\n)+$/);
        assert.deepEqual(readdirSync(volume.path), [], 'nothing written');
      });
  });
});
