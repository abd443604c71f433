import { spawn, type ChildProcess } from 'node:child_process';
import { DISABLE_SIGUSR1 } from '../../contract/no-inspector.ts';
import { join } from 'node:path';
import { ConfigErrors, quote } from '../../contract/errors.ts';
import type { ExecReference } from '../../contract/reference.ts';
import type { Env } from '../../contract/settings.ts';
import { parseExecSettings, resolveHelper, type ExecSettings } from './config.ts';
import { DEFAULT_SERVICE_ACCOUNT_DIR } from '../../contract/service-account.ts';
import {
  contentVersion,
  namedVersion,
  fetchEach,
  MAX_SECRET_BYTES,
  ProviderError,
  toProviderError,
  type FetchContext,
  type Provider,
  type ProviderFactory,
  type ProviderOptions,
  type SecretValue,
} from '../provider.ts';

/**
 * Any other backend (Azure Key Vault, 1Password, Doppler, Conjur, an internal service), through a
 * helper program the platform team puts in EXEC_HELPERS_DIR. `exec:HELPER/ARGUMENT` runs HELPER with
 * ARGUMENT as argv[1], without a shell, in a process group of its own and an environment of
 * HELPER_ENV only (never the agent's: it holds the agent's credentials). Its stdout is the value;
 * its exit code says what went wrong. The protocol, for helper authors: docs/exec-helpers.md.
 *
 * Nothing a helper prints is logged as such: stdout is the secret, and of stderr only the first line
 * (cut to STDERR_SHOWN characters) reaches a failure's message, and not even that when it contains
 * (a piece of) the value.
 */

/** The protocol version helpers see as SECRET_AGENT_EXEC_VERSION. */
export const EXEC_PROTOCOL_VERSION = '1';

/** Where a helper's program lookup goes: the usual system directories, none of the agent's. */
const HELPER_PATH = '/usr/local/bin:/usr/bin:/bin';

/** Every variable a helper gets, and nothing else; docs/exec-helpers.md lists the same. */
export const HELPER_ENV: readonly { name: string; doc: string }[] = [
  { name: 'PATH', doc: `\`${HELPER_PATH}\`.` },
  {
    name: 'SECRET_AGENT_EXEC_VERSION',
    doc: `The protocol version, \`${EXEC_PROTOCOL_VERSION}\`: what this page describes.`,
  },
  {
    name: 'POD_NAMESPACE',
    doc: 'The pod’s namespace, for the backend’s audit log (when the agent knows it; the webhook sets it).',
  },
  { name: 'POD_NAME', doc: 'The pod’s name (when the agent knows it).' },
  { name: 'POD_UID', doc: 'The pod’s UID (when the agent knows it).' },
  {
    name: 'SERVICE_ACCOUNT_TOKEN_FILE',
    doc: 'The pod’s service-account token (`SERVICE_ACCOUNT_DIR/token`): the pod’s identity, to log in to the backend with. Read it on every run: the kubelet rotates it.',
  },
  {
    name: 'SERVICE_ACCOUNT_CA_FILE',
    doc: 'The CA of the Kubernetes API server (`SERVICE_ACCOUNT_DIR/ca.crt`).',
  },
  {
    name: 'KUBERNETES_SERVICE_HOST',
    doc: 'The API server’s address, as the kubelet gives it to the agent (when set).',
  },
  { name: 'KUBERNETES_SERVICE_PORT', doc: 'The API server’s port (when set).' },
  {
    name: 'NODE_OPTIONS',
    doc: `\`${DISABLE_SIGUSR1}\`: a helper written for Node (\`#!/nodejs/bin/node\`) never opens its inspector on a signal from another container of the pod.`,
  },
];

