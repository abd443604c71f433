/**
 * Reference tables, generated from the declarations in code so the docs cannot drift.
 * `npm run docs` rewrites docs/reference/, docs/troubleshooting.md and docs/exec-helpers.md between
 * `<!-- generated:NAME -->` and `<!-- /generated:NAME -->`; test/docs.test.ts fails when they differ.
 */
import type { Registry } from 'prom-client';
import { AGENT_SETTINGS } from '../agent/contract/agent-settings.ts';
import { SECRET_SETTINGS } from '../agent/contract/secret-settings.ts';
import { CLIENT_ENV } from '../agent/providers/provider-env.ts';
import { PRODUCT_ANNOTATIONS } from '../agent/contract/product-annotations.ts';
import { KEY_SUFFIX_DOC, REFERENCE_FORMS } from '../agent/contract/reference.ts';
import { ProviderError, type FailureReason } from '../agent/providers/provider.ts';
import { HELPER_ENV } from '../agent/providers/exec/exec-provider.ts';
import { EXEC_SETTINGS } from '../agent/providers/exec/env.ts';
import { VAULT_ENV } from '../agent/providers/vault/env.ts';
import { AGENT_PORT_LIMITS } from '../agent/serve/health-server.ts';
import { EVENT_LOOP_SAMPLE_MS, METRIC_DOCS, RESIDENT_METRICS } from '../agent/serve/metrics.ts';
import { ENV_EXEC_EXIT, ENV_EXEC_EXIT_DOCS } from '../agent/contract/env-exec.ts';
import { REFUSED_ENV_FAMILIES } from '../agent/contract/refused-env-names.ts';
import { ENV_ANNOTATION, ENV_ANNOTATION_PREFIX } from '../webhook/annotations/env-annotations.ts';
import { FILE_ANNOTATIONS } from '../webhook/annotations/file-annotations.ts';
import { POD_ANNOTATIONS } from '../webhook/annotations/pod-annotations.ts';
import { PREFIX } from '../webhook/annotations/annotation.ts';
import { SERVE_EXIT } from '../webhook/cli/exit-codes.ts';
import { WEBHOOK_SETTINGS } from '../webhook/config/settings.ts';
import { WEBHOOK_LIMITS } from '../webhook/limits.ts';
import { createWebhookMetrics } from '../webhook/metrics.ts';
import {
  errorCatalogue,
  errorProvider,
  errorSymptom,
  logSymptom,
  type ErrorRow,
  type Symptom,
} from './error-catalogue.ts';

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

/**
 * Message and fix text as table cells: outside `code spans`, `<file>` would be read as an HTML tag and
 * `*` as emphasis.
 */
