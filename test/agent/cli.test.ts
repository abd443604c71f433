/**
 * The built agent (dist/agent.js) as a person meets it: --help, --version, its exit codes, and every
 * configuration mistake reported at start (exit 2, stderr for a person, one JSON line per problem
 * on stdout), never echoing a value. Issue 10's agent items. Build first: `node images/build.ts`.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readdirSync, rmSync, mkdtempSync, writeFileSync, chmodSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import packageJson from '../../package.json' with { type: 'json' };
import { AGENT_SETTINGS } from '../../agent/contract/agent-settings.ts';
import { SECRET_SETTINGS } from '../../agent/contract/secret-settings.ts';
import { CLIENT_ENV } from '../../agent/providers/provider-env.ts';
import { REFERENCE_FORMS } from '../../agent/contract/reference.ts';
import { EXEC_SETTINGS } from '../../agent/providers/exec/env.ts';
import { VAULT_ENV } from '../../agent/providers/vault/env.ts';
import { REQUIRED_NODE_MAJOR } from '../../agent/require-node-version.ts';
import { assertNoCanary, canary } from '../support/canary.ts';
import { AGENT_JS, memoryDir, runAgent, type AgentRun } from '../support/run-agent.ts';
import { olderSystemNode, SYSTEM_PATH } from '../support/system-node.ts';

let sources: string;
const value = { password: '' };

/** Exit 2, each problem on stderr and as an `invalid configuration` log line naming its field. */
function assertConfigErrors(run: AgentRun, fields: readonly string[]): void {
  assert.equal(run.code, 2, `stderr: ${run.stderr}\nstdout: ${run.stdout}`);
  assert.match(run.stderr, /^secret-agent: invalid configuration\n/);
  const logged = run.logs.filter((l) => l.msg === 'invalid configuration');
  assert.deepEqual(logged.map((l) => l.field).sort(), [...fields].sort());
  for (const l of logged) {
    assert.equal(l.level, 'error');
    assert.ok(typeof l.problem === 'string' && typeof l.fix === 'string');
    assert.ok(run.stderr.includes(`  ${String(l.field)}: ${String(l.problem)}. Fix: ${String(l.fix)}\n`));
  }
  assert.ok(!run.logs.some((l) => l.msg === 'fetched'), 'nothing was fetched');
}

