/**
 * agent/contract/refused-env-names.ts: the one declared list of variables no secret may set. Its
 * entries are names a variable can have, none is listed twice or hidden behind a prefix (a table
 * row that never decides anything would mislead a reader), and the rule matches names, not
 * substrings: exact names exactly, prefixes at the start, in any case.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ENV_NAME } from '../../agent/contract/env-exec.ts';
import { REFUSED_ENV_FAMILIES, refusedEnvName } from '../../agent/contract/refused-env-names.ts';

const names = REFUSED_ENV_FAMILIES.flatMap((f) => f.names);
const prefixes = REFUSED_ENV_FAMILIES.flatMap((f) => f.prefixes);

describe('the refused env names', () => {
  it('each entry is a variable name or its start, listed once, none shadowed by a prefix', () => {
    for (const entry of [...names, ...prefixes]) assert.match(entry, ENV_NAME, entry);
    const upper = [...names, ...prefixes].map((e) => e.toUpperCase());
    assert.equal(new Set(upper).size, upper.length, 'no entry twice');
    for (const name of names)
      assert.ok(
        !prefixes.some((p) => name.toUpperCase().startsWith(p.toUpperCase())),
        `${name} is under a prefix`,
      );
    for (const p of prefixes)
      assert.ok(
        !prefixes.some((q) => q !== p && p.toUpperCase().startsWith(q.toUpperCase())),
        `${p} is under another`,
      );
    for (const f of REFUSED_ENV_FAMILIES)
      assert.ok(f.readBy && f.why && f.names.length + f.prefixes.length > 0);
  });

  it('an exact name matches itself only; a prefix, every name it starts; both in any case', () => {
    assert.equal(refusedEnvName('PATH')?.entry, 'PATH');
    assert.equal(refusedEnvName('path')?.entry, 'PATH');
    assert.equal(refusedEnvName('PATHS'), undefined);
    assert.equal(refusedEnvName('MY_PATH'), undefined);
    assert.equal(refusedEnvName('LD_PRELOAD')?.entry, 'LD_*');
    assert.equal(refusedEnvName('Ld_Anything_New')?.entry, 'LD_*');
    assert.equal(refusedEnvName('LDAP_URI'), undefined);
    assert.equal(refusedEnvName('X_LD_PRELOAD'), undefined);
    assert.equal(refusedEnvName('COMPlus_EnableDiagnostics')?.entry, 'COMPLUS_*');
    assert.equal(refusedEnvName('PYTHONPATH')?.family.readBy.startsWith('Python'), true);
  });
});