const prose = (text: string) =>
  text
    .split(/(`[^`]*`)/)
    .map((part, i) => (i % 2 === 1 ? part : part.replace(/</g, '&lt;').replace(/\*/g, '\\*')))
    .join('');
/** A field or annotation as code; alternatives (`A / B`) each as code. */
const whereCell = (text: string) =>
  text === ''
    ? ''
    : text
        .split(' / ')
        .map((w) => code(w))
        .join(' / ');

/** A table without repeated rows (two sites, or two callers, can say exactly the same). */
function uniqueTable(header: string[], rows: string[][]): string {
  const seen = new Set<string>();
  return table(
    header,
    rows.filter((r) => {
      const key = JSON.stringify(r);
      if (seen.has(key)) return false;
      seen.add(key);
      return true;
    }),
  );
}

function errorRows(symptom: Symptom, filter: (row: ErrorRow) => boolean = () => true): ErrorRow[] {
  return errorCatalogue()
    .sites.flatMap((s) => s.rows)
    .filter((r) => errorSymptom(r) === symptom && filter(r));
}

/** Only run-time text, e.g. `‹message›` (agent/run-agent.ts logs a ConfigError's message): nothing to look up. */
const PLACEHOLDER_ONLY = /^‹[^›]*›$/;

function logTable(symptom: Symptom): string {
  return uniqueTable(
    ['Level', 'Message (`msg`)', 'Fields'],
    errorCatalogue()
      .logs.filter((l) => logSymptom(l) === symptom && !PLACEHOLDER_ONLY.test(l.message))
      .map((l) => [l.level, prose(l.message), l.fields.map(code).join(', ')]),
  );
}

/** Problem and fix, with a first column naming the field only when some row names a concrete one. */
function problemTable(whereHeader: string, rows: readonly ErrorRow[]): string {
  const showWhere = rows.some((r) => r.where !== '' && !PLACEHOLDER_ONLY.test(r.where));
  return uniqueTable(
    showWhere ? [whereHeader, 'Problem', 'Fix'] : ['Problem', 'Fix'],
    rows.map((r) => [...(showWhere ? [whereCell(r.where)] : []), prose(r.message), prose(r.fix)]),
  );
}

/** The webhook's answers to requests it cannot read, as opposed to its own start-up and TLS failures. */
const isRequestError = (r: ErrorRow) => r.errorClass === 'BadReviewError' || r.errorClass === 'HttpError';

/** The order the agent reference lists providers in, then errors any provider can raise. */
const PROVIDER_ORDER = [...new Set(REFERENCE_FORMS.map((f) => f.provider)), 'any'];

function failureReason(row: ErrorRow): FailureReason {
  if (!errorCatalogue().failureReasons.includes(row.where))
    throw new Error(`${row.file}: ProviderError reason ${row.where} is not a FailureReason`);
  return row.where as FailureReason;
}

/** Whether it is transient (init mode retries it until INIT_DEADLINE), as the class itself decides. */
function retried(row: ErrorRow): boolean {
  return new ProviderError(
    failureReason(row),
    '',
    '',
    row.transient === undefined ? {} : { transient: row.transient },
  ).transient;
}

function providerRows(): ErrorRow[] {
  const reasons = errorCatalogue().failureReasons;
  const rank = (r: ErrorRow) =>
    reasons.indexOf(failureReason(r)) * PROVIDER_ORDER.length + PROVIDER_ORDER.indexOf(errorProvider(r.file));
  // Array.prototype.sort is stable: within a reason and provider, rows keep the order of the source.
  return errorRows('delivery', (r) => r.errorClass === 'ProviderError').sort((a, b) => rank(a) - rank(b));
}

/** Errors the init summary and the sidecar's log report with reason `format` (as SecretFormatError). */
const FORMAT_ERRORS = new Set(['SecretFormatError', 'TemplateError', 'ValueFormatError']);

/** The generated blocks of docs/troubleshooting.md: the error catalogue, grouped by symptom. */
export const TROUBLESHOOTING_TABLES: Record<string, () => string> = {
  'errors-admission': () => problemTable('Annotation', errorRows('admission')),
  'errors-references': () => problemTable('Annotation or variable', errorRows('references')),
  'errors-agent-config': () => problemTable('Variable', errorRows('agent-config')),
  'errors-fetch': () =>
    uniqueTable(
      ['Reason', 'Provider', 'Message', 'Fix', 'Transient'],
      providerRows().map((r) => [
        code(r.where),
        errorProvider(r.file),
        prose(r.message),
        prose(r.fix),
        retried(r) ? 'yes' : 'no',
      ]),
    ),
  'errors-files': () =>
    uniqueTable(
      ['Reason', 'Where', 'Problem', 'Fix'],
      errorRows('delivery', (r) => r.errorClass !== 'ProviderError').map((r) => [
        // The words the init summary and the sidecar's log print for these (agent/modes/init.ts).
        code(FORMAT_ERRORS.has(r.errorClass) ? 'format' : 'write'),
        whereCell(r.where),
        prose(r.message),
        prose(r.fix),
      ]),
    ),
  'failure-reasons': () => {
    const rows = providerRows();
    return table(
      ['`reason`', '`provider`', 'Transient'],
      errorCatalogue()
        .failureReasons.filter((reason) => rows.some((r) => r.where === reason))
        .map((reason) => {
          const mine = rows.filter((r) => r.where === reason);
          const providers = PROVIDER_ORDER.filter((p) => mine.some((r) => errorProvider(r.file) === p));
          const retry = new Set(mine.map(retried));
          return [
            code(reason),
            providers.join(', '),
            retry.size === 2 ? 'depends on the case' : retry.has(true) ? 'yes' : 'no',
          ];
        }),
    );
  },
  'logs-delivery': () => logTable('delivery'),
  'logs-refresh': () => logTable('refresh'),
  'errors-notify': () => problemTable('File', errorRows('notify')),
  'logs-notify': () => logTable('notify'),
  'errors-webhook': () =>
    uniqueTable(
      ['Error', 'Where', 'Message', 'Fix'],
      errorRows('webhook', (r) => !isRequestError(r)).map((r) => [
        r.errorClass,
        whereCell(r.where),
        prose(r.message),
        prose(r.fix),
      ]),
    ),
  'errors-webhook-requests': () =>
    uniqueTable(
      ['Error', 'HTTP status', 'Message'],
      errorRows('webhook', isRequestError).map((r) => [
        r.errorClass,
        // BadReviewError carries no status: the server answers it with 400 (webhook/server.ts).
        r.where === '' ? '400' : r.where,
        prose(r.message),
      ]),
    ),
  'logs-webhook': () => logTable('webhook'),
  'webhook-exit-codes': () =>
    table(
      ['Exit code', 'Meaning'],
      Object.values(SERVE_EXIT).map((e) => [code(String(e.code)), e.meaning]),
    ),
  'errors-render': () =>
    uniqueTable(
      ['Error', 'Where', 'Problem', 'Fix'],
      errorRows('render').map((r) => [r.errorClass, whereCell(r.where), prose(r.message), prose(r.fix)]),
    ),
};

/** The generated blocks of docs/exec-helpers.md: the helper protocol's environment. */
export const EXEC_HELPER_TABLES: Record<string, () => string> = {
  'exec-helper-env': () =>
    table(
      ['Variable', 'Meaning'],
      HELPER_ENV.map((v) => [code(v.name), v.doc]),
    ),
};

/** The generated blocks of docs/env.md: the env wrapper's exit codes, the names no secret may set. */
export const ENV_EXEC_TABLES: Record<string, () => string> = {
  'env-refused-names': () =>
    table(
      ['Names', 'Read by', 'What the value does'],
      REFUSED_ENV_FAMILIES.map((f) => [
        [
          ...f.names.map(code),
          ...f.prefixes.map((p) => code(`${p}*`)),
          ...f.infixes.map((i) => code(`*${i}*`)),
          ...f.suffixes.map((s) => code(`*${s}`)),
        ].join(', ') +
          (f.admittedEndings.length
            ? ` (not ${f.admittedEndings.map((e) => code(`*${e}`)).join(', ')})`
            : ''),
        f.readBy,
        f.why,
      ]),
    ),
  'env-exec-exit': () =>
    table(
      ['Exit code', 'Meaning'],
      [
        ...(Object.keys(ENV_EXEC_EXIT) as (keyof typeof ENV_EXEC_EXIT)[]).map((k) => [
          code(String(ENV_EXEC_EXIT[k])),
          ENV_EXEC_EXIT_DOCS[k],
        ]),
        ['128 + N', 'Signal N (SIGTERM: 143) ended the wait, before the command started.'],
      ],
    ),
};

/** The agent's tables: docs/reference/agent.md. */
export const AGENT_REFERENCE_TABLES: Record<string, () => string> = {
  'agent-port-limits': () => {
    const l = AGENT_PORT_LIMITS;
    const refused = (reason: string) => `closed unanswered; counted as \`reason="${reason}"\``;
    return table(
      ['What', 'Limit', 'Past it'],
      [
        [
          'Connections held at once',
          String(l.maxConnections),
          `a request that has arrived is answered first; then one past its grace that has sent none, from the address holding the most such, the oldest of those, else one whose request is still arriving ${l.slowRequestMs} ms after it began, from the address holding the most, is ${refused('full')}`,
        ],
        [
          'A connection’s grace, from its handshake (Node: its accept); the small sidecar gives none to one that has sent part of a request',
          `${l.graceMs} ms`,
          `within it, a connection is not closed to make room: newcomers wait in the kernel’s queue (${l.residentListenBacklog} long) until a grace ends (the small sidecar), or up to ${l.maxInGrace} are held beyond the ${l.maxConnections}; past that the oldest goes, of an address holding more than 8 of them first (the Node agent, its queue ${l.listenBacklog} long)`,
        ],
        [
          'Connections held from one address, past their grace',
          String(l.maxPerSource),
          `its newcomer closes its own oldest that has sent no request (${refused('per-source')}); a newcomer within its grace is never refused for its address (the node’s may be shared)`,
        ],
        [
          'Time to a connection’s first complete request',
          `${l.firstRequestMs / 1000} s`,
          `${refused('no-request')}`,
        ],
        [
          'Requests per connection',
          String(l.maxRequests),
          'answered with `Connection: close`, then closed; what comes after the first request’s head (a body, requests sent without waiting for the answer) is not read',
        ],
        [
          'A request’s headers',
          `${l.maxHeaderBytes / 1024} KiB, ${l.maxHeadersCount} kept`,
          'HTTP 431; headers past the count are dropped',
        ],
        ['Time to a whole request (headers and any body)', `${l.requestMs / 1000} s`, 'HTTP 408, closed'],
      ],
    );
  },
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
  'exec-env': () =>
    table(
      ['Variable', 'Default', 'Meaning'],
      Object.entries(EXEC_SETTINGS).map(([name, s]) => [code(name), defaultCell(s.default), s.doc]),
    ),
  'agent-metrics': () =>
    table(
      ['Metric', 'Type', 'Labels', 'Meaning (the Node sidecar)', 'In the small sidecar'],
      METRIC_DOCS.map((m) => [code(m.name), m.type, m.labels, m.help, m.small]),
    ) +
    `\n\nPlus the process metrics of prom-client (RSS, heap, open fds, event-loop lag sampled every ${EVENT_LOOP_SAMPLE_MS} ms) prefixed \`secret_agent_process_\`. The small sidecar (\`/app/resident\`) serves the last run's metrics, counted over every run, and its own: ${RESIDENT_METRICS.map(code).join(', ')}, \`secret_agent_http_connections_refused_total\` for its port and \`secret_agent_process_resident_memory_bytes\`; a run, a process of a few hundred milliseconds, reports no process metrics.`,
  references: () =>
    `${table(
      ['Provider', 'Form', 'Meaning'],
      REFERENCE_FORMS.map((f) => [f.provider, code(f.form), f.meaning]),
    )}\n\n${KEY_SUFFIX_DOC}`,
};