/** The stderr line a helper may print to name the value's version (else none is published: contentVersion). */
export const VERSION_LINE = 'secret-agent-version:';
/** A version as helpers may name it: short, printable, no spaces (it reaches logs and notifications). */
const VERSION = /^[\x21-\x7e]{1,128}$/;
/** How much of a helper's first stderr line a failure shows. */
export const STDERR_SHOWN = 200;
/** How much stderr is read at all: enough for the first line and a version line. */
const STDERR_KEPT = 64 * 1024;
/** A piece of the value this long, anywhere in a line, withholds the line. */
const VALUE_PIECE = 16;

export interface ExecProviderDeps {
  /** Where the settings and KUBERNETES_SERVICE_* are read; default process.env. */
  readonly env?: Env;
}

export const createExecProvider: ProviderFactory<ExecReference> = (options) => openExecProvider(options);

/** Throws a non-transient ProviderError when the exec settings are unusable. */
export function openExecProvider(
  options: ProviderOptions,
  deps: ExecProviderDeps = {},
): Provider<ExecReference> {
  const env = deps.env ?? process.env;
  const settings = readSettings(env);
  const helperEnv = helperEnvironment(options, env);
  const running = new Set<ChildProcess>();
  return {
    fetch: (refs, ctx) =>
      fetchEach(refs, settings.concurrency, (ref) => runHelper(ref, settings, helperEnv, running, ctx)),
    endpoint: (ref) => join(settings.helpersDir, ref.helper),
    close: () => {
      for (const child of running) killGroup(child);
      running.clear();
    },
  };
}

function readSettings(env: Env): ExecSettings {
  try {
    return parseExecSettings(env);
  } catch (e) {
    if (!(e instanceof ConfigErrors)) throw e;
    // The agent's start-up check (agent/config/check-backend-settings.ts) reports these before any
    // fetch; this is for a provider opened without it.
    const first = e.errors[0]!;
    throw new ProviderError('invalid', `${first.field}: ${first.problem}`, first.fix, { transient: false });
  }
}

/** The helper's whole environment (HELPER_ENV): nothing of the agent's own. */
export function helperEnvironment(options: ProviderOptions, env: Env): Record<string, string> {
  const saDir = options.serviceAccountDir ?? DEFAULT_SERVICE_ACCOUNT_DIR;
  const { namespace, name, uid } = options.pod;
  const host = env.KUBERNETES_SERVICE_HOST;
  const port = env.KUBERNETES_SERVICE_PORT;
  return {
    PATH: HELPER_PATH,
    SECRET_AGENT_EXEC_VERSION: EXEC_PROTOCOL_VERSION,
    ...(namespace ? { POD_NAMESPACE: namespace } : {}),
    ...(name ? { POD_NAME: name } : {}),
    ...(uid ? { POD_UID: uid } : {}),
    SERVICE_ACCOUNT_TOKEN_FILE: join(saDir, 'token'),
    SERVICE_ACCOUNT_CA_FILE: join(saDir, 'ca.crt'),
    ...(host ? { KUBERNETES_SERVICE_HOST: host } : {}),
    ...(host && port ? { KUBERNETES_SERVICE_PORT: port } : {}),
    NODE_OPTIONS: DISABLE_SIGUSR1,
  };
}

/** Kills everything in the helper's process group: the helper and whatever it started. */
function killGroup(child: ChildProcess): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, 'SIGKILL');
  } catch {
    // ESRCH: the group is already gone.
  }
}

