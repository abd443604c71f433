import { AGENT_SETTINGS } from './contract/agent-settings.ts';
import { SECRET_SETTINGS } from './contract/secret-settings.ts';
import { CLIENT_ENV } from './providers/provider-env.ts';
import { KEY_SUFFIX_DOC, REFERENCE_FORMS } from './contract/reference.ts';
import { EXEC_SETTINGS } from './providers/exec/env.ts';
import { VAULT_ENV } from './providers/vault/env.ts';

/** What each exit code means: `--help` prints it, and agent/run-agent.ts returns exactly these. */
export const EXIT_CODES: readonly { code: number; meaning: string }[] = [
  { code: 0, meaning: 'every secret written (init), or a clean stop on SIGTERM (sidecar)' },
  {
    code: 1,
    meaning:
      'a secret could not be delivered: the backend refused or failed it, or its value does not fit the format; nothing was written, stderr lists each secret with the reason and a fix',
  },
  {
    code: 2,
    meaning:
      'invalid configuration or environment: every problem is listed, nothing was written, and nothing was fetched unless the problem shows only in the values (a split secret’s key that is another secret’s file)',
  },
  { code: 70, meaning: 'internal error: a bug in the agent, please report it' },
];

const WIDTH = 100;

/** `text` wrapped at WIDTH, every line indented by `indent`; Markdown code marks dropped for a terminal. */
function wrap(text: string, indent: string): string {
  const lines: string[] = [];
  let line = '';
  for (const word of text.replace(/`/g, '').split(/\s+/)) {
    if (line !== '' && indent.length + line.length + 1 + word.length > WIDTH) {
      lines.push(indent + line);
      line = word;
    } else line = line === '' ? word : `${line} ${word}`;
  }
  if (line !== '') lines.push(indent + line);
  return lines.join('\n');
}

function entries(rows: readonly { name: string; default?: string | undefined; doc: string }[]): string {
  return rows
    .map((r) => {
      if (r.default === undefined || r.default === '') return `  ${r.name}\n${wrap(r.doc, '      ')}`;
      const header = `  ${r.name} (default: ${r.default})`;
      // A default that is a sentence rather than a value goes with the text.
      return header.length <= WIDTH
        ? `${header}\n${wrap(r.doc, '      ')}`
        : `  ${r.name}\n${wrap(`${r.doc} Default: ${r.default}.`, '      ')}`;
    })
    .join('\n');
}

/**
 * `secret-agent --help`: usage and every setting, rendered from the same declarations the reference tables (docs/reference/agent.md)
 * tables are generated from (docs/tables.ts), so the two cannot disagree.
 */
export function helpText(version: string): string {
  const settings = Object.entries(AGENT_SETTINGS).map(([name, s]) => ({
    name,
    default: s.default,
    doc: s.doc,
  }));
  const perSecret = Object.entries(SECRET_SETTINGS).map(([name, s]) => ({
    name: `SECRET_<N>_${name}`,
    default: s.default,
    doc: s.doc,
  }));
  const references = REFERENCE_FORMS.map((f) => ({ name: f.form, doc: f.meaning }));
  return [
    wrap(
      `secret-agent ${version}: fetches secrets from AWS Secrets Manager, GCP Secret Manager, HashiCorp Vault and helper programs for any other backend into files on a memory volume, written atomically, and keeps them fresh. Configured by env only.`,
      '',
    ),
    '',
    'Usage:',
    '  SECRET_0_REF=REFERENCE SECRET_0_FILENAME=FILE [SECRET_1_REF=… …] [SETTING=… …] node agent.js',
    '  SECRET_ARN=REFERENCE [SECRET_FILENAME=FILE] node agent.js      (the Flyte / aws-samples contract)',
    '  node agent.js --help | --version',
    '',
    'Exit codes:',
    ...EXIT_CODES.map((e) => `${`  ${e.code}`.padEnd(6)}${wrap(e.meaning, '      ').trimStart()}`),
    '',
    'Settings:',
    entries(settings),
    '',
    'Per-secret settings (N = 0, 1, 2, … without gaps):',
    entries(perSecret),
    '',
    'References:',
    entries(references),
    wrap(KEY_SUFFIX_DOC, '  '),
    '',
    'Read by the backend providers and their client libraries:',
    entries(CLIENT_ENV),
    '',
    'Vault:',
    entries(VAULT_ENV),
    '',
    'Helper programs (exec:):',
    entries(Object.entries(EXEC_SETTINGS).map(([name, s]) => ({ name, default: s.default, doc: s.doc }))),
    '',
    'A misspelt variable (one close to these names) is an error, not ignored. More: docs/agent.md.',
    '',
  ].join('\n');
}