/** The webhook's tables: docs/reference/webhook.md. */
export const WEBHOOK_REFERENCE_TABLES: Record<string, () => string> = {
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
        [
          code(`${PREFIX}${ENV_ANNOTATION_PREFIX}<VAR>`),
          ENV_ANNOTATION.type,
          defaultCell(ENV_ANNOTATION.default),
          ENV_ANNOTATION.doc,
        ],
      ],
    ),
  'product-annotations': () =>
    table(
      ['Annotation', 'Written by', 'On', 'Meaning'],
      PRODUCT_ANNOTATIONS.map((a) => [code(a.key), `the ${a.writtenBy}`, a.on, a.doc]),
    ),
  'webhook-limits': () =>
    table(
      ['What', 'Limit', 'Past it', 'Why'],
      WEBHOOK_LIMITS.map((l) => [l.what, l.limit, l.past, l.why]),
    ),
  'webhook-env': () =>
    table(
      ['Variable', 'Default', 'Description'],
      Object.entries(WEBHOOK_SETTINGS).map(([name, s]) => [code(name), defaultCell(s.default), s.doc]),
    ),
};

/** Every generated table, by the name of its block. */
export const GENERATED_TABLES: Record<string, () => string> = {
  ...AGENT_REFERENCE_TABLES,
  ...WEBHOOK_REFERENCE_TABLES,
  ...TROUBLESHOOTING_TABLES,
  ...EXEC_HELPER_TABLES,
  ...ENV_EXEC_TABLES,
};

