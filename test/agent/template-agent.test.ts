import assert from 'node:assert/strict';
import {
  chmodSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { assertNoCanary, canary } from '../support/canary.ts';
import { eventually, memoryDir, runAgent, startAgent } from '../support/run-agent.ts';

/**
 * FORMAT=template through the built agent with the file: provider: the files and modes a mixed set
 * gets in init mode, the exit codes of a bad template (2, before any fetch) and of a value that does
 * not fit it (1, nothing written), and a sidecar that re-renders a template when either secret it
 * reads rotates, tells the app once per debounce window, and keeps the last good file through a bad
 * value. runAgent and startAgent check all output for canaries.
 */

let sources: string;

/** Writes a source file the way a backend changes a value: whole, never half-written. */
function writeSource(name: string, content: string): string {
  const path = join(sources, name);
  writeFileSync(`${path}.tmp`, content, { mode: 0o644 });
  renameSync(`${path}.tmp`, path);
  return path;
}

const read = (dir: string, name: string) => {
  try {
    return readFileSync(join(dir, name), 'utf8');
  } catch {
    return undefined;
  }
};

const mode = (dir: string, name: string) => statSync(join(dir, name)).mode & 0o777;

interface Db {
  host: string;
  port: number;
  user: string;
  password?: string;
  options: { sslmode: string };
}

const dbValue = (password: string | undefined): Db => ({
  host: 'db.internal',
  port: 5432,
  user: 'app',
  ...(password === undefined ? {} : { password }),
  options: { sslmode: 'require' },
});

describe('FORMAT=template, through the built agent', () => {
  before(() => {
    sources = mkdtempSync(join(tmpdir(), 'secret-agent-template-sources-'));
    chmodSync(sources, 0o755);
  });
  after(() => rmSync(sources, { recursive: true, force: true }));

  it('init: writes a template reading two secrets by NAME beside json, yaml, properties and env files of the same set', async () => {
    using dir = memoryDir();
    const password = canary('pw');
    const apiKey = canary('api');
    const db = writeSource('init-db.json', JSON.stringify(dbValue(password)));
    const api = writeSource('init-api-key', apiKey);
    const run = await runAgent({
      SECRETS_DIR: dir.path,
      SECRET_0_REF: `file:${db}`,
      SECRET_0_NAME: 'db',
      SECRET_0_FORMAT: 'json',
      SECRET_0_FILENAME: 'db.json',
      SECRET_0_MODE: '0440',
      SECRET_1_REF: `file:${api}`,
      SECRET_1_NAME: 'api',
      SECRET_1_FILENAME: 'api-key',
      SECRET_2_REF: `file:${db}`,
      SECRET_2_FORMAT: 'template',
      SECRET_2_FILENAME: 'app.env',
      SECRET_2_MODE: '0600',
      SECRET_2_TEMPLATE: [
        '# {{! a comment, not written }}rendered by secret-agent',
        'DATABASE_URL=postgres://{{secrets.db.user}}:{{secrets.db.password}}@{{host}}:{{port}}/app',
        'API_KEY={{secrets.api}}',
        '{{#options}}',
        'PGSSLMODE={{sslmode}}',
        '{{/options}}',
        'REPLICA={{#replica}}{{replica}}{{/replica}}{{^replica}}none{{/replica}}',
        '',
      ].join('\n'),
      SECRET_3_REF: `file:${db}`,
      SECRET_3_FORMAT: 'yaml',
      SECRET_3_FILENAME: 'config/db.yaml',
      SECRET_3_MODE: '0640',
      SECRET_4_REF: `file:${db}`,
      SECRET_4_FORMAT: 'properties',
      SECRET_4_FILENAME: 'config/db.properties',
      SECRET_4_MODE: '0444',
      SECRET_5_REF: `file:${db}`,
      SECRET_5_FORMAT: 'env',
      SECRET_5_FILENAME: 'db.sh',
      SECRET_6_REF: `file:${db}#options`,
      SECRET_6_FORMAT: 'template',
      SECRET_6_FILENAME: 'sslmode.conf',
      SECRET_6_TEMPLATE: 'sslmode = {{sslmode}}\n',
    });
    assert.equal(run.code, 0, run.stderr);
    assert.deepEqual(
      readdirSync(dir.path)
        .filter((n) => !n.startsWith('..'))
        .sort(),
      ['api-key', 'app.env', 'config', 'db.json', 'db.sh', 'sslmode.conf'],
    );
    const files: [string, string, number][] = [
      [
        'db.json',
        `{\n  "host": "db.internal",\n  "port": 5432,\n  "user": "app",\n  "password": "${password}",\n  "options": {\n    "sslmode": "require"\n  }\n}\n`,
        0o440,
      ],
      ['api-key', apiKey, 0o400],
      [
        'app.env',
        `# rendered by secret-agent\nDATABASE_URL=postgres://app:${password}@db.internal:5432/app\nAPI_KEY=${apiKey}\nPGSSLMODE=require\nREPLICA=none\n`,
        0o600,
      ],
      [
        'config/db.yaml',
        `host: db.internal\nport: 5432\nuser: app\npassword: ${password}\noptions:\n  sslmode: require\n`,
        0o640,
      ],
      [
        'config/db.properties',
        `host=db.internal\nport=5432\nuser=app\npassword=${password}\noptions.sslmode=require\n`,
        0o444,
      ],
      [
        'db.sh',
        `export host='db.internal'\nexport port='5432'\nexport user='app'\nexport password='${password}'\nexport options='{"sslmode":"require"}'\n`,
        0o400,
      ],
      ['sslmode.conf', 'sslmode = require\n', 0o400],
    ];
    for (const [name, content, bits] of files) {
      assert.equal(read(dir.path, name), content, name);
      assert.equal(mode(dir.path, name).toString(8), bits.toString(8), `mode of ${name}`);
    }
    const done = run.logs.find((l) => l.msg === 'secrets written');
    assert.equal(done?.files, 7);
  });

  it('init: exits 2 on a template syntax error or an unknown secret name, before fetching anything', async () => {
    using dir = memoryDir();
    // Neither source exists: a fetch would fail with not-found, so a config error alone proves none ran.
    const run = await runAgent({
      SECRETS_DIR: dir.path,
      SECRET_0_REF: `file:${join(sources, 'no-such-db.json')}`,
      SECRET_0_NAME: 'db',
      SECRET_0_FILENAME: 'db.json',
      SECRET_1_REF: `file:${join(sources, 'no-such-api-key')}`,
      SECRET_1_FORMAT: 'template',
      SECRET_1_FILENAME: 'app.env',
      SECRET_1_TEMPLATE: 'URL=postgres://{{secrets.db.user}}@x\n  {{#flags}}{{.}}\n',
      SECRET_2_REF: `file:${join(sources, 'no-such-api-key')}`,
      SECRET_2_FORMAT: 'template',
      SECRET_2_FILENAME: 'other.env',
      SECRET_2_TEMPLATE: 'KEY={{secrets.apii.key}}',
    });
    assert.equal(run.code, 2, run.stderr);
    assert.match(run.stderr, /^secret-agent: invalid configuration\n/);
    assert.match(
      run.stderr,
      /\n {2}SECRET_1_TEMPLATE: line \d+, column \d+: unclosed section "flags"\. Fix: /,
    );
    assert.match(
      run.stderr,
      /\n {2}SECRET_2_TEMPLATE: line 1, column 5: \{\{secrets\.apii\.key\}\} names no secret the agent fetches \(names: "db"\)\. Fix: set SECRET_<N>_NAME/,
    );
    const problems = run.logs.filter((l) => l.msg === 'invalid configuration').map((l) => l.field);
    assert.deepEqual(problems, ['SECRET_1_TEMPLATE', 'SECRET_2_TEMPLATE']);
    assert.ok(!/not-found|no file at/.test(run.stdout + run.stderr), 'nothing was fetched');
    assert.ok(!run.logs.some((l) => l.msg === 'starting'), 'stopped before starting any work');
    assert.deepEqual(readdirSync(dir.path), []);
  });

  it('init: exits 1 and writes nothing when a value does not fit the template, naming the tag, not the value', async () => {
    using dir = memoryDir();
    const password = canary('pw');
    const db = writeSource('misfit-db.json', JSON.stringify({ user: 'app', pass: password }));
    const api = writeSource('misfit-api-key', canary('api'));
    const env = {
      SECRETS_DIR: dir.path,
      SECRET_0_REF: `file:${db}`,
      SECRET_0_NAME: 'db',
      SECRET_0_FORMAT: 'json',
      SECRET_0_FILENAME: 'db.json',
      SECRET_1_REF: `file:${api}`,
      SECRET_1_FORMAT: 'template',
      SECRET_1_FILENAME: 'app.env',
      SECRET_1_TEMPLATE: 'KEY={{.}}\nURL=postgres://{{secrets.db.user}}:{{secrets.db.password}}@db\n',
    };
    const run = await runAgent(env);
    assert.equal(run.code, 1, run.stderr);
    assert.deepEqual(readdirSync(dir.path), []);
    assert.match(run.stderr, /1 of 2 secrets could not be delivered; nothing was written/);
    assert.match(
      run.stderr,
      /SECRET_1 \(file:.*\): format: SECRET_1_TEMPLATE line 2, column 36: \{\{secrets\.db\.password\}\} names no key of the secret it reads\n/,
    );
    const failure = run.logs.find((l) => l.msg === 'secret not delivered');
    assert.equal(failure?.id, 'SECRET_1');
    assert.equal(failure?.reason, 'format');

    // The secret it reads failed itself: both are reported, each for what it is.
    const missing = await runAgent({ ...env, SECRET_0_REF: `file:${join(sources, 'gone.json')}` });
    assert.equal(missing.code, 1, missing.stderr);
    assert.deepEqual(readdirSync(dir.path), []);
    assert.match(missing.stderr, /2 of 2 secrets could not be delivered/);
    assert.match(missing.stderr, /SECRET_0 \(file:.*gone\.json\): not-found: /);
    assert.match(
      missing.stderr,
      /SECRET_1 \(file:.*\): format: the template reads the secret named "db" \(SECRET_0\), which was not delivered\n\s+fix: fix SECRET_0 first/,
    );
  });

  it('sidecar: re-renders when either secret rotates, swaps the set at once, tells the app once per debounce, and keeps the last good file through a bad value', async () => {
    using dir = memoryDir();
    const pw = [canary('pw1'), canary('pw2'), canary('pw3')];
    const keys = [canary('key1'), canary('key2'), canary('key3')];
    const db = writeSource('sidecar-db.json', JSON.stringify(dbValue(pw[0])));
    const api = writeSource('sidecar-api-key', keys[0]!);
    const appConf = (password: string, key: string) =>
      `url=postgres://app:${password}@db.internal:5432/app\nkey=${key}\n`;

    const calls: { url: string; body: string }[] = [];
    const app = createServer((req, res) => {
      let body = '';
      req.on('data', (d: Buffer) => (body += d.toString()));
      req.on('end', () => {
        calls.push({ url: req.url!, body });
        res.end();
      });
    });
    await new Promise<void>((r) => app.listen(0, '127.0.0.1', r));
    const debounceMs = 3000;
    const agent = startAgent({
      AGENT_MODE: 'sidecar',
      SECRETS_DIR: dir.path,
      REFRESH_INTERVAL: '1s',
      AGENT_HTTP_ADDR: '127.0.0.1:0',
      ROTATION_HTTP_URL: `POST http://127.0.0.1:${(app.address() as AddressInfo).port}/-/reload`,
      ROTATION_DEBOUNCE: `${debounceMs}ms`,
      SECRET_0_REF: `file:${db}`,
      SECRET_0_NAME: 'db',
      SECRET_0_FORMAT: 'json',
      SECRET_0_FILENAME: 'db.json',
      SECRET_1_REF: `file:${api}`,
      SECRET_1_FORMAT: 'template',
      SECRET_1_FILENAME: 'app.conf',
      SECRET_1_TEMPLATE:
        'url=postgres://{{secrets.db.user}}:{{secrets.db.password}}@{{secrets.db.host}}:{{secrets.db.port}}/app\nkey={{.}}\n',
    });
    const rotations = () => agent.output().logs.filter((l) => l.msg === 'rotated').length;
    const rotated = (n: number) => eventually(() => (rotations() >= n ? true : undefined), `rotation ${n}`);
    const told = (n: number) =>
      eventually(() => (calls.length >= n ? true : undefined), `notification ${n}`, debounceMs + 20_000);
    const changedFiles = (i: number) => {
      assertNoCanary(calls[i]!.body, 'the rotation request body');
      return (JSON.parse(calls[i]!.body) as { changedFiles: string[] }).changedFiles;
    };
    try {
      await agent.waitForLog((l) => l.msg === 'secrets written');
      assert.equal(read(dir.path, 'app.conf'), appConf(pw[0]!, keys[0]!));
      assert.equal(JSON.parse(read(dir.path, 'db.json')!).password, pw[0]);
      assert.equal(readlinkSync(join(dir.path, 'app.conf')), '..data/app.conf');
      const first = readlinkSync(join(dir.path, '..data'));

      // One secret rotates: the template reading it is rendered again, in a new payload.
      writeSource('sidecar-api-key', keys[1]!);
      await rotated(1);
      const second = readlinkSync(join(dir.path, '..data'));
      assert.notEqual(second, first, 'a new payload directory');
      assert.equal(readFileSync(join(dir.path, second, 'app.conf'), 'utf8'), appConf(pw[0]!, keys[1]!));
      assert.equal(JSON.parse(readFileSync(join(dir.path, second, 'db.json'), 'utf8')).password, pw[0]);
      await eventually(
        () => (existsSync(join(dir.path, first)) ? undefined : true),
        'the old payload removed',
      );
      await told(1);
      assert.equal(calls[0]!.url, '/-/reload');
      assert.deepEqual(changedFiles(0), ['app.conf']);

      // Both rotate, a refresh cycle apart but within the debounce: the app hears of it once.
      writeSource('sidecar-api-key', keys[2]!);
      await rotated(2);
      writeSource('sidecar-db.json', JSON.stringify(dbValue(pw[1])));
      await rotated(3);
      assert.equal(calls.length, 1, 'still waiting out the debounce');
      assert.equal(read(dir.path, 'app.conf'), appConf(pw[1]!, keys[2]!));
      await told(2);
      assert.deepEqual(changedFiles(1), ['app.conf', 'db.json']);
      await new Promise((r) => setTimeout(r, debounceMs + 1000));
      assert.equal(calls.length, 2, 'two rotations in one debounce window, one notification');

      // The password disappears: the template cannot render, so its last good file stays, and the
      // error names the tag, never the value.
      const good = read(dir.path, 'app.conf');
      writeSource('sidecar-db.json', JSON.stringify(dbValue(undefined)));
      const misfit = await agent.waitForLog(
        (l) => l.msg === 'new value does not fit the format; keeping the last good one',
      );
      assert.equal(misfit.id, 'SECRET_1');
      assert.equal(misfit.reason, 'format');
      assert.equal(
        misfit.detail,
        'SECRET_1_TEMPLATE line 1, column 36: {{secrets.db.password}} names no key of the secret it reads',
      );
      await eventually(
        () => (JSON.parse(read(dir.path, 'db.json')!).password === undefined ? true : undefined),
        'db.json, which the new value fits, written',
      );
      assert.equal(read(dir.path, 'app.conf'), good, 'the last good template file kept');
      await told(3);
      assert.deepEqual(changedFiles(2), ['db.json'], 'the kept file is no change');

      // The value is fixed: the template renders again.
      writeSource('sidecar-db.json', JSON.stringify(dbValue(pw[2])));
      await eventually(
        () => (read(dir.path, 'app.conf') === appConf(pw[2]!, keys[2]!) ? true : undefined),
        'the template rendered again',
      );
      await told(4);
      assert.deepEqual(changedFiles(3), ['app.conf', 'db.json']);
    } finally {
      assert.equal((await agent.stop()).code, 0);
      app.close();
    }
  });
});
