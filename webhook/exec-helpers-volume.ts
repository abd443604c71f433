import { ConfigError, quote } from '../agent/contract/errors.ts';
import { DEFAULT_HELPERS_DIR } from '../agent/providers/exec/env.ts';
import { DNS_SUBDOMAIN } from './kubernetes-names.ts';

/**
 * EXEC_HELPERS_VOLUME: where the helper programs of `exec:` references come from, as the cluster
 * admin names it. Only the volume sources that make sense for a directory of programs the platform
 * team maintains are taken, each with the few fields it needs, so the volume the webhook renders is
 * always one the API server accepts and the agent can run helpers from.
 */

/** Where the agent containers see the helpers: the agent's default EXEC_HELPERS_DIR, so no env is needed. */
export const HELPERS_MOUNT_PATH = DEFAULT_HELPERS_DIR;

/**
 * r-xr-xr-x: a ConfigMap's files are root's, the agent runs as another user, and Node reads a
 * #!/nodejs/bin/node script (safe readable: its interpreter is execute-only). A ConfigMap of binaries
 * takes 0511 (329): the agent refuses a binary its user can read (docs/exec-helpers.md).
 */
const DEFAULT_MODE = 0o555;

export type ExecHelpersVolume =
  | { readonly configMap: { readonly name: string; readonly defaultMode: number } }
  | { readonly persistentVolumeClaim: { readonly claimName: string; readonly readOnly: true } };

const EXAMPLE = '{"configMap":{"name":"secret-agent-helpers"}}';

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Parses the JSON of EXEC_HELPERS_VOLUME; throws a ConfigError naming `field` and the fix. */
export function parseExecHelpersVolume(text: string, field: string): ExecHelpersVolume {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    throw new ConfigError(
      field,
      `${quote(text)} is not JSON`,
      `write a volume source as JSON, e.g. ${EXAMPLE}`,
    );
  }
  const kinds = isObject(doc) ? Object.keys(doc) : [];
  if (kinds.length !== 1 || (kinds[0] !== 'configMap' && kinds[0] !== 'persistentVolumeClaim'))
    throw new ConfigError(
      field,
      `${quote(text)} is not one configMap or persistentVolumeClaim volume source`,
      `name the ConfigMap (in each namespace whose pods use exec:) or the claim, e.g. ${EXAMPLE} or {"persistentVolumeClaim":{"claimName":"secret-agent-helpers"}}`,
    );
  const kind = kinds[0];
  const source = (doc as Record<string, unknown>)[kind];
  const allowed = kind === 'configMap' ? ['name', 'defaultMode'] : ['claimName', 'readOnly'];
  const extra = isObject(source) ? Object.keys(source).filter((k) => !allowed.includes(k)) : [];
  if (!isObject(source) || extra.length > 0)
    throw new ConfigError(
      field,
      isObject(source)
        ? `${kind} has fields the webhook does not render: ${extra.map(quote).join(', ')}`
        : `${kind} is not an object`,
      `give ${kind} only ${allowed.join(' and ')}, e.g. ${EXAMPLE}`,
    );
  const nameField = kind === 'configMap' ? 'name' : 'claimName';
  const name = source[nameField];
  if (typeof name !== 'string' || !DNS_SUBDOMAIN.test(name))
    throw new ConfigError(
      field,
      `${kind}.${nameField} ${typeof name === 'string' ? quote(name) : 'is missing or'} is not a Kubernetes name`,
      'use lower-case letters, digits, - and ., e.g. secret-agent-helpers',
    );
  if (kind === 'persistentVolumeClaim') {
    if (source.readOnly !== undefined && source.readOnly !== true)
      throw new ConfigError(
        field,
        'persistentVolumeClaim.readOnly is not true',
        'leave readOnly out (the webhook mounts the helpers read-only) or set it to true',
      );
    return { persistentVolumeClaim: { claimName: name, readOnly: true } };
  }
  const mode = source.defaultMode ?? DEFAULT_MODE;
  if (typeof mode !== 'number' || !Number.isInteger(mode) || mode < 0 || mode > 0o777)
    throw new ConfigError(
      field,
      'configMap.defaultMode is not a file mode (a whole number from 0 to 511)',
      'leave it out for 0555 (#!/nodejs/bin/node scripts), or write 329 for 0511 (a ConfigMap of binaries): JSON has no octal',
    );
  // Every user executes; reading is for scripts only (0555): a binary the agent can read is one it
  // refuses to run (0511), so either is taken.
  if ((mode & 0o001) === 0)
    throw new ConfigError(
      field,
      `configMap.defaultMode ${mode} (0${mode.toString(8)}) does not let every user read and execute the helpers (scripts, 0555) or execute them (binaries, 0511), and the agent runs as the pod's user, not the files' owner`,
      'leave it out for 0555 (#!/nodejs/bin/node scripts), or write 329 for 0511 (a ConfigMap of binaries): JSON has no octal',
    );
  return { configMap: { name, defaultMode: mode } };
}
