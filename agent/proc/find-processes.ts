import { readdir, readFile } from 'node:fs/promises';

/** The kernel truncates a task's comm to 15 bytes (TASK_COMM_LEN 16, with the NUL). */
export const COMM_LENGTH = 15;

/**
 * Every process this one can see, but itself: PID and /proc/PID/comm. Sees the app only when the
 * pod shares one process namespace. Throws when /proc cannot be listed.
 */
export async function listProcesses(procDir = '/proc'): Promise<{ pid: number; comm: string }[]> {
  const processes: { pid: number; comm: string }[] = [];
  for (const entry of await readdir(procDir)) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    if (pid === process.pid) continue;
    try {
      const comm = await readFile(`${procDir}/${entry}/comm`, 'utf8');
      processes.push({ pid, comm: comm.replace(/\n$/, '') });
    } catch {
      // The process exited between the listing and the read.
    }
  }
  return processes;
}

/**
 * PIDs whose /proc/PID/comm is `name` (compared on its first 15 bytes, as the kernel keeps them),
 * excluding the agent itself. Throws when /proc cannot be listed.
 */
export async function findProcessesByName(name: string, procDir = '/proc'): Promise<number[]> {
  const wanted = name.slice(0, COMM_LENGTH);
  return (await listProcesses(procDir)).filter((p) => p.comm === wanted).map((p) => p.pid);
}
