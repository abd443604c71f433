import { build } from 'esbuild';
import { chmodSync, globSync } from 'node:fs';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

/**
 * Builds each example exec: helper (deploy/exec-helpers/*.ts) into one executable file in `outdir`, named
 * without an extension, as references name it (`exec:kubernetes-secret/…`). Not minified: an admin
 * reads what goes into the helpers volume. The source's #! line (/nodejs/bin/node, the agent image's
 * Node) is kept. Returns the files written.
 */
export async function buildHelpers(outdir: string): Promise<string[]> {
  const written: string[] = [];
  for (const source of globSync('deploy/exec-helpers/*.ts', { cwd: ROOT }).sort()) {
    const outfile = join(outdir, basename(source, '.ts'));
    await build({
      entryPoints: [join(ROOT, source)],
      outfile,
      bundle: true,
      platform: 'node',
      target: 'node24',
      format: 'esm',
      legalComments: 'none',
      logLevel: 'warning',
      banner: {
        js: `// A secret-agent exec: helper, built from ${source}: usage there, protocol in docs/exec-helpers.md.`,
      },
    });
    chmodSync(outfile, 0o755);
    written.push(outfile);
  }
  return written;
}
