import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { AGENT_SETTINGS } from '../agent/contract/agent-settings.ts';
import { SECRET_SETTINGS } from '../agent/contract/secret-settings.ts';
import { CLIENT_ENV } from '../agent/providers/provider-env.ts';
import { GENERATED_DOCS, GENERATED_TABLES, renderGenerated, TABLE_HOMES } from '../docs/tables.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const read = (path: string) => readFileSync(join(ROOT, path), 'utf8');
const readme = read('README.md');

/** README.md and every page under docs/, as paths from the root. */
function markdownFiles(): string[] {
  const found = ['README.md', 'CHANGELOG.md'];
  const walk = (dir: string) => {
    for (const entry of readdirSync(join(ROOT, dir), { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith('.md')) found.push(path);
    }
  };
  walk('docs');
  return found;
}

/** A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces as hyphens. */
function headingAnchors(markdown: string): Set<string> {
  const anchors = new Set<string>();
  for (const [, text] of withoutCode(markdown).matchAll(/^#{1,6} (.+)$/gm)) {
    const base = text!
      .toLowerCase()
      .replace(/[^\p{L}\p{N} _-]/gu, '')
      .replace(/ /g, '-');
    let anchor = base;
    for (let n = 1; anchors.has(anchor); n++) anchor = `${base}-${n}`;
    anchors.add(anchor);
  }
  return anchors;
}

/** The text outside fenced code blocks: a `](x)` in YAML or shell is not a link. */
function withoutCode(markdown: string): string {
  return markdown.replace(/^```[\s\S]*?^```$/gm, '');
}

/** Every relative link of a page that does not resolve: its file, or its heading, is missing. */
function brokenLinks(page: string): string[] {
  return linkProblems(page, read(page));
}

function linkProblems(page: string, text: string): string[] {
  const broken: string[] = [];
  for (const [, target] of withoutCode(text).matchAll(/\]\(([^)\s]+)\)/g)) {
    if (/^[a-z]+:/.test(target!)) continue; // https:, mailto:
    const [path, anchor] = target!.split('#') as [string, string | undefined];
    const file = path === '' ? page : relative(ROOT, join(ROOT, dirname(page), path));
    if (!existsSync(join(ROOT, file))) {
      broken.push(`${page}: ${target} (no ${file})`);
      continue;
    }
    if (anchor !== undefined && file.endsWith('.md') && statSync(join(ROOT, file)).isFile())
      if (!headingAnchors(read(file)).has(anchor)) broken.push(`${page}: ${target} (no heading #${anchor})`);
  }
  return broken;
}

describe('the reference tables', () => {
  it('are each in their page, equal to what the code declares (run `npm run docs` to fix)', () => {
    for (const [name, home] of Object.entries(TABLE_HOMES))
      assert.match(read(home), new RegExp(`<!-- generated:${name} -->`), `${home} is missing block ${name}`);
    assert.deepEqual(Object.keys(TABLE_HOMES).sort(), Object.keys(GENERATED_TABLES).sort());
    for (const doc of GENERATED_DOCS) {
      const text = read(doc);
      assert.equal(text, renderGenerated(text), `${doc} is stale: run npm run docs`);
    }
  });

  it('name every env var the agent reads', () => {
    const reference = read('docs/reference/agent.md');
    for (const name of [...Object.keys(AGENT_SETTINGS), ...CLIENT_ENV.map((v) => v.name)])
      assert.ok(reference.includes(`\`${name}\``), name);
    for (const name of Object.keys(SECRET_SETTINGS))
      assert.ok(reference.includes(`\`SECRET_<N>_${name}\``), name);
  });
});

describe('the docs link only to what exists', () => {
  it('every relative link of the README and of docs/ resolves, to a file and to a heading', () => {
    const pages = markdownFiles();
    assert.ok(pages.includes('docs/reference/agent.md'));
    assert.deepEqual(pages.flatMap(brokenLinks), []);
  });

  it('reads anchors as GitHub makes them, and finds a missing file and a missing heading', () => {
    const anchors = headingAnchors(
      '# Who can read the files\n## Native or classic sidecars: `NATIVE_SIDECARS`\n## Notes\n## Notes\n```\n# not a heading\n```\n',
    );
    assert.deepEqual(
      [...anchors],
      ['who-can-read-the-files', 'native-or-classic-sidecars-native_sidecars', 'notes', 'notes-1'],
    );
    const page =
      '[a](no-such-page.md) [b](webhook.md#no-such-heading) [c](webhook.md#denials) [d](https://example.com)';
    assert.deepEqual(linkProblems('docs/x.md', page), [
      'docs/x.md: no-such-page.md (no docs/no-such-page.md)',
      'docs/x.md: webhook.md#no-such-heading (no heading #no-such-heading)',
    ]);
  });
});

describe('README', () => {
  it('is a front page: at most 300 lines', () => {
    const lines = readme.split('\n').length;
    assert.ok(lines <= 300, `README.md has ${lines} lines`);
  });

  it('has the two-command quick start and the test command CI runs', () => {
    assert.match(readme, /npm ci && npm start/);
    assert.match(readme, /^npm test$/m);
    assert.match(read('.ci/run'), /^npm test$/m);
  });
});