function runHelper(
  ref: ExecReference,
  settings: ExecSettings,
  env: Record<string, string>,
  running: Set<ChildProcess>,
  ctx: FetchContext,
): Promise<SecretValue> {
  const path = resolveHelper(settings.helpersDir, ref.helper);
  const helper = quote(ref.helper);
  return new Promise<SecretValue>((resolve, reject) => {
    if (ctx.signal.aborted) return reject(attemptOver(helper));
    const child = spawn(path, [ref.argument], {
      cwd: settings.helpersDir,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
      shell: false,
      // A process group of its own, so a timeout kills what the helper started too.
      detached: true,
    });
    running.add(child);
    const stdout: Buffer[] = [];
    let stdoutBytes = 0;
    let stderr = '';
    let exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
    let settled = false;

    const finish = (outcome: { value: SecretValue } | { error: ProviderError }) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      ctx.signal.removeEventListener('abort', onAbort);
      running.delete(child);
      if ('value' in outcome) resolve(outcome.value);
      else reject(outcome.error);
    };
    /** Ends the run now: the group is killed and what it printed is dropped, unread. */
    const stop = (error: ProviderError) => {
      killGroup(child);
      child.stdout?.destroy();
      child.stderr?.destroy();
      finish({ error });
    };

    const timer = setTimeout(
      () =>
        stop(
          new ProviderError(
            'timeout',
            `helper ${helper} did not finish within EXEC_TIMEOUT (${settings.timeoutMs} ms); its process group was killed`,
            'make the helper answer sooner (or exit 75 when its backend is slow), or raise EXEC_TIMEOUT; retried until the deadline',
          ),
        ),
      settings.timeoutMs,
    );
    const onAbort = () => stop(attemptOver(helper));
    ctx.signal.addEventListener('abort', onAbort, { once: true });

    child.stdout!.on('data', (chunk: Buffer) => {
      stdoutBytes += chunk.length;
      if (stdoutBytes > MAX_SECRET_BYTES)
        return stop(
          new ProviderError(
            'too-large',
            `helper ${helper} printed more than ${MAX_SECRET_BYTES} bytes; it was stopped`,
            `keep secrets at most ${MAX_SECRET_BYTES} bytes (1 MiB, the Kubernetes Secret limit)`,
            { transient: false },
          ),
        );
      stdout.push(chunk);
    });
    child.stderr!.on('data', (chunk: Buffer) => {
      if (stderr.length < STDERR_KEPT) stderr += chunk.toString('utf8').slice(0, STDERR_KEPT - stderr.length);
    });
    child.once('error', (e: NodeJS.ErrnoException) => {
      killGroup(child);
      finish({ error: spawnError(e, helper) });
    });
    child.once('exit', (code, signal) => {
      exit = { code, signal };
      // Whatever the helper left running would hold its pipes open, and is no business of ours.
      killGroup(child);
    });
    child.once('close', () => {
      if (settled || exit === undefined) return;
      const bytes = Buffer.concat(stdout);
      const { firstLine, version } = readStderr(stderr, bytes);
      if (exit.code === 0) {
        return finish({
          value: { bytes, ...(version !== undefined ? namedVersion(version) : contentVersion(bytes)) },
        });
      }
      finish({ error: exitError(helper, exit, firstLine) });
    });
  });
}

function attemptOver(helper: string): ProviderError {
  return new ProviderError(
    'timeout',
    `the attempt's time ran out before helper ${helper} finished; its process group was killed`,
    'make the helper answer sooner, or raise INIT_DEADLINE; retried until the deadline',
  );
}

function spawnError(e: NodeJS.ErrnoException, helper: string): ProviderError {
  switch (e.code) {
    case 'ENOENT':
      return new ProviderError(
        'not-found',
        `helper ${helper} could not be started: it, or the interpreter its #! line names, does not exist (ENOENT)`,
        'check the #! line: the agent image has no shell, and Node is at /nodejs/bin/node',
        { transient: false },
      );
    case 'EACCES':
      return new ProviderError(
        'permission-denied',
        `helper ${helper} could not be started (EACCES)`,
        'give a script mode 0555 and a binary 0511, on a volume mounted without noexec, and make a script’s #! interpreter executable',
        { transient: false },
      );
    case 'ENOEXEC':
      return new ProviderError(
        'invalid',
        `helper ${helper} is neither a program for this platform nor a script with a #! line (ENOEXEC)`,
        'build it for the node’s platform, or start the script with #!/nodejs/bin/node',
        { transient: false },
      );
    default:
      return toProviderError(e);
  }
}

