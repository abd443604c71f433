import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { formatDuration, parseDuration } from '../../agent/contract/duration.ts';
import { withConfigFile } from '../../agent/contract/config-file.ts';
import { parseAgentConfig, renderSecretEnv, type Env } from '../../agent/contract/env.ts';
import { ConfigErrors } from '../../agent/contract/errors.ts';
import { findPathConflict, validateRelativePath } from '../../agent/contract/path.ts';

function errorsOf(env: Env): { field: string; message: string }[] {
  try {
    parseAgentConfig(env);
  } catch (e) {
    assert.ok(e instanceof ConfigErrors, String(e));
    return e.errors.map((err) => ({ field: err.field, message: err.message }));
  }
  assert.fail('expected configuration errors');
}

describe('parseAgentConfig', () => {
  it('applies defaults for the indexed form', () => {
    const config = parseAgentConfig({ SECRET_0_REF: 'aws:db#password', SECRET_0_FILENAME: 'db/password' });
    assert.equal(config.mode, 'init');
    assert.equal(config.secretsDir, '/tmp');
    assert.equal(config.setName, 'data');
    assert.equal(config.initDeadlineMs, 60_000);
    assert.equal(config.requireMemoryFs, true);
    assert.equal(config.logLevel, 'info');
    assert.equal(config.secrets.length, 1);
    assert.deepEqual(
      { ...config.secrets[0], ref: config.secrets[0]!.ref.text },
      {
        id: 'SECRET_0',
        ref: 'aws:db#password',
        filename: 'db/password',
        format: 'raw',
        mode: 0o400,
        refreshIntervalMs: 300_000,
      },
    );
  });

  it('reads many secrets with formats, modes and a global file mode', () => {
    const config = parseAgentConfig({
      SECRETS_DIR: '/secrets',
      FILE_MODE: '0440',
      SECRET_0_REF: 'aws:a',
      SECRET_0_FILENAME: 'a',
      SECRET_1_REF: 'aws:b',
      SECRET_1_FORMAT: 'split',
      SECRET_2_REF: 'aws:c',
      SECRET_2_FILENAME: 'c.env',
      SECRET_2_FORMAT: 'dotenv',
      SECRET_2_MODE: '600',
      INIT_DEADLINE: '1m30s',
    });
    assert.deepEqual(
      config.secrets.map((s) => [s.id, s.filename, s.format, s.mode.toString(8)]),
      [
        ['SECRET_0', 'a', 'raw', '440'],
        ['SECRET_1', '', 'split', '440'],
        ['SECRET_2', 'c.env', 'dotenv', '600'],
      ],
    );
    assert.equal(config.initDeadlineMs, 90_000);
  });

  it('accepts the Flyte / aws-samples sidecar contract', () => {
    const arn = 'arn:aws:secretsmanager:us-east-2:123456789012:secret:app-XyZ123';
    const config = parseAgentConfig({ SECRET_ARN: arn, SECRET_FILENAME: 'app-token' });
    assert.equal(config.secretsDir, '/tmp');
    assert.equal(config.secrets[0]!.filename, 'app-token');
    assert.equal(config.secrets[0]!.ref.provider, 'aws');
    assert.equal(config.setName, 'data-app-token');
    assert.equal(parseAgentConfig({ SECRET_ARN: arn }).secrets[0]!.filename, 'secret');
  });

  it('collects every problem at once, each naming its variable', () => {
    const errors = errorsOf({
      AGENT_MODE: 'daemon',
      SECRETS_DIR: 'relative/dir',
      SECRET_0_REF: 'nope:x',
      SECRET_0_FILENAME: '../etc/passwd',
      SECRET_1_REF: 'aws:b',
      SECRET_1_FILENAME: 'b',
      SECRET_1_MODE: '0999',
      SECRET_1_FORMATT: 'raw',
      SECRET_3_REF: 'aws:d',
      SECRET_3_FILENAME: 'd',
      INIT_DEADLINE: 'soon',
    });
    const fields = errors.map((e) => e.field).sort();
    assert.deepEqual(fields, [
      'AGENT_MODE',
      'INIT_DEADLINE',
      'SECRETS_DIR',
      'SECRET_0_FILENAME',
      'SECRET_0_REF',
      'SECRET_1_FORMATT',
      'SECRET_1_MODE',
      'SECRET_2_REF',
    ]);
    for (const e of errors) assert.match(e.message, /Fix: \S/);
    assert.match(errors.find((e) => e.field === 'SECRET_2_REF')!.message, /gap/);
  });

  const single: [string, Env, string, RegExp][] = [
    ['nothing configured', {}, 'SECRET_0_REF', /no secret is configured/],
    ['a missing file name', { SECRET_0_REF: 'aws:a' }, 'SECRET_0_FILENAME', /is not set/],
    [
      'an absolute file name',
      { SECRET_0_REF: 'aws:a', SECRET_0_FILENAME: '/etc/passwd' },
      'SECRET_0_FILENAME',
      /absolute/,
    ],
    [
      'a reserved name',
      { SECRET_0_REF: 'aws:a', SECRET_0_FILENAME: '..data' },
      'SECRET_0_FILENAME',
      /reserved/,
    ],
    ['settings without a ref', { SECRET_0_FILENAME: 'a' }, 'SECRET_0_REF', /no reference/],
    ['a leading zero', { SECRET_00_REF: 'aws:a', SECRET_00_FILENAME: 'a' }, 'SECRET_00_REF', /leading zeros/],
    [
      'two secrets writing one file',
      { SECRET_0_REF: 'aws:a', SECRET_0_FILENAME: 'x', SECRET_1_REF: 'aws:b', SECRET_1_FILENAME: 'x' },
      'SECRET_1_FILENAME',
      /also the file name of SECRET_0/,
    ],
    [
      'a file used as a directory',
      { SECRET_0_REF: 'aws:a', SECRET_0_FILENAME: 'x', SECRET_1_REF: 'aws:b', SECRET_1_FILENAME: 'x/y' },
      'SECRET_1_FILENAME',
      /as a directory/,
    ],
    [
      'legacy and indexed together',
      { SECRET_ARN: 'aws:a', SECRET_0_REF: 'aws:b', SECRET_0_FILENAME: 'b' },
      'SECRET_ARN',
      /together/,
    ],
    [
      'SECRET_FILENAME alone',
      { SECRET_FILENAME: 'x', SECRET_0_REF: 'aws:b', SECRET_0_FILENAME: 'b' },
      'SECRET_FILENAME',
      /without SECRET_ARN/,
    ],
    [
      'a mode without read bits',
      { SECRET_0_REF: 'aws:a', SECRET_0_FILENAME: 'a', SECRET_0_MODE: '0200' },
      'SECRET_0_MODE',
      /readable file mode/,
    ],
    [
      'a signal without a target',
      { SECRET_0_REF: 'aws:a', SECRET_0_FILENAME: 'a', ROTATION_SIGNAL: 'SIGHUP' },
      'ROTATION_SIGNAL',
      /no process/,
    ],
    [
      'a bad HTTP target',
      { SECRET_0_REF: 'aws:a', SECRET_0_FILENAME: 'a', ROTATION_HTTP_URL: 'POST ftp://x' },
      'ROTATION_HTTP_URL',
      /METHOD/,
    ],
  ];
  for (const [name, env, field, problem] of single) {
    it(`rejects ${name}`, () => {
      const errors = errorsOf(env);
      const match = errors.find((e) => e.field === field);
      assert.ok(match, `expected an error for ${field}, got ${JSON.stringify(errors)}`);
      assert.match(match.message, problem);
    });
  }

  it('renders env that parses back to the same secrets', () => {
    const input = [
      { ref: 'aws:db#password', filename: 'db/password' },
      {
        ref: 'projects/p-1234/secrets/api/versions/2',
        filename: 'api',
        format: 'split' as const,
        mode: '0440',
        refreshInterval: '1m',
      },
      { ref: 'vault:secret/data/app', filename: 'app.env', format: 'dotenv' as const },
    ];
    const env = Object.fromEntries(renderSecretEnv(input).map((e) => [e.name, e.value]));
    const config = parseAgentConfig(env);
    assert.deepEqual(
      config.secrets.map((s) => ({
        ref: s.ref.text,
        filename: s.filename,
        format: s.format,
        mode: s.mode,
        refresh: s.refreshIntervalMs,
      })),
      [
        { ref: 'aws:db#password', filename: 'db/password', format: 'raw', mode: 0o400, refresh: 300_000 },
        {
          ref: 'projects/p-1234/secrets/api/versions/2',
          filename: 'api',
          format: 'split',
          mode: 0o440,
          refresh: 60_000,
        },
        {
          ref: 'vault:secret/data/app',
          filename: 'app.env',
          format: 'dotenv',
          mode: 0o400,
          refresh: 300_000,
        },
      ],
    );
  });
});

