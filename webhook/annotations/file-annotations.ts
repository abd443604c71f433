import { SECRET_FORMATS, SECRET_SETTINGS } from '../../agent/contract/secret-settings.ts';
import { validateRelativePath } from '../../agent/contract/path.ts';
import { parseReference, type SecretReference } from '../../agent/contract/reference.ts';
import { compileTemplate } from '../../agent/format/template.ts';
import { annotation } from './annotation.ts';

/**
 * Per-file annotations: `secret-agent.io/<setting>-<file>`. `<file>` is the name after the prefix;
 * annotation names cannot hold `/`, so `path-<file>` moves a file into a sub-directory.
 */
export const FILE_ANNOTATIONS = {
  secret: annotation<SecretReference>({
    type: 'reference',
    // A reference is a name, but text that fails to parse as one may be the secret itself.
    echo: 'shape',
    default: undefined,
    doc: 'Required, one per file: the secret reference (agent reference grammar). Writes the file `<file>` into the mount path. `aws:NAME` needs a region (aws-region or AGENT_AWS_REGION), `gcp:SECRET` a project (gcp-project or AGENT_GCP_PROJECT), `vault:` the cluster’s AGENT_VAULT_ADDR and a role (vault-role or AGENT_VAULT_ROLE), `exec:` a cluster that allows it (ALLOW_EXEC_REFERENCES): a pod without them is refused.',
    parse: parseReference,
  }),
  path: annotation({
    type: 'relative path',
    echo: 'quote',
    default: '`<file>`',
    doc: 'Path of the file inside the mount path, sub-directories allowed (e.g. `db/password`), never escaping it. For `format-<file>: split`, the directory the keys go into; `.` means the top level.',
    parse: (text, field) => (text === '.' ? '' : validateRelativePath(text, field)),
  }),
  format: annotation({
    type: SECRET_FORMATS.map((f) => `\`${f}\``).join(' | '),
    echo: 'quote',
    default: 'raw',
    doc: 'How the value becomes files (see the agent’s SECRET_<N>_FORMAT). `template` needs `template-<file>`, which implies it.',
    parse: (text, field) => SECRET_SETTINGS.FORMAT.parse(text, field),
  }),
  // Refusals quote only tag and section names from it (never the text around them), and hiding every
  // string the template contains would hide those names, which are the point of the message.
  template: annotation({
    type: 'Mustache text',
    echo: 'quote',
    default: undefined,
    doc: 'The file’s text: `{{key}}` for this secret’s JSON keys, `{{secrets.<other file>.key}}` for another secret of the pod (by its `<file>` name), `{{^key}}fallback{{/key}}` for a default (docs/templates.md). Implies `format-<file>: template`. A syntax error, a partial, or a `secrets.` name that is no file of the pod is refused with the line and column.',
    parse: (text, field) => compileTemplate(text, field),
  }),
  'file-mode': annotation({
    type: 'octal mode',
    echo: 'quote',
    default: '`file-mode`',
    doc: 'Mode of this file.',
    parse: (text, field) => (SECRET_SETTINGS.MODE.parse(text, field), text),
  }),
  'refresh-interval': annotation({
    type: 'duration',
    echo: 'quote',
    default: '`refresh-interval`',
    doc: 'Sidecar refresh period of this file.',
    parse: (text, field) => (SECRET_SETTINGS.REFRESH_INTERVAL.parse(text, field), text),
  }),
} as const;

export type FileAnnotationName = keyof typeof FILE_ANNOTATIONS;

/** Longest first, so `file-mode-x` is never read as something shorter. */
export const FILE_ANNOTATION_PREFIXES = (Object.keys(FILE_ANNOTATIONS) as FileAnnotationName[])
  .map((name) => ({ name, prefix: `${name}-` }))
  .sort((a, b) => b.prefix.length - a.prefix.length);

/** The name part rules Kubernetes applies to annotation keys. */
export const FILE_NAME = /^[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;

/** Reads `secret-agent.io/<key>` as a file annotation: which setting, which file. */
export function matchFileAnnotation(key: string): { name: FileAnnotationName; file: string } | undefined {
  for (const { name, prefix } of FILE_ANNOTATION_PREFIXES) {
    if (key.startsWith(prefix) && key.length > prefix.length) return { name, file: key.slice(prefix.length) };
  }
  return undefined;
}
