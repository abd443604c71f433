/** The Node this project pins: the binary the `node` devDependency installed into node_modules. */
import { runTool } from './container-engine.ts';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const NODE = join(fileURLToPath(new URL('..', import.meta.url)), 'node_modules/node/bin/node');

export function pinnedNode(): { path: string; version: string } {
  const version = runTool(NODE, ['--version'], {
    install: 'npm ci (the `node` devDependency brings Node 24)',
  })
    .trim()
    .replace(/^v/, '');
  if (!version.startsWith('24.')) throw new Error(`the images need Node 24; ${NODE} is ${version}`);
  return { path: NODE, version };
}
