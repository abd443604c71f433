import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import type { SidecarSettings } from '../../agent/contract/agent-config.ts';
import { createNotifiers } from '../../agent/notify/create-notifiers.ts';
import type { RotationEvent } from '../../agent/notify/notifier.ts';
import { commandArgv, createRunCommandNotifier } from '../../agent/notify/run-command.ts';
import { assertNoCanary, canary } from '../support/canary.ts';

const EVENT: RotationEvent = {
  versions: { SECRET_0: 'v2', SECRET_1: 'v9' },
  unnamed: [],
  changedFiles: ['db/password', 'api-key'],
};

function captureLog() {
  const lines: string[] = [];
  const log = pino({ level: 'trace' }, { write: (line: string) => void lines.push(line) });
  return { log, text: () => lines.join('') };
}

describe('ROTATION_COMMAND: a program run by the agent', () => {
  let dir: string;
  let script: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'command-'));
    script = join(dir, 'reload.mjs');
    // Records what it saw, prints a "secret" (which must not reach the agent's log), exits as told.
    writeFileSync(
      script,
      `import { writeFileSync } from 'node:fs';
       const [out, exitCode, sleepMs, printed] = process.argv.slice(2);
       writeFileSync(out, JSON.stringify({ argv: process.argv.slice(2), env: process.env }));
       process.stdout.write(printed + '\\n');
       process.stderr.write(printed + '\\n');
       setTimeout(() => process.exit(Number(exitCode)), Number(sleepMs));`,
    );
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  const settings = (command: string): SidecarSettings => ({
    refreshIntervalMs: 60_000,
    httpAddr: { host: '127.0.0.1', port: 8099 },
    debounceMs: 100,
    command,
    restartOnChange: false,
    deleteBarePod: false,
  });

  it('runs `node script args` without a shell; the program sees SECRETS_ROTATED_FILES, PATH and NODE_OPTIONS (no inspector) only', async () => {
    const out = join(dir, 'seen.json');
    const printed = canary('printed');
    const agentSecret = canary('agent-env');
    process.env.AWS_SECRET_ACCESS_KEY = agentSecret;
    try {
      const { log, text } = captureLog();
      const [notifier, ...rest] = createNotifiers(settings(`node ${script}  ${out}\t0 0 ${printed}`), {
        log,
        pod: {},
        serviceAccountDir: '/nonexistent',
        kubernetesApiUrl: undefined,
        secretsDir: '/nonexistent',
      });
      assert.equal(rest.length, 0);
      assert.equal(notifier!.kind, 'command');
      assert.deepEqual(await notifier!.notify(EVENT, new AbortController().signal), { ok: true });
      const seen = JSON.parse(readFileSync(out, 'utf8')) as { argv: string[]; env: Record<string, string> };
      assert.deepEqual(seen.argv, [out, '0', '0', printed]);
      assert.deepEqual(Object.keys(seen.env).sort(), ['NODE_OPTIONS', 'PATH', 'SECRETS_ROTATED_FILES']);
      assert.equal(
        seen.env.NODE_OPTIONS,
        '--disable-sigusr1',
        'a Node program opens no inspector on a signal',
      );
      assert.equal(seen.env.SECRETS_ROTATED_FILES, 'db/password,api-key');
      assert.equal(seen.env.PATH, process.env.PATH);
      assertNoCanary(text(), 'command notifier logs');
    } finally {
      delete process.env.AWS_SECRET_ACCESS_KEY;
    }
  });

  it('a non-zero exit is exit-N', async () => {
    const { log, text } = captureLog();
    const notifier = createRunCommandNotifier(
      { command: `node ${script} ${join(dir, 'x.json')} 3 0 ${canary()}` },
      log,
    );
    assert.deepEqual(await notifier.notify(EVENT, new AbortController().signal), {
      ok: false,
      reason: 'exit-3',
    });
    assertNoCanary(text(), 'command notifier logs');
  });

  it('a program that is not in the image is not-found, with the distroless hint', async () => {
    const { log, text } = captureLog();
    const notifier = createRunCommandNotifier({ command: '/usr/local/bin/no-such-reloader --now' }, log);
    assert.deepEqual(await notifier.notify(EVENT, new AbortController().signal), {
      ok: false,
      reason: 'not-found',
    });
    assert.match(text(), /distroless/);
  });

  it('a program that outlives its timeout is stopped: timeout', async () => {
    const notifier = createRunCommandNotifier(
      { command: `node ${script} ${join(dir, 'slow.json')} 0 600000 x`, timeoutMs: 200, killGraceMs: 100 },
      captureLog().log,
    );
    assert.deepEqual(await notifier.notify(EVENT, new AbortController().signal), {
      ok: false,
      reason: 'timeout',
    });
  });

  it('the caller aborting (shutdown) stops the program: aborted', async () => {
    const out = join(dir, 'aborted.json');
    const notifier = createRunCommandNotifier(
      { command: `node ${script} ${out} 0 600000 x` },
      captureLog().log,
    );
    const abort = new AbortController();
    const pending = notifier.notify(EVENT, abort.signal);
    // Abort once the program is running (it has written its record).
    while (
      !(() => {
        try {
          return readFileSync(out, 'utf8').length > 0;
        } catch {
          return false;
        }
      })()
    )
      await new Promise((resolve) => setTimeout(resolve, 5));
    abort.abort();
    assert.deepEqual(await pending, { ok: false, reason: 'aborted' });
  });

  it('splits on any whitespace; `node` is the agent’s own Node binary', () => {
    assert.deepEqual(commandArgv('  node  /app/reload.js\t--all '), [
      process.execPath,
      '--disable-sigusr1',
      '/app/reload.js',
      '--all',
    ]);
    assert.deepEqual(commandArgv('/bin/kill -HUP 1'), ['/bin/kill', '-HUP', '1']);
  });
});
