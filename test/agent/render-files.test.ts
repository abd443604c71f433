import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { SecretSpec } from '../../agent/contract/agent-config.ts';
import type { SecretFormat } from '../../agent/contract/secret-settings.ts';
import { parseReference } from '../../agent/contract/reference.ts';
import { renderFiles, SecretFormatError } from '../../agent/format/render-files.ts';
import { assertNoCanary, canary } from '../support/canary.ts';

function spec(ref: string, filename: string, format: SecretFormat = 'raw', mode = 0o400): SecretSpec {
  return {
    id: 'SECRET_0',
    ref: parseReference(ref, 'SECRET_0_REF'),
    filename,
    format,
    mode,
    refreshIntervalMs: 0,
  };
}
const text = (b: Uint8Array) => Buffer.from(b).toString('utf8');
const json = (v: unknown) => Buffer.from(JSON.stringify(v));

function assertFormatError(fn: () => unknown, problem: RegExp): void {
  assert.throws(fn, (e: unknown) => {
    assert.ok(e instanceof SecretFormatError);
    assert.equal(e.secretId, 'SECRET_0');
    assert.match(e.message, problem);
    assert.ok(e.fix.length > 0);
    assertNoCanary(`${e.message} ${e.fix} ${e.stack}`, 'a format error');
    return true;
  });
}

describe('renderFiles', () => {
  it('writes raw bytes untouched, binary included', () => {
    const bytes = Uint8Array.from([0, 255, 1, 254]);
    assert.deepEqual(renderFiles(spec('aws:x', 'bin', 'raw', 0o440), bytes), [
      { path: 'bin', bytes, mode: 0o440 },
    ]);
  });

  it('picks a key: strings as is, other JSON values as JSON', () => {
    const value = { password: canary('pw'), port: 5432, tls: { ca: 'x' } };
    assert.equal(text(renderFiles(spec('aws:x#password', 'pw'), json(value))[0]!.bytes), value.password);
    assert.equal(text(renderFiles(spec('aws:x#port', 'port'), json(value))[0]!.bytes), '5432');
    assert.equal(text(renderFiles(spec('aws:x#tls', 'tls'), json(value))[0]!.bytes), '{"ca":"x"}');
  });

  it('splits every top-level key into its own file under the directory', () => {
    const files = renderFiles(
      spec('aws:x', 'db', 'split', 0o440),
      json({ user: 'app', password: 'pw', port: 1 }),
    );
    assert.deepEqual(
      files.map((f) => [f.path, text(f.bytes), f.mode]),
      [
        ['db/user', 'app', 0o440],
        ['db/password', 'pw', 0o440],
        ['db/port', '1', 0o440],
      ],
    );
    assert.deepEqual(
      renderFiles(spec('aws:x#inner', '', 'split'), json({ inner: { a: 'b' } })).map((f) => f.path),
      ['a'],
    );
  });

  it('writes dotenv that POSIX sh reads back exactly', () => {
    const [file] = renderFiles(
      spec('aws:x', 'app.env', 'dotenv'),
      json({ A: 'plain', B: "it's", C: 'line1\nline2', D: '$HOME `x` "q" \\' }),
    );
    assert.equal(text(file!.bytes), `A='plain'\nB="it's"\nC='line1\nline2'\nD='$HOME \`x\` "q" \\'\n`);
  });

  it('rejects values that do not fit the format, without quoting them', () => {
    const secretText = canary('notjson');
    assertFormatError(() => renderFiles(spec('aws:x#k', 'f'), Buffer.from(secretText)), /not valid JSON/);
    assertFormatError(
      () => renderFiles(spec('aws:x', 'f', 'split'), Buffer.from(secretText)),
      /not valid JSON/,
    );
    assertFormatError(() => renderFiles(spec('aws:x#k', 'f'), json([secretText])), /not a JSON object/);
    assertFormatError(
      () => renderFiles(spec('aws:x#missing', 'f'), json({ k: secretText })),
      /no key "missing" \(it has 1 keys\)/,
    );
    assertFormatError(
      () => renderFiles(spec('aws:x', 'f', 'split'), json(secretText)),
      /needs a JSON object/,
    );
    // A key that is no file name may be a pasted secret: described by place and length, never quoted.
    assertFormatError(
      () => renderFiles(spec('aws:x', 'f', 'split'), json({ ok: 'x', [`${secretText}/x`]: 'v' })),
      new RegExp(`key 2 of 2 \\(of ${secretText.length + 2} characters\\) contains "/"`),
    );
    assertFormatError(
      () => renderFiles(spec('aws:x', 'f', 'split'), json({ [`..${secretText}`]: 'v' })),
      /key 1 of 1 \(of \d+ characters\): the key has a segment starting with "\.\.", reserved/,
    );
    assertFormatError(
      () => renderFiles(spec('aws:x', 'f', 'dotenv'), json({ [`${secretText} x`]: 'v' })),
      /key 1 of 1 \(of \d+ characters\) is not a valid variable name/,
    );
    assertFormatError(
      () => renderFiles(spec('aws:x', 'f', 'dotenv'), json({ 'not a name': secretText })),
      /not a valid variable name/,
    );
    assertFormatError(() => renderFiles(spec('aws:x#k', 'f'), Uint8Array.from([0xff, 0xfe])), /not UTF-8/);
    assertFormatError(
      () => renderFiles(spec('aws:x', 'f', 'split'), json({ big: 'x'.repeat(1024 * 1024 + 1) })),
      /would be 1048577 bytes/,
    );
  });
});
