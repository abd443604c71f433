import assert from 'node:assert/strict';
import {
  chmodSync,
  chownSync,
  lstatSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { canary } from '../support/canary.ts';
import { memoryDir, ROOT } from '../support/run-agent.ts';
import { IMAGE_UID, requestInside, runSandboxed, startSandboxed, type SandboxSpec } from './sandbox.ts';

const isRoot = process.getuid?.() === 0;
const SECRET_SOURCE = '/run/secrets/db-password';

/** The Dockerfile.agent step that fills the V8 compile cache: import every chunk, then flush. */
const PREFILL =
  "import { readdirSync } from 'node:fs'; import { flushCompileCache } from 'node:module'; for (const f of readdirSync('/app/agent-chunks')) if (f.endsWith('.js')) await import('/app/agent-chunks/' + f); flushCompileCache();";

describe(
  'the agent bundle, run as its image runs it (bubblewrap: uid 65532, read-only root, loopback only)',
  { skip: !isRoot && 'switching to uid 65532 needs root' },
  () => {
    let work: string;
    let source: string;
    let value: string;

    before(() => {
      work = mkdtempSync('/dev/shm/secret-agent-image-');
      chmodSync(work, 0o755);
      source = join(work, 'db-password');
      value = canary('image');
      writeFileSync(source, value, { mode: 0o444 });
    });
    after(() => rmSync(work, { recursive: true, force: true }));

    const agent = (
      volume: string,
      env: Record<string, string>,
      extra: Partial<SandboxSpec> = {},
    ): SandboxSpec => ({
      image: 'agent',
      env: {
        SECRETS_DIR: '/secrets',
        SECRET_0_REF: `file:${SECRET_SOURCE}`,
        SECRET_0_FILENAME: 'db-password',
        ...env,
      },
      readOnly: [[source, SECRET_SOURCE], ...(extra.readOnly ?? [])],
      writable: [[volume, '/secrets'], ...(extra.writable ?? [])],
      ...(extra.command ? { command: extra.command } : {}),
    });

    it('init: writes the files into the volume, owned by 65532 with mode 0400, and exits 0', async () => {
      using volume = memoryDir(IMAGE_UID);
      const run = await runSandboxed(agent(volume.path, {}));
      assert.equal(run.code, 0, run.stderr);
      assert.equal(run.stderr, '');
      assert.ok(run.logs.some((l) => l.msg === 'secrets written'));
      assert.equal(readFileSync(join(volume.path, 'db-password'), 'utf8'), value);
      const file = statSync(join(volume.path, 'db-password'));
      assert.equal(file.mode & 0o777, 0o400);
      assert.equal(file.uid, IMAGE_UID);
      assert.equal(file.gid, IMAGE_UID);
      for (const entry of readdirSync(volume.path)) {
        const info = lstatSync(join(volume.path, entry));
        assert.equal(info.uid, IMAGE_UID, `${entry} belongs to the image's user`);
      }
    });

    it('cannot write anywhere but the volume: the bundle dir, the root and /tmp are refused with the SECRETS_DIR error (exit 2)', async () => {
      using volume = memoryDir(IMAGE_UID);
      const cases: [string, Partial<SandboxSpec>, RegExp][] = [
        [
          '/app',
          {},
          /SECRETS_DIR: "\/app" is not writable by the agent \(EROFS\)\. Fix: mount a writable emptyDir there/,
        ],
        ['/', {}, /SECRETS_DIR: "\/" is not writable by the agent \(EROFS\)/],
        [
          '/tmp',
          {},
          /SECRETS_DIR: "\/tmp" is not an existing directory\. Fix: mount the secrets volume there/,
        ],
        // The volume itself mounted read-only.
        [
          '/readonly-volume',
          { readOnly: [[volume.path, '/readonly-volume']] },
          /SECRETS_DIR: "\/readonly-volume" is not writable by the agent \(EROFS\)/,
        ],
      ];
      for (const [dir, extra, message] of cases) {
        const run = await runSandboxed(agent(volume.path, { SECRETS_DIR: dir }, extra));
        assert.equal(run.code, 2, `${dir}: ${run.stderr}`);
        assert.match(run.stderr, message, dir);
      }
      assert.deepEqual(readdirSync(volume.path), [], 'nothing was written anywhere');
    });

    it('the sandbox itself: every path but the volume refuses a write, whatever the process tries', async () => {
      using volume = memoryDir(IMAGE_UID);
      const probe = `
      const fs = require('node:fs');
      const out = {};
      for (const dir of ['/', '/app', '/app/agent-chunks', '/nodejs/bin', '/usr', '/usr/lib', '/dev', '/dev/shm', '/tmp', '/run/secrets', '/secrets']) {
        try { fs.writeFileSync(dir + '/written-by-probe', 'x'); out[dir] = 'written'; } catch (e) { out[dir] = e.code; }
      }
      try { fs.appendFileSync('/app/agent.js', '//'); out['/app/agent.js'] = 'written'; } catch (e) { out['/app/agent.js'] = e.code; }
      console.log(JSON.stringify(out));`;
      const run = await runSandboxed(agent(volume.path, {}, { command: ['/nodejs/bin/node', '-e', probe] }));
      assert.equal(run.code, 0, run.stderr);
      const result = JSON.parse(run.stdout) as Record<string, string>;
      assert.equal(result['/secrets'], 'written', 'the volume is writable');
      for (const [path, outcome] of Object.entries(result)) {
        if (path === '/secrets') continue;
        assert.ok(['EROFS', 'EACCES', 'ENOENT', 'EPERM'].includes(outcome), `${path}: ${outcome}`);
      }
      assert.deepEqual(readdirSync(volume.path), ['written-by-probe']);
    });

    it('has no network but its own loopback: a backend on this machine’s 127.0.0.1 is unreachable (exit 1, unavailable)', async () => {
      using volume = memoryDir(IMAGE_UID);
      let connections = 0;
      const outside = createServer((s) => {
        connections++;
        s.destroy();
      });
      await new Promise<void>((r) => outside.listen(0, '127.0.0.1', r));
      const port = (outside.address() as { port: number }).port;
      try {
        const run = await runSandboxed(
          agent(volume.path, {
            SECRET_0_REF: 'aws:prod/db',
            AWS_REGION: 'us-east-1',
            AWS_ACCESS_KEY_ID: 'testing',
            AWS_SECRET_ACCESS_KEY: 'testing',
            AWS_ENDPOINT_URL_SECRETS_MANAGER: `http://127.0.0.1:${port}`,
            INIT_DEADLINE: '1s',
          }),
        );
        assert.equal(run.code, 1, run.stderr);
        assert.match(run.stderr, /SECRET_0 \(aws:prod\/db\): unavailable: ECONNREFUSED/);
        assert.equal(connections, 0, 'nothing left the sandbox');
      } finally {
        outside.close();
      }
    });

    it('sidecar: serves /readyz, /healthz and /metrics on its loopback, and stops cleanly on SIGTERM as PID 1', async () => {
      using volume = memoryDir(IMAGE_UID);
      const box = startSandboxed(
        agent(volume.path, { AGENT_MODE: 'sidecar', AGENT_HTTP_ADDR: '127.0.0.1:8099' }),
      );
      try {
        const pid = await box.pid;
        let ready = { status: 0, body: '' };
        for (let i = 0; i < 100 && ready.status !== 200; i++) {
          ready = requestInside(pid, { url: 'http://127.0.0.1:8099/readyz' });
          if (ready.status !== 200) await sleep(100);
        }
        assert.equal(ready.status, 200, `readyz: ${ready.body}; ${box.output().stderr}`);
        assert.equal(requestInside(pid, { url: 'http://127.0.0.1:8099/healthz' }).status, 200);
        const metrics = requestInside(pid, { url: 'http://127.0.0.1:8099/metrics' });
        assert.match(metrics.body, /^secret_agent_ready 1$/m);
        assert.equal(readFileSync(join(volume.path, 'db-password'), 'utf8'), value);
        await box.kill('SIGTERM');
        const { code } = await box.exited;
        assert.equal(code, 0, box.output().stderr);
        assert.ok(box.logs().some((l) => l.msg === 'stopping' && l.why === 'SIGTERM'));
        assert.equal(
          readFileSync(join(volume.path, 'db-password'), 'utf8'),
          value,
          'files stay after the stop',
        );
      } finally {
        await box.kill('SIGKILL').catch(() => undefined);
        await box.exited.catch(() => undefined);
      }
    });

    describe('NODE_COMPILE_CACHE=/app/compile-cache, read-only at run time (Dockerfile.agent)', () => {
      const fill = async (uidAtBuild: number): Promise<string> => {
        const cache = mkdtempSync(join(work, 'compile-cache-'));
        chownSync(cache, IMAGE_UID, IMAGE_UID);
        const run = await runSandboxed({
          image: 'agent',
          env: { NODE_COMPILE_CACHE: '/app/compile-cache' },
          writable: [[cache, '/app/compile-cache']],
          uid: uidAtBuild,
          command: ['/nodejs/bin/node', '--input-type=module', '-e', PREFILL],
        });
        assert.equal(run.code, 0, run.stderr);
        assert.ok(readdirSync(cache, { recursive: true }).length > 1, 'the cache was filled');
        return cache;
      };
      const runWith = (cache: string | undefined, debug = false) => {
        const volume = mkdtempSync(join(work, 'volume-'));
        chownSync(volume, IMAGE_UID, IMAGE_UID);
        return runSandboxed(
          agent(
            volume,
            {
              NODE_COMPILE_CACHE: '/app/compile-cache',
              ...(debug ? { NODE_DEBUG_NATIVE: 'COMPILE_CACHE' } : {}),
            },
            cache ? { readOnly: [[cache, '/app/compile-cache']] } : {},
          ),
        );
      };

      for (const [name, cache] of [
        ['pre-filled', () => fill(IMAGE_UID)],
        ['empty', () => Promise.resolve(mkdtempSync(join(work, 'compile-cache-empty-')))],
        ['missing', () => Promise.resolve(undefined)],
      ] as const) {
        it(`${name}: the agent runs, and prints nothing but its JSON log lines (no cache warnings)`, async () => {
          const run = await runWith(await cache());
          assert.equal(run.code, 0, run.stderr);
          assert.equal(run.stderr, '', 'nothing on stderr');
          const lines = run.stdout.split('\n').filter((l) => l !== '');
          assert.ok(
            lines.every((l) => l.startsWith('{')),
            `only JSON on stdout: ${run.stdout}`,
          );
        });
      }

      // Node keys the cache directory by uid (…/v24.x-x64-HASH-UID): NODE_DEBUG_NATIVE shows hits.
      const accepted = /V8 code cache for ESM file:\/\/\/app\/agent-chunks\/\S+ was accepted/;

      it('a cache filled by the image’s user (65532) is used at run time', async () => {
        const run = await runWith(await fill(IMAGE_UID), true);
        assert.equal(run.code, 0, run.stderr);
        assert.match(run.stderr, accepted);
      });

      it('Dockerfile.agent fills the cache as the user that runs the agent, so it is the one used', () => {
        const lines = readFileSync(join(ROOT, 'Dockerfile.agent'), 'utf8').split('\n');
        const user = lines.indexOf('USER 65532:65532');
        const filling = lines.findIndex((l) => l.startsWith('RUN') && l.includes('flushCompileCache'));
        assert.ok(user >= 0 && filling > user, 'USER 65532:65532 precedes the RUN that fills the cache');
        assert.ok(lines.includes('ENV NODE_COMPILE_CACHE=/app/compile-cache'));
      });
    });
  },
);
