import { execFileSync } from 'node:child_process';
import { REQUIRED_NODE_MAJOR } from '../../agent/require-node-version.ts';

/** PATH without npm's node_modules/.bin: `npm test` puts the project's Node 24 first, this finds the system's. */
export const SYSTEM_PATH = (process.env.PATH ?? '/usr/bin:/bin')
  .split(':')
  .filter((dir) => !dir.includes('node_modules'))
  .join(':');

/** The version of the system's `node` when it is older than the bundles need (v20 on these machines). */
export function olderSystemNode(): string | undefined {
  try {
    const version = execFileSync('node', ['--version'], {
      encoding: 'utf8',
      env: { PATH: SYSTEM_PATH },
    }).trim();
    return Number(/^v(\d+)/.exec(version)?.[1]) < REQUIRED_NODE_MAJOR ? version : undefined;
  } catch {
    return undefined;
  }
}
