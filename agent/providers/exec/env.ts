import { absolutePath, count, duration, setting } from '../../contract/settings.ts';

/**
 * The exec provider's settings, declared as data: config.ts parses them, and the agent's misspelling
 * check, the docs tables and `--help` list them (agent/providers/provider-env.ts joins them with the
 * other providers'). Declarations only, so knowing them never loads child_process code.
 */

export const DEFAULT_HELPERS_DIR = '/secret-agent/helpers';

export const EXEC_SETTINGS = {
  EXEC_HELPERS_DIR: setting({
    default: DEFAULT_HELPERS_DIR,
    doc: 'Directory of the helper programs `exec:HELPER/…` runs: the volume the platform team provides (the webhook mounts it here, read-only). Only plain file names in it run; a link out of it is refused.',
    parse: absolutePath,
  }),
  EXEC_TIMEOUT: setting({
    default: '10s',
    doc: 'How long one helper run may take; then its whole process group is killed and the run counts as a transient timeout (retried).',
    parse: duration(100, 300_000, '10s or 1m'),
  }),
  EXEC_CONCURRENCY: setting({
    default: '4',
    doc: 'How many helpers run at once.',
    parse: count(1, 64),
  }),
} as const;
