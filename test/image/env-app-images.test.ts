/**
 * The env-var tests' app images (env-app-images.ts), run directly, without the wrapper: the app is
 * what the wrapper tests take it to be (PID 1, its argv byte for byte, a variable's length and never
 * its value, signals and exit codes), on both platforms (arm64 under QEMU), and each image is the kind
 * it stands in for: no shell in the distroless and Alpine ones, musl's loader or glibc's as the
 * interpreter, the platform's machine in the ELF header.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { requirePodman } from '../../images/container-engine.ts';
import { PLATFORM_NAMES, PLATFORMS } from '../../images/platforms.ts';
import { canary } from '../support/canary.ts';
import { readElf } from './env-app-elf.ts';
import { APP_KINDS, APP_PATH, APP_USER, envAppImages, PLATFORM_ELF } from './env-app-images.ts';
import {
  argBytes,
  assertTermReachesApp,
  AWKWARD_ARGS,
  fileFromImage,
  imagePaths,
  runApp,
  startApp,
  type StartedEvent,
} from './env-app-run.ts';

const podman = requirePodman();
const images = envAppImages();

for (const platform of PLATFORMS)
  for (const kind of APP_KINDS)
    describe(`the ${kind} app image, ${platform}`, () => {
      const image = images[kind][platform];
      const elf = PLATFORM_ELF[platform];

      it("reports PID 1, its argv byte for byte and a variable's length, never its value", async () => {
        const secret = canary('db-url');
        const run = await runApp(podman, {
          image,
          platform,
          env: { REPORT_VARS: 'DB_URL,NOT_SET', DB_URL: secret, REPORT_EXIT: '0' },
          args: AWKWARD_ARGS,
        });
        assert.equal(run.code, 0, run.stderr);
        assert.ok(!run.stdout.includes(secret) && !run.stderr.includes(secret));
        const lines = run.stdout.split('\n').filter((l) => l !== '');
        assert.equal(lines.length, 1, `one line, the start report: ${run.stdout}`);
        assert.match(lines[0]!, /^[\x20-\x7e]*$/, 'every byte outside printable ASCII escaped');
        const started = run.events[0] as StartedEvent;
        assert.equal(started.event, 'started');
        assert.equal(started.pid, 1);
        assert.equal(started.uid, APP_USER[kind]);
        assert.deepEqual(
          started.argv.map(argBytes),
          [APP_PATH, ...AWKWARD_ARGS].map((a) => Buffer.from(a)),
        );
        assert.deepEqual(started.lengths, { DB_URL: Buffer.byteLength(secret), NOT_SET: null });
        assert.ok(started.env_names.includes('DB_URL'), `DB_URL among ${started.env_names.join(' ')}`);
        assert.ok(!started.env_names.includes('NOT_SET'));
      });

      it('gets the TERM a kubelet sends and exits 143', async () => {
        await assertTermReachesApp(startApp(podman, { image, platform, env: { REPORT_MAX_SECONDS: '60' } }));
      });

      it('passes its exit code on', async () => {
        const run = await runApp(podman, { image, platform, env: { REPORT_EXIT: '7' } });
        assert.equal(run.code, 7, run.stderr);
        assert.equal(run.events[0]?.event, 'started');
      });

      it(`is a ${platform} image, its app linked as ${kind} images link theirs`, () => {
        const arch = podman.run(['image', 'inspect', '--format', '{{.Architecture}}', image]).stdout.trim();
        assert.equal(arch, PLATFORM_NAMES[platform].arch);
        const app = readElf(fileFromImage(podman, image, APP_PATH));
        assert.equal(app.machine, elf.machine);
        if (kind === 'distroless') {
          assert.equal(app.interpreter, undefined, 'static: no loader');
          assert.equal(app.dynamic, false, 'static: no dynamic section');
        } else {
          assert.equal(app.interpreter, kind === 'alpine' ? elf.musl : elf.glibc);
          const loader = readElf(fileFromImage(podman, image, app.interpreter!));
          assert.equal(loader.machine, elf.machine);
          assert.equal(loader.type, 3, 'the loader is a shared object');
        }
      });

      it(kind === 'debian' ? 'has /bin/sh' : 'has no shell, nothing but the app', async () => {
        const sh = await runApp(podman, {
          image,
          platform,
          entrypoint: ['/bin/sh', '-c', 'exit 0'],
        });
        if (kind === 'debian') {
          assert.equal(sh.code, 0, sh.stderr);
          return;
        }
        assert.equal(sh.code, 127, 'podman: the entrypoint is not there');
        assert.match(sh.stderr, /\/bin\/sh.*no such file or directory/);
        const files = imagePaths(podman, image).filter((p) => !p.endsWith('/'));
        assert.deepEqual(
          files.sort(),
          kind === 'alpine' ? ['app/report', elf.musl.slice(1)] : ['app/report'],
        );
      });
    });
