import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, describe, it } from 'node:test';
import { REFERENCE_FORMS } from '../../agent/contract/reference.ts';
import { METRIC_DOCS } from '../../agent/serve/metrics.ts';
import {
  countErrorSitesByText,
  errorCatalogue,
  errorProvider,
  errorSymptom,
  logSymptom,
  scanErrorCatalogue,
} from '../../docs/error-catalogue.ts';
import { AGENT_CONTAINER, AGENT_INIT_CONTAINER } from '../../webhook/injected-names.ts';
import { SERVE_EXIT } from '../../webhook/cli/exit-codes.ts';
import { createWebhookMetrics } from '../../webhook/metrics.ts';

const root = fileURLToPath(new URL('../..', import.meta.url)).replace(/\/$/, '');
const guide = readFileSync(join(root, 'docs/troubleshooting.md'), 'utf8');

function countByClass(sites: readonly { errorClass: string }[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const s of sites) counts.set(s.errorClass, (counts.get(s.errorClass) ?? 0) + 1);
  return counts;
}

const sorted = (m: Map<string, number>) => [...m].sort(([a], [b]) => a.localeCompare(b));

describe('error catalogue of this repository', () => {
  const catalogue = errorCatalogue();

  it('finds every `new XError(` that a plain text search finds, class by class', () => {
    assert.deepEqual(sorted(countByClass(catalogue.sites)), sorted(countErrorSitesByText(root)));
  });

  it('gives every site at least one row, and every row a message', () => {
    for (const site of catalogue.sites) {
      assert.ok(site.rows.length > 0, `${site.file}: a ${site.errorClass} without rows`);
      for (const row of site.rows)
        assert.notEqual(row.message.trim(), '', `${site.file}: ${site.errorClass}`);
    }
  });

  it('gives every row a fix where the class takes one', () => {
    // The classes whose constructor has a fix must be recognised as such, or the check below is empty.
    const withFix = new Set(catalogue.sites.filter((s) => s.takesFix).map((s) => s.errorClass));
    for (const c of [
      'ConfigError',
      'ProviderError',
      'WriteError',
      'SecretFormatError',
      'ServiceAccountError',
    ])
      assert.ok(withFix.has(c), `${c} is not read as taking a fix`);
    for (const site of catalogue.sites.filter((s) => s.takesFix))
      for (const row of site.rows)
        assert.notEqual(row.fix.trim(), '', `${site.file}: ${site.errorClass} "${row.message}" has no fix`);
  });

  it('reads every ProviderError reason as a FailureReason, from a known provider', () => {
    assert.ok(catalogue.failureReasons.includes('not-found'), 'FailureReason not found in provider.ts');
    const providers = new Set([...REFERENCE_FORMS.map((f) => f.provider), 'any']);
    for (const site of catalogue.sites.filter((s) => s.errorClass === 'ProviderError')) {
      assert.ok(
        providers.has(errorProvider(site.file)),
        `${site.file}: provider ${errorProvider(site.file)}`,
      );
      for (const row of site.rows)
        assert.ok(catalogue.failureReasons.includes(row.where), `${site.file}: reason ${row.where}`);
    }
  });

  it('places every error and log line under a symptom', () => {
    for (const row of catalogue.sites.flatMap((s) => s.rows)) assert.doesNotThrow(() => errorSymptom(row));
    for (const row of catalogue.logs) assert.doesNotThrow(() => logSymptom(row));
    assert.ok(catalogue.logs.some((l) => l.message === 'refresh failed; keeping the last good files'));
  });
});

