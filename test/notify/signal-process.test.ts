import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import { createNotifiers } from '../../agent/notify/create-notifiers.ts';
import type { NotifierDeps, RotationEvent } from '../../agent/notify/notifier.ts';
import type { SidecarSettings } from '../../agent/contract/agent-config.ts';
import { assertNoCanary, canary } from '../support/canary.ts';

const EVENT: RotationEvent = { versions: { SECRET_0: 'v2' }, unnamed: [], changedFiles: ['db-password'] };

function captureLog() {
  const lines: string[] = [];
  const log = pino({ level: 'trace' }, { write: (line: string) => void lines.push(line) });
  return { log, text: () => lines.join('') };
}

function signalNotifier(signal: NonNullable<SidecarSettings['signal']>, log: NotifierDeps['log']) {
  const settings: SidecarSettings = {
    refreshIntervalMs: 60_000,
    httpAddr: { host: '127.0.0.1', port: 8099 },
    debounceMs: 100,
    signal,
    restartOnChange: false,
    deleteBarePod: false,
  };
  const notifiers = createNotifiers(settings, {
    log,
    pod: {},
    serviceAccountDir: '/nonexistent',
    kubernetesApiUrl: undefined,
    secretsDir: '/nonexistent',
  });
  assert.equal(notifiers.length, 1);
  assert.equal(notifiers[0]!.kind, 'signal');
  return notifiers[0]!;
}

/** A stand-in app: names itself (that sets /proc/PID/comm), writes a pidfile, reports each SIGHUP. */
class App {
  readonly child: ChildProcess;
  private out = '';
  private waiters: { text: string; resolve: () => void }[] = [];

  constructor(title: string, pidFile: string, uid?: number) {
    const script = `
      process.title = ${JSON.stringify(title)};
      process.on('SIGHUP', () => process.stdout.write('got SIGHUP\\n'));
      require('node:fs').writeFileSync(${JSON.stringify(pidFile)}, process.pid + '\\n');
      process.stdout.write('ready\\n');
      setInterval(() => {}, 60000);`;
    this.child = spawn(process.execPath, ['-e', script], {
      stdio: ['ignore', 'pipe', 'inherit'],
      ...(uid !== undefined ? { uid, gid: uid } : {}),
    });
    this.child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
      this.out += chunk;
      this.waiters = this.waiters.filter((w) => (this.out.includes(w.text) ? (w.resolve(), false) : true));
    });
  }

  /** Resolves once the app has printed `text` (the test's own timeout bounds the wait). */
  printed(text: string): Promise<void> {
    if (this.out.includes(text)) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ text, resolve }));
  }

  get output(): string {
    return this.out;
  }

  async stop(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const exited = new Promise((resolve) => this.child.once('exit', resolve));
    this.child.kill('SIGKILL');
    await exited;
  }
}

