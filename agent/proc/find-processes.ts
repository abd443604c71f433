import { readdir, readFile } from 'node:fs/promises';

/** The kernel truncates a task's comm to 15 bytes (TASK_COMM_LEN 16, with the NUL). */
export const COMM_LENGTH = 15;

/**
 * PIDs whose /proc/PID/comm is `name` (compared on its first 15 bytes, as the kernel keeps them),
 * excluding the agent itself. Sees the app only when the pod shares one process namespace.
 * Throws when /proc cannot be listed.
 */
export async function findProcessesByName(name: string, procDir = '/proc'): Promise<number[]> {
  const wanted = name.slice(0, COMM_LENGTH);
  const pids: number[] = [];
  for (const entry of await readdir(procDir)) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    if (pid === process.pid) continue;
    try {
      const comm = await readFile(`${procDir}/${entry}/comm`, 'utf8');
      if (comm.replace(/\n$/, '') === wanted) pids.push(pid);
    } catch {
      // The process exited between the listing and the read.
    }
  }
  return pids;
}