describe('docs/troubleshooting.md', () => {
  it('has no line numbers, which would churn with every edit', () => {
    assert.doesNotMatch(guide, /\.ts:\d+/);
  });

  it('names only containers the webhook injects', () => {
    const names = [...guide.matchAll(/ -c ([a-z0-9-]+)/g)].map((m) => m[1]);
    assert.ok(names.length > 0);
    for (const name of names) assert.ok([AGENT_CONTAINER, AGENT_INIT_CONTAINER].includes(name!), name);
  });

  it('names only metrics the agent and the webhook export', () => {
    const webhook = createWebhookMetrics()
      .registry.getMetricsAsArray()
      .map((m) => (m as unknown as { name: string }).name);
    const known = new Set([...METRIC_DOCS.map((m) => m.name), ...webhook]);
    const named = new Set([...guide.matchAll(/\bsecret_agent_[a-z_]+/g)].map((m) => m[0]));
    assert.ok(named.has('secret_agent_fetch_failures_total'));
    for (const name of named) assert.ok(known.has(name), `${name} is not a metric`);
  });

  it('names only alerts the monitoring component defines', () => {
    const rules = readFileSync(join(root, 'deploy/components/monitoring/prometheusrule.yaml'), 'utf8');
    for (const [name] of guide.matchAll(/\bSecretAgent[A-Za-z]+/g))
      assert.match(rules, new RegExp(`alert: ${name}\\b`), `${name} is not an alert`);
  });

  it('states the exit codes agent/run-agent.ts and the webhook server (webhook/cli/serve.ts) use', () => {
    const agent = readFileSync(join(root, 'agent/run-agent.ts'), 'utf8');
    const webhook = readFileSync(join(root, 'webhook/cli/serve.ts'), 'utf8');
    for (const code of ['return 1;', 'return 2;', 'process.exit(70)']) assert.ok(agent.includes(code), code);
    // The webhook's codes are declared (webhook/cli/exit-codes.ts) and tabled from there: it exits with no other.
    const exits = [...webhook.matchAll(/process\.exit\(([^)]*)\)/g)].map((m) => m[1]);
    assert.deepEqual(
      exits.filter((e) => !/^SERVE_EXIT\.[A-Za-z]+\.code$/.test(e!)),
      [],
      'serve.ts exits only with SERVE_EXIT codes',
    );
    assert.deepEqual(
      [...new Set(exits)].sort(),
      Object.keys(SERVE_EXIT)
        .map((name) => `SERVE_EXIT.${name}.code`)
        .sort(),
      'every declared code is used',
    );
    assert.ok(guide.includes('<!-- generated:webhook-exit-codes -->'));
    assert.match(guide, /`1` a secret\s+could not be delivered/);
    assert.match(guide, /`2` invalid configuration/);
  });

  it('links only to headings that exist', () => {
    const slugs = (markdown: string) =>
      new Set(
        [...markdown.matchAll(/^#+ (.+)$/gm)].map((m) =>
          m[1]!
            .toLowerCase()
            .replace(/[^\p{L}\p{N} _-]/gu, '')
            .replace(/ /g, '-'),
        ),
      );
    for (const [, file, anchor] of guide.matchAll(/\]\(([^)#]*)#([^)]+)\)/g)) {
      const target = file ? readFileSync(join(root, 'docs', file!), 'utf8') : guide;
      assert.ok(slugs(target).has(anchor!), `${file}#${anchor}`);
    }
  });
});

describe('the scan itself, on a small tree', () => {
  const dirs: string[] = [];
  after(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  function tree(files: Record<string, string>): string {
    const dir = mkdtempSync(join(tmpdir(), 'error-catalogue-'));
    dirs.push(dir);
    for (const [path, text] of Object.entries(files)) {
      mkdirSync(dirname(join(dir, path)), { recursive: true });
      writeFileSync(join(dir, path), text);
    }
    return dir;
  }

  const errors = `
export class ConfigError extends Error {
  constructor(field: string, problem: string, fix: string) {
    super(\`\${field}: \${problem}. Fix: \${fix}\`);
  }
}
export function quote(text: string): string {
  return JSON.stringify(text);
}
`;

  it('renders literals, constants, placeholders and the texts callers pass', () => {
    const dir = tree({
      'agent/contract/errors.ts': errors,
      'agent/contract/settings.ts': `
import { ConfigError, quote } from './errors.ts';
const PREFIX = 'demo.io/';
const LIMIT = 4 * 1024;
const MODES = ['a', 'b'] as const;
export function parse(text: string, field: string): void {
  const fail = (problem: string, fix: string): never => {
    throw new ConfigError(field, problem, fix);
  };
  if (text === '') fail('is empty', \`use one of \${MODES.join(', ')}\`);
  if (text.length > LIMIT) fail(\`is \${text.length} characters long\`, \`keep it under \${LIMIT}\`);
}
export function mode(text: string, secret: { value: string }): void {
  throw new ConfigError(\`\${PREFIX}mode\`, \`\${quote(text)} is not a mode (\${secret.value})\`, text ? 'drop it' : 'set it');
}
`,
    });
    const { sites } = scanErrorCatalogue(dir);
    assert.deepEqual(
      sites.map((s) => s.rows.map((r) => [r.where, r.message, r.fix])),
      [
        [
          ['‹field›', 'is empty', 'use one of a, b'],
          ['‹field›', 'is ‹length› characters long', 'keep it under 4096'],
        ],
        [
          ['demo.io/mode', '"‹text›" is not a mode (‹value›)', 'drop it'],
          ['demo.io/mode', '"‹text›" is not a mode (‹value›)', 'set it'],
        ],
      ],
    );
  });

  it('reads ProviderError options, FailureReason, log lines and webhook-only plain Errors', () => {
    const dir = tree({
      'agent/providers/provider.ts': `
export type FailureReason = 'not-found' | 'timeout';
export class ProviderError extends Error {
  constructor(reason: FailureReason, detail: string, fix: string, opts: { transient?: boolean } = {}) {
    super(detail);
  }
}
`,
      'agent/providers/demo.ts': `
import { ProviderError } from './provider.ts';
declare const log: { warn(fields: object, msg: string): void };
export function f(ok: boolean, id: string): void {
  log.warn({ id, reason: 'x' }, ok ? 'kept' : 'lost');
  new Error('an agent-internal error: not catalogued');
  throw new ProviderError('timeout', 'slow', 'wait', { transient: false });
}
`,
      'webhook/start.ts': `export function g(): never { throw new Error('cannot start'); }\n`,
    });
    const catalogue = scanErrorCatalogue(dir);
    assert.deepEqual(catalogue.failureReasons, ['not-found', 'timeout']);
    assert.deepEqual(
      catalogue.sites.map((s) => [s.errorClass, s.file, s.rows]),
      [
        [
          'ProviderError',
          'agent/providers/demo.ts',
          [
            {
              errorClass: 'ProviderError',
              file: 'agent/providers/demo.ts',
              where: 'timeout',
              message: 'slow',
              fix: 'wait',
              transient: false,
            },
          ],
        ],
        [
          'Error',
          'webhook/start.ts',
          [{ errorClass: 'Error', file: 'webhook/start.ts', where: '', message: 'cannot start', fix: '' }],
        ],
      ],
    );
    assert.equal(errorProvider('agent/providers/demo.ts'), 'demo');
    assert.deepEqual(
      catalogue.logs.map((l) => [l.level, l.message, l.fields]),
      [
        ['warn', 'kept', ['id', 'reason']],
        ['warn', 'lost', ['id', 'reason']],
      ],
    );
    assert.deepEqual(sorted(countByClass(catalogue.sites)), sorted(countErrorSitesByText(dir)));
  });

  it('is caught out by the text count when a site is not code the compiler sees', () => {
    // The safety net works both ways: a `new ConfigError(` the scan does not see makes the counts differ.
    const dir = tree({
      'agent/contract/errors.ts': errors,
      'agent/contract/env.ts': `
import { ConfigError } from './errors.ts';
// Once: throw new ConfigError('A', 'b', 'c');
export const e = new ConfigError('A', 'is wrong', 'fix it');
`,
    });
    assert.notDeepEqual(
      sorted(countByClass(scanErrorCatalogue(dir).sites)),
      sorted(countErrorSitesByText(dir)),
    );
  });

  it('stops on an error class it cannot read', () => {
    const dir = tree({ 'agent/a.ts': `export const e = new MysteryError('x');\n` });
    assert.throws(() => scanErrorCatalogue(dir), /no class MysteryError/);
  });
});
