import { ConfigError } from '../../agent/contract/errors.ts';
import { kib, MAX_SETTING_BYTES, MAX_TEMPLATE_BYTES, oversize } from '../../agent/contract/value-limits.ts';
import { readAnnotationKey } from '../annotations/annotation-keys.ts';
import { PREFIX } from '../annotations/annotation.ts';

/**
 * How much a pod's `secret-agent.io/` annotations may hold, checked before any of them is parsed. A
 * mutating webhook sees the pod before the API server validates it (its 256 KiB for all annotations
 * together is checked after us), so without these a pod could make the webhook parse, render and
 * answer megabytes. Each value has the agent's cap for the setting it becomes
 * (agent/contract/value-limits.ts), so the agent accepts whatever the webhook admits.
 */

/** All of them together, names and values, as Kubernetes counts its own limit for all annotations. */
export const MAX_ANNOTATION_TOTAL_BYTES = 256 * 1024;

/** A pod with 100 files and 4 settings each has about 400; past this, work per annotation adds up. */
export const MAX_ANNOTATIONS = 512;

/** The name after `secret-agent.io/`: Kubernetes' limit on the name part of an annotation key. */
export const MAX_ANNOTATION_NAME = 63;

/** The size cap of an annotation's value: a template's or any other setting's. */
function annotationLimit(key: string): number {
  const read = readAnnotationKey(key);
  return read?.kind === 'file' && read.name === 'template' ? MAX_TEMPLATE_BYTES : MAX_SETTING_BYTES;
}

/** A key as an error names it: cut where Kubernetes would have refused it. */
function shownKey(key: string): string {
  const limit = PREFIX.length + MAX_ANNOTATION_NAME;
  return key.length > limit ? `${key.slice(0, limit)}…` : key;
}

/**
 * The `secret-agent.io/` annotations over their limits: their number, each name and value, and all of
 * them together. Never a value: names and sizes only.
 */
export function checkAnnotationLimits(annotations: Readonly<Record<string, string>>): ConfigError[] {
  const keys = Object.keys(annotations).filter((k) => k.startsWith(PREFIX));
  if (keys.length > MAX_ANNOTATIONS)
    return [
      new ConfigError(
        `${PREFIX}*`,
        `the pod has ${keys.length} ${PREFIX} annotations, over their limit of ${MAX_ANNOTATIONS}`,
        `remove the ones that are no secret-agent setting; a pod needs one ${PREFIX}secret-<file> per file and a few settings`,
      ),
    ];
  const errors: ConfigError[] = [];
  const sizes: [string, number][] = [];
  for (const key of keys) {
    const value = annotations[key]!;
    const name = key.length - PREFIX.length;
    if (name > MAX_ANNOTATION_NAME)
      errors.push(
        new ConfigError(
          shownKey(key),
          `the name after ${PREFIX} is ${name} characters long, over Kubernetes' limit of ${MAX_ANNOTATION_NAME}`,
          'shorten it (for a file annotation, shorten the <file> part: the path-<file> annotation names the file on disk)',
        ),
      );
    const limit = annotationLimit(key);
    const tooLong = oversize(value, shownKey(key), limit);
    if (tooLong) errors.push(tooLong);
    sizes.push([shownKey(key), Buffer.byteLength(key) + Buffer.byteLength(value)]);
  }
  const total = sizes.reduce((sum, [, bytes]) => sum + bytes, 0);
  // One value over its own limit is what to fix first: the total would only repeat it.
  if (errors.length === 0 && total > MAX_ANNOTATION_TOTAL_BYTES) {
    const largest = sizes
      .sort((a, b) => b[1] - a[1])
      .slice(0, 3)
      .map(([key, bytes]) => `${key} ${bytes} bytes`)
      .join(', ');
    errors.push(
      new ConfigError(
        `${PREFIX}*`,
        `the pod's ${PREFIX} annotations hold ${total} bytes together, over their limit of ${kib(MAX_ANNOTATION_TOTAL_BYTES)} (the largest: ${largest})`,
        `make them smaller, e.g. template only the lines of a file that hold secrets`,
      ),
    );
  }
  return errors;
}