/** The document each table must appear in (it may appear elsewhere too). */
export const TABLE_HOMES: Record<string, string> = Object.fromEntries([
  ...Object.keys(AGENT_REFERENCE_TABLES).map((name) => [name, 'docs/reference/agent.md']),
  ...Object.keys(WEBHOOK_REFERENCE_TABLES).map((name) => [name, 'docs/reference/webhook.md']),
  ...Object.keys(TROUBLESHOOTING_TABLES).map((name) => [name, 'docs/troubleshooting.md']),
  ...Object.keys(EXEC_HELPER_TABLES).map((name) => [name, 'docs/exec-helpers.md']),
  ...Object.keys(ENV_EXEC_TABLES).map((name) => [name, 'docs/env.md']),
]);

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
export const GENERATED_DOCS = [
  'docs/reference/agent.md',
  'docs/reference/webhook.md',
  'docs/troubleshooting.md',
  'docs/exec-helpers.md',
  'docs/env.md',
] as const;

/** A document with every generated block re-rendered. */
export function renderGenerated(text: string): string {
  return text.replace(BLOCK, (_, name: string) => {
    const render = GENERATED_TABLES[name];
    if (!render) throw new Error(`a generated block "${name}" that docs/tables.ts does not know`);
    return `<!-- generated:${name} -->\n${render()}\n<!-- /generated:${name} -->`;
  });
}
