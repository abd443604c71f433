import { ENV_VALUES_DIR, MAX_ENV_VARS, envValuePath } from '../../agent/contract/env-exec.ts';
import { ConfigError, quote } from '../../agent/contract/errors.ts';
import { PREFIX } from '../annotations/annotation.ts';
import { ENV_ANNOTATION, ENV_ANNOTATION_PREFIX } from '../annotations/env-annotations.ts';
import type { InjectionDefaults } from '../config/injection-defaults.ts';
import type { SecretFileRequest } from '../injection-request.ts';
import { referenceRefusal, type ParsedReference } from './parse-secret-files.ts';
import { attempt, type EnvValues } from './read-annotations.ts';

/**
 * The pod's variables, one per `secret-agent.io/env-<VAR>`: each a secret the agent writes, raw, to
 * `.secret-agent-env/<VAR>` in the volume, where the env wrapper reads it (docs/env.md). Their names
 * were checked when the annotations were read; here, their references and how many there are.
 */
export interface EnvSecrets {
  /** The variables whose references parse, in name order: secrets like the files', with `env` set. */
  readonly secrets: readonly SecretFileRequest[];
  readonly references: readonly ParsedReference[];
}

export function parseEnvVars(
  envValues: EnvValues,
  files: readonly SecretFileRequest[],
  defaults: Pick<InjectionDefaults, 'allowFileReferences' | 'execHelpers'>,
  errors: ConfigError[],
): EnvSecrets {
  const secrets: SecretFileRequest[] = [];
  const references: ParsedReference[] = [];
  if (envValues.size === 0) return { secrets, references };
  if (envValues.size > MAX_ENV_VARS)
    errors.push(
      new ConfigError(
        `${PREFIX}${ENV_ANNOTATION_PREFIX}*`,
        `names ${envValues.size} variables, more than ${MAX_ENV_VARS}`,
        'read the rest from files (secret-agent.io/secret-<file>), or one variable holding a JSON or dotenv secret the app parses',
      ),
    );
  // The values' directory is the webhook's: a file of the pod written there would be overwritten or clash.
  for (const file of files)
    if (file.path === ENV_VALUES_DIR || file.path.startsWith(`${ENV_VALUES_DIR}/`))
      errors.push(
        new ConfigError(
          file.annotation,
          `writes ${quote(file.path)}, where the environment variables' values go`,
          `give the file another path (secret-agent.io/path-${file.file})`,
        ),
      );
  for (const name of [...envValues.keys()].sort()) {
    const annotation = `${PREFIX}${ENV_ANNOTATION_PREFIX}${name}`;
    const ref = attempt(() => ENV_ANNOTATION.parse(envValues.get(name)!, annotation), errors);
    if (ref === undefined) continue;
    const refused = referenceRefusal(ref, annotation, defaults);
    if (refused) {
      errors.push(refused);
      continue;
    }
    references.push({ annotation, ref });
    secrets.push({
      file: `${ENV_ANNOTATION_PREFIX}${name}`,
      env: name,
      annotation,
      ref: envValues.get(name)!,
      provider: ref.provider,
      path: envValuePath(name),
      format: 'raw',
    });
  }
  return { secrets, references };
}
