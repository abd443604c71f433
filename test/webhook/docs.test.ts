import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import {
  FILE_ANNOTATION_PREFIXES,
  matchFileAnnotation,
  POD_ANNOTATIONS,
  renderAnnotationTable,
} from '../../webhook/annotations.ts';
import { renderWebhookEnvTable, WEBHOOK_SETTINGS } from '../../webhook/config.ts';
import { ROOT } from '../support/run-agent.ts';

const DOC = join(ROOT, 'docs/webhook.md');

/** The text between `<!-- name:begin -->` and `<!-- name:end -->`. */
function section(text: string, name: string): { before: string; body: string; after: string } {
  const begin = `<!-- ${name}:begin -->\n`;
  const end = `<!-- ${name}:end -->`;
  const i = text.indexOf(begin);
  const j = text.indexOf(end);
  assert.ok(i >= 0 && j > i, `docs/webhook.md has no ${name} section`);
  return {
    before: text.slice(0, i + begin.length),
    body: text.slice(i + begin.length, j),
    after: text.slice(j),
  };
}

describe('the annotation surface', () => {
  it('no pod-wide annotation can be read as a per-file one', () => {
    for (const name of Object.keys(POD_ANNOTATIONS)) assert.equal(matchFileAnnotation(name), undefined, name);
    for (const { name, prefix } of FILE_ANNOTATION_PREFIXES)
      assert.deepEqual(matchFileAnnotation(`${prefix}db`), { name, file: 'db' });
  });

  it('docs/webhook.md carries the generated tables (regenerate: UPDATE_DOCS=1 node --test test/webhook/docs.test.ts)', () => {
    let text = readFileSync(DOC, 'utf8');
    const tables = { annotations: renderAnnotationTable(), 'webhook-env': renderWebhookEnvTable() };
    if (process.env.UPDATE_DOCS === '1') {
      for (const [name, table] of Object.entries(tables)) {
        const s = section(text, name);
        text = s.before + table + s.after;
      }
      writeFileSync(DOC, text);
    }
    for (const [name, table] of Object.entries(tables))
      assert.equal(section(text, name).body, table, `the ${name} table is stale`);
    for (const name of Object.keys(POD_ANNOTATIONS))
      assert.ok(tables.annotations.includes(`\`secret-agent.io/${name}\``));
    for (const name of Object.keys(WEBHOOK_SETTINGS))
      assert.ok(tables['webhook-env'].includes(`\`${name}\``));
  });
});
