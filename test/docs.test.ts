import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { AGENT_SETTINGS } from '../agent/contract/agent-settings.ts';
import { SECRET_SETTINGS } from '../agent/contract/secret-settings.ts';
import { CLIENT_ENV } from '../agent/providers/provider-env.ts';
import {
  EXEC_HELPER_TABLES,
  GENERATED_DOCS,
  README_TABLES,
  renderGenerated,
  TROUBLESHOOTING_TABLES,
} from '../docs/tables.ts';

const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
const troubleshooting = readFileSync(new URL('../docs/troubleshooting.md', import.meta.url), 'utf8');
const execHelpers = readFileSync(new URL('../docs/exec-helpers.md', import.meta.url), 'utf8');

describe('README', () => {
  it('has every generated reference table, equal to what the code declares (run `npm run docs` to fix)', () => {
    for (const name of Object.keys(README_TABLES)) {
      // The error catalogue's tables live in the troubleshooting guide, the helper protocol's in its page,
      // every other table in the README.
      const [doc, text] = Object.hasOwn(TROUBLESHOOTING_TABLES, name)
        ? ['docs/troubleshooting.md', troubleshooting]
        : Object.hasOwn(EXEC_HELPER_TABLES, name)
          ? ['docs/exec-helpers.md', execHelpers]
          : ['README.md', readme];
      assert.match(text, new RegExp(`<!-- generated:${name} -->`), `${doc} is missing block ${name}`);
    }
    for (const doc of GENERATED_DOCS) {
      const text = readFileSync(new URL(`../${doc}`, import.meta.url), 'utf8');
      assert.equal(text, renderGenerated(text), `${doc} is stale: run npm run docs`);
    }
  });

  it('names every env var the agent reads', () => {
    for (const name of [...Object.keys(AGENT_SETTINGS), ...CLIENT_ENV.map((v) => v.name)]) {
      assert.ok(readme.includes(`\`${name}\``), name);
    }
    for (const name of Object.keys(SECRET_SETTINGS))
      assert.ok(readme.includes(`\`SECRET_<N>_${name}\``), name);
  });

  it('has the two-command quick start and the test command CI runs', () => {
    assert.match(readme, /npm ci && npm start/);
    assert.match(readme, /^npm test$/m);
    assert.match(readFileSync(new URL('../.ci/run', import.meta.url), 'utf8'), /^npm test$/m);
  });
});
