/**
 * The exec provider with real helper programs (Node and sh scripts written to a temp helpers
 * directory, spawned for real), and the built agent (dist/agent.js) end to end with the same helpers.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { parseReference, type ExecReference } from '../../agent/contract/reference.ts';
import { EXEC_SETTINGS } from '../../agent/providers/exec/env.ts';
import {
  HELPER_ENV,
  openExecProvider,
  readStderr,
  STDERR_SHOWN,
  VERSION_LINE,
} from '../../agent/providers/exec/exec-provider.ts';
import { ProviderError, type FetchOutcome, type Provider } from '../../agent/providers/provider.ts';
import { assertNoCanary, canary } from '../support/canary.ts';
import { eventually, memoryDir, runAgent, startAgent } from '../support/run-agent.ts';

const POD = { namespace: 'shop', name: 'web-1', uid: '0d1c5b3e-6a41-4f8e-9c1e-3f1f7f0e2a11' };

let helpers: string;
let scratch: string;

/** Writes an executable helper; `node` scripts run with this test's Node (the image's is /nodejs/bin/node). */
function helper(name: string, body: string, options: { lang?: 'node' | 'sh'; mode?: number } = {}): string {
  const shebang = options.lang === 'sh' ? '#!/bin/sh' : `#!${process.execPath}`;
  const path = join(helpers, name);
  writeFileSync(path, `${shebang}\n${body}\n`);
  chmodSync(path, options.mode ?? 0o755);
  return path;
}

function ref(text: string): ExecReference {
  const parsed = parseReference(text, 'SECRET_0_REF');
  assert.equal(parsed.provider, 'exec');
  return parsed as ExecReference;
}

function open(env: Record<string, string> = {}): Provider<ExecReference> {
  return openExecProvider(
    { pod: POD, agentVersion: '9.9.9', serviceAccountDir: '/var/run/secrets/kubernetes.io/serviceaccount' },
    { env: { EXEC_HELPERS_DIR: helpers, ...env } },
  );
}

async function fetchOne(text: string, env: Record<string, string> = {}): Promise<FetchOutcome> {
  const provider = open(env);
  try {
    const [outcome] = await provider.fetch([ref(text)], { signal: AbortSignal.timeout(30_000) });
    return outcome!;
  } finally {
    await provider.close?.();
  }
}

function failure(outcome: FetchOutcome): ProviderError {
  assert.ok(!outcome.ok, 'expected a failed outcome');
  assertNoCanary(
    `${outcome.error.message} ${outcome.error.fix} ${String(outcome.error.stack)}`,
    'a provider error',
  );
  return outcome.error;
}

function value(outcome: FetchOutcome): { text: string; version: string; backendVersion?: string } {
  assert.ok(outcome.ok, `expected success, got ${outcome.ok ? '' : outcome.error.message}`);
  const { version, backendVersion } = outcome.value;
  return {
    text: Buffer.from(outcome.value.bytes).toString('utf8'),
    version,
    ...(backendVersion !== undefined ? { backendVersion } : {}),
  };
}

/** Gone, or a zombie waiting for a reaper: either way no longer running. */
function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
}

