/**
 * The wrapper's #defines against agent/contract/env-exec.ts, read out of the C source: the webhook,
 * the agent and the wrapper cannot drift apart.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import {
  ENV_EXEC_EXIT,
  ENV_EXEC_MAX_DIR_BYTES,
  ENV_EXEC_MAX_WAIT_SECONDS,
  ENV_VALUES_DIR,
  MAX_ENV_NAME_BYTES,
  MAX_ENV_VALUE_BYTES,
  MAX_ENV_VARS,
} from '../../agent/contract/env-exec.ts';

const SOURCE = readFileSync(new URL('../../agent/native/env-exec.c', import.meta.url), 'utf8');

/** A #define's value: a string literal, or an integer expression of digits, * + - and parentheses. */
function define(name: string): string | number {
  const m = new RegExp(`^#define ${name} (.+?)(?:\\s*/\\*.*)?$`, 'm').exec(SOURCE);
  assert.ok(m, `agent/native/env-exec.c has no #define ${name}`);
  const text = m[1]!.trim();
  if (text.startsWith('"')) return JSON.parse(text) as string;
  assert.match(text, /^[\d\s*+\-()]+$/, `#define ${name} is not a plain integer expression`);
  return Function(`return (${text});`)() as number;
}

describe('env-exec.c’s #defines match agent/contract/env-exec.ts', () => {
  const expected: Record<string, string | number> = {
    ENV_VALUES_DIR,
    MAX_ENV_VALUE_BYTES,
    MAX_ENV_VARS,
    MAX_ENV_NAME_BYTES,
    MAX_WAIT_SECONDS: ENV_EXEC_MAX_WAIT_SECONDS,
    MAX_DIR_BYTES: ENV_EXEC_MAX_DIR_BYTES,
    EXIT_USAGE: ENV_EXEC_EXIT.usage,
    EXIT_BAD_VALUE: ENV_EXEC_EXIT.badValue,
    EXIT_READ_ERROR: ENV_EXEC_EXIT.readError,
    EXIT_TIMEOUT: ENV_EXEC_EXIT.timeout,
    EXIT_CANNOT_EXECUTE: ENV_EXEC_EXIT.cannotExecute,
    EXIT_NOT_FOUND: ENV_EXEC_EXIT.notFound,
  };
  for (const [name, value] of Object.entries(expected))
    it(`${name} = ${JSON.stringify(value)}`, () => assert.equal(define(name), value));

  it('every exit code of the contract has its #define', () => {
    const defined = [...SOURCE.matchAll(/^#define EXIT_\w+ (\d+)$/gm)].map((m) => Number(m[1]));
    const byValue = (a: number, b: number) => a - b;
    assert.deepEqual(defined.sort(byValue), [...Object.values(ENV_EXEC_EXIT)].sort(byValue));
  });

  it('the limits the messages spell out are the #defines’ (3072 bytes, 0 to 3600 s, 64, 255)', () => {
    assert.match(SOURCE, new RegExp(`is longer than ${ENV_EXEC_MAX_DIR_BYTES} bytes`));
    assert.match(SOURCE, new RegExp(`whole seconds from 0 to ${ENV_EXEC_MAX_WAIT_SECONDS}`));
    assert.match(SOURCE, new RegExp(`more than the ${MAX_ENV_VARS} allowed`));
    assert.match(SOURCE, new RegExp(`at most ${MAX_ENV_NAME_BYTES} bytes`));
  });
});
