import type { SecretSpec } from '../contract/agent-config.ts';
import { ConfigError, ConfigErrors } from '../contract/errors.ts';
import type { FormatKit } from './render-files.ts';
import { ValueFormatError } from './structured-formats.ts';

/**
 * Loads the code of the formats the configured secrets use, and no other: an agent without
 * templates never evaluates the template parser, one without FORMAT=yaml never the YAML writer.
 * Templates are compiled here, at start-up and before any fetch, so a syntax error or a
 * `{{secrets.NAME}}` that names no secret stops the agent (exit 2) with the line and column.
 */
export async function loadFormats(secrets: readonly SecretSpec[]): Promise<FormatKit> {
  const templated = secrets.filter((s) => s.format === 'template');
  const [yaml, template] = await Promise.all([
    secrets.some((s) => s.format === 'yaml') ? import('./yaml-format.ts') : undefined,
    templated.length > 0 ? import('./template.ts') : undefined,
  ]);
  const kit: { -readonly [K in keyof FormatKit]: FormatKit[K] } = {};
  if (yaml) kit.yaml = yaml.toYamlText;
  if (!template) return kit;

  const byName = new Map(secrets.flatMap((s) => (s.name === undefined ? [] : [[s.name, s] as const])));
  const names = [...byName.keys()];
  const errors: ConfigError[] = [];
  const compiled = new Map<string, ReturnType<typeof template.compileTemplate>>();
  for (const spec of templated) {
    try {
      const c = template.compileTemplate(spec.template!, `${spec.id}_TEMPLATE`);
      errors.push(
        ...template.checkSecretNames(
          c,
          names,
          () => 'set SECRET_<N>_NAME on the secret the template means, and use that name after secrets.',
        ),
      );
      compiled.set(spec.id, c);
    } catch (e) {
      if (!(e instanceof ConfigError)) throw e;
      errors.push(e);
    }
  }
  if (errors.length > 0) throw new ConfigErrors(errors);

  /** A secret's value as a template sees it: with `#key`, that key's value. */
  const valueFor = (spec: SecretSpec, bytes: Uint8Array, whose: string) => {
    const value = template.templateValue(bytes, whose);
    const key = spec.ref.key;
    if (key === undefined) return value;
    if (typeof value !== 'object' || value === null || Array.isArray(value) || !Object.hasOwn(value, key))
      throw new template.TemplateError(
        `${whose} has no JSON key ${JSON.stringify(key)} for its #key`,
        'check the #key spelling against the secret’s keys',
      );
    return value[key]!;
  };

  kit.template = (spec, bytes, valueOf) => {
    const c = compiled.get(spec.id)!;
    try {
      const used = new Map<string, ReturnType<typeof valueFor>>();
      for (const { path } of c.secretPaths) {
        const name = template.secretNameOf(path, names)!;
        if (used.has(name)) continue;
        const other = byName.get(name)!;
        const otherBytes = valueOf(name);
        if (otherBytes === undefined)
          throw new template.TemplateError(
            `the template reads the secret named ${JSON.stringify(name)} (${other.id}), which was not delivered`,
            `fix ${other.id} first: its own error is reported too`,
          );
        used.set(name, valueFor(other, otherBytes, `the secret named ${JSON.stringify(name)} (${other.id})`));
      }
      return template.renderTemplate(c, { own: valueFor(spec, bytes, 'the value'), secrets: used });
    } catch (e) {
      if (e instanceof template.TemplateError) throw new ValueFormatError(e.problem, e.fix);
      throw e;
    }
  };
  return kit;
}
