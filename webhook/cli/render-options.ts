import { ConfigError, quote } from '../../agent/contract/errors.ts';
import { DNS_LABEL } from '../kubernetes-names.ts';
import { STDIN } from './manifest-input.ts';
import type { KubernetesVersion } from './render-settings.ts';
import { parseCommandArgs } from './command-args.ts';

/** `render`'s command line, parsed and checked; every error names the flag and the fix. */

export interface RenderOptions {
  readonly help: boolean;
  readonly files: readonly string[];
  readonly check: boolean;
  readonly namespace: string;
  readonly agentImage?: string;
  readonly clusterVersion?: KubernetesVersion;
}

const SEE_HELP = 'see secret-agent-webhook render --help';

/** Throws a ConfigError naming the flag. */
export function parseRenderOptions(args: readonly string[]): RenderOptions {
  const parsed = parseCommandArgs(
    args,
    {
      file: { type: 'string', short: 'f', multiple: true },
      check: { type: 'boolean' },
      namespace: { type: 'string', short: 'n' },
      'agent-image': { type: 'string' },
      'cluster-version': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
    SEE_HELP,
  );
  const { values, positionals } = parsed;
  if (values.help) return { help: true, files: [], check: false, namespace: 'default' };
  if (positionals.length > 0)
    throw new ConfigError(
      'arguments',
      `unexpected argument ${quote(positionals[0]!)}`,
      `name files with -f, e.g. -f ${positionals[0]!}`,
    );
  const files = values.file ?? [];
  if (files.length === 0)
    throw new ConfigError('-f', 'is missing', 'name a manifest file with -f FILE, or -f - to read stdin');
  if (files.filter((f) => f === STDIN).length > 1)
    throw new ConfigError('-f', 'names stdin (-) more than once', 'read stdin once');
  const namespace = values.namespace ?? 'default';
  if (!DNS_LABEL.test(namespace))
    throw new ConfigError(
      '--namespace',
      `${quote(namespace)} is not a namespace name`,
      'use lower-case letters, digits and -',
    );
  return {
    help: false,
    files,
    check: values.check ?? false,
    namespace,
    ...(values['agent-image'] !== undefined ? { agentImage: values['agent-image'] } : {}),
    ...(values['cluster-version'] !== undefined
      ? { clusterVersion: kubernetesVersion(values['cluster-version']) }
      : {}),
  };
}

/** `1.28`, `v1.31.2` or `v1.30.4-eks-a737599`: what `kubectl version` prints for the server. */
function kubernetesVersion(text: string): KubernetesVersion {
  const m = /^v?(\d+)\.(\d+)(?:\.\d+)?(?:[-+][0-9A-Za-z.+-]*)?$/.exec(text);
  if (!m)
    throw new ConfigError(
      '--cluster-version',
      `${quote(text)} is not a Kubernetes version`,
      'use MAJOR.MINOR, e.g. 1.28 or 1.31',
    );
  return { major: Number(m[1]), minor: Number(m[2]) };
}
