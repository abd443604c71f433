import { setTimeout as sleep } from 'node:timers/promises';
import { formatDuration } from '../../agent/contract/duration.ts';
import { ConfigError, quote } from '../../agent/contract/errors.ts';
import { compareHoldings, whyBehind, type ComparedPod, type Newest } from './compare-versions.ts';
import { readHoldings } from './held-versions.ts';
import { prometheusHoldings, PrometheusError } from './prometheus-holdings.ts';
import { KubernetesReadError, listInjectedPods } from './injected-pods.ts';
import { contextNamespace, KubectlError, startKubectlProxy, type KubernetesReader } from './kubectl-proxy.ts';
import { versionsJson, versionsTable } from './render-versions.ts';
import { parseVersionsOptions, type VersionsOptions } from './versions-options.ts';

/** The exit codes of `versions`, declared once: --help lists them, docs/rotation.md names them. */
export const VERSIONS_EXIT = {
  done: { code: 0, meaning: 'listed; or, waiting, every pod reading the reference holds the version' },
  behind: {
    code: 1,
    meaning: 'waiting, the timeout passed with pods behind: stderr names each and why, if known',
  },
  arguments: { code: 2, meaning: 'bad arguments, or --wait-for names a reference no injected pod reads' },
  kubernetes: {
    code: 3,
    meaning: 'kubectl could not reach the API server, or it (or Prometheus) failed a call',
  },
  internal: { code: 70, meaning: 'an unexpected fault, a bug: name, message and stack on stderr' },
  missingPermission: {
    code: 77,
    meaning: 'the API server refused a read (403): bind deploy/versions-reader’s ClusterRole',
  },
} as const satisfies Record<string, { readonly code: number; readonly meaning: string }>;

export interface VersionsIo {
  readonly env: NodeJS.ProcessEnv;
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
  /** Progress rewrites one line on a terminal; elsewhere it is plain lines, fewer. */
  readonly stderrIsTTY: boolean;
}

const NAME = 'secret-agent-webhook versions';

export function versionsHelp(): string {
  const codes = Object.values(VERSIONS_EXIT)
    .map((e) => `  ${String(e.code).padEnd(4)}${e.meaning}`)
    .join('\n');
  return `Usage: ${NAME} [-n NAMESPACE | -A] [-l SELECTOR] [-o table|json]
       ${NAME} --wait-for REF[=VERSION] [--timeout 10m] [-n NAMESPACE | -A] [-l SELECTOR]

Lists every injected pod with the version of each secret its files hold (never a value), and marks
the pods behind the newest version seen for the same reference. With --wait-for, waits until every
pod reading REF holds VERSION (or, none named, the newest any pod holds), then exits 0.

It reads through kubectl (its kubeconfig, context and credentials): pods, and each agent's log; with
--prometheus, the versions from Prometheus instead of the logs (agents scraped by the monitoring component).

  -n, --namespace NS      the pods of NS (default: the context's namespace)
  -A, --all-namespaces    the pods of every namespace
  -l, --selector SEL      only pods with these labels (as kubectl's -l)
  -o, --output FORMAT     table (default) or json
      --wait-for REF[=V]  wait until every pod reading REF (as its annotation writes it) holds V
      --timeout DURATION  give up waiting after this long (default 10m)
      --interval DURATION between two looks while waiting (default 5s)
      --concurrency N     agents' logs read at once (default 8, at most 64)
      --prometheus URL    read versions from this Prometheus (its API root) instead of the logs
      --kubectl PATH      the kubectl to run (default: kubectl on PATH, or KUBECTL)
      --kubeconfig FILE   --context NAME   passed to kubectl

Exit codes:
${codes}
`;
}

