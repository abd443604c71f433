import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import {
  FILE_ANNOTATION_PREFIXES,
  FILE_ANNOTATIONS,
  matchFileAnnotation,
} from '../../webhook/annotations/file-annotations.ts';
import { POD_ANNOTATIONS } from '../../webhook/annotations/pod-annotations.ts';
import { WEBHOOK_SETTINGS } from '../../webhook/config/settings.ts';
import { ROOT } from '../support/run-agent.ts';

describe('the annotation surface', () => {
  it('no pod-wide annotation can be read as a per-file one', () => {
    for (const name of Object.keys(POD_ANNOTATIONS)) assert.equal(matchFileAnnotation(name), undefined, name);
    for (const { name, prefix } of FILE_ANNOTATION_PREFIXES)
      assert.deepEqual(matchFileAnnotation(`${prefix}db`), { name, file: 'db' });
  });

  it('every annotation and webhook setting is in the generated tables of docs/reference/webhook.md', () => {
    const doc = readFileSync(join(ROOT, 'docs/reference/webhook.md'), 'utf8');
    for (const name of ['annotations', 'webhook-env'])
      assert.ok(doc.includes(`<!-- generated:${name} -->`), name);
    for (const name of Object.keys(POD_ANNOTATIONS))
      assert.ok(doc.includes(`\`secret-agent.io/${name}\``), name);
    for (const name of Object.keys(WEBHOOK_SETTINGS)) assert.ok(doc.includes(`\`${name}\``), name);
  });

  it('docs/webhook.md#denials names every annotation whose value a refusal hides', () => {
    const doc = readFileSync(join(ROOT, 'docs/webhook.md'), 'utf8');
    const denials = doc.slice(doc.indexOf('## Denials'), doc.indexOf('\n## ', doc.indexOf('## Denials') + 1));
    const hidden = [
      ...Object.entries(POD_ANNOTATIONS)
        .filter(([, a]) => a.echo !== 'quote')
        .map(([name]) => name),
      ...Object.entries(FILE_ANNOTATIONS)
        .filter(([, a]) => a.echo !== 'quote')
        .map(([name]) => `${name}-<file>`),
    ];
    for (const name of hidden) assert.ok(denials.includes(`\`${name}\``), name);
  });
});
