/**
 * The env-vars wrapper (agent/native/env-exec.c) as the agent image ships it, on every platform:
 * /app/env-exec, compiled for that platform in Dockerfile.agent's native stage (arm64 under QEMU). Run
 * here as an app container runs it: PID 1 of an image without a shell (the agent's distroless one), as
 * uid 65532 with a read-only root, in front of the image's own Node, reading a secrets volume the agent's
 * writer (AtomicDir) filled. What the program does is tested from source in test/env-exec/; here, that
 * the image holds it, built for the right machine, and that it runs there.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { before, describe, it } from 'node:test';
import { ENV_EXEC_EXIT, ENV_EXEC_IMAGE_PATH } from '../../agent/contract/env-exec.ts';
import { platformImage, type PlatformImageRecord } from '../../images/manifest.ts';
import { PLATFORMS, requireEmulation } from '../../images/platforms.ts';
import { canary } from '../support/canary.ts';
import { envVolume } from '../env-exec/wrapper.ts';
import { assertStaticExecutable } from './elf.ts';
import { builtImages, emptyDirOnTmpfs, runContainer, startContainer, type ContainerSpec } from './podman.ts';

/** Under QEMU a Node start takes seconds; this bounds a hung run. */
const RUN_TIMEOUT = 180_000;
const NODE = '/nodejs/bin/node';
const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

/** The app: what it got, the set variables by length and hash only. */
const REPORT = `process.stdout.write(JSON.stringify({ pid: process.pid, arch: process.arch, uid: process.getuid(),
  argv: process.argv.slice(1), keep: process.env.KEEP,
  set: ['DB_PASSWORD', 'API_KEY'].map((n) => [process.env[n].length,
    require('node:crypto').createHash('sha256').update(process.env[n]).digest('hex')]) }))`;

for (const platform of PLATFORMS)
  describe(`the agent image’s env-exec on ${platform} (PID 1, uid 65532, read-only root, no shell)`, () => {
    let agent: PlatformImageRecord;
    const wrapper = (
      dir: string,
      args: readonly string[],
      extra: Partial<ContainerSpec> = {},
    ): ContainerSpec => ({
      image: agent.ref,
      platform,
      user: 65532,
      mounts: [{ host: dir, container: '/secrets', readOnly: true }],
      entrypoint: [ENV_EXEC_IMAGE_PATH, '--dir=/secrets', ...args],
      ...extra,
    });

    before(() => {
      requireEmulation(platform);
      agent = platformImage(builtImages().manifest, 'agent', platform);
    });

    it(`${ENV_EXEC_IMAGE_PATH} is a static ${platform} ELF executable, root's, mode 0555, that its user cannot write`, async () => {
      const size = await assertStaticExecutable(agent.ref, platform, ENV_EXEC_IMAGE_PATH, 0o555, RUN_TIMEOUT);
      console.log(`${platform}: ${ENV_EXEC_IMAGE_PATH} is ${size} bytes`);
    });

    it('sets the variables from the agent’s set and execs the image’s Node as PID 1, argv and env kept', async () => {
      using vol = emptyDirOnTmpfs();
      const values = { DB_PASSWORD: canary('db'), API_KEY: canary('api') };
      await (await envVolume(vol.path)).write(values, 0o444); // the app's uid is not the writer's here
      const run = await runContainer(
        wrapper(
          vol.path,
          ['--wait=30', '--set=DB_PASSWORD', '--set=API_KEY', '--', NODE, '-e', REPORT, 'arg one', '--'],
          {
            env: { KEEP: 'kept' },
          },
        ),
        RUN_TIMEOUT,
      );
      assert.equal(run.code, 0, run.stderr);
      assert.deepEqual(JSON.parse(run.stdout), {
        pid: 1,
        arch: platform === 'linux/amd64' ? 'x64' : 'arm64',
        uid: 65532,
        argv: ['arg one', '--'],
        keep: 'kept',
        set: Object.values(values).map((v) => [v.length, sha256(v)]),
      });
    });

    it('no set within --wait: 75 naming the variable', async () => {
      using vol = emptyDirOnTmpfs();
      const run = await runContainer(
        wrapper(vol.path, ['--wait=0', '--set=DB_PASSWORD', '--', NODE]),
        RUN_TIMEOUT,
      );
      assert.equal(run.code, ENV_EXEC_EXIT.timeout, run.stderr);
      assert.match(
        run.stderr,
        /^env-exec: no set from the agent in 0 s: "\/secrets\/\.\.data" is not there .*DB_PASSWORD not set\. Fix: .+\n$/,
      );
    });

    it('SIGTERM to PID 1 while it waits (podman kill, as the kubelet stops it): exits 143 with its line', async () => {
      using vol = emptyDirOnTmpfs();
      const container = startContainer(wrapper(vol.path, ['--wait=3600', '--set=DB_PASSWORD', '--', NODE]));
      try {
        // Its handler is installed once PID 1 catches SIGTERM (read with the image's Node, podman exec).
        const { podman } = builtImages();
        const catching = async () => {
          const r = await podman.runAsync(
            [
              'exec',
              container.name,
              NODE,
              '-e',
              `process.stdout.write(require('fs').readFileSync('/proc/1/status', 'utf8'))`,
            ],
            { check: false },
          );
          const cgt = /^SigCgt:\t([0-9a-f]+)$/m.exec(r.stdout)?.[1];
          return cgt !== undefined && ((BigInt(`0x${cgt}`) >> 14n) & 1n) === 1n;
        };
        for (let i = 0; i < 120 && !(await catching()); i++) await new Promise((r) => setTimeout(r, 500));
        await container.kill('SIGTERM');
        assert.equal(await container.exited, 128 + 15, container.output().stderr);
        assert.equal(
          container.output().stderr,
          "env-exec: SIGTERM while waiting for the agent's set; exiting 143\n",
        );
      } finally {
        await container.kill('SIGKILL');
        await container.exited.catch(() => undefined);
      }
    });
  });