class Progress {
  readonly #io: VersionsIo;
  #shown = false;
  constructor(io: VersionsIo) {
    this.#io = io;
  }
  /** `always`: a plain line even when not on a terminal. */
  say(text: string, always = false): void {
    if (this.#io.stderrIsTTY) {
      this.#io.stderr(`\r\x1b[2K${text}`);
      this.#shown = true;
    } else if (always) this.#io.stderr(`${text}\n`);
  }
  done(): void {
    if (this.#shown) this.#io.stderr('\r\x1b[2K');
    this.#shown = false;
  }
}

async function look(
  api: KubernetesReader,
  o: VersionsOptions,
  namespace: string | undefined,
  progress: Progress,
) {
  const pods = await listInjectedPods(api, { namespace, selector: o.selector }, (listed) =>
    progress.say(`listed ${listed} pods`, listed >= 1000),
  );
  // Not on a terminal: a line per tenth of a large namespace, none for a small one.
  const step = Math.max(100, Math.ceil(pods.length / 10));
  const holdings =
    o.prometheus !== undefined
      ? await prometheusHoldings(o.prometheus, pods, namespace)
      : await readHoldings(api, pods, o.concurrency, (done) =>
          progress.say(`read ${done} of ${pods.length} agents`, done % step === 0),
        );
  progress.done();
  return compareHoldings(holdings);
}

/**
 * REF or REF=VERSION, split at the last `=` whatever the pods read: looking the whole text up first let
 * a tenant's pod whose reference was `gcp:db=7` turn the operator's wait for version 7 of gcp:db into a
 * wait for its own (an eleventh review). A reference that holds `=` is named with its version.
 */
function target(text: string, refs: ReadonlySet<string>): { ref: string; version?: string } {
  const at = text.lastIndexOf('=');
  const ref = at > 0 ? text.slice(0, at) : text;
  const version = at > 0 ? text.slice(at + 1) : '';
  if (refs.has(ref)) return version === '' ? { ref } : { ref, version };
  const known = [...refs].sort().slice(0, 10).map(quote).join(', ');
  throw new ConfigError(
    '--wait-for',
    `no injected pod here reads ${quote(ref)}`,
    refs.size === 0
      ? 'check -n/-A and -l: no injected pod matched'
      : `name a reference as its annotation writes it, then = and the version (a reference that holds = needs it): ${known}`,
  );
}

async function waitFor(
  api: KubernetesReader,
  o: VersionsOptions,
  namespace: string | undefined,
  io: VersionsIo,
  progress: Progress,
): Promise<number> {
  const deadline = Date.now() + o.timeoutMs;
  let wanted: { ref: string; version?: string } | undefined;
  for (;;) {
    const { pods, newest } = await look(api, o, namespace, progress);
    const refs = new Set(pods.flatMap((p) => p.files.map((f) => f.ref)));
    if (wanted === undefined) {
      wanted = target(o.waitFor!, refs);
      if (wanted.version === undefined)
        io.stderr(
          `no version named: waiting until every pod reading ${wanted.ref} holds the newest version any of them holds. Right after a rotation, name it (${wanted.ref}=VERSION): until one pod has fetched it, nothing here knows it exists\n`,
        );
    }
    const version = wanted.version ?? newest.find((n: Newest) => n.ref === wanted!.ref)?.version;
    const reading = pods.filter((p) => p.files.some((f) => f.ref === wanted!.ref));
    const behind = reading
      .map((p): [ComparedPod, string | undefined] => [
        p,
        version === undefined ? 'no pod names a version' : whyBehind(p, wanted!.ref, version),
      ])
      .filter(([, why]) => why !== undefined);
    const shown = version ?? '(none named)';
    if (reading.length > 0 && behind.length === 0) {
      io.stderr(`all ${reading.length} pods reading ${wanted.ref} hold ${shown}\n`);
      return VERSIONS_EXIT.done.code;
    }
    if (Date.now() + o.intervalMs > deadline) {
      io.stderr(
        `timed out after ${formatDuration(o.timeoutMs)}: ${behind.length} of ${reading.length} pods reading ${wanted.ref} do not hold ${shown}:\n` +
          behind.map(([p, why]) => `  ${p.holding.pod.namespace}/${p.holding.pod.name}: ${why}\n`).join(''),
      );
      return VERSIONS_EXIT.behind.code;
    }
    progress.say(
      `${reading.length - behind.length} of ${reading.length} pods reading ${wanted.ref} hold ${shown}; waiting for ${behind
        .slice(0, 3)
        .map(([p]) => p.holding.pod.name)
        .join(', ')}${behind.length > 3 ? ', …' : ''}`,
      true,
    );
    await sleep(o.intervalMs);
  }
}

/** `versions`: returns the exit code; never throws but for a bug. */
export async function runVersions(args: readonly string[], io: VersionsIo): Promise<number> {
  let o: VersionsOptions;
  try {
    o = parseVersionsOptions(args, io.env);
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    io.stderr(`${NAME}: ${e.message}\n`);
    return VERSIONS_EXIT.arguments.code;
  }
  if (o.help) {
    io.stdout(versionsHelp());
    return VERSIONS_EXIT.done.code;
  }
  const progress = new Progress(io);
  let api: KubernetesReader | undefined;
  try {
    const namespace = o.allNamespaces ? undefined : (o.namespace ?? contextNamespace(o));
    api = await startKubectlProxy(o);
    if (o.waitFor !== undefined) return await waitFor(api, o, namespace, io, progress);
    const { pods, newest } = await look(api, o, namespace, progress);
    io.stdout(
      o.output === 'json' ? versionsJson(pods, newest) : versionsTable(pods, namespace === undefined),
    );
    return VERSIONS_EXIT.done.code;
  } catch (e) {
    progress.done();
    if (e instanceof ConfigError) {
      io.stderr(`${NAME}: ${e.message}\n`);
      return VERSIONS_EXIT.arguments.code;
    }
    if (e instanceof KubernetesReadError) {
      io.stderr(`${NAME}: ${e.message}\n`);
      return e.status === 403 ? VERSIONS_EXIT.missingPermission.code : VERSIONS_EXIT.kubernetes.code;
    }
    if (e instanceof KubectlError || e instanceof PrometheusError) {
      io.stderr(`${NAME}: ${e.message}\n`);
      return VERSIONS_EXIT.kubernetes.code;
    }
    throw e;
  } finally {
    await api?.close();
  }
}