describe('exec provider', () => {
  before(() => {
    helpers = mkdtempSync(join(tmpdir(), 'secret-agent-helpers-'));
    scratch = mkdtempSync(join(tmpdir(), 'secret-agent-helper-scratch-'));
    chmodSync(helpers, 0o755);
    chmodSync(scratch, 0o777);
  });
  after(() => {
    rmSync(helpers, { recursive: true, force: true });
    rmSync(scratch, { recursive: true, force: true });
  });

  it('runs the helper with the argument as argv[1], its stdout as the value, hashed as the version compared, none published', async () => {
    const secret = canary('exec');
    helper('echo-arg', `process.stdout.write(${JSON.stringify(secret)} + ':' + process.argv[2]);`);
    const first = value(await fetchOne('exec:echo-arg/prod-vault/db-password'));
    assert.equal(first.text, `${secret}:prod-vault/db-password`);
    assert.match(first.version, /^content:[0-9a-f]{16}$/);
    assert.equal(first.backendVersion, undefined, 'a hash of a value is never a published version');
    assert.equal(value(await fetchOne('exec:echo-arg/prod-vault/db-password')).version, first.version);
    assert.notEqual(value(await fetchOne('exec:echo-arg/other')).version, first.version);
  });

  it('gives the helper only the documented environment, without a shell, in the helpers directory', async () => {
    helper(
      'show-env',
      'process.stdout.write(JSON.stringify({ env: process.env, cwd: process.cwd(), argv: process.argv.slice(2) }));',
    );
    const provider = openExecProvider(
      { pod: POD, agentVersion: '9', serviceAccountDir: '/sa' },
      {
        env: {
          EXEC_HELPERS_DIR: helpers,
          KUBERNETES_SERVICE_HOST: '10.0.0.1',
          KUBERNETES_SERVICE_PORT: '443',
          AWS_SECRET_ACCESS_KEY: canary('agent-credential'),
        },
      },
    );
    const [outcome] = await provider.fetch([ref('exec:show-env/$HOME;`id`')], {
      signal: AbortSignal.timeout(30_000),
    });
    await provider.close?.();
    const seen = JSON.parse(value(outcome!).text) as {
      env: Record<string, string>;
      cwd: string;
      argv: string[];
    };
    assert.deepEqual(seen.argv, ['$HOME;`id`'], 'the argument is passed as is: no shell expands it');
    assert.equal(seen.cwd, helpers);
    assert.deepEqual(seen.env, {
      PATH: '/usr/local/bin:/usr/bin:/bin',
      SECRET_AGENT_EXEC_VERSION: '1',
      POD_NAMESPACE: 'shop',
      POD_NAME: 'web-1',
      POD_UID: POD.uid,
      SERVICE_ACCOUNT_TOKEN_FILE: '/sa/token',
      SERVICE_ACCOUNT_CA_FILE: '/sa/ca.crt',
      KUBERNETES_SERVICE_HOST: '10.0.0.1',
      KUBERNETES_SERVICE_PORT: '443',
      NODE_OPTIONS: '--disable-sigusr1',
    });
    assert.deepEqual(Object.keys(seen.env).sort(), HELPER_ENV.map((v) => v.name).sort());
  });

  it('a helper written for Node opens no inspector on SIGUSR1 (a container of the pod may send it), and a Node without the flag does', async () => {
    // The helper signals itself, then says whether Node's inspector listens: as another container's
    // SIGUSR1 would, in a pod that shares its process namespace.
    const body =
      "process.kill(process.pid, 'SIGUSR1'); setTimeout(() => process.stdout.write(require('node:inspector').url() ? 'inspector open' : 'no inspector'), 500);";
    helper('signal-self', body);
    const provider = openExecProvider(
      { pod: POD, agentVersion: '9', serviceAccountDir: '/sa' },
      { env: { EXEC_HELPERS_DIR: helpers } },
    );
    const [outcome] = await provider.fetch([ref('exec:signal-self/now')], {
      signal: AbortSignal.timeout(30_000),
    });
    await provider.close?.();
    assert.equal(value(outcome!).text, 'no inspector');
    // The control: the same program, the same Node, without NODE_OPTIONS, on a port of its own.
    const control = spawnSync(process.execPath, ['--inspect-port=127.0.0.1:0', '-e', body], {
      encoding: 'utf8',
      env: { PATH: process.env.PATH ?? '' },
    });
    assert.equal(control.stdout, 'inspector open', control.stderr);
  });

  it('takes the version from a well-formed version line on stderr, else hashes the value', async () => {
    const secret = canary('versioned');
    helper(
      'versioned',
      `process.stderr.write('fetching\\n${VERSION_LINE} 42\\n'); process.stdout.write(${JSON.stringify(secret)});`,
    );
    assert.equal(value(await fetchOne('exec:versioned/x')).version, '42');
    assert.equal(value(await fetchOne('exec:versioned/x')).backendVersion, '42');
    helper(
      'bad-version',
      `process.stderr.write('${VERSION_LINE} has spaces in it\\n'); process.stdout.write(${JSON.stringify(secret)});`,
    );
    assert.match(value(await fetchOne('exec:bad-version/x')).version, /^content:[0-9a-f]{16}$/);
    assert.equal(value(await fetchOne('exec:bad-version/x')).backendVersion, undefined);
    // A version that is the value would put the secret into logs and rotation notices.
    helper(
      'value-as-version',
      `process.stderr.write('${VERSION_LINE} ' + ${JSON.stringify(secret)} + '\\n'); process.stdout.write(${JSON.stringify(secret)});`,
    );
    const leaky = value(await fetchOne('exec:value-as-version/x'));
    assert.match(leaky.version, /^content:[0-9a-f]{16}$/);
    assert.equal(leaky.backendVersion, undefined);
    assertNoCanary(leaky.version, 'the version');
  });

  it('maps exit codes: 75 transient, 66 not found, 77 permission denied, 64 invalid, others internal', async () => {
    const cases: [number, string, boolean][] = [
      [75, 'unavailable', true],
      [66, 'not-found', false],
      [77, 'permission-denied', false],
      [64, 'invalid', false],
      [1, 'internal', false],
      [2, 'internal', false],
    ];
    for (const [code, reason, transient] of cases) {
      helper(
        `exit-${code}`,
        `process.stderr.write('backend says ${code}\\nsecond line\\n'); process.exit(${code});`,
      );
      const error = failure(await fetchOne(`exec:exit-${code}/x`));
      assert.equal(error.reason, reason, `exit ${code}`);
      assert.equal(error.transient, transient, `exit ${code}`);
      assert.match(
        error.message,
        new RegExp(`^helper "exit-${code}" exited with ${code}\\b.*: backend says ${code}$`),
      );
      assert.doesNotMatch(error.message, /second line/);
    }
  });

  it('a helper killed by a signal it did not get from us is a permanent failure', async () => {
    helper('self-kill', 'process.kill(process.pid, "SIGSEGV");');
    const error = failure(await fetchOne('exec:self-kill/x'));
    assert.equal(error.reason, 'internal');
    assert.equal(error.transient, false);
    assert.match(error.message, /was killed by SIGSEGV/);
  });

  it('shows only the first stderr line, cut to a readable length, without control characters', async () => {
    helper(
      'chatty',
      `process.stderr.write('\\n' + '\\u001b[31m' + 'x'.repeat(500) + '\\nsecond\\n'); process.exit(1);`,
    );
    const error = failure(await fetchOne('exec:chatty/x'));
    const shown = /exited with 1: (.*)$/.exec(error.message)?.[1] ?? '';
    assert.equal(shown.length, STDERR_SHOWN + 1, 'cut after STDERR_SHOWN characters, with an ellipsis');
    assert.ok(shown.endsWith('…'));
    assert.ok(!error.message.includes('\u001b'), 'no terminal escape');
    assert.doesNotMatch(error.message, /second/);
  });

  it('withholds a stderr line that shows the value, whole, encoded or in part', async () => {
    const secret = canary('printed');
    const lines = [
      `oops ${secret}`,
      `base64 ${Buffer.from(secret).toString('base64')}`,
      `hex ${Buffer.from(secret).toString('hex')}`,
      `part ${secret.slice(3, 23)}`,
    ];
    for (const [i, line] of lines.entries()) {
      helper(
        `leaky-${i}`,
        `process.stdout.write(${JSON.stringify(secret)}); process.stderr.write(${JSON.stringify(`${line}\n`)}); process.exit(1);`,
      );
      const error = failure(await fetchOne(`exec:leaky-${i}/x`));
      assert.match(error.message, /its message is withheld/, line.split(' ')[0]);
    }
    assert.deepEqual(readStderr('all fine\n', Buffer.from(secret)), { firstLine: 'all fine' });
  });

  it('stops a helper that prints more than 1 MiB', async () => {
    helper(
      'flood',
      "const chunk = Buffer.alloc(64 * 1024, 'x'); for (let i = 0; i < 40; i++) process.stdout.write(chunk);",
    );
    const error = failure(await fetchOne('exec:flood/x'));
    assert.equal(error.reason, 'too-large');
    assert.equal(error.transient, false);
  });

  it('kills the whole process group at EXEC_TIMEOUT, a grandchild included, as a transient timeout', async () => {
    const pidFile = join(scratch, 'grandchild.pid');
    helper('hang', `sleep 300 &\necho $! > ${pidFile}\nsleep 300`, { lang: 'sh' });
    const error = failure(await fetchOne('exec:hang/x', { EXEC_TIMEOUT: '500ms' }));
    assert.equal(error.reason, 'timeout');
    assert.equal(error.transient, true);
    assert.match(error.message, /EXEC_TIMEOUT \(500 ms\); its process group was killed/);
    const grandchild = Number(readFileSync(pidFile, 'utf8'));
    await eventually(() => (running(grandchild) ? undefined : true), 'the grandchild to be killed');
  });

  it('kills what a helper left running after it exited, so nothing outlives a run', async () => {
    const pidFile = join(scratch, 'orphan.pid');
    helper('orphan', `sleep 300 >/dev/null 2>&1 &\necho $! > ${pidFile}\nprintf done`, { lang: 'sh' });
    assert.equal(value(await fetchOne('exec:orphan/x')).text, 'done');
    const orphan = Number(readFileSync(pidFile, 'utf8'));
    await eventually(() => (running(orphan) ? undefined : true), 'the orphan to be killed');
  });

  it('kills the helper when the attempt is abandoned, and on close', async () => {
    const pidFile = join(scratch, 'abandoned.pid');
    helper('slow', `echo $$ > ${pidFile}\nsleep 300`, { lang: 'sh' });
    const provider = open();
    const controller = new AbortController();
    const pending = provider.fetch([ref('exec:slow/x')], { signal: controller.signal });
    const pid = await eventually(
      () =>
        existsSync(pidFile) && readFileSync(pidFile, 'utf8').trim() !== ''
          ? Number(readFileSync(pidFile, 'utf8'))
          : undefined,
      'the helper to start',
    );
    controller.abort();
    const [outcome] = await pending;
    const error = failure(outcome!);
    assert.equal(error.reason, 'timeout');
    assert.match(error.message, /the attempt's time ran out/);
    await eventually(() => (running(pid) ? undefined : true), 'the helper to be killed');

    rmSync(pidFile);
    const again = provider.fetch([ref('exec:slow/x')], { signal: AbortSignal.timeout(30_000) });
    const second = await eventually(
      () =>
        existsSync(pidFile) && readFileSync(pidFile, 'utf8').trim() !== ''
          ? Number(readFileSync(pidFile, 'utf8'))
          : undefined,
      'the helper to start again',
    );
    await provider.close?.();
    await eventually(() => (running(second) ? undefined : true), 'close to kill the helper');
    const [closed] = await again;
    assert.equal(failure(closed!).reason, 'internal');
  });

  it('refuses a helper that is missing, not executable, not a file, or a link out of the directory', async () => {
    const missing = failure(await fetchOne('exec:nope/x'));
    assert.equal(missing.reason, 'not-found');
    assert.match(missing.message, /^EXEC_HELPERS_DIR: ".*" has no helper "nope"/);

    helper('not-executable', 'process.stdout.write("x");', { mode: 0o644 });
    const denied = failure(await fetchOne('exec:not-executable/x'));
    assert.equal(denied.reason, 'permission-denied');
    assert.match(denied.message, /the helper "not-executable" in ".*" is not executable/);
    assert.match(denied.fix, /0555/);

    mkdirSync(join(helpers, 'a-directory'), { recursive: true });
    assert.equal(failure(await fetchOne('exec:a-directory/x')).reason, 'invalid');

    const outside = join(scratch, 'outside');
    writeFileSync(outside, `#!${process.execPath}\nprocess.stdout.write('escaped');\n`, { mode: 0o755 });
    symlinkSync(outside, join(helpers, 'escape'));
    const escape = failure(await fetchOne('exec:escape/x'));
    assert.equal(escape.reason, 'invalid');
    assert.match(escape.message, /the helper "escape" leads out of/);
    assert.equal(escape.transient, false);
  });

  it('follows links inside the directory, as a ConfigMap volume is laid out', async () => {
    const data = join(helpers, '..2026_01_01_00_00_00.000000000');
    mkdirSync(data);
    writeFileSync(join(data, 'from-configmap'), `#!${process.execPath}\nprocess.stdout.write('linked');\n`, {
      mode: 0o555,
    });
    symlinkSync('..2026_01_01_00_00_00.000000000', join(helpers, '..data'));
    symlinkSync('..data/from-configmap', join(helpers, 'from-configmap'));
    assert.equal(value(await fetchOne('exec:from-configmap/x')).text, 'linked');
  });

  it('names a #! interpreter that does not exist', async () => {
    const path = join(helpers, 'bad-shebang');
    writeFileSync(path, '#!/nodejs/bin/no-such-node\n', { mode: 0o755 });
    const error = failure(await fetchOne('exec:bad-shebang/x'));
    assert.equal(error.reason, 'not-found');
    assert.match(error.message, /the interpreter its #! line names, does not exist/);
  });

  it('refuses settings out of range, naming the variable', () => {
    assert.throws(
      () => open({ EXEC_TIMEOUT: 'soon' }),
      (e: unknown) =>
        e instanceof ProviderError && e.reason === 'invalid' && /^EXEC_TIMEOUT: "soon"/.test(e.message),
    );
    assert.throws(
      () => open({ EXEC_CONCURRENCY: '0' }),
      (e: unknown) => e instanceof ProviderError && /^EXEC_CONCURRENCY: /.test(e.message),
    );
  });

  it('runs at most EXEC_CONCURRENCY helpers at once', async () => {
    const dir = join(scratch, 'concurrency');
    mkdirSync(dir);
    // Each run marks itself running, counts the runs it sees, and waits until the test lets it go.
    helper(
      'gate',
      `import { existsSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
const dir = ${JSON.stringify(dir)};
const me = dir + '/' + process.argv[2] + '.running';
writeFileSync(me, '');
const seen = readdirSync(dir).filter((f) => f.endsWith('.running')).length;
const wait = () => {
  if (!existsSync(dir + '/go')) return void setTimeout(wait, 20);
  rmSync(me);
  process.stdout.write(String(seen));
};
wait();`,
    );
    const provider = open({ EXEC_CONCURRENCY: '2' });
    const refs = ['a', 'b', 'c', 'd', 'e'].map((n) => ref(`exec:gate/${n}`));
    const pending = provider.fetch(refs, { signal: AbortSignal.timeout(30_000) });
    const runningNow = () => readdirSync(dir).filter((f) => f.endsWith('.running')).length;
    await eventually(() => (runningNow() >= 2 ? true : undefined), 'two helpers to run');
    writeFileSync(join(dir, 'go'), '');
    const outcomes = await pending;
    assert.equal(outcomes.length, 5);
    for (const o of outcomes) assert.ok(Number(value(o).text) <= 2, 'never more than two at once');
    await provider.close?.();
  });

  it('docs/exec-helpers.md lists every setting, the variables a helper gets (generated) and the exit codes', () => {
    const doc = readFileSync(new URL('../../docs/exec-helpers.md', import.meta.url), 'utf8');
    for (const name of Object.keys(EXEC_SETTINGS)) assert.ok(doc.includes(`\`${name}\``), name);
    assert.match(doc, /<!-- generated:exec-helper-env -->/);
    for (const code of ['0', '64', '66', '75', '77']) assert.match(doc, new RegExp(`^\\| ${code} +\\|`, 'm'));
    assert.ok(doc.includes(VERSION_LINE));
  });
});

describe('exec: references through the built agent', () => {
  let dir: string;
  let work: string;
  const write = (name: string, body: string) => {
    const path = join(dir, name);
    writeFileSync(path, `#!${process.execPath}\n${body}\n`, { mode: 0o755 });
  };
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'secret-agent-agent-helpers-'));
    work = mkdtempSync(join(tmpdir(), 'secret-agent-agent-helper-work-'));
    chmodSync(dir, 0o755);
  });
  after(() => {
    rmSync(dir, { recursive: true, force: true });
    rmSync(work, { recursive: true, force: true });
  });

  it('init mode writes what the helper printed; the helper sees the pod, never the agent’s env', async () => {
    using secrets = memoryDir();
    const password = canary('exec-password');
    write(
      'vault-ish',
      `process.stdout.write(JSON.stringify({ password: ${JSON.stringify(password)}, asked: process.argv[2], env: Object.keys(process.env).sort(), nodeOptions: process.env.NODE_OPTIONS, pod: process.env.POD_NAMESPACE + '/' + process.env.POD_NAME }));`,
    );
    const run = await runAgent({
      SECRETS_DIR: secrets.path,
      SECRET_0_REF: 'exec:vault-ish/prod/db#password',
      SECRET_0_FILENAME: 'db-password',
      SECRET_1_REF: 'exec:vault-ish/prod/db',
      SECRET_1_FILENAME: 'db.json',
      EXEC_HELPERS_DIR: dir,
      POD_NAMESPACE: 'shop',
      POD_NAME: 'web-1',
      AWS_SECRET_ACCESS_KEY: canary('agent-credential'),
    });
    assert.equal(run.code, 0, run.stderr);
    assert.equal(readFileSync(join(secrets.path, 'db-password'), 'utf8'), password);
    const seen = JSON.parse(readFileSync(join(secrets.path, 'db.json'), 'utf8')) as {
      asked: string;
      env: string[];
      nodeOptions: string;
      pod: string;
    };
    assert.equal(seen.asked, 'prod/db');
    assert.equal(seen.pod, 'shop/web-1');
    assert.ok(!seen.env.includes('AWS_SECRET_ACCESS_KEY'), 'the agent’s credentials stay with the agent');
    assert.ok(!seen.env.includes('SECRETS_DIR'));
    // Never the agent's NODE_OPTIONS (its heap cap): the helper's own, which keeps its inspector shut.
    assert.equal(seen.nodeOptions, '--disable-sigusr1');
  });

  it('retries a helper that exits 75 with the usual backoff, then delivers', async () => {
    using secrets = memoryDir();
    const value = canary('after-retry');
    const counter = join(work, 'attempts');
    write(
      'flaky',
      `import { existsSync, readFileSync, writeFileSync } from 'node:fs';
const file = ${JSON.stringify(counter)};
const n = existsSync(file) ? Number(readFileSync(file, 'utf8')) + 1 : 1;
writeFileSync(file, String(n));
if (n < 3) { process.stderr.write('backend busy, try later\\n'); process.exit(75); }
process.stdout.write(${JSON.stringify(value)});`,
    );
    const run = await runAgent({
      SECRETS_DIR: secrets.path,
      SECRET_0_REF: 'exec:flaky/x',
      SECRET_0_FILENAME: 'x',
      EXEC_HELPERS_DIR: dir,
    });
    assert.equal(run.code, 0, run.stderr);
    assert.equal(readFileSync(join(secrets.path, 'x'), 'utf8'), value);
    assert.equal(readFileSync(counter, 'utf8'), '3');
    const retries = run.logs.filter((l) => l.msg === 'transient backend errors; retrying');
    assert.equal(retries.length, 2);
    assert.deepEqual(retries[0]!.reasons, ['unavailable']);
    const [failed] = retries[0]!.secrets as { detail: string; endpoint: string }[];
    assert.match(failed!.detail, /exited with 75 \(temporary failure\): backend busy, try later$/);
    assert.equal(failed!.endpoint, join(dir, 'flaky'));
  });

  it('a permanent failure stops at once, its message withheld where it shows the value', async () => {
    using secrets = memoryDir();
    const leaked = canary('stderr-leak');
    write(
      'careless',
      `process.stdout.write(${JSON.stringify(leaked)}); process.stderr.write('could not parse ' + ${JSON.stringify(leaked)} + '\\n'); process.exit(1);`,
    );
    const run = await runAgent({
      SECRETS_DIR: secrets.path,
      SECRET_0_REF: 'exec:careless/x',
      SECRET_0_FILENAME: 'x',
      EXEC_HELPERS_DIR: dir,
    });
    // runAgent has already scanned stdout and stderr for the canary.
    assert.equal(run.code, 1);
    assert.match(
      run.stderr,
      /SECRET_0 \(exec:careless\/x\): internal: helper "careless" exited with 1: \(its message is withheld/,
    );
    assert.equal(run.logs.filter((l) => l.msg === 'transient backend errors; retrying').length, 0);
  });

  it('a missing helper is a configuration error before any helper runs', async () => {
    using secrets = memoryDir();
    const marker = join(work, 'ran');
    write(
      'marks',
      `import { writeFileSync } from 'node:fs'; writeFileSync(${JSON.stringify(marker)}, ''); process.stdout.write('x');`,
    );
    const run = await runAgent({
      SECRETS_DIR: secrets.path,
      SECRET_0_REF: 'exec:marks/x',
      SECRET_0_FILENAME: 'a',
      SECRET_1_REF: 'exec:az-keyvault/prod/db',
      SECRET_1_FILENAME: 'b',
      SECRET_2_REF: 'exec:az-keyvault/prod/api',
      SECRET_2_FILENAME: 'c',
      EXEC_HELPERS_DIR: dir,
    });
    assert.equal(run.code, 2);
    assert.match(
      run.stderr,
      /EXEC_HELPERS_DIR: ".*" has no helper "az-keyvault" \(ENOENT\), which SECRET_1, SECRET_2 run\. Fix: add the helper/,
    );
    assert.ok(!existsSync(marker), 'no helper ran');
  });

  it('refuses a reference that names a path, describing it by its shape', async () => {
    using secrets = memoryDir();
    const run = await runAgent({
      SECRETS_DIR: secrets.path,
      SECRET_0_REF: 'exec:../../bin/sh/-c',
      SECRET_0_FILENAME: 'a',
      EXEC_HELPERS_DIR: dir,
    });
    assert.equal(run.code, 2);
    assert.match(
      run.stderr,
      /SECRET_0_REF: the helper name after exec: \(a value of 2 characters\) is not a plain file name: it is \. or \.\./,
    );
  });

  it('the sidecar rotates when the helper’s answer changes, with the version the helper names', async () => {
    using secrets = memoryDir();
    const source = join(work, 'current');
    const first = canary('first');
    const second = canary('second');
    writeFileSync(source, first);
    write(
      'from-file',
      `import { readFileSync } from 'node:fs';
const value = readFileSync(${JSON.stringify(source)}, 'utf8');
process.stderr.write('secret-agent-version: v-' + (value.includes('first') ? 1 : 2) + '\\n');
process.stdout.write(value);`,
    );
    const agent = startAgent({
      AGENT_MODE: 'sidecar',
      SECRETS_DIR: secrets.path,
      SECRET_0_REF: 'exec:from-file/current',
      SECRET_0_FILENAME: 'current',
      EXEC_HELPERS_DIR: dir,
      REFRESH_INTERVAL: '1s',
      AGENT_HTTP_ADDR: '127.0.0.1:0',
    });
    try {
      await agent.waitForLog((l) => l.msg === 'secrets written');
      assert.equal(readFileSync(join(secrets.path, 'current'), 'utf8'), first);
      writeFileSync(source, second);
      await agent.waitForLog((l) => l.msg === 'rotated');
      assert.equal(readFileSync(join(secrets.path, 'current'), 'utf8'), second);
    } finally {
      assert.equal((await agent.stop()).code, 0);
    }
  });
});