describe('the agent command line', () => {
  before(() => {
    sources = mkdtempSync(join(tmpdir(), 'secret-agent-cli-'));
    chmodSync(sources, 0o755);
    value.password = canary('pw');
    writeFileSync(join(sources, 'db.json'), JSON.stringify({ user: 'app', password: value.password }));
  });
  after(() => rmSync(sources, { recursive: true, force: true }));

  // Item 8.
  it('--help prints usage, the exit codes and every declared setting, and exits 0', () => {
    const run = spawnSync(process.execPath, [AGENT_JS, '--help'], { encoding: 'utf8', env: {} });
    assert.equal(run.status, 0, run.stderr);
    assert.equal(run.stderr, '');
    const out = run.stdout;
    assert.match(out, /^secret-agent \d+\.\d+\.\d+: /);
    assert.match(out, /Usage:\n/);
    for (const code of ['0', '1', '2', '70']) assert.match(out, new RegExp(`\\n  ${code} +\\S`));
    const names = [
      ...Object.keys(AGENT_SETTINGS),
      ...Object.keys(SECRET_SETTINGS).map((n) => `SECRET_<N>_${n}`),
      ...CLIENT_ENV.map((v) => v.name),
      ...VAULT_ENV.map((v) => v.name),
      ...Object.keys(EXEC_SETTINGS),
      ...REFERENCE_FORMS.map((f) => f.form),
    ];
    for (const name of names) assert.ok(out.includes(`\n  ${name}`), `--help lists ${name}`);
    for (const line of out.split('\n')) assert.ok(line.length <= 100, `a line over 100 characters: ${line}`);
    assert.equal(spawnSync(process.execPath, [AGENT_JS, '-h'], { encoding: 'utf8', env: {} }).stdout, out);
  });

  it('--version prints the version and exits 0', () => {
    const run = spawnSync(process.execPath, [AGENT_JS, '--version'], { encoding: 'utf8', env: {} });
    assert.equal(run.status, 0);
    assert.equal(run.stdout, `secret-agent ${packageJson.version}\n`);
  });

  it('refuses arguments it does not take, echoing only option-like ones', () => {
    const pasted = canary('argv');
    for (const [arg, shown] of [
      ['--verison', /"--verison" is not an argument the agent takes/],
      [pasted, /\(a value of \d+ characters\) is not an argument/],
    ] as const) {
      const run = spawnSync(process.execPath, [AGENT_JS, arg], { encoding: 'utf8', env: {} });
      assert.equal(run.status, 2);
      assert.match(run.stderr, shown);
      assert.match(run.stderr, /takes only --help and --version/);
      assertNoCanary(run.stderr + run.stdout, 'the agent’s output');
      assert.equal(JSON.parse(run.stdout.trim()).field, 'arguments');
    }
  });

  // Item 1.
  it('describes a pasted secret by its shape, in SECRET_<N>_REF and the legacy SECRET_ARN', async () => {
    using dir = memoryDir();
    const pasted = canary('pasted');
    // runAgent fails the test if the canary shows in stdout or stderr, in any encoding.
    const indexed = await runAgent({ SECRETS_DIR: dir.path, SECRET_0_REF: pasted, SECRET_0_FILENAME: 'db' });
    assertConfigErrors(indexed, ['SECRET_0_REF']);
    assert.match(
      indexed.stderr,
      new RegExp(`SECRET_0_REF: \\(a value of ${pasted.length} characters\\) is not a reference`),
    );
    const legacy = await runAgent({ SECRETS_DIR: dir.path, SECRET_ARN: `arn:aws:${pasted}` });
    assertConfigErrors(legacy, ['SECRET_ARN']);
    assert.match(
      legacy.stderr,
      /SECRET_ARN: the ARN \(a value of \d+ characters\) is not a Secrets Manager secret ARN/,
    );
    assert.deepEqual(readdirSync(dir.path), []);
  });

  // Item 4.
  it('refuses misspelt settings instead of ignoring them: AGENT_MOD=sidecar does not run init mode', async () => {
    using dir = memoryDir();
    const run = await runAgent({
      SECRETS_DIR: dir.path,
      SECRET_0_REF: `file:${sources}/db.json#password`,
      SECRET_0_FILENAME: 'db',
      AGENT_MOD: 'sidecar',
      REFRESH_INTERVALL: '1m',
      ROTATION_SIGNL: 'SIGHUP',
      FILEMODE: '0440',
      SECRET_DIR: '/elsewhere',
      SECRET_0_FORMATT: 'raw',
      // What a real pod carries: never flagged.
      HOSTNAME: 'web-1',
      HOME: '/home/nonroot',
      NODE_OPTIONS: '--max-old-space-size=96',
      KUBERNETES_SERVICE_HOST: '10.0.0.1',
      AWS_ROLE_ARN: 'arn:aws:iam::123456789012:role/app',
      VAULT_CACERT: '/vault/ca.crt',
    });
    assertConfigErrors(run, [
      'AGENT_MOD',
      'REFRESH_INTERVALL',
      'ROTATION_SIGNL',
      'FILEMODE',
      'SECRET_DIR',
      'SECRET_0_FORMATT',
    ]);
    assert.match(run.stderr, /AGENT_MOD: is not a variable the agent reads.*Fix: did you mean AGENT_MODE\?/);
    assert.match(run.stderr, /SECRET_DIR: .*did you mean SECRETS_DIR\?/);
    assert.match(run.stderr, /SECRET_0_FORMATT: .*did you mean SECRET_0_FORMAT\?/);
    assert.ok(!run.stderr.includes('/elsewhere'), 'values are not shown');
    assert.deepEqual(readdirSync(dir.path), []);
  });

  // Item 5.
  it('refuses modes that let others write, or anyone execute, and modes without their leading 0', async () => {
    using dir = memoryDir();
    const run = await runAgent({
      SECRETS_DIR: dir.path,
      FILE_MODE: '0777',
      SECRET_0_REF: `file:${sources}/db.json`,
      SECRET_0_FILENAME: 'db',
      SECRET_0_MODE: '644',
    });
    assertConfigErrors(run, ['FILE_MODE', 'SECRET_0_MODE']);
    assert.match(
      run.stderr,
      /FILE_MODE: "0777" \(rwxrwxrwx\) lets the group or others write the file, or anyone execute it/,
    );
    assert.match(run.stderr, /SECRET_0_MODE: "644" has no leading 0.*Fix: write 0644 for rw-r--r--/);
    assert.deepEqual(readdirSync(dir.path), []);
  });

  // Item 6.
  it('exits 2 before any fetch when a backend setting is missing: region, project, Vault address and credentials', async () => {
    using dir = memoryDir();
    const run = await runAgent({
      SECRETS_DIR: dir.path,
      SECRET_0_REF: 'aws:prod/db',
      SECRET_0_FILENAME: 'db',
      SECRET_1_REF: 'vault:secret/data/app',
      SECRET_1_FILENAME: 'app',
      SECRET_2_REF: 'gcp:api',
      SECRET_2_FILENAME: 'api',
      SECRET_3_REF: 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:tls-AbCdEf',
      SECRET_3_FILENAME: 'tls',
    });
    assertConfigErrors(run, ['AWS_REGION', 'GCP_PROJECT', 'VAULT_ADDR', 'VAULT_TOKEN']);
    assert.match(
      run.stderr,
      /AWS_REGION: is not set, but secrets named without a region \(aws:NAME\) need it: SECRET_0\. Fix: /,
    );
    assert.ok(!run.logs.some((l) => l.msg === 'starting'), 'refused before the run starts');
    assert.deepEqual(readdirSync(dir.path), []);
  });

  it('exits 2 when two secrets write one file, naming both, in init and sidecar mode', async () => {
    using dir = memoryDir();
    const ref = `file:${sources}/db.json`;
    // Known from the names alone: refused before fetching.
    const named = await runAgent({
      SECRETS_DIR: dir.path,
      SECRET_0_REF: ref,
      SECRET_0_FILENAME: 'password',
      SECRET_1_REF: ref,
      SECRET_1_FILENAME: 'user',
      SECRET_2_REF: `${ref}#password`,
      SECRET_2_FILENAME: 'password',
    });
    assertConfigErrors(named, ['SECRET_2_FILENAME']);
    assert.match(named.stderr, /SECRET_2_FILENAME: SECRET_0 and SECRET_2 both write "password"/);
    // Known once a split secret's keys are: refused before writing.
    for (const mode of ['init', 'sidecar']) {
      const split = await runAgent({
        SECRETS_DIR: dir.path,
        AGENT_MODE: mode,
        AGENT_HTTP_ADDR: '127.0.0.1:0',
        SECRET_0_REF: `${ref}#user`,
        SECRET_0_FILENAME: 'password',
        SECRET_1_REF: ref,
        SECRET_1_FORMAT: 'split',
      });
      assert.equal(split.code, 2, `${mode}: ${split.stderr}`);
      assert.match(
        split.stderr,
        /SECRET_1_FILENAME: SECRET_0 and SECRET_1 both write "password" \(SECRET_1: FORMAT=split writes each key as a file\)/,
      );
      assert.ok(split.logs.some((l) => l.msg === 'invalid configuration' && l.field === 'SECRET_1_FILENAME'));
      assert.deepEqual(readdirSync(dir.path), [], mode);
    }
  });

  // Item 7.
  describe('a taken AGENT_HTTP_ADDR', () => {
    let taken: Server;
    let port: number;
    before(async () => {
      taken = createServer();
      await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
      port = (taken.address() as { port: number }).port;
    });
    after(() => taken.close());

    it('is a configuration error naming AGENT_HTTP_ADDR and the fix (exit 2), found before fetching', async () => {
      using dir = memoryDir();
      const run = await runAgent({
        SECRETS_DIR: dir.path,
        AGENT_MODE: 'sidecar',
        AGENT_HTTP_ADDR: `127.0.0.1:${port}`,
        SECRET_0_REF: `file:${sources}/db.json`,
        SECRET_0_FILENAME: 'db',
      });
      assertConfigErrors(run, ['AGENT_HTTP_ADDR']);
      assert.match(
        run.stderr,
        new RegExp(`AGENT_HTTP_ADDR: 127\\.0\\.0\\.1:${port} is already in use \\(EADDRINUSE\\)`),
      );
      assert.match(run.stderr, /Fix: set AGENT_HTTP_ADDR to a free port/);
      assert.doesNotMatch(run.stderr, /internal error/);
      assert.deepEqual(readdirSync(dir.path), []);
    });
  });

  // Item 11.
  describe('on a Node older than the images’', () => {
    it('requires the Node major package.json requires', () => {
      assert.equal(packageJson.engines.node, `>=${REQUIRED_NODE_MAJOR}`);
    });

    const oldNode = olderSystemNode();
    it(
      'stops at once with a plain message, as text and as a JSON line (the node on PATH)',
      { skip: oldNode ? false : 'the `node` on PATH is not older than the required version' },
      () => {
        const run = spawnSync('node', [AGENT_JS], {
          encoding: 'utf8',
          env: { PATH: SYSTEM_PATH, SECRET_0_REF: 'aws:db', SECRET_0_FILENAME: 'db' },
        });
        assert.equal(run.status, 2);
        assert.equal(
          run.stderr,
          `secret-agent: Node.js ${oldNode} is too old: this program needs Node.js ${REQUIRED_NODE_MAJOR} or newer. Fix: run it with Node.js ${REQUIRED_NODE_MAJOR}, as the images do (/nodejs/bin/node), or with node_modules/.bin/node after npm ci\n`,
        );
        const line = JSON.parse(run.stdout) as Record<string, unknown>;
        assert.deepEqual(
          [line.level, line.msg, line.node],
          ['error', 'unsupported Node.js version', oldNode],
        );
        // --version too: nothing of the agent runs before the check.
        assert.equal(
          spawnSync('node', [AGENT_JS, '--version'], { encoding: 'utf8', env: { PATH: SYSTEM_PATH } }).status,
          2,
        );
      },
    );

    it('stops whichever Node it finds too old (the check itself, on this Node)', () => {
      const run = spawnSync(
        process.execPath,
        [
          '--input-type=module',
          '-e',
          `Object.defineProperty(process, 'versions', { value: { ...process.versions, node: '22.9.0' } });
           Object.defineProperty(process, 'version', { value: 'v22.9.0' });
           await import(${JSON.stringify(new URL('../../agent/require-node-version.ts', import.meta.url).href)});
           process.stdout.write('not stopped');`,
        ],
        { encoding: 'utf8' },
      );
      assert.equal(run.status, 2);
      assert.match(run.stderr, /^secret-agent: Node\.js v22\.9\.0 is too old/);
      assert.doesNotMatch(run.stdout, /not stopped/);
    });
  });
});
