import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { formatDuration, parseDuration } from '../../agent/contract/duration.ts';
import { withConfigFile } from '../../agent/config/agent-config-file.ts';
import { findFileClash } from '../../agent/config/file-clash.ts';
import { parseAgentConfig } from '../../agent/config/parse-agent-config.ts';
import { parseFileMode } from '../../agent/contract/file-mode.ts';
import { renderSecretEnv } from '../../agent/contract/render-secret-env.ts';
import type { Env } from '../../agent/contract/settings.ts';
import { ConfigError, ConfigErrors } from '../../agent/contract/errors.ts';
import { checkBackendSettings } from '../../agent/config/check-backend-settings.ts';
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
      SECRET_2_MODE: '0600',
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
      /SECRET_0 and SECRET_1 both write "x"/,
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
      /"0200" \(-w-------\) does not let the owner read the file/,
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
  it('lays the file over env, accepting only the agent’s settings and SECRET_<N>_*', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'secret-agent-cfg-'));
    try {
      const file = join(dir, 'agent.yaml');
      writeFileSync(
        file,
        'REFRESH_INTERVAL: 2m\nSECRET_0_REF: aws:db\nSECRET_0_FILENAME: db\nREQUIRE_MEMORY_FS: false\n',
      );
      const config = parseAgentConfig(
        await withConfigFile({ REFRESH_INTERVAL: '5m', SECRETS_DIR: '/s' }, file),
      );
      assert.equal(config.sidecar.refreshIntervalMs, 120_000, 'the file wins over env');
      assert.equal(config.secretsDir, '/s');
      assert.equal(config.requireMemoryFs, false);

      writeFileSync(file, 'VAULT_ADDR: http://x\nAGENT_CONFIG_FILE: /other\nSECRET_0_REF: [a]\n');
      await assert.rejects(
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
      await assert.rejects(() => withConfigFile({}, file), /is not valid YAML or JSON/);
      await assert.rejects(() => withConfigFile({}, join(dir, 'missing.yaml')), /cannot read .*ENOENT/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

// Issue 10, item 5: secret files are never writable by others, nor executable; modes are written octal.
describe('file modes', () => {
  it('accepts what only the owner writes and nobody executes', () => {
    for (const [text, mode] of [
      ['0400', 0o400],
      ['0440', 0o440],
      ['0444', 0o444],
      ['0600', 0o600],
      ['0640', 0o640],
      ['0644', 0o644],
      ['0o600', 0o600],
    ] as const)
      assert.equal(parseFileMode(text, 'FILE_MODE'), mode, text);
  });

  const refused: [string, RegExp][] = [
    ['0777', /"0777" \(rwxrwxrwx\) lets the group or others write the file, or anyone execute it/],
    ['0666', /\(rw-rw-rw-\) lets the group or others write/],
    ['0664', /\(rw-rw-r--\)/],
    ['0700', /\(rwx------\) .*anyone execute/],
    ['0755', /\(rwxr-xr-x\)/],
    ['0540', /\(r-xr-----\)/],
    ['0200', /does not let the owner read/],
    ['0044', /\(---r--r--\) does not let the owner read/],
    ['644', /"644" has no leading 0.*Fix: write 0644 for rw-r--r--/],
    ['400', /Fix: write 0400 for r--------/],
    ['420', /no leading 0/],
    ['0999', /not an octal mode/],
    ['04400', /not an octal mode/],
    ['', /"" is not an octal mode/],
    ['rw-r--r--', /"rw-r--r--" is not an octal mode/],
    ['CANARY7f3e-pasted', /\(a value of 17 characters\) is not an octal mode/],
  ];
  for (const [text, problem] of refused) {
    it(`refuses ${JSON.stringify(text)}, saying why and what to write`, () => {
      for (const field of ['FILE_MODE', 'SECRET_0_MODE']) {
        const env: Env =
          field === 'FILE_MODE'
            ? { FILE_MODE: text, SECRET_0_REF: 'aws:a', SECRET_0_FILENAME: 'a' }
            : { SECRET_0_MODE: text, SECRET_0_REF: 'aws:a', SECRET_0_FILENAME: 'a' };
        const errors = errorsOf(env);
        assert.deepEqual(
          errors.map((e) => e.field),
          [field],
        );
        assert.match(errors[0]!.message, problem);
        assert.match(errors[0]!.message, /Fix: \S/);
      }
    });
  }
});

// Issue 10, item 6: what the backends need is configuration, found before any fetch.
describe('checkBackendSettings', () => {
  const check = (env: Env) =>
    checkBackendSettings(parseAgentConfig(env), env).map((e) => ({ field: e.field, message: e.message }));

  it('needs a region for aws:NAME, naming the secrets, but not for an ARN', () => {
    const env: Env = {
      SECRET_0_REF: 'aws:db',
      SECRET_0_FILENAME: 'db',
      SECRET_1_REF: 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:api-AbCdEf',
      SECRET_1_FILENAME: 'api',
      SECRET_2_REF: 'aws:tls',
      SECRET_2_FILENAME: 'tls',
    };
    const errors = check(env);
    assert.deepEqual(
      errors.map((e) => e.field),
      ['AWS_REGION'],
    );
    assert.match(
      errors[0]!.message,
      /^AWS_REGION: is not set, but secrets named without a region \(aws:NAME\) need it: SECRET_0, SECRET_2\./,
    );
    assert.match(errors[0]!.message, /Fix: set AWS_REGION .*full ARN/);
    assert.deepEqual(check({ ...env, AWS_REGION: 'eu-west-1' }), []);
    assert.deepEqual(check({ ...env, AWS_DEFAULT_REGION: 'eu-west-1' }), []);
    assert.equal(check({ ...env, AWS_REGION: '' }).length, 1, 'an empty region is none');
    assert.deepEqual(
      check({
        SECRET_1_REF: env.SECRET_1_REF,
        SECRET_1_FILENAME: 'api',
        SECRET_0_REF: 'file:/x',
        SECRET_0_FILENAME: 'x',
      }),
      [],
    );
  });

  it('needs a project for gcp:SECRET', () => {
    const env: Env = { SECRET_0_REF: 'gcp:db', SECRET_0_FILENAME: 'db' };
    assert.match(
      check(env)[0]!.message,
      /^GCP_PROJECT: is not set, but secrets named without a project \(gcp:SECRET\) need it: SECRET_0\./,
    );
    assert.deepEqual(check({ ...env, GOOGLE_CLOUD_PROJECT: 'p-1234' }), []);
    assert.deepEqual(check({ SECRET_0_REF: 'projects/p-1234/secrets/db', SECRET_0_FILENAME: 'db' }), []);
  });

  it('checks GCP_TRANSPORT where a GCP secret is read: a known transport, and no REST past a proxy', () => {
    const env: Env = { SECRET_0_REF: 'projects/p-1234/secrets/db', SECRET_0_FILENAME: 'db' };
    assert.deepEqual(check(env), []);
    assert.deepEqual(check({ ...env, GCP_TRANSPORT: 'grpc', https_proxy: 'http://proxy:3128' }), []);
    assert.deepEqual(
      check({ ...env, https_proxy: 'http://proxy:3128' }),
      [],
      'the default follows the proxy',
    );
    const [bad] = check({ ...env, GCP_TRANSPORT: 'http2' });
    assert.equal(bad?.field, 'GCP_TRANSPORT');
    assert.match(bad!.message, /^GCP_TRANSPORT: "http2" is not a transport\. Fix: use rest or grpc/);
    const [proxied] = check({ ...env, GCP_TRANSPORT: 'rest', grpc_proxy: 'http://proxy:3128' });
    assert.equal(proxied?.field, 'GCP_TRANSPORT');
    assert.match(
      proxied!.message,
      /the proxy grpc_proxy names: the REST client ignores proxy settings\. Fix: use grpc/,
    );
    // Not a GCP pod: not its business.
    assert.deepEqual(check({ SECRET_0_REF: 'file:/x', SECRET_0_FILENAME: 'x', GCP_TRANSPORT: 'http2' }), []);
  });

  it('needs a Vault address and usable Vault settings, naming the variables', () => {
    const env: Env = { SECRET_0_REF: 'vault:secret/data/app', SECRET_0_FILENAME: 'app' };
    const errors = check(env);
    assert.deepEqual(
      errors.map((e) => e.field),
      ['VAULT_ADDR', 'VAULT_TOKEN'],
    );
    assert.match(
      errors[0]!.message,
      /^VAULT_ADDR: is not set, but secrets read from Vault need it: SECRET_0\. Fix: /,
    );
    assert.match(errors[1]!.message, /no Vault credentials.*Fix: set VAULT_ROLE/);
    assert.deepEqual(
      check({ ...env, VAULT_ADDR: 'vault.example.com' }).map((e) => e.field),
      ['VAULT_ADDR'],
    );
    assert.deepEqual(
      check({ ...env, VAULT_TOKEN_FILE: '/vault/token' }).map((e) => e.field),
      ['VAULT_ADDR'],
    );
    assert.deepEqual(
      check({ ...env, VAULT_ADDR: 'https://127.0.0.1:8200', VAULT_TOKEN_FILE: '/vault/token' }),
      [],
    );
  });
});

describe('findFileClash', () => {
  it('names both secrets, and says when a split secret’s keys are the cause', () => {
    const clash = findFileClash([
      { id: 'SECRET_0', path: 'password' },
      { id: 'SECRET_1', path: 'user', split: true },
      { id: 'SECRET_1', path: 'password', split: true },
    ]);
    assert.ok(clash instanceof ConfigError);
    assert.equal(clash.field, 'SECRET_1_FILENAME');
    assert.match(
      clash.problem,
      /^SECRET_0 and SECRET_1 both write "password" \(SECRET_1: FORMAT=split writes each key as a file\)$/,
    );
    assert.equal(
      findFileClash([
        { id: 'SECRET_0', path: 'a' },
        { id: 'SECRET_1', path: 'b' },
      ]),
      undefined,
    );
  });
});
