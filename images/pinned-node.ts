/** The Node this project pins: the binary the `node` devDependency installed into node_modules. */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const NODE = join(fileURLToPath(new URL('..', import.meta.url)), 'node_modules/node/bin/node');

export function pinnedNode(): { path: string; version: string } {
  const r = spawnSync(NODE, ['--version'], { encoding: 'utf8' });
  if (r.status !== 0)
    throw new Error(`${NODE} does not run. Fix: npm ci (the \`node\` devDependency brings Node 24).`);
  const version = r.stdout.trim().replace(/^v/, '');
  if (!version.startsWith('24.')) throw new Error(`the images need Node 24; ${NODE} is ${version}`);
  return { path: NODE, version };
}