/** A helper's exit code, as docs/exec-helpers.md documents it. */
function exitError(
  helper: string,
  exit: { code: number | null; signal: NodeJS.Signals | null },
  firstLine: string | undefined,
): ProviderError {
  const said = firstLine === undefined ? '' : `: ${firstLine}`;
  switch (exit.code) {
    case 75:
      return new ProviderError(
        'unavailable',
        `helper ${helper} exited with 75 (temporary failure)${said}`,
        'nothing to do if it passes: retried with backoff until the deadline; else see the helper’s message',
      );
    case 66:
      return new ProviderError(
        'not-found',
        `helper ${helper} exited with 66 (not found)${said}`,
        'check the argument after the helper name: the backend has no such secret',
        { transient: false },
      );
    case 77:
      return new ProviderError(
        'permission-denied',
        `helper ${helper} exited with 77 (permission denied)${said}`,
        'grant the pod’s identity (its service account) read access to the secret in the backend',
        { transient: false },
      );
    case 64:
      return new ProviderError(
        'invalid',
        `helper ${helper} exited with 64 (bad argument)${said}`,
        'write the argument after the helper name the way the helper expects (see its documentation)',
        { transient: false },
      );
    case null:
      return new ProviderError(
        'internal',
        `helper ${helper} was killed by ${exit.signal ?? 'a signal'}${said}`,
        'check the helper: it must end by itself, with exit code 0, 64, 66, 75 or 77 (docs/exec-helpers.md)',
        { transient: false },
      );
    default:
      return new ProviderError(
        'internal',
        `helper ${helper} exited with ${exit.code}${said}`,
        'see the helper’s message; exit 75 makes a failure transient (retried), 64, 66 and 77 name it (docs/exec-helpers.md)',
        { transient: false },
      );
  }
}

/**
 * What of a helper's stderr may be used: its version line, if well-formed, and its first other
 * line, cut short; either is dropped when it gives away (a piece of) the value printed on stdout.
 */
export function readStderr(stderr: string, value: Buffer): { firstLine?: string; version?: string } {
  let firstLine: string | undefined;
  let version: string | undefined;
  for (const raw of stderr.split(/\r?\n/)) {
    const line = raw.trim();
    if (line === '') continue;
    if (line.startsWith(VERSION_LINE)) {
      const v = line.slice(VERSION_LINE.length).trim();
      if (version === undefined && VERSION.test(v) && !revealsValue(v, value)) version = v;
      continue;
    }
    if (firstLine === undefined) {
      // Control characters (a terminal's escapes) go: the line lands in logs and a pod's termination message.
      const printable = line.replace(/[\p{Cc}\p{Cf}]/gu, ' ');
      const cut = printable.length > STDERR_SHOWN ? `${printable.slice(0, STDERR_SHOWN)}…` : printable;
      firstLine = revealsValue(printable, value)
        ? '(its message is withheld: it contains the value it printed)'
        : cut;
    }
    if (firstLine !== undefined && version !== undefined) break;
  }
  return {
    ...(firstLine !== undefined ? { firstLine } : {}),
    ...(version !== undefined ? { version } : {}),
  };
}

/**
 * Whether `text` shows the value: all of it (as text, base64 or hex), or any VALUE_PIECE characters
 * of it. Errs towards withholding: a lost diagnostic is cheap, a leaked secret is not.
 */
export function revealsValue(text: string, value: Buffer): boolean {
  if (value.length === 0) return false;
  const plain = value.toString('utf8');
  const whole = [plain.trim(), value.toString('base64'), value.toString('hex')];
  if (whole.some((w) => w !== '' && text.includes(w))) return true;
  if (text.length >= VALUE_PIECE && plain.includes(text)) return true;
  for (let i = 0; i + VALUE_PIECE <= text.length; i++)
    if (plain.includes(text.slice(i, i + VALUE_PIECE))) return true;
  return false;
}
