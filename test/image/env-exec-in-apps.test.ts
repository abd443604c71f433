/**
 * The env-exec wrapper (agent/native/env-exec.c) in the app images it must work in (issue 32's
 * acceptance): distroless (static, no shell, no libc), Alpine (musl's loader, no shell) and Debian
 * (glibc), amd64 and arm64 (QEMU). Each container runs as the webhook's patch runs an app container:
 * the wrapper at ENV_EXEC_APP_PATH (the exec volume, read-only), its arguments from envExecCommand, the
 * secrets volume read-only, written by the agent's own writer on tmpfs, hardened as podman.ts runs
 * containers. The app's first line (env-app/report.c) shows what it got: the variable, by length;
 * its argv, exactly its own command; PID 1. Signals reach it, its exit code comes back, and a value
 * never appears in any output.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { ENV_EXEC_APP_PATH, ENV_EXEC_EXIT, envExecCommand } from '../../agent/contract/env-exec.ts';
import { requirePodman } from '../../images/container-engine.ts';
import { PLATFORMS, type Platform } from '../../images/platforms.ts';
import { canary } from '../support/canary.ts';
import { readElf } from './env-app-elf.ts';
import { APP_KINDS, APP_PATH, APP_USER, envAppImages, PLATFORM_ELF, type AppKind } from './env-app-images.ts';
import {
  argBytes,
  assertTermReachesApp,
  AWKWARD_ARGS,
  runApp,
  startApp,
  type StartedEvent,
} from './env-app-run.ts';
import { envExecFor, writeEnvSet } from './env-app-wrapper.ts';
import { emptyDirOnTmpfs, type ContainerSpec } from './podman.ts';

const podman = requirePodman();
const images = envAppImages();
const MOUNT = '/secrets';
const COMMAND = [APP_PATH, ...AWKWARD_ARGS];

/** The app container as the webhook's patch makes it: the wrapper first, then the app's own command. */
function wrapped(
  kind: AppKind,
  platform: Platform,
  volume: string,
  names: readonly string[],
  env: Record<string, string>,
  waitSeconds = 10,
): ContainerSpec {
  const [wrapper, ...args] = envExecCommand(MOUNT, waitSeconds, names, COMMAND);
  return {
    image: images[kind][platform],
    platform,
    env,
    mounts: [
      { host: envExecFor(platform), container: ENV_EXEC_APP_PATH, readOnly: true },
      { host: volume, container: MOUNT, readOnly: true },
    ],
    entrypoint: [wrapper!, ...args],
  };
}

for (const platform of PLATFORMS)
  for (const kind of APP_KINDS)
    describe(`env-exec in the ${kind} app image, ${platform}`, () => {
      it('gives the app the variable at its first instruction, its own argv and PID 1', async () => {
        // A wrapper of this machine's platform would run in another platform's image too, natively.
        const wrapper = readElf(readFileSync(envExecFor(platform)));
        assert.equal(wrapper.machine, PLATFORM_ELF[platform].machine, `a ${platform} wrapper`);
        assert.equal(wrapper.interpreter, undefined, 'static: it runs in any image');
        using volume = emptyDirOnTmpfs();
        const secret = canary('db-url');
        await writeEnvSet(volume.path, { DB_URL: secret }, APP_USER[kind]);
        const run = await runApp(
          podman,
          wrapped(kind, platform, volume.path, ['DB_URL'], {
            REPORT_VARS: 'DB_URL,NOT_SET',
            REPORT_EXIT: '0',
            DB_URL: 'inherited, to be replaced',
          }),
        );
        assert.equal(run.code, 0, run.stderr);
        assert.ok(!run.stdout.includes(secret) && !run.stderr.includes(secret));
        assert.equal(run.stderr, '', 'the wrapper says nothing when all is well');
        const started = run.events[0] as StartedEvent;
        assert.equal(started.event, 'started', run.stdout);
        assert.equal(started.pid, 1, 'the app is PID 1: the wrapper exec()d it');
        assert.equal(started.uid, APP_USER[kind]);
        assert.deepEqual(
          started.argv.map(argBytes),
          COMMAND.map((a) => Buffer.from(a)),
          'argv is exactly the app’s own command',
        );
        assert.deepEqual(started.lengths, { DB_URL: Buffer.byteLength(secret), NOT_SET: null });
        assert.equal(
          started.env_names.filter((n) => n === 'DB_URL').length,
          1,
          'set once, over the inherited one',
        );
        assert.ok(started.env_names.includes('REPORT_VARS'), 'the rest of the env kept');
      });

      it('lets the TERM a kubelet sends reach the app, whose 143 comes back', async () => {
        using volume = emptyDirOnTmpfs();
        await writeEnvSet(volume.path, { DB_URL: canary('db-url') }, APP_USER[kind]);
        const app = startApp(
          podman,
          wrapped(kind, platform, volume.path, ['DB_URL'], {
            REPORT_VARS: 'DB_URL',
            REPORT_MAX_SECONDS: '60',
          }),
        );
        const started = (await app.waitForEvent('started').catch(async (e: unknown) => {
          await app.kill('SIGKILL');
          throw e;
        })) as StartedEvent;
        assert.equal(started.pid, 1);
        await assertTermReachesApp(app);
      });

      it('passes the app’s exit code on', async () => {
        using volume = emptyDirOnTmpfs();
        await writeEnvSet(volume.path, { DB_URL: canary('db-url') }, APP_USER[kind]);
        const run = await runApp(
          podman,
          wrapped(kind, platform, volume.path, ['DB_URL'], { REPORT_VARS: 'DB_URL', REPORT_EXIT: '7' }),
        );
        assert.equal(run.code, 7, run.stderr);
        assert.equal(run.events[0]?.event, 'started');
      });

      it('never starts the app without its variables: the wait ends in its own exit code, naming the variable', async () => {
        using volume = emptyDirOnTmpfs();
        await writeEnvSet(volume.path, { DB_URL: canary('db-url') }, APP_USER[kind]);
        const run = await runApp(
          podman,
          wrapped(kind, platform, volume.path, ['DB_URL', 'NOT_WRITTEN'], { REPORT_EXIT: '0' }, 1),
        );
        assert.equal(run.code, ENV_EXEC_EXIT.timeout, run.stderr);
        assert.deepEqual(run.events, [], 'the app never ran');
        assert.match(run.stderr, /NOT_WRITTEN/);
      });
    });
