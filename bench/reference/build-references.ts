/**
 * Bundles the references as one minified CommonJS file each (ES module builds of the packages
 * preferred, as images/build.ts does for the agent): no TypeScript stripped at run time, no module
 * resolution. CommonJS, not ESM: an ES module's `import` of a builtin builds its whole namespace, which
 * loads what the builtin's lazy getters hold (measured: +8 MiB RSS for the bare sidecar); the agent's
 * bundle shims builtins to avoid that (images/build.ts), and a plain CommonJS script never pays it. So
 * each reference is its cheapest honest form. Returns their paths.
 */
import { build } from 'esbuild';
import { join } from 'node:path';

const root = new URL('../../', import.meta.url).pathname;

export async function buildReferences(): Promise<{ bareNode: string; awsSdkAlone: string }> {
  const bundle = (name: string) => bundleOne(name).then(() => join(root, `dist/bench/${name}.cjs`));
  return { bareNode: await bundle('bare-node'), awsSdkAlone: await bundle('aws-sdk-alone') };
}

async function bundleOne(name: string): Promise<void> {
  await build({
    entryPoints: [join(root, `bench/reference/${name}.ts`)],
    outfile: join(root, `dist/bench/${name}.cjs`),
    bundle: true,
    platform: 'node',
    target: 'node24',
    format: 'cjs',
    minify: true,
    mainFields: ['module', 'main'],
    logLevel: 'warning',
  });
}
