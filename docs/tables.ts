/**
 * README reference tables, generated from the declarations in code so the docs cannot drift.
 * `npm run docs` rewrites the README and docs/webhook.md between `<!-- generated:NAME -->` and `<!-- /generated:NAME -->`;
 * test/docs.test.ts fails when they differ.
 */
import type { Registry } from 'prom-client';
import { AGENT_SETTINGS, CLIENT_ENV, SECRET_SETTINGS } from '../agent/contract/env.ts';
import { KEY_SUFFIX_DOC, REFERENCE_FORMS } from '../agent/contract/reference.ts';
import { VAULT_ENV } from '../agent/providers/vault/config.ts';
import { METRIC_DOCS } from '../agent/serve/metrics.ts';
import { FILE_ANNOTATIONS, POD_ANNOTATIONS, PREFIX } from '../webhook/annotations.ts';
import { WEBHOOK_SETTINGS } from '../webhook/config.ts';
import { createWebhookMetrics } from '../webhook/metrics.ts';

const cell = (text: string) => text.replace(/\|/g, '\\|').replace(/\n/g, ' ');
const code = (text: string) => `\`${text}\``;
/** A default as code, unless absent or already formatted by its declaration. */
const defaultCell = (text: string | undefined) =>
  text === undefined || text === '' ? '' : text.startsWith('`') ? text : code(text);

function table(header: string[], rows: string[][]): string {
  return [
    `| ${header.join(' | ')} |`,
    `| ${header.map(() => '---').join(' | ')} |`,
    ...rows.map((r) => `| ${r.map(cell).join(' | ')} |`),
  ].join('\n');
}

export const README_TABLES: Record<string, () => string> = {
  'agent-env': () =>
    table(
      ['Variable', 'Default', 'Meaning'],
      Object.entries(AGENT_SETTINGS).map(([name, s]) => [
        code(name),
        s.default === undefined ? '' : code(s.default),
        s.doc,
      ]),
    ),
  'secret-env': () =>
    table(
      ['Variable', 'Default', 'Meaning'],
      Object.entries(SECRET_SETTINGS).map(([name, s]) => [
        code(`SECRET_<N>_${name}`),
        s.default === undefined ? '' : code(s.default),
        s.doc,
      ]),
    ),
  'client-env': () =>
    table(
      ['Variable', 'Meaning'],
      CLIENT_ENV.map((v) => [code(v.name), v.doc]),
    ),
  'vault-env': () =>
    table(
      ['Variable', 'Default', 'Meaning'],
      VAULT_ENV.map((v) => [code(v.name), v.default === '' ? '' : code(v.default), v.doc]),
    ),
  'agent-metrics': () =>
    table(
      ['Metric', 'Type', 'Labels', 'Meaning'],
      METRIC_DOCS.map((m) => [code(m.name), m.type, m.labels, m.help]),
    ) +
    '\n\nPlus the process metrics of prom-client (RSS, heap, open fds, event-loop lag) prefixed `secret_agent_process_`.',
  'webhook-metrics': () => metricsTable(createWebhookMetrics().registry),
  annotations: () =>
    table(
      ['Annotation', 'Type', 'Default', 'Description'],
      [
        ...Object.entries(POD_ANNOTATIONS).map(([name, a]) => [
          code(`${PREFIX}${name}`),
          a.type,
          defaultCell(a.default),
          a.doc,
        ]),
        ...Object.entries(FILE_ANNOTATIONS).map(([name, a]) => [
          code(`${PREFIX}${name}-<file>`),
          a.type,
          defaultCell(a.default),
          a.doc,
        ]),
      ],
    ),
  'webhook-env': () =>
    table(
      ['Variable', 'Default', 'Description'],
      Object.entries(WEBHOOK_SETTINGS).map(([name, s]) => [code(name), defaultCell(s.default), s.doc]),
    ),
  references: () =>
    `${table(
      ['Provider', 'Form', 'Meaning'],
      REFERENCE_FORMS.map((f) => [f.provider, code(f.form), f.meaning]),
    )}\n\n${KEY_SUFFIX_DOC}`,
};

function metricsTable(registry: Registry): string {
  return table(
    ['Metric', 'Type', 'Labels', 'Meaning'],
    registry.getMetricsAsArray().map((m) => {
      const { name, help, type, labelNames } = m as unknown as {
        name: string;
        help: string;
        type: string;
        labelNames: string[];
      };
      return [code(name), type, labelNames.join(', '), help];
    }),
  );
}

const BLOCK = /<!-- generated:([a-z-]+) -->\n[\s\S]*?<!-- \/generated:\1 -->/g;

/** The documents whose generated blocks `npm run docs` keeps equal to the code. */
export const GENERATED_DOCS = ['README.md', 'docs/webhook.md'] as const;

/** A document with every generated block re-rendered. */
export function renderGenerated(text: string): string {
  return text.replace(BLOCK, (_, name: string) => {
    const render = README_TABLES[name];
    if (!render) throw new Error(`a generated block "${name}" that docs/tables.ts does not know`);
    return `<!-- generated:${name} -->\n${render()}\n<!-- /generated:${name} -->`;
  });
}
