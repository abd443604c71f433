import { ConfigError, quote } from '../../agent/contract/errors.ts';
import { ENV_NAME } from '../../agent/contract/env-exec.ts';
import { refusedEnvName } from '../../agent/contract/refused-env-names.ts';
import { isProductAnnotation } from '../../agent/contract/product-annotations.ts';
import { readAnnotationKey } from '../annotations/annotation-keys.ts';
import { PREFIX, type Annotation } from '../annotations/annotation.ts';
import { FILE_NAME, type FileAnnotationName } from '../annotations/file-annotations.ts';
import { POD_ANNOTATIONS, type PodAnnotationName } from '../annotations/pod-annotations.ts';
import { closestAnnotation } from './closest-annotation.ts';

/**
 * A pod's `secret-agent.io/` annotations sorted by what they configure, as written: the first step of
 * parsing. A key that configures nothing is refused here, with the annotation it was likely meant to be.
 */

export type PodValues = ReadonlyMap<PodAnnotationName, string>;
/** Per file (the `<file>` of `secret-agent.io/<setting>-<file>`), its settings as written. */
export type FileValues = ReadonlyMap<string, ReadonlyMap<FileAnnotationName, string>>;

/** Per variable (the `<VAR>` of `secret-agent.io/env-<VAR>`), its reference as written. */
export type EnvValues = ReadonlyMap<string, string>;

export interface AnnotationValues {
  readonly pod: PodValues;
  readonly files: FileValues;
  readonly env: EnvValues;
}

/** Sorts the annotations into pod-wide and per-file values; unknown keys and bad file names go to `errors`. */
export function readAnnotations(
  annotations: Readonly<Record<string, string>>,
  errors: ConfigError[],
): AnnotationValues {
  const pod = new Map<PodAnnotationName, string>();
  const files = new Map<string, Map<FileAnnotationName, string>>();
  const env = new Map<string, string>();
  for (const [key, value] of Object.entries(annotations)) {
    // What the agent or the webhook wrote (a restart's template annotation) is not a setting: kept as is.
    const match = isProductAnnotation(key) ? undefined : readAnnotationKey(key);
    if (match === undefined) continue;
    if (match.kind === 'pod') {
      pod.set(match.name, value);
      continue;
    }
    if (match.kind === 'env') {
      const error = envNameError(key, match.variable);
      if (error) errors.push(error);
      else env.set(match.variable, value);
      continue;
    }
    if (match.kind === 'unknown') {
      const near = closestAnnotation(match.name);
      errors.push(
        new ConfigError(
          key,
          'is not a secret-agent annotation',
          `${near ? `did you mean ${PREFIX}${near}? Otherwise ` : ''}remove it; files are named by ${PREFIX}secret-<file> (see docs/webhook.md for every annotation)`,
        ),
      );
      continue;
    }
    if (!FILE_NAME.test(match.file)) {
      errors.push(
        new ConfigError(
          key,
          `${quote(match.file)} is not a file name`,
          'use letters, digits, -, _ and . (sub-directories go in path-<file>)',
        ),
      );
      continue;
    }
    let values = files.get(match.file);
    if (!values) files.set(match.file, (values = new Map()));
    values.set(match.name, value);
  }
  return { pod, files, env };
}

/**
 * Why `secret-agent.io/env-<variable>` names no variable a secret may set: not a name a shell can read,
 * or one a loader, a shell, a runtime or a launcher reads to choose code or trust, by name or by convention
 * (agent/contract/refused-env-names.ts, which words the rule that matched).
 */
function envNameError(key: string, variable: string): ConfigError | undefined {
  if (!ENV_NAME.test(variable))
    return new ConfigError(
      key,
      `${quote(variable)} is not an environment variable name a shell can read`,
      'use letters, digits and _, not starting with a digit, e.g. secret-agent.io/env-DATABASE_URL',
    );
  const refused = refusedEnvName(variable);
  if (refused === undefined) return undefined;
  return new ConfigError(
    key,
    `${quote(variable)} ${refused.reason}: whoever writes the secret would ${refused.consequence}`,
    `give the secret a name of the app's own, e.g. ${PREFIX}env-DATABASE_URL; if the app needs ${variable}, set it in the container's env, where the pod's author chooses it (a path or an option is not a secret). docs/env.md lists every refused name`,
  );
}

/** The parsed value of a pod-wide annotation. */
export type PodValue<N extends PodAnnotationName> = ReturnType<(typeof POD_ANNOTATIONS)[N]['parse']>;

/**
 * Reads pod-wide values by their declarations, defaults included: undefined where unset, or where the
 * value does not parse (its error goes to `errors`, once however often the value is read).
 */
export type PodValueReader = <N extends PodAnnotationName>(name: N) => PodValue<N> | undefined;

export function podValueReader(values: PodValues, errors: ConfigError[]): PodValueReader {
  // Each value parsed once: several steps read the same annotation, and a bad one is one problem.
  const parsed = new Map<PodAnnotationName, unknown>();
  return <N extends PodAnnotationName>(name: N) => {
    if (parsed.has(name)) return parsed.get(name) as PodValue<N> | undefined;
    const a = POD_ANNOTATIONS[name] as Annotation<PodValue<N>>;
    const raw = values.get(name) ?? a.default;
    const value = raw === undefined ? undefined : attempt(() => a.parse(raw, PREFIX + name), errors);
    parsed.set(name, value);
    return value;
  };
}

/**
 * The parsed value, or undefined when the text does not parse: its ConfigError goes to `errors`, or
 * nowhere where another check reports it already.
 */
export function attempt<T>(parse: () => T, errors?: ConfigError[]): T | undefined {
  try {
    return parse();
  } catch (e) {
    if (e instanceof ConfigError) {
      errors?.push(e);
      return undefined;
    }
    throw e;
  }
}