describe('durations', () => {
  it('parses Go-style durations', () => {
    assert.equal(parseDuration('30s'), 30_000);
    assert.equal(parseDuration('1m30s'), 90_000);
    assert.equal(parseDuration('1.5h'), 5_400_000);
    assert.equal(parseDuration('250ms'), 250);
    assert.equal(parseDuration('0'), 0);
    for (const bad of ['', '5', 's', '1x', '1m 30s', '-1s', '1s2'])
      assert.equal(parseDuration(bad), undefined, bad);
  });
  it('formats what it parses', () => {
    for (const ms of [250, 1000, 90_000, 5_400_000, 3_723_004])
      assert.equal(parseDuration(formatDuration(ms)), ms);
  });
});

describe('paths', () => {
  it('accepts plain relative paths and rejects escapes', () => {
    assert.equal(validateRelativePath('db/password', 'F'), 'db/password');
    for (const bad of [
      '',
      '/abs',
      'a/../b',
      '..',
      './a',
      'a//b',
      'a/',
      'a\\b',
      'a\nb',
      '..data',
      'x/..hidden',
      'a'.repeat(256),
    ]) {
      assert.throws(() => validateRelativePath(bad, 'F'), /^ConfigError|F: /, JSON.stringify(bad));
    }
  });
  it('finds files that collide or shadow directories', () => {
    assert.equal(findPathConflict(['a', 'b/c', 'b/d']), undefined);
    assert.deepEqual(findPathConflict(['a', 'a']), ['a', 'a']);
    assert.deepEqual(findPathConflict(['b', 'b/c']), ['b', 'b/c']);
  });
});