describe('ROTATION_SIGNAL: signals the app process', () => {
  let dir: string;
  const apps: App[] = [];
  const start = async (
    title: string,
    pidFile = join(dir, `${randomBytes(4).toString('hex')}.pid`),
    uid?: number,
  ) => {
    const app = new App(title, pidFile, uid);
    apps.push(app);
    await app.printed('ready');
    return app;
  };

  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'signal-'));
  });
  after(async () => {
    await Promise.all(apps.map((a) => a.stop()));
    rmSync(dir, { recursive: true, force: true });
  });

  it('by pidfile: the process gets SIGHUP and the outcome is ok', async () => {
    const pidFile = join(dir, 'app.pid');
    const app = await start(`rotapp-${randomBytes(4).toString('hex')}`, pidFile);
    const { log, text } = captureLog();
    const outcome = await signalNotifier({ name: 'SIGHUP', pidFile }, log).notify(
      EVENT,
      new AbortController().signal,
    );
    assert.deepEqual(outcome, { ok: true });
    await app.printed('got SIGHUP');
    assert.match(text(), new RegExp(`"pids":\\[${app.child.pid}\\]`));
  });

  it('by process name (/proc/PID/comm): every process of that name gets it, the agent never', async () => {
    const title = `rotapp-${randomBytes(4).toString('hex')}`;
    const first = await start(title);
    const second = await start(title);
    const bystander = await start(`rotapp-${randomBytes(4).toString('hex')}`);
    const { log, text } = captureLog();
    const outcome = await signalNotifier({ name: 'SIGHUP', process: title }, log).notify(
      EVENT,
      new AbortController().signal,
    );
    assert.deepEqual(outcome, { ok: true });
    await Promise.all([first.printed('got SIGHUP'), second.printed('got SIGHUP')]);
    const signalled = (JSON.parse(text().trim().split('\n').at(-1)!) as { pids: number[] }).pids;
    assert.deepEqual(
      [...signalled].sort((a, b) => a - b),
      [first.child.pid!, second.child.pid!].sort((a, b) => a - b),
    );
    assert.ok(!signalled.includes(bystander.child.pid!) && !signalled.includes(process.pid));
  });

  it('matches a name longer than 15 bytes by the part the kernel keeps in comm', async () => {
    const title = `rotapp-${randomBytes(4).toString('hex')}-long-server-name`;
    const app = await start(title);
    const { log } = captureLog();
    const outcome = await signalNotifier({ name: 'SIGHUP', process: title }, log).notify(
      EVENT,
      new AbortController().signal,
    );
    assert.deepEqual(outcome, { ok: true });
    await app.printed('got SIGHUP');
  });

  it('no process of that name: no-process, with a log line that says what to check', async () => {
    const { log, text } = captureLog();
    const outcome = await signalNotifier(
      { name: 'SIGHUP', process: `absent-${randomBytes(4).toString('hex')}` },
      log,
    ).notify(EVENT, new AbortController().signal);
    assert.deepEqual(outcome, { ok: false, reason: 'no-process' });
    assert.match(text(), /shareProcessNamespace/);
  });

  it('pidfile problems each have their reason: missing, not a PID, PID 1, the agent itself, a stale PID', async () => {
    const { log, text } = captureLog();
    const notify = (pidFile: string) =>
      signalNotifier({ name: 'SIGHUP', pidFile }, log).notify(EVENT, new AbortController().signal);
    assert.deepEqual(await notify(join(dir, 'missing.pid')), { ok: false, reason: 'no-pidfile' });

    const bad = join(dir, 'bad.pid');
    const leak = canary('pidfile');
    for (const content of ['', 'abc', '-5', '0', '12.5', '99999999', leak]) {
      writeFileSync(bad, content);
      assert.deepEqual(await notify(bad), { ok: false, reason: 'bad-pidfile' }, JSON.stringify(content));
    }
    writeFileSync(bad, '1\n');
    assert.deepEqual(await notify(bad), { ok: false, reason: 'pid-1' });
    writeFileSync(bad, String(process.pid));
    assert.deepEqual(await notify(bad), { ok: false, reason: 'own-process' });

    const gone = await start(`rotapp-${randomBytes(4).toString('hex')}`);
    writeFileSync(bad, String(gone.child.pid));
    await gone.stop();
    assert.deepEqual(await notify(bad), { ok: false, reason: 'no-process' });
    assertNoCanary(text(), 'signal notifier logs');
  });

  it('another uid without CAP_KILL: permission-denied, with the fix in the log', async (t) => {
    if (process.getuid?.() !== 0) return t.skip('needs root to run the agent side as another uid');
    const pidFile = join(dir, 'root-app.pid');
    chmodSync(dir, 0o755); // the pidfile is readable; only the signal is refused
    const app = await start(`rotapp-${randomBytes(4).toString('hex')}`, pidFile);
    // The agent side runs as nobody (65534) and tries to signal the root-owned app.
    const moduleUrl = new URL('../../agent/notify/signal-process.ts', import.meta.url).href;
    const script = `
      import { pino } from 'pino';
      const { createSignalProcessNotifier } = await import(${JSON.stringify(moduleUrl)});
      const n = createSignalProcessNotifier({ signal: 'SIGHUP', pidFile: ${JSON.stringify(pidFile)} }, pino({ level: 'warn' }, pino.destination(2)));
      process.stdout.write(JSON.stringify(await n.notify({ versions: {}, changedFiles: [] }, new AbortController().signal)));`;
    const agent = spawn(process.execPath, ['--input-type=module', '-e', script], {
      uid: 65534,
      gid: 65534,
      cwd: new URL('../..', import.meta.url).pathname,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    agent.stdout.setEncoding('utf8').on('data', (c: string) => (out += c));
    agent.stderr.setEncoding('utf8').on('data', (c: string) => (err += c));
    const code = await new Promise((resolve) => agent.once('exit', resolve));
    assert.equal(code, 0, `the agent side failed: ${err}`);
    assert.deepEqual(JSON.parse(out), { ok: false, reason: 'permission-denied' });
    assert.match(
      err,
      /not permitted to signal the app: run the agent with the app’s uid \(runAsUser\), or add CAP_KILL/,
    );
    await app.stop();
    assert.doesNotMatch(app.output, /SIGHUP/);
  });
});
