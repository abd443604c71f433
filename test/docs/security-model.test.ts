import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { WEBHOOK_SETTINGS } from '../../webhook/config/settings.ts';

/**
 * docs/security.md is the threat model: every claim names the tests that prove it. These checks keep
 * it honest: each claim has a test, each test it names exists under that name, and each setting it
 * names is one the webhook has.
 */

const root = fileURLToPath(new URL('../..', import.meta.url));
const doc = readFileSync(join(root, 'docs/security.md'), 'utf8');

/** `test/…/x.test.ts` › “test name” */
const REFERENCE = /`(test\/[\w/.-]+\.test\.ts)` › “([^”]+)”/g;
/** The sections whose every `###` heading is a claim. */
const CLAIM_SECTIONS = [
  'What a tenant cannot make the webhook or the agent do',
  'What a tenant can do, by design',
  'Who in the pod can read the files',
  'What one pod cannot cost the webhook',
];

interface Claim {
  readonly title: string;
  readonly references: readonly { readonly file: string; readonly name: string }[];
}

function sections(text: string): Map<string, string> {
  const out = new Map<string, string>();
  const parts = text.split(/^## /m).slice(1);
  for (const part of parts) {
    const newline = part.indexOf('\n');
    out.set(part.slice(0, newline).trim(), part.slice(newline + 1));
  }
  return out;
}

function claims(text: string): Claim[] {
  const bySection = sections(text);
  return CLAIM_SECTIONS.flatMap((title) => {
    const body = bySection.get(title);
    assert.ok(body !== undefined, `docs/security.md has no section "## ${title}"`);
    return body
      .split(/^### /m)
      .slice(1)
      .map((part) => ({
        title: part.slice(0, part.indexOf('\n')).trim(),
        references: [...part.matchAll(REFERENCE)].map((m) => ({ file: m[1]!, name: m[2]! })),
      }));
  });
}

const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** Whether `source` declares a test or suite of exactly that (literal) name. */
function declares(source: string, name: string): boolean {
  const quoted = ["'", '"', '`'].map((q) => `${q}${escape(name).replaceAll(q, `\\\\${q}`)}${q}`);
  return quoted.some((q) => new RegExp(`\\b(?:it|describe)\\(\\s*${q}`).test(source));
}

describe('docs/security.md', () => {
  const all = claims(doc);

  it('names the tests of every claim, and each exists under that name', () => {
    assert.ok(all.length > 0, 'no claim found: the sections or the headings changed');
    for (const claim of all) {
      assert.ok(claim.references.length > 0, `“${claim.title}” names no test`);
      for (const { file, name } of claim.references) {
        const path = join(root, file);
        assert.ok(existsSync(path), `“${claim.title}”: ${file} does not exist`);
        assert.ok(
          declares(readFileSync(path, 'utf8'), name),
          `“${claim.title}”: ${file} has no test “${name}”`,
        );
      }
    }
  });

  it('names only settings the webhook has', () => {
    const named = [...doc.matchAll(/`((?:ALLOW|AGENT|VAULT|WEBHOOK|ADMISSION|EXEC)_[A-Z_]+)`/g)].map(
      (m) => m[1]!,
    );
    assert.ok(named.length > 0);
    for (const name of named)
      assert.ok(Object.hasOwn(WEBHOOK_SETTINGS, name), `${name} is no webhook setting`);
  });

  it('would catch a claim without a test, and a test that does not exist', () => {
    const sample = [
      '## What a tenant cannot make the webhook or the agent do',
      '### Tested',
      '- `test/agent/atomic-dir.test.ts` › “rejects escaping paths and collisions”',
      '### Untested',
      'Prose only.',
      '## What a tenant can do, by design',
      '### Misnamed',
      '- `test/agent/atomic-dir.test.ts` › “rejects escaping paths”',
      '## Who in the pod can read the files',
      '## What one pod cannot cost the webhook',
      '',
    ].join('\n');
    const found = claims(sample);
    assert.deepEqual(
      found.map((c) => [c.title, c.references.length]),
      [
        ['Tested', 1],
        ['Untested', 0],
        ['Misnamed', 1],
      ],
    );
    const source = readFileSync(join(root, 'test/agent/atomic-dir.test.ts'), 'utf8');
    assert.equal(declares(source, found[0]!.references[0]!.name), true);
    assert.equal(declares(source, found[2]!.references[0]!.name), false);
  });
});
