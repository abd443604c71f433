import { accessSync, closeSync, constants, openSync, readSync } from 'node:fs';

/**
 * Whether a program the agent is about to start would be a process other processes of the agent's
 * uid can open. The kernel makes a process non-dumpable at execve when its user cannot read the
 * program, or, for a `#!` script, the interpreter (would_dump runs on every file execve opens); a
 * dumpable process's /proc/PID/{environ,mem,fd,root,…}, ptrace and pidfd_getfd are open to any
 * process of its uid, such as an app in a shared-PID pod. The agent image's Node and resident are
 * root's and 0511 for that reason (images/execute-only.ts); an `exec:` helper or a rotation command
 * must be as closed, or it hands out what the agent protects: the agent's mount namespace through
 * /proc/PID/root (every file of the volume, writable), the helper's environment, memory and pipes.
 *
 * "Readable" is access(2) with R_OK, the question the kernel asks, as this process (its uid and
 * groups, any capability it holds). Synchronous: two or three system calls, before each start.
 */

/** What another process of the agent's uid could read a run of the program through. */
export type ReadableProgram =
  /** The program itself (a binary, or a file with no `#!` line) is readable. */
  | { readonly kind: 'program' }
  /** A `#!` script whose interpreter (as written, resolved from the run's directory) is readable. */
  | { readonly kind: 'interpreter'; readonly interpreter: string };

/** BINPRM_BUF_SIZE: the part of a file the kernel reads for its `#!` line. */
const SCRIPT_HEAD_BYTES = 256;

/**
 * Whether this process's own program is readable by its user: then this process is dumpable itself
 * (root reads every file; so does a developer's Node), and no program it starts can be kept from
 * its peers any better than it is. The agent image's Node is not (root's, 0511), whatever non-root
 * uid the agent runs as.
 */
export function ownProgramReadable(): boolean {
  // Only a read access granted counts: anything else leaves the checks on.
  try {
    accessSync(process.execPath, constants.R_OK);
    return true;
  } catch {
    return false;
  }
}

/**
 * What makes a run of `path` (started with `cwd` as its directory, where a relative `#!`
 * interpreter is found) readable by this process's uid, or undefined when the kernel will make it
 * non-dumpable. A file it cannot read is closed whatever it is (if it is a script, its interpreter
 * cannot read it either, and the run fails on its own). A readable script is closed when its
 * interpreter is not readable; a readable interpreter that is itself a script is counted readable
 * (the kernel would go on to its interpreter; a helper has no need of that). An interpreter that does
 * not exist is left to the run, which fails naming it.
 */
export function readableProgram(path: string, cwd: string): ReadableProgram | undefined {
  if (readable(path) === 'no') return undefined;
  const interpreter = scriptInterpreter(path);
  if (interpreter === undefined) return { kind: 'program' };
  // Joined, not normalised: the kernel resolves `..` after a link the way the file system does.
  switch (readable(interpreter.startsWith('/') ? interpreter : `${cwd}/${interpreter}`)) {
    case 'no':
    case 'missing':
      return undefined;
    default:
      return { kind: 'interpreter', interpreter };
  }
}

/** access(R_OK): 'no' only for EACCES; 'missing' when there is nothing there to run. */
function readable(path: string): 'yes' | 'no' | 'missing' {
  try {
    accessSync(path, constants.R_OK);
    return 'yes';
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'EACCES') return 'no';
    // Anything else (EPERM from a security module, EIO…) cannot be shown closed: counted readable.
    return code === 'ENOENT' || code === 'ENOTDIR' ? 'missing' : 'yes';
  }
}

/**
 * The interpreter a `#!` line names, as binfmt_script reads it: after `#!` and any spaces or tabs,
 * up to a space, tab, newline or NUL, within the file's first 256 bytes. Undefined for a file that
 * does not start with `#!` (a binary) or names no interpreter.
 */
function scriptInterpreter(path: string): string | undefined {
  const head = Buffer.alloc(SCRIPT_HEAD_BYTES);
  let length: number;
  try {
    const fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
    try {
      length = readSync(fd, head, 0, head.length, 0);
    } finally {
      closeSync(fd);
    }
  } catch {
    // Readable a moment ago: whatever it is now, it is not shown to be a script with a closed interpreter.
    return undefined;
  }
  if (length < 2 || head[0] !== 0x23 /* # */ || head[1] !== 0x21 /* ! */) return undefined;
  const line = head.subarray(2, length).toString('latin1');
  const name = /^[ \t]*([^ \t\n\0]*)/.exec(line)![1]!;
  return name === '' ? undefined : name;
}