describe('split directories', () => {
  it('may hold other secrets’ files, but not sit where a file is', () => {
    const ok = parseAgentConfig({
      SECRET_0_REF: 'aws:a',
      SECRET_0_FILENAME: 'db/extra',
      SECRET_1_REF: 'aws:b',
      SECRET_1_FILENAME: 'db',
      SECRET_1_FORMAT: 'split',
    });
    assert.equal(ok.secrets.length, 2);
    const errors = errorsOf({
      SECRET_0_REF: 'aws:a',
      SECRET_0_FILENAME: 'db',
      SECRET_1_REF: 'aws:b',
      SECRET_1_FILENAME: 'db/x',
      SECRET_1_FORMAT: 'split',
    });
    assert.equal(errors[0]!.field, 'SECRET_1_FILENAME');
    assert.match(errors[0]!.message, /split directory "db\/x" is where SECRET_0 writes the file "db"/);
  });
});

describe('AGENT_CONFIG_FILE', () => {
  it('lays the file over env, accepting only the agent’s settings and SECRET_<N>_*', () => {
    const dir = mkdtempSync(join(tmpdir(), 'secret-agent-cfg-'));
    try {
      const file = join(dir, 'agent.yaml');
      writeFileSync(
        file,
        'REFRESH_INTERVAL: 2m\nSECRET_0_REF: aws:db\nSECRET_0_FILENAME: db\nREQUIRE_MEMORY_FS: false\n',
      );
      const config = parseAgentConfig(withConfigFile({ REFRESH_INTERVAL: '5m', SECRETS_DIR: '/s' }, file));
      assert.equal(config.sidecar.refreshIntervalMs, 120_000, 'the file wins over env');
      assert.equal(config.secretsDir, '/s');
      assert.equal(config.requireMemoryFs, false);

      writeFileSync(file, 'VAULT_ADDR: http://x\nAGENT_CONFIG_FILE: /other\nSECRET_0_REF: [a]\n');
      assert.throws(
        () => withConfigFile({}, file),
        (e: unknown) => {
          assert.ok(e instanceof ConfigErrors);
          assert.deepEqual(
            e.errors.map((x) => x.field),
            [
              'AGENT_CONFIG_FILE "VAULT_ADDR"',
              'AGENT_CONFIG_FILE "AGENT_CONFIG_FILE"',
              'AGENT_CONFIG_FILE "SECRET_0_REF"',
            ],
          );
          return true;
        },
      );
      writeFileSync(file, 'SECRET_0_REF: "unterminated\n');
      assert.throws(() => withConfigFile({}, file), /is not valid YAML or JSON/);
      assert.throws(() => withConfigFile({}, join(dir, 'missing.yaml')), /cannot read .*ENOENT/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
