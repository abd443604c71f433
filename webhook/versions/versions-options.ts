import { ConfigError, quote } from '../../agent/contract/errors.ts';
import { parseDuration } from '../../agent/contract/duration.ts';
import { DNS_LABEL } from '../kubernetes-names.ts';
import { parseCommandArgs } from '../cli/command-args.ts';

/** `versions`'s command line, parsed and checked; every error names the flag and the fix. */
export interface VersionsOptions {
  readonly help: boolean;
  /** One namespace (kubectl's context's if not given), or every one (`allNamespaces`, `-A`). */
  readonly namespace: string | undefined;
  readonly allNamespaces: boolean;
  readonly selector: string | undefined;
  readonly output: 'table' | 'json';
  /** `REF[=VERSION]` as typed: split once the references the pods read are known (a reference may hold `=`). */
  readonly waitFor: string | undefined;
  readonly timeoutMs: number;
  /** Between two looks while waiting. */
  readonly intervalMs: number;
  /** Pods read at once. */
  readonly concurrency: number;
  /** Read versions from this Prometheus instead of the agents' logs. */
  readonly prometheus: string | undefined;
  readonly kubectl: string;
  readonly kubeconfig: string | undefined;
  readonly context: string | undefined;
}

const SEE_HELP = 'see secret-agent-webhook versions --help';
const DEFAULT_TIMEOUT = '10m';
const DEFAULT_INTERVAL = '5s';
/** A namespace of 5,000 pods in about a minute, at 8 log reads in flight: the API server's default inflight cap is 400. */
const DEFAULT_CONCURRENCY = 8;
const MAX_CONCURRENCY = 64;

function duration(flag: string, text: string, min: number, max: number): number {
  const ms = parseDuration(text);
  if (ms === undefined)
    throw new ConfigError(flag, `${quote(text)} is not a duration`, 'write it as Go does, e.g. 30s, 10m, 1h');
  if (ms < min || ms > max)
    throw new ConfigError(
      flag,
      `${quote(text)} is out of range`,
      `use ${min / 1000}s to ${max / 3_600_000}h`,
    );
  return ms;
}

/** Throws a ConfigError naming the flag. */
export function parseVersionsOptions(args: readonly string[], env: NodeJS.ProcessEnv): VersionsOptions {
  const parsed = parseCommandArgs(
    args,
    {
      namespace: { type: 'string', short: 'n' },
      'all-namespaces': { type: 'boolean', short: 'A' },
      selector: { type: 'string', short: 'l' },
      output: { type: 'string', short: 'o' },
      'wait-for': { type: 'string' },
      timeout: { type: 'string' },
      interval: { type: 'string' },
      concurrency: { type: 'string' },
      prometheus: { type: 'string' },
      kubectl: { type: 'string' },
      kubeconfig: { type: 'string' },
      context: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
    SEE_HELP,
  );
  const { values, positionals } = parsed;
  const base = {
    namespace: undefined,
    allNamespaces: false,
    selector: undefined,
    output: 'table' as const,
    waitFor: undefined,
    timeoutMs: parseDuration(DEFAULT_TIMEOUT)!,
    intervalMs: parseDuration(DEFAULT_INTERVAL)!,
    concurrency: DEFAULT_CONCURRENCY,
    prometheus: undefined,
    kubectl: env.KUBECTL ?? 'kubectl',
    kubeconfig: undefined,
    context: undefined,
  };
  if (values.help) return { help: true, ...base };
  if (positionals.length > 0)
    throw new ConfigError('arguments', `unexpected argument ${quote(positionals[0]!)}`, SEE_HELP);
  if (values['all-namespaces'] && values.namespace !== undefined)
    throw new ConfigError('--namespace', 'is given with --all-namespaces', 'use one of -n NAMESPACE or -A');
  const namespace = values.namespace;
  if (namespace !== undefined && !DNS_LABEL.test(namespace))
    throw new ConfigError(
      '--namespace',
      `${quote(namespace)} is not a namespace name`,
      'use lower-case letters, digits and -',
    );
  const output = values.output ?? 'table';
  if (output !== 'table' && output !== 'json')
    throw new ConfigError(
      '--output',
      `${quote(output)} is not an output format`,
      'use table (the default) or json',
    );
  const waitFor = values['wait-for'];
  if (waitFor !== undefined && waitFor.trim() === '')
    throw new ConfigError(
      '--wait-for',
      'is empty',
      'name a reference as its annotation writes it, e.g. aws:prod/db',
    );
  if (values.timeout !== undefined && waitFor === undefined)
    throw new ConfigError(
      '--timeout',
      'is given without --wait-for',
      'add --wait-for REF[=VERSION], or drop --timeout',
    );
  let concurrency = DEFAULT_CONCURRENCY;
  if (values.concurrency !== undefined) {
    concurrency = Number(values.concurrency);
    if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > MAX_CONCURRENCY)
      throw new ConfigError(
        '--concurrency',
        `${quote(values.concurrency)} is not a whole number from 1 to ${MAX_CONCURRENCY}`,
        `use 1 to ${MAX_CONCURRENCY} (default ${DEFAULT_CONCURRENCY})`,
      );
  }
  const prometheus = values.prometheus;
  if (prometheus !== undefined && !/^https?:\/\/[^/\s]+/.test(prometheus))
    throw new ConfigError(
      '--prometheus',
      `${quote(prometheus)} is not an http(s) URL`,
      'name Prometheus’s API root, e.g. http://prometheus.monitoring:9090',
    );
  return {
    ...base,
    help: false,
    prometheus,
    namespace,
    allNamespaces: values['all-namespaces'] === true,
    selector: values.selector,
    output,
    waitFor,
    timeoutMs: duration('--timeout', values.timeout ?? DEFAULT_TIMEOUT, 1_000, 24 * 3_600_000),
    intervalMs: duration('--interval', values.interval ?? DEFAULT_INTERVAL, 100, 3_600_000),
    concurrency,
    kubectl: values.kubectl ?? base.kubectl,
    kubeconfig: values.kubeconfig,
    context: values.context,
  };
}
