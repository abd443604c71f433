/**
 * The resident (agent/native/resident.c) as the agent image ships it, on every platform: /app/resident,
 * compiled for that platform in Dockerfile.agent's native stage (arm64 under QEMU), run as the agent
 * runs (uid 65532, read-only root, no capabilities, no new privileges: test/image/podman.ts), with the
 * image's own Node as its run. What the program does is tested from source in test/resident/; here,
 * that the image holds it, built for the right machine, and that it runs there.
 */
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { platformImage, type PlatformImageRecord } from '../../images/manifest.ts';
import { PLATFORMS, requireEmulation } from '../../images/platforms.ts';
import { rawRequest } from '../resident/resident-process.ts';
import { freePort } from '../support/moto.ts';
import { eventually } from '../support/run-agent.ts';
import { assertStaticExecutable } from './elf.ts';
import { builtImages, runContainer, startContainer, type ContainerSpec } from './podman.ts';

/** Under QEMU a Node start takes seconds; this bounds a hung run. */
const RUN_TIMEOUT = 180_000;
const NODE = '/nodejs/bin/node';

/** What a run writes on fd 4 for a good outcome (docs/design.md "The resident"). */
const GOOD_RUN = `
const fs = require('node:fs');
const handedIn = fs.readFileSync(3).length;
const metrics = 'image_run_seen{arch="' + process.arch + '",uid="' + process.getuid() + '",fds="' + process.env.AGENT_HANDOFF_FDS + '",state_bytes="' + handedIn + '"} 1\\n';
fs.writeSync(4, 'secret-agent-outcome 1\\nready 1\\nnext-ms 3600000\\nmetrics ' + Buffer.byteLength(metrics) + '\\n' + metrics + '\\nend\\n');
`;

for (const platform of PLATFORMS)
  describe(`the agent image’s resident on ${platform} (uid 65532, read-only root, no capabilities)`, () => {
    let agent: PlatformImageRecord;
    /** This platform's image, its entrypoint replaced by the resident running `run`. */
    const resident = (run: readonly string[], extra: Partial<ContainerSpec> = {}): ContainerSpec => ({
      image: agent.ref,
      platform,
      user: 65532,
      entrypoint: ['/app/resident', '--', ...run],
      ...extra,
    });

    before(() => {
      requireEmulation(platform);
      agent = platformImage(builtImages().manifest, 'agent', platform);
    });

    it(`/app/resident is a static ${platform} ELF executable, root's, mode 0511 (execute-only), that its user can neither read nor write`, async () => {
      await assertStaticExecutable(agent.ref, platform, '/app/resident', 0o511, RUN_TIMEOUT);
    });

    it('a bad AGENT_RUN_DEADLINE: exit 2 naming it and the fix, before any run', async () => {
      const run = await runContainer(
        resident([NODE, '-e', 'process.stdout.write("a run started")'], {
          env: { AGENT_RUN_DEADLINE: '0s' },
        }),
        RUN_TIMEOUT,
      );
      assert.equal(run.code, 2, run.stderr);
      assert.equal(run.stdout, '', 'no run started');
      assert.match(
        run.stderr,
        /^secret-agent resident: AGENT_RUN_DEADLINE: "0s" is not a duration from 1s to 1h\. Fix: .+\n$/,
      );
    });

    it('with a run that fails (the image’s Node, exit 1), keeps serving: /healthz 200, /readyz 503, the failures counted; SIGTERM ends it with 0', async () => {
      const port = await freePort();
      const container = startContainer(
        resident([NODE, '-e', 'process.exit(1)'], {
          network: 'host',
          env: { AGENT_HTTP_ADDR: `127.0.0.1:${port}` },
        }),
      );
      try {
        const metrics = await eventually(
          async () => {
            const answer = await rawRequest(port, 'GET /metrics HTTP/1.1\r\n\r\n').catch(() => undefined);
            return answer?.body.match(/^secret_agent_resident_runs_total\{outcome="failed"\} [1-9]\d*$/m)
              ? answer.body
              : undefined;
          },
          'a failed run counted on /metrics',
          RUN_TIMEOUT,
        );
        assert.match(metrics, /^secret_agent_resident_runs_total\{outcome="ok"\} 0$/m);
        const health = await rawRequest(port, 'GET /healthz HTTP/1.1\r\n\r\n');
        assert.deepEqual([health.status, health.body], [200, 'ok\n']);
        const ready = await rawRequest(port, 'GET /readyz HTTP/1.1\r\n\r\n');
        assert.deepEqual([ready.status, ready.body], [503, 'secrets not written yet\n']);
        await container.kill('SIGTERM');
        assert.equal(await container.exited, 0, container.output().stderr);
        assert.match(
          container.output().stderr,
          /secret-agent resident: run 1 exited 1; keeping the last good outcome/,
        );
      } finally {
        await container.kill('SIGKILL');
        await container.exited.catch(() => undefined);
      }
    });

    it('a good run of the image’s Node, as 65532 with the handoff fds, makes it ready and serves its metrics', async () => {
      const port = await freePort();
      const container = startContainer(
        resident([NODE, '-e', GOOD_RUN], { network: 'host', env: { AGENT_HTTP_ADDR: `127.0.0.1:${port}` } }),
      );
      try {
        await eventually(
          async () => {
            const answer = await rawRequest(port, 'GET /readyz HTTP/1.1\r\n\r\n').catch(() => undefined);
            return answer?.status === 200 ? true : undefined;
          },
          '/readyz 200 after the good run',
          RUN_TIMEOUT,
        );
        const metrics = await rawRequest(port, 'GET /metrics HTTP/1.1\r\n\r\n');
        assert.equal(metrics.status, 200);
        const arch = platform === 'linux/amd64' ? 'x64' : 'arm64';
        assert.match(
          metrics.body,
          new RegExp(`^image_run_seen\\{arch="${arch}",uid="65532",fds="3,4",state_bytes="0"\\} 1\\n`),
        );
        assert.match(metrics.body, /^secret_agent_resident_runs_total\{outcome="ok"\} 1$/m);
        await container.kill('SIGTERM');
        assert.equal(await container.exited, 0, container.output().stderr);
      } finally {
        await container.kill('SIGKILL');
        await container.exited.catch(() => undefined);
      }
    });
  });
