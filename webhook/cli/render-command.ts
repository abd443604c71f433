import { ConfigError, ConfigErrors } from '../../agent/contract/errors.ts';
import type { Env } from '../../agent/contract/settings.ts';
import { renderHelp } from './help.ts';
import { InputError, readManifests } from './manifest-input.ts';
import { formatManifests, type OutputDocument } from './manifest-output.ts';
import { formatDiagnostic, renderDocument } from './render-manifests.ts';
import { parseRenderOptions } from './render-options.ts';
import { renderSettings } from './render-settings.ts';

/**
 * `secret-agent-webhook render`: arguments → settings → manifests in → admission → manifests out.
 * Exit status: 0 all admitted; 1 some object would be refused (with --check also: one asks for
 * injection without the opt-in label, so its pods would run without their secrets); 2 bad arguments,
 * settings or input.
 */

export interface RenderIO {
  readonly env: Env;
  readStdin(): Promise<string>;
  stdout(text: string): void;
  stderr(text: string): void;
}

export const EXIT_REFUSED = 1;
export const EXIT_BAD_INPUT = 2;
const NAME = 'secret-agent-webhook render';

export async function runRender(args: readonly string[], io: RenderIO): Promise<number> {
  const fail = (lines: string) => {
    io.stderr(`${NAME}: ${lines}\n`);
    return EXIT_BAD_INPUT;
  };
  let options;
  let settings;
  try {
    options = parseRenderOptions(args);
    if (options.help) {
      io.stdout(renderHelp());
      return 0;
    }
    settings = renderSettings(io.env, options);
  } catch (e) {
    if (e instanceof ConfigError) return fail(e.message);
    if (e instanceof ConfigErrors)
      return fail(`invalid configuration\n${e.errors.map((err) => `  ${err.message}`).join('\n')}`);
    throw e;
  }

  let sources;
  try {
    sources = await readManifests(options.files, io.readStdin);
  } catch (e) {
    if (e instanceof InputError) return fail(e.message);
    throw e;
  }
  // --check is for CI: silent unless something is wrong.
  if (settings.note && !options.check) io.stderr(`${settings.note}\n`);

  const context = { defaults: settings.defaults, namespace: options.namespace, check: options.check };
  const output: OutputDocument[] = [];
  let refused = 0;
  for (const source of sources)
    for (const doc of source.documents) {
      const rendered = renderDocument(doc.value, context);
      for (const d of rendered.diagnostics) io.stderr(`${formatDiagnostic(d)}\n`);
      refused += rendered.refused;
      if (rendered.value !== undefined)
        output.push({
          value: rendered.value,
          changed: rendered.changed,
          indentSeq: source.indentSeq,
          ...(doc.yaml ? { yaml: doc.yaml } : {}),
        });
    }
  if (!options.check && output.length > 0) {
    const format = sources.every((s) => s.format === 'json') ? 'json' : 'yaml';
    io.stdout(formatManifests(output, format));
  }
  return refused > 0 ? EXIT_REFUSED : 0;
}
