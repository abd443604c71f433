/**
 * Secrets as environment variables (docs/env.md): the contract between the webhook, which rewrites an
 * app container's command, the agent, which writes the values and installs the wrapper, and the wrapper
 * itself (agent/native/env-exec.c, whose #defines a test checks against these).
 *
 * The app container runs
 *
 *   ENV_EXEC_APP_PATH --dir=<mount-path> --wait=<seconds> --set=VAR ... -- <its own command...>
 *
 * followed by its own `args`, unchanged. The wrapper reads each VAR from one payload of the agent's
 * set (`<mount-path>/..data` resolved once, `<payload>/ENV_VALUES_DIR/VAR`), so the variables are one
 * consistent version, sets them over the inherited env and execve()s the command, which keeps argv,
 * the rest of the env, the working directory and PID 1.
 */

/** The wrapper in the agent image (Dockerfile.agent). */
export const ENV_EXEC_IMAGE_PATH = '/app/env-exec';
/** Its file name in the exec volume, where the agent copies it. */
export const ENV_EXEC_NAME = 'env-exec';
/** Where agent containers mount the exec volume (read-write: the agent installs the wrapper). */
export const ENV_EXEC_AGENT_DIR = '/secret-agent/exec';
/** Where app containers mount the exec volume, read-only. */
export const ENV_EXEC_APP_DIR = '/.secret-agent';
/** What an app container's command starts with. */
export const ENV_EXEC_APP_PATH = `${ENV_EXEC_APP_DIR}/${ENV_EXEC_NAME}`;

/** The directory, inside the secrets volume, of the env values: one file per variable, named after it. */
export const ENV_VALUES_DIR = '.secret-agent-env';

/**
 * A variable name the wrapper sets: POSIX's portable name (letters, digits, `_`, not starting with a
 * digit), which every shell and runtime reads. Kubernetes allows more; a shell could not read it.
 */
export const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * Linux refuses an env string (`NAME=value` and its NUL) over 32 pages (MAX_ARG_STRLEN, 128 KiB):
 * execve fails with E2BIG. The wrapper refuses a longer value itself, naming the variable.
 */
export const MAX_ENV_VALUE_BYTES = 128 * 1024 - 256;

/** How many variables one container may take from secrets. */
export const MAX_ENV_VARS = 64;

/** The longest variable name the wrapper takes (NAME_MAX: it is a file name in ENV_VALUES_DIR). */
export const MAX_ENV_NAME_BYTES = 255;

/** The longest `--wait=`, in seconds, the wrapper takes. */
export const ENV_EXEC_MAX_WAIT_SECONDS = 3600;

/**
 * The longest `--dir=` (the secrets volume's mount path) the wrapper takes: with `/..data_<ts>_<rand>`,
 * ENV_VALUES_DIR and a name it stays under PATH_MAX (4096).
 */
export const ENV_EXEC_MAX_DIR_BYTES = 3072;

/** The path of a variable's value, relative to the secrets volume: what the agent writes. */
export function envValuePath(name: string): string {
  return `${ENV_VALUES_DIR}/${name}`;
}

/** An app container's new command: the wrapper, then the container's own command. */
export function envExecCommand(
  mountPath: string,
  waitSeconds: number,
  names: readonly string[],
  command: readonly string[],
): string[] {
  return [
    ENV_EXEC_APP_PATH,
    `--dir=${mountPath}`,
    `--wait=${waitSeconds}`,
    ...names.map((name) => `--set=${name}`),
    '--',
    ...command,
  ];
}

/**
 * The wrapper's own exit codes (before it execs, nothing else exits): sysexits.h's where one fits,
 * the shells' 126/127 for a command that cannot run, and 128+N when signal N ends the wait.
 */
export const ENV_EXEC_EXIT = {
  /** A bad argument: the webhook's patch was edited by hand. */
  usage: 64,
  /** A value an env var cannot hold: a NUL byte, or over MAX_ENV_VALUE_BYTES. */
  badValue: 65,
  /** A value file could not be read (not a regular file, a read error). */
  readError: 74,
  /** The agent's set did not appear within --wait. */
  timeout: 75,
  /** The command exists but could not be executed (execve failed: permissions, format). */
  cannotExecute: 126,
  /** The command was not found (as a path, or on PATH). */
  notFound: 127,
} as const;

/** What each exit code means, and what to do: docs/env.md's table. */
export const ENV_EXEC_EXIT_DOCS: Record<keyof typeof ENV_EXEC_EXIT, string> = {
  usage:
    'The wrapper’s arguments are not the webhook’s: the container’s command was edited after admission. Re-create the pod from its workload.',
  badValue: `A value holds a NUL byte or is over ${MAX_ENV_VALUE_BYTES / 1024} KiB, which no environment variable can hold. Read that secret from a file instead (\`secret-agent.io/secret-<file>\`).`,
  readError:
    'A value could not be read: not a regular file, or a read error. The message names the variable and the path.',
  timeout:
    'The agent’s set did not appear within `--wait` (INIT_DEADLINE + 15 s). The agent container’s log says why; the message names the variables missing.',
  cannotExecute:
    'The command exists but could not be executed (permissions, not an executable for this platform), or the variables and arguments are over the kernel’s limit.',
  notFound: 'The command is not found, as a path or on the container’s PATH.',
};
