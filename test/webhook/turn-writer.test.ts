import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { TurnWriter } from '../../webhook/turn-writer.ts';
import { assertNoCanary, canary } from '../support/canary.ts';
import type { LogLine } from '../support/captured-log.ts';
import { ROOT } from '../support/run-agent.ts';
import { AGENT_IMAGE, basicPod, review } from './fixtures.ts';
import { call } from './https-call.ts';
import { certDir, makeServingPair } from './tls-certs.ts';

const writerModule = new URL('../../webhook/turn-writer.ts', import.meta.url).href;

/** Runs `code` (which has TurnWriter on fd 1 as `out`) in a fresh node; its stdout and status. */
function run(code: string): { stdout: string; status: number | null } {
  const script = `import { TurnWriter } from ${JSON.stringify(writerModule)};\nconst out = new TurnWriter(1);\n${code}`;
  const child = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  });
  return { stdout: child.stdout, status: child.status };
}

describe('TurnWriter: log lines written once per event-loop turn', () => {
  it('writes the lines of a turn together at its end, in order', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'turn-writer-'));
    const file = join(dir, 'log');
    const fd = openSync(file, 'w');
    try {
      const out = new TurnWriter(fd);
      out.write('{"n":1}\n');
      out.write('{"n":2}\n');
      assert.equal(readFileSync(file, 'utf8'), '', 'nothing is written before the turn ends');
      await nextTurn();
      assert.equal(readFileSync(file, 'utf8'), '{"n":1}\n{"n":2}\n');
      out.write('{"n":3}\n');
      await nextTurn();
      assert.equal(readFileSync(file, 'utf8'), '{"n":1}\n{"n":2}\n{"n":3}\n');
      out.flushSync();
      assert.equal(readFileSync(file, 'utf8'), '{"n":1}\n{"n":2}\n{"n":3}\n', 'nothing twice');
    } finally {
      closeSync(fd);
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('loses no line at process.exit() or after an uncaught exception', () => {
    const exited = run(
      `out.write('a\\n'); setImmediate(() => { out.write('b\\n'); out.write('c\\n'); process.exit(3); });`,
    );
    assert.deepEqual(exited, { stdout: 'a\nb\nc\n', status: 3 });
    const crashed = run(
      `out.write('a\\n'); setImmediate(() => { out.write('b\\n'); throw new Error('boom'); });`,
    );
    assert.deepEqual(crashed, { stdout: 'a\nb\n', status: 1 });
  });

  it('writes a large turn whole, through a non-blocking pipe that takes part of it per write', () => {
    // process.stdout makes the pipe non-blocking: 1.2 MB meets EAGAIN many times over.
    const { stdout, status } = run(
      `void process.stdout; for (let i = 0; i < 20000; i++) out.write(JSON.stringify({ i, pad: 'x'.repeat(40) }) + '\\n');`,
    );
    assert.equal(status, 0);
    const lines = stdout.trimEnd().split('\n');
    assert.equal(lines.length, 20000);
    lines.forEach((line, i) => assert.equal((JSON.parse(line) as { i: number }).i, i));
  });
});

describe('the webhook process logs through TurnWriter', () => {
  it('writes every decision line by the time it has shut down, whole; no value reaches stdout', async () => {
    const pair = await makeServingPair();
    using dir = certDir();
    dir.write(pair);
    const child = spawn(process.execPath, [join(ROOT, 'webhook/main.ts')], {
      env: {
        PATH: process.env.PATH ?? '',
        AGENT_IMAGE,
        NATIVE_SIDECARS: 'true',
        AGENT_GCP_PROJECT: 'my-project',
        WEBHOOK_PORT: '0',
        WEBHOOK_HOST: '127.0.0.1',
        TLS_CERT_FILE: dir.cert,
        TLS_KEY_FILE: dir.key,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    const lines = () =>
      stdout
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as LogLine);
    const uids = [1, 2, 3].map((i) => `00000000-0000-4000-8000-00000000000${i}`);
    try {
      const port = await new Promise<number>((resolve, reject) => {
        child.stdout.on('data', () => {
          const listening = lines().find((l) => l.msg === 'webhook listening');
          if (listening) resolve(listening.port as number);
        });
        void exited.then((code) => reject(new Error(`exited ${code}: ${stderr}${stdout}`)));
      });
      const pod = basicPod(
        { 'secret-agent.io/secret-token': 'gcp:api-token' },
        { containers: [{ name: 'app', image: 'a', env: [{ name: 'PASSWORD', value: canary('env') }] }] },
      );
      await Promise.all(
        uids.map((uid) =>
          call(port, pair.ca, '/mutate', { body: JSON.stringify(review(pod, { uid })) }).then((r) =>
            assert.equal(r.status, 200),
          ),
        ),
      );
    } finally {
      child.kill('SIGTERM');
      assert.equal(await exited, 0, stderr);
    }
    assertNoCanary(stdout, 'the webhook process stdout');
    const decisions = lines().filter((l) => l.outcome === 'injected');
    assert.deepEqual(decisions.map((l) => l.uid).sort(), uids);
    assert.equal(lines().at(-1)!.msg, 'shutting down');
    assert.ok(stdout.endsWith('\n'), 'whole lines only');
  });
});
