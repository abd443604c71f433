/**
 * Every `secret-agent.io/` key the code names is declared: a user annotation (webhook/annotations.ts) or
 * one secret-agent writes itself (agent/contract/product-annotations.ts). The second kind must come
 * back through admission unchanged, or the product refuses its own pods (issue 21: the agent's
 * restarted-for annotation made the webhook refuse every pod of the restarted workload).
 */
import { ENV_ANNOTATION_PREFIX, matchEnvAnnotation } from '../../webhook/annotations/env-annotations.ts';
import assert from 'node:assert/strict';
import { globSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import {
  ANNOTATION_PREFIX,
  isProductAnnotation,
  PRODUCT_ANNOTATIONS,
  STATUS_ANNOTATION,
  WARNINGS_ANNOTATION,
  STATUS_INJECTED,
} from '../../agent/contract/product-annotations.ts';
import { FILE_ANNOTATION_PREFIXES, matchFileAnnotation } from '../../webhook/annotations/file-annotations.ts';
import { POD_ANNOTATIONS } from '../../webhook/annotations/pod-annotations.ts';
import { PREFIX } from '../../webhook/annotations/annotation.ts';
import { assertNoCanary, canary } from '../support/canary.ts';
import { ROOT } from '../support/run-agent.ts';
import { basicPod, admitThroughWebhook, injectedPod } from '../webhook/fixtures.ts';

const NAME = '([A-Za-z0-9][-A-Za-z0-9_.]*)';
/** The ways the code spells a key: a literal, a template on the prefix constant, a concatenation. */
const KEY_FORMS = [
  new RegExp(`secret-agent\\.io/${NAME}`, 'g'),
  new RegExp(`\\$\\{(?:PREFIX|ANNOTATION_PREFIX)\\}${NAME}`, 'g'),
  new RegExp(`\\b(?:PREFIX|ANNOTATION_PREFIX)\\s*\\+\\s*['"\`]${NAME}`, 'g'),
];

/** The key names (after the prefix) a source text spells out; a name ending in `-` is a per-file prefix. */
function keyNames(text: string): string[] {
  return KEY_FORMS.flatMap((form) => [...text.matchAll(form)].map((m) => m[1]!.replace(/\.+$/, '')));
}

/** Why `name` is ours to use, or undefined when nothing declares it. */
function declaration(name: string): string | undefined {
  if (name === ENV_ANNOTATION_PREFIX || matchEnvAnnotation(name) !== undefined)
    return 'a variable annotation';
  if (name.endsWith('-'))
    return FILE_ANNOTATION_PREFIXES.some((f) => f.prefix === name) ? 'a per-file annotation' : undefined;
  if (Object.hasOwn(POD_ANNOTATIONS, name)) return 'a pod annotation';
  if (matchFileAnnotation(name)) return 'a per-file annotation';
  if (isProductAnnotation(`${PREFIX}${name}`)) return 'written by secret-agent';
  return undefined;
}

function undeclared(text: string): string[] {
  return keyNames(text).filter((name) => declaration(name) === undefined);
}

describe('the annotations secret-agent writes itself', () => {
  it('every secret-agent.io/ key named in agent/ and webhook/ is declared', () => {
    const files = globSync(['agent/**/*.ts', 'webhook/**/*.ts'], { cwd: ROOT }).filter(
      (f) => !f.endsWith('.d.ts'),
    );
    assert.ok(files.length > 50, `only ${files.length} source files found`);
    const found = new Map<string, string[]>();
    const missing: string[] = [];
    for (const file of files) {
      const text = readFileSync(join(ROOT, file), 'utf8');
      for (const name of keyNames(text)) {
        found.set(name, [...(found.get(name) ?? []), file]);
        if (declaration(name) === undefined) missing.push(`${file}: ${PREFIX}${name}`);
      }
    }
    assert.deepEqual(
      missing,
      [],
      'declare each key in webhook/annotations.ts (a setting) or agent/contract/product-annotations.ts (written by secret-agent)',
    );
    // The scan sees the writers themselves, whichever way they spell the key.
    assert.ok(found.get('restarted-for')?.includes('agent/contract/product-annotations.ts'));
    assert.ok(found.get('status')?.includes('agent/contract/product-annotations.ts'));
    assert.ok(found.has('secret-'), 'the per-file form');
    assert.ok(found.has('aws-region'), 'a pod annotation named in a message');
  });

  it('the scan flags a key written without a declaration, in each spelling', () => {
    assert.deepEqual(
      undeclared(
        [
          "const A = 'secret-agent.io/notes';",
          'const B = `${PREFIX}restarted-at`;',
          "const C = ANNOTATION_PREFIX + 'owner';",
          'const D = `${PREFIX}secretz-${file}`;',
        ].join('\n'),
      ).sort(),
      ['notes', 'owner', 'restarted-at', 'secretz-'],
    );
    assert.deepEqual(
      undeclared(
        "const ok = [`${PREFIX}mode`, 'secret-agent.io/secret-<file>', `${PREFIX}file-mode-${file}`, 'secret-agent.io/restarted-for.'];",
      ),
      [],
    );
  });

  it('are declared once each, under the prefix, and none is a setting', () => {
    const keys = PRODUCT_ANNOTATIONS.map((a) => a.key);
    assert.equal(new Set(keys).size, keys.length);
    assert.equal(PREFIX, ANNOTATION_PREFIX);
    for (const a of PRODUCT_ANNOTATIONS) {
      assert.ok(a.key.startsWith(ANNOTATION_PREFIX), a.key);
      const name = a.key.slice(ANNOTATION_PREFIX.length);
      assert.ok(!Object.hasOwn(POD_ANNOTATIONS, name), `${a.key} is also a pod annotation`);
      assert.equal(matchFileAnnotation(name), undefined, `${a.key} reads as a per-file annotation`);
      assert.ok(a.doc.length > 20 && a.on.length > 5, a.key);
    }
  });

  it('a pod carrying every one of them is injected; each is left as it was, but the webhook’s own status and warnings', () => {
    // Values the webhook must neither read nor show: canaries, as if someone put a secret there.
    const written = Object.fromEntries(PRODUCT_ANNOTATIONS.map((a) => [a.key, canary('written')]));
    // Without a uid in the spec the webhook warns (files shared by group); with one it has nothing to say.
    for (const securityContext of [undefined, { runAsUser: 1000 }]) {
      const pod = basicPod(
        { ...written, 'secret-agent.io/secret-db': 'aws:prod/db' },
        securityContext ? { securityContext } : {},
      );
      const result = admitThroughWebhook(pod, { AGENT_AWS_REGION: 'eu-west-1' });
      assertNoCanary(JSON.stringify(result.review), 'the AdmissionReview response');
      assertNoCanary(JSON.stringify(result.log), 'the decision log');
      const patched = injectedPod(pod, result);
      const { [WARNINGS_ANNOTATION]: _carried, ...kept } = pod.metadata.annotations!;
      const warnings = result.review.response.warnings ?? [];
      assert.equal(warnings.length, securityContext ? 0 : 1);
      assert.deepEqual(patched.metadata.annotations, {
        ...kept,
        [STATUS_ANNOTATION]: STATUS_INJECTED,
        ...(warnings.length > 0 ? { [WARNINGS_ANNOTATION]: warnings.join('\n') } : {}),
      });
      // Never passed to the agent as a setting.
      const env = JSON.stringify([...(patched.spec.initContainers ?? []), ...patched.spec.containers]);
      for (const value of Object.values(written)) assert.ok(!env.includes(value));
    }
  });

  it('a pod refused for another reason: the refusal names neither them nor their values', () => {
    const written = Object.fromEntries(PRODUCT_ANNOTATIONS.map((a) => [a.key, canary('written')]));
    const pod = basicPod({
      ...written,
      'secret-agent.io/secret-db': 'aws:prod/db',
      'secret-agent.io/mode': 'x',
    });
    const result = admitThroughWebhook(pod, { AGENT_AWS_REGION: 'eu-west-1' });
    assert.equal(result.outcome, 'denied');
    const message = result.review.response.status?.message ?? '';
    assert.match(message, /secret-agent\.io\/mode: "x" is not an injection mode/);
    for (const a of PRODUCT_ANNOTATIONS) assert.ok(!message.includes(a.key), `${a.key} in: ${message}`);
    assertNoCanary(JSON.stringify(result.review), 'the refusal');
    assertNoCanary(JSON.stringify(result.log), 'the decision log');
  });
});
