import { parseReference, type SecretReference } from '../../agent/contract/reference.ts';
import { annotation } from './annotation.ts';

/**
 * `secret-agent.io/env-<VAR>`: the variable `<VAR>` of the app containers, from a secret (docs/env.md).
 * The value is a reference in the agent's grammar, `#key` included, as for `secret-<file>`; the agent
 * writes it into the volume and the app container's command runs through the env wrapper, which sets it.
 */
export const ENV_ANNOTATION_PREFIX = 'env-';

export const ENV_ANNOTATION = annotation<SecretReference>({
  type: 'reference',
  // A reference is a name, but text that fails to parse as one may be the secret itself.
  echo: 'shape',
  default: undefined,
  doc: 'The environment variable `<VAR>` of the app containers, from this reference (agent reference grammar, `#key` included); files stay the recommendation (docs/env.md). Each selected container needs its `command` in the pod spec, which the webhook runs through the env wrapper; `<VAR>` is letters, digits and `_`, not starting with a digit, and not one the container sets already. A new value reaches the app at its next start: with `restart-on-change`, a rotation restarts the workload.',
  parse: parseReference,
});

/** Reads the name part after `secret-agent.io/` as an env annotation: the variable as written. */
export function matchEnvAnnotation(name: string): string | undefined {
  return name.startsWith(ENV_ANNOTATION_PREFIX) && name.length > ENV_ANNOTATION_PREFIX.length
    ? name.slice(ENV_ANNOTATION_PREFIX.length)
    : undefined;
}
