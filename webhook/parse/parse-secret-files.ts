import { ConfigError, quote } from '../../agent/contract/errors.ts';
import { findPathConflict } from '../../agent/contract/path.ts';
import type { SecretReference } from '../../agent/contract/reference.ts';
import { checkSecretNames, type CompiledTemplate } from '../../agent/format/template.ts';
import { PREFIX, type Annotation } from '../annotations/annotation.ts';
import { FILE_ANNOTATIONS, type FileAnnotationName } from '../annotations/file-annotations.ts';
import type { InjectionDefaults } from '../config/injection-defaults.ts';
import type { SecretFileRequest } from '../injection-request.ts';
import { attempt, type FileValues } from './read-annotations.ts';

/**
 * The pod's files, one per `secret-agent.io/secret-<file>`: each file's annotations parsed and checked
 * together (a reference this cluster allows, a format that agrees with its template, a path), then
 * across files (the secrets a template reads are files of the pod; no two files share a path).
 */

/** A reference as parsed, with the annotation it came from: what the provider checks read. */
export interface ParsedReference {
  /** The `secret-agent.io/secret-<file>` key it came from. */
  readonly annotation: string;
  readonly ref: SecretReference;
}

export interface SecretFiles {
  /** The files whose annotations all parse, in file-name order. */
  readonly secrets: readonly SecretFileRequest[];
  /** Their references, parsed. */
  readonly references: readonly ParsedReference[];
}

/** The parsed value of a per-file annotation. */
type FileValue<N extends FileAnnotationName> = ReturnType<(typeof FILE_ANNOTATIONS)[N]['parse']>;

/**
 * Why this cluster cannot serve a parsed reference (`field`: the annotation it came from), or undefined:
 * `file:` and `exec:` are the cluster admin's to allow.
 */
export function referenceRefusal(
  ref: SecretReference,
  field: string,
  defaults: Pick<InjectionDefaults, 'allowFileReferences' | 'execHelpers'>,
): ConfigError | undefined {
  if (ref.provider === 'file' && !defaults.allowFileReferences)
    return new ConfigError(
      field,
      'file: references are turned off on this cluster (they read files inside the agent container)',
      'reference the secret in AWS, GCP or Vault; file: is for local runs (webhook setting ALLOW_FILE_REFERENCES)',
    );
  if (ref.provider === 'exec' && !defaults.execHelpers)
    return new ConfigError(
      field,
      'exec: references are turned off on this cluster (they run a helper program in the agent container)',
      'reference the secret in AWS, GCP or Vault, or ask the cluster admin to allow exec: references (webhook settings ALLOW_EXEC_REFERENCES and EXEC_HELPERS_VOLUME, docs/exec-helpers.md)',
    );
  return undefined;
}

/** `envCount`: how many variables the pod takes from secrets; a pod with neither files nor variables names no secret. */
export function parseSecretFiles(
  fileValues: FileValues,
  defaults: Pick<InjectionDefaults, 'allowFileReferences' | 'execHelpers'>,
  errors: ConfigError[],
  envCount = 0,
): SecretFiles {
  const secrets: SecretFileRequest[] = [];
  const references: ParsedReference[] = [];
  const templates: CompiledTemplate[] = [];
  for (const file of [...fileValues.keys()].sort()) {
    const values = fileValues.get(file)!;
    const key = (name: FileAnnotationName) => `${PREFIX}${name}-${file}`;
    const ref = values.get('secret');
    if (ref === undefined) {
      for (const name of values.keys())
        errors.push(
          new ConfigError(
            key(name),
            `configures file ${quote(file)}, but ${key('secret')} is not set`,
            `add ${key('secret')}: <reference>, or remove this annotation`,
          ),
        );
      continue;
    }
    const get = <N extends FileAnnotationName>(name: N): FileValue<N> | undefined => {
      const raw = values.get(name);
      const a = FILE_ANNOTATIONS[name] as Annotation<FileValue<N>>;
      return raw === undefined ? undefined : attempt(() => a.parse(raw, key(name)), errors);
    };
    const okRef = get('secret');
    const refused = okRef && referenceRefusal(okRef, key('secret'), defaults);
    if (refused) {
      errors.push(refused);
      continue;
    }
    const template = get('template');
    const chosenFormat = get('format');
    const format = values.has('template') ? 'template' : (chosenFormat ?? 'raw');
    if (values.has('template') && chosenFormat !== undefined && chosenFormat !== 'template') {
      errors.push(
        new ConfigError(
          key('format'),
          `is ${quote(chosenFormat)}, but ${key('template')} makes the file a template`,
          `remove ${key('format')}, or remove ${key('template')}`,
        ),
      );
      continue;
    }
    if (chosenFormat === 'template' && !values.has('template')) {
      errors.push(
        new ConfigError(
          key('format'),
          `is "template", but ${key('template')} is not set`,
          `add ${key('template')} with the file's text, e.g. postgres://{{username}}:{{password}}@db:5432/app`,
        ),
      );
      continue;
    }
    if (values.has('template') && template === undefined) continue;
    if (template) templates.push(template);
    const path = values.has('path') ? get('path') : file;
    const mode = get('file-mode');
    const refreshInterval = get('refresh-interval');
    if (path === '' && format !== 'split') {
      errors.push(
        new ConfigError(
          key('path'),
          '"." (the top level) is only for format split',
          `name a file, e.g. ${file}`,
        ),
      );
      continue;
    }
    if (okRef === undefined || path === undefined) continue;
    if (
      (values.has('file-mode') && mode === undefined) ||
      (values.has('refresh-interval') && refreshInterval === undefined)
    )
      continue;
    references.push({ annotation: key('secret'), ref: okRef });
    secrets.push({
      file,
      annotation: key('secret'),
      ref,
      provider: okRef.provider,
      path,
      format,
      ...(mode !== undefined ? { mode } : {}),
      ...(refreshInterval !== undefined ? { refreshInterval } : {}),
      ...(template ? { template: template.text } : {}),
    });
  }
  // A template reads other secrets by their file name: every name it uses must be a file here.
  const files = [...fileValues.keys()].sort();
  for (const template of templates)
    errors.push(
      ...checkSecretNames(
        template,
        files,
        () => `use the <file> part of one of this pod's ${PREFIX}secret-<file> annotations after secrets.`,
      ),
    );
  const conflict = findPathConflict(secrets.filter((s) => s.path !== '').map((s) => s.path));
  if (conflict) {
    const [first, second] = conflict;
    const holders = (path: string) => secrets.filter((s) => s.path === path).map((s) => s.annotation);
    const culprit = first === second ? holders(second)[1]! : holders(second)[0]!;
    // The path annotation is what to change, when the file has one.
    const culpritFile = culprit.slice(`${PREFIX}secret-`.length);
    errors.push(
      new ConfigError(
        fileValues.get(culpritFile)?.has('path') ? `${PREFIX}path-${culpritFile}` : culprit,
        first === second
          ? `writes ${quote(first)}, which ${holders(first)[0]} writes too`
          : `writes ${quote(second)}, which needs ${quote(first)} as a directory, but ${holders(first)[0]} writes a file there`,
        'give every file its own path (set secret-agent.io/path-<file>)',
      ),
    );
  }
  if (fileValues.size === 0 && envCount === 0)
    errors.push(
      new ConfigError(
        `${PREFIX}inject`,
        'is "true" but no secret is named',
        'add an annotation secret-agent.io/secret-<file>: <reference> (or secret-agent.io/env-<VAR>: <reference>)',
      ),
    );
  return { secrets, references };
}
