import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { assertNoCanary } from './support/canary.ts';
import { ROOT } from './support/run-agent.ts';

/**
 * `npm start` end to end: the built webhook and agent as child processes, exactly as a person runs
 * it (after the build `npm test` does). The demo values are not canaries; the point is that the
 * whole flow works and leaves nothing running.
 */

const DEMO = join(ROOT, 'docs/quickstart/secrets');

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code !== 'ESRCH';
  }
}

describe('npm start (docs/quickstart/run.ts)', () => {
  let work: string | undefined;
  after(() => {
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('injects, runs the agent with the patched env, rotates, and stops everything', async () => {
    const demoBefore = readFileSync(join(DEMO, 'database.json'), 'utf8');
    const { stdout, stderr } = await promisify(execFile)(
      process.execPath,
      [join(ROOT, 'docs/quickstart/run.ts')],
      { cwd: ROOT, env: { PATH: process.env.PATH ?? '/usr/bin:/bin' }, timeout: 90_000 },
    ).catch((e: { code?: number; stdout?: string; stderr?: string }) => {
      assert.fail(`run.ts exited ${e.code}\n${e.stdout}\n${e.stderr}`);
    });
    assertNoCanary(stdout, 'quick start stdout');
    assertNoCanary(stderr, 'quick start stderr');
    assert.equal(stderr, '');

    work = /^Working directory: (\S+)/m.exec(stdout)?.[1];
    assert.ok(work, `no working directory in:\n${stdout}`);

    // 1-2: the webhook over HTTPS injected one native sidecar with env only, and mounted the app.
    const webhookPid = Number(
      /dist\/webhook\.js \(pid (\d+)\) serves https:\/\/127\.0\.0\.1:\d+\/mutate/.exec(stdout)?.[1],
    );
    assert.match(
      stdout,
      /→ allowed in \d+ ms with \d+ JSONPatch operations; the patched pod is a valid v1 Pod/,
    );
    assert.match(stdout, /volume secret-agent-secrets: emptyDir, medium Memory, sizeLimit \d+Mi/);
    assert.match(
      stdout,
      /initContainers\[0\] secret-agent {2}\(added; native sidecar: restartPolicy Always, postStart holds the app until GET http:\/\/127\.0\.0\.1:8099\/readyz answers 200 \(at most 75s\)\)/,
    );
    assert.match(stdout, /image {4}ghcr\.io\/example\/secret-agent:0\.1\.0/);
    assert.match(stdout, /env {6}AGENT_MODE=sidecar/);
    assert.match(stdout, new RegExp(`SECRET_\\d_REF=file:${work}/source/database\\.json#password`));
    assert.match(stdout, /POD_UID ← downward API metadata\.uid/);
    assert.match(
      stdout,
      /containers\[0\] app {2}\(the app's container\)\n\s+mounts +secret-agent-secrets → \/etc\/secrets \(read-only\)/,
    );
    assert.match(stdout, /annotation secret-agent\.io\/status: injected/);

    // 3: the agent ran with the patch's env, only the local stand-ins replaced, and wrote the files.
    const agentPid = Number(/started \(pid (\d+)\), probes on 127\.0\.0\.1:\d+/.exec(stdout)?.[1]);
    assert.match(stdout, new RegExp(`SECRETS_DIR +/secret-agent/secrets → ${work}/secrets`));
    assert.match(stdout, /ready: 7 files written into/);
    assert.match(stdout, /db-password +0400 {2}"demo-only-not-a-real-password"/);
    assert.match(stdout, /db\/username +0400 {2}"demo_app"/);
    assert.match(stdout, /api-key +0400 {2}"demo-api-key-0000-not-real"/);
    // The template: rendered by the agent from the env the webhook gave it (docs/templates.md).
    assert.match(
      stdout,
      /SECRET_3_FORMAT=template\n\s+SECRET_3_NAME=db-url\n\s+SECRET_3_TEMPLATE=postgres:\/\/\{\{username\}\}/,
    );
    assert.match(
      stdout,
      /db-url +0400 {2}"postgres:\/\/demo_app:demo-only-not-a-real-password@db\.demo\.internal:5432\/app"/,
    );
    assert.match(
      stdout,
      /db-url was rendered from the template in secret-agent\.io\/template-db-url:\n {5}postgres:\/\/\{\{username\}\}:\{\{password\}\}@\{\{host\}\}:\{\{port\}\}\/app\n {5}→ "postgres:\/\/demo_app:/,
    );

    // 4: the value changed in the copy, the set was swapped and the app was told which files changed.
    assert.match(stdout, /agent: rotated db\/password, db-password, db-url\n/);
    assert.match(stdout, /\.\.data: (\S+) → (?!\1)\S+ \(one rename; the old set removed\)/);
    assert.match(stdout, /the app received POST \/-\/reload/);
    assert.match(stdout, /"changedFiles":\["db-password","db-url","db\/password"\]/);
    // The template read the password that changed, so its file was rendered again.
    assert.match(stdout, /db-url was rendered again from its template: it reads the password that changed/);
    const rotated = JSON.parse(readFileSync(join(work, 'source/database.json'), 'utf8')) as {
      password: string;
    };
    assert.notEqual(rotated.password, JSON.parse(demoBefore).password);
    assert.equal(readFileSync(join(work, 'secrets/db-password'), 'utf8'), rotated.password);
    assert.equal(
      readFileSync(join(work, 'secrets/db-url'), 'utf8'),
      `postgres://demo_app:${rotated.password}@db.demo.internal:5432/app`,
    );
    assert.equal(readFileSync(join(DEMO, 'database.json'), 'utf8'), demoBefore, 'the repository was edited');

    // 5: both stopped cleanly on SIGTERM, nothing left running.
    assert.match(stdout, /Stopped with SIGTERM: agent exit 0, webhook exit 0\./);
    for (const pid of [webhookPid, agentPid]) {
      assert.ok(pid > 0, `no pid in:\n${stdout}`);
      assert.equal(isRunning(pid), false, `process ${pid} is still running`);
    }
  });
});
