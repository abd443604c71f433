import { PREFIX, type Annotation } from './annotation.ts';
import { ENV_ANNOTATION, matchEnvAnnotation } from './env-annotations.ts';
import { FILE_ANNOTATIONS, matchFileAnnotation, type FileAnnotationName } from './file-annotations.ts';
import { POD_ANNOTATIONS, type PodAnnotationName } from './pod-annotations.ts';

/**
 * What a `secret-agent.io/…` key configures, read one way for every reader: admission's (which
 * setting, which file or variable), the refusals' (how to show its value) and the size limits' (a template's or
 * another setting's).
 */
export type AnnotationKey =
  | { readonly kind: 'pod'; readonly name: PodAnnotationName }
  /** `file` as written: whether it is a valid file name (FILE_NAME) is the reader's to check. */
  | { readonly kind: 'file'; readonly name: FileAnnotationName; readonly file: string }
  /** `secret-agent.io/env-<variable>`: `variable` as written (whether it is a valid name is the reader's to check). */
  | { readonly kind: 'env'; readonly variable: string }
  /** No declared annotation: `name` is what follows the prefix. */
  | { readonly kind: 'unknown'; readonly name: string };

/** Reads a full key; undefined for a key that is none of ours (without the prefix). */
export function readAnnotationKey(key: string): AnnotationKey | undefined {
  if (!key.startsWith(PREFIX)) return undefined;
  const name = key.slice(PREFIX.length);
  if (Object.hasOwn(POD_ANNOTATIONS, name)) return { kind: 'pod', name: name as PodAnnotationName };
  const variable = matchEnvAnnotation(name);
  if (variable !== undefined) return { kind: 'env', variable };
  const match = matchFileAnnotation(name);
  return match ? { kind: 'file', ...match } : { kind: 'unknown', name };
}

/**
 * The declared annotation behind a full `secret-agent.io/…` key, pod-wide or per-file (also when the
 * file name is not a valid one); undefined for a key that is none of ours.
 */
export function annotationFor(key: string): Annotation<unknown> | undefined {
  const read = readAnnotationKey(key);
  if (read?.kind === 'pod') return POD_ANNOTATIONS[read.name];
  if (read?.kind === 'file') return FILE_ANNOTATIONS[read.name];
  if (read?.kind === 'env') return ENV_ANNOTATION;
  return undefined;
}
