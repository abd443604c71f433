import assert from 'node:assert/strict';
import {
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { ENV_EXEC_NAME, envValuePath } from '../../agent/contract/env-exec.ts';
import { canary } from '../support/canary.ts';
import { memoryDir, runAgent } from '../support/run-agent.ts';

/**
 * ENV_EXEC_DIR: the built agent installs the env wrapper into the app's read-only volume before it
 * writes any file, whole (one rename), leaves an identical one alone, and refuses what cannot be the
 * wrapper before any backend call. `/bin/true` stands in for the wrapper: any ELF executable will do
 * here; test/env-exec/ tests the wrapper itself.
 */

const PROGRAM = '/bin/true';

function setup() {
  const secrets = memoryDir();
  const exec = memoryDir();
  const sources = memoryDir();
  const value = canary('env-value');
  writeFileSync(join(sources.path, 'db-url'), value);
  const env = {
    AGENT_MODE: 'init',
    SECRETS_DIR: secrets.path,
    ENV_EXEC_DIR: exec.path,
    ENV_EXEC_PROGRAM: PROGRAM,
    SECRET_0_REF: `file:${join(sources.path, 'db-url')}`,
    SECRET_0_FILENAME: envValuePath('DB_URL'),
  };
  return {
    secrets,
    exec,
    sources,
    value,
    env,
    [Symbol.dispose]() {
      for (const d of [secrets, exec, sources]) d[Symbol.dispose]();
    },
  };
}

describe('the agent installs the env wrapper (ENV_EXEC_DIR)', () => {
  it('a copy, mode 0555, before the value it reads is written; an identical one is left alone', async () => {
    using s = setup();
    const run = await runAgent(s.env);
    assert.equal(run.code, 0, run.stderr);
    const installed = join(s.exec.path, ENV_EXEC_NAME);
    assert.deepEqual(readFileSync(installed), readFileSync(PROGRAM));
    assert.equal(statSync(installed).mode & 0o7777, 0o555);
    assert.deepEqual(readdirSync(s.exec.path), [ENV_EXEC_NAME], 'no temporary file left');
    assert.equal(readFileSync(join(s.secrets.path, envValuePath('DB_URL')), 'utf8'), s.value);
    const installedAt = run.logs.findIndex((l) => l.msg === 'env wrapper installed');
    const written = run.logs.findIndex((l) => l.msg === 'secrets written');
    assert.ok(installedAt >= 0, 'the install is logged');
    assert.ok(written > installedAt, 'installed before the files are written');

    const inode = statSync(installed).ino;
    const again = await runAgent({ ...s.env, LOG_LEVEL: 'debug' });
    assert.equal(again.code, 0, again.stderr);
    assert.equal(statSync(installed).ino, inode, 'an identical wrapper is not rewritten');
    assert.ok(again.logs.some((l) => l.msg === 'env wrapper unchanged'));
  });

  it('another file, or a link, at its name is replaced by one rename; the link’s target is untouched', async () => {
    using s = setup();
    const victim = join(s.sources.path, 'victim');
    writeFileSync(victim, readFileSync(PROGRAM), { mode: 0o644 });
    symlinkSync(victim, join(s.exec.path, ENV_EXEC_NAME));
    const run = await runAgent(s.env);
    assert.equal(run.code, 0, run.stderr);
    const installed = join(s.exec.path, ENV_EXEC_NAME);
    assert.ok(lstatSync(installed).isFile(), 'a file of its own, not the link');
    assert.equal(statSync(victim).mode & 0o777, 0o644, 'the link’s target keeps its mode');

    writeFileSync(installed, 'an older wrapper');
    const replaced = await runAgent(s.env);
    assert.equal(replaced.code, 0, replaced.stderr);
    assert.deepEqual(readFileSync(installed), readFileSync(PROGRAM));
  });

  it('refused before any fetch: not an executable, missing, a directory that is not there, inside SECRETS_DIR', async () => {
    using s = setup();
    const text = join(s.exec.path, 'not-elf');
    writeFileSync(text, '#!/bin/sh\n');
    const cases: [Record<string, string>, RegExp][] = [
      [{ ENV_EXEC_PROGRAM: text }, /ENV_EXEC_PROGRAM: ".*not-elf" is not an executable/],
      [
        { ENV_EXEC_PROGRAM: '/no/such/env-exec' },
        /ENV_EXEC_PROGRAM: "\/no\/such\/env-exec" cannot be read \(ENOENT\)/,
      ],
      [
        { ENV_EXEC_DIR: join(s.exec.path, 'absent') },
        /ENV_EXEC_DIR: the wrapper cannot be written to .*absent" \(ENOENT\)/,
      ],
      [{ ENV_EXEC_DIR: join(s.secrets.path, 'bin') }, /ENV_EXEC_DIR: ".*\/bin" overlaps SECRETS_DIR/],
      [{ ENV_EXEC_DIR: 'relative/dir' }, /ENV_EXEC_DIR/],
    ];
    for (const [change, message] of cases) {
      if (change.ENV_EXEC_DIR?.endsWith('/bin')) mkdirSync(change.ENV_EXEC_DIR, { recursive: true });
      const run = await runAgent({ ...s.env, ...change });
      assert.equal(run.code, 2, `${JSON.stringify(change)}: exit 2\n${run.stderr}`);
      assert.match(run.stderr, message);
      assert.equal(
        readdirSync(s.secrets.path).filter((n) => n !== 'bin').length,
        0,
        `${JSON.stringify(change)}: nothing written to the volume`,
      );
    }
  });
});
