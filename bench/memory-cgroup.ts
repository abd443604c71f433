/**
 * A container's memory as the node counts it, read from its memory cgroup the way the kubelet
 * (cAdvisor) does: working set = usage − inactive_file, the figure the kubelet reports
 * (`container_memory_working_set_bytes`, `kubectl top`) and evicts on, while the limit's OOM killer
 * acts on usage once reclaim (which drops inactive file pages first) cannot free enough.
 *   cgroup v1: memory.usage_in_bytes, memory.stat total_inactive_file / total_rss / total_cache /
 *              total_shmem, memory.max_usage_in_bytes; cpuacct.usage (ns)
 *   cgroup v2: memory.current, memory.stat inactive_file / anon / file / shmem, memory.peak;
 *              cpu.stat usage_usec
 * Only v1 (hybrid) has been run here; the v2 names are the kernel's documented ones.
 */
import { existsSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const MiB = 1048576;

export interface MemorySample {
  /** Everything charged to the cgroup (anonymous, page cache, tmpfs, kernel): memory.usage_in_bytes. */
  readonly usageMiB: number;
  /** usage − inactive_file: what the kubelet reports and evicts on. */
  readonly workingSetMiB: number;
  /** Anonymous memory (heap, native allocations, stacks): total_rss / anon. */
  readonly anonMiB: number;
  /** Page cache charged here (file pages this cgroup faulted in first, and tmpfs). */
  readonly cacheMiB: number;
  /** tmpfs pages written from here: the secret files on the memory-medium volume. */
  readonly shmemMiB: number;
  readonly inactiveFileMiB: number;
  /** File pages mapped into this cgroup's processes and charged here (the Node binary's, for the first agent). */
  readonly mappedFileMiB: number;
  /** Kernel memory charged here (page tables, sockets, slab): v1 kmem.usage_in_bytes, v2 `kernel`. */
  readonly kernelMiB: number;
  /** The highest usage the kernel recorded (v1 max_usage_in_bytes, v2 memory.peak); undefined when unread. */
  readonly peakUsageMiB: number | undefined;
  /** Counters since the cgroup began: major page faults, and refaults of file pages evicted from here (thrashing). */
  readonly majorFaults: number;
  readonly fileRefaults: number;
}

export interface CgroupLayout {
  readonly version: 1 | 2;
  /** Where the memory controller's hierarchy is mounted. */
  readonly memoryRoot: string;
  /** Where CPU time is accounted (v1: the cpuacct hierarchy; v2: the same as memoryRoot). */
  readonly cpuRoot: string;
  /** Every hierarchy a cgroupfs manager creates a parent in: each v1 one and, in hybrid mode, the v2 one too. */
  readonly hierarchies: readonly string[];
}

/** The mounted cgroup hierarchies, from /proc/self/mountinfo. */
export function cgroupLayout(): CgroupLayout {
  const mounts = readFileSync('/proc/self/mountinfo', 'utf8')
    .trim()
    .split('\n')
    .map((line) => {
      const [before, after] = line.split(' - ');
      const [type, , superOptions] = after!.split(' ');
      return { point: before!.split(' ')[4]!, type: type!, options: superOptions!.split(',') };
    });
  const v1 = mounts.filter((m) => m.type === 'cgroup');
  const unified = mounts.find((m) => m.type === 'cgroup2');
  const memory = v1.find((m) => m.options.includes('memory'));
  if (memory) {
    const cpuacct = v1.find((m) => m.options.includes('cpuacct'));
    if (!cpuacct) throw new Error('cgroup v1 memory hierarchy mounted, but no cpuacct one');
    return {
      version: 1,
      memoryRoot: memory.point,
      cpuRoot: cpuacct.point,
      hierarchies: [...v1, ...(unified ? [unified] : [])].map((m) => m.point),
    };
  }
  if (!unified) throw new Error('no cgroup memory controller is mounted');
  return { version: 2, memoryRoot: unified.point, cpuRoot: unified.point, hierarchies: [unified.point] };
}

function stat(dir: string): Map<string, number> {
  return new Map(
    readFileSync(join(dir, 'memory.stat'), 'utf8')
      .trim()
      .split('\n')
      .map((line) => {
        const [key, value] = line.split(' ');
        return [key!, Number(value)] as const;
      }),
  );
}

const readNumber = (path: string) => Number(readFileSync(path, 'utf8').trim());

/** One reading of a memory cgroup (a directory under layout.memoryRoot); throws once it is gone. */
export function readMemory(layout: CgroupLayout, dir: string): MemorySample {
  const s = stat(dir);
  const v1 = layout.version === 1;
  const usage = readNumber(join(dir, v1 ? 'memory.usage_in_bytes' : 'memory.current'));
  const inactiveFile = s.get(v1 ? 'total_inactive_file' : 'inactive_file') ?? 0;
  const peakFile = join(dir, v1 ? 'memory.max_usage_in_bytes' : 'memory.peak');
  const peak = existsSync(peakFile) ? readNumber(peakFile) : undefined;
  return {
    usageMiB: usage / MiB,
    // As cAdvisor computes it: never below zero.
    workingSetMiB: Math.max(0, usage - inactiveFile) / MiB,
    anonMiB: (s.get(v1 ? 'total_rss' : 'anon') ?? 0) / MiB,
    cacheMiB: (s.get(v1 ? 'total_cache' : 'file') ?? 0) / MiB,
    shmemMiB: (s.get(v1 ? 'total_shmem' : 'shmem') ?? 0) / MiB,
    inactiveFileMiB: inactiveFile / MiB,
    mappedFileMiB: (s.get(v1 ? 'total_mapped_file' : 'file_mapped') ?? 0) / MiB,
    kernelMiB: (v1 ? readNumber(join(dir, 'memory.kmem.usage_in_bytes')) : (s.get('kernel') ?? 0)) / MiB,
    peakUsageMiB: peak === undefined ? undefined : peak / MiB,
    majorFaults: s.get(v1 ? 'total_pgmajfault' : 'pgmajfault') ?? 0,
    fileRefaults: s.get(v1 ? 'total_workingset_refault_file' : 'workingset_refault_file') ?? 0,
  };
}

/** Resets the kernel's recorded peak (v1: write 0 to max_usage_in_bytes; v2: write to memory.peak). */
export function resetPeak(layout: CgroupLayout, dir: string): void {
  const file = join(dir, layout.version === 1 ? 'memory.max_usage_in_bytes' : 'memory.peak');
  writeFileSync(file, layout.version === 1 ? '0' : 'reset');
}

/** Over a cgroup's life: the times its usage reached its limit (v1 failcnt, v2 `max` events), and OOM kills. */
export function readLimitCounters(
  layout: CgroupLayout,
  relative: string,
): { limitHits: number; oomKills: number } {
  const dir = join(layout.memoryRoot, relative);
  if (layout.version === 1)
    return {
      limitHits: readNumber(join(dir, 'memory.failcnt')),
      oomKills: Number(
        /oom_kill (\d+)/.exec(readFileSync(join(dir, 'memory.oom_control'), 'utf8'))?.[1] ?? 0,
      ),
    };
  const events = readFileSync(join(dir, 'memory.events'), 'utf8');
  return {
    limitHits: Number(/^max (\d+)/m.exec(events)![1]),
    oomKills: Number(/^oom_kill (\d+)/m.exec(events)![1]),
  };
}

/** CPU time the cgroup has used, in seconds. */
export function readCpuSeconds(layout: CgroupLayout, relative: string): number {
  if (layout.version === 1) return readNumber(join(layout.cpuRoot, relative, 'cpuacct.usage')) / 1e9;
  const line = readFileSync(join(layout.cpuRoot, relative, 'cpu.stat'), 'utf8')
    .split('\n')
    .find((l) => l.startsWith('usage_usec '));
  return Number(line!.split(' ')[1]) / 1e6;
}

/** The container cgroup podman made under `parent` (cgroupfs manager: `<parent>/libpod-<id>`), if any yet. */
export function containerCgroup(layout: CgroupLayout, parent: string): string | undefined {
  const dir = join(layout.memoryRoot, parent);
  if (!existsSync(dir)) return undefined;
  const child = readdirSync(dir).find((d) => d.startsWith('libpod-') && !d.endsWith('.scope'));
  return child === undefined ? undefined : join(parent, child);
}

/** The first process in a cgroup (the container's PID 1, as this host numbers it). */
export function firstPid(layout: CgroupLayout, relative: string): number | undefined {
  const procs = readFileSync(join(layout.memoryRoot, relative, 'cgroup.procs'), 'utf8').trim();
  return procs === '' ? undefined : Number(procs.split('\n')[0]);
}

/** A process's resident set as /proc sees it: VmRSS, its peak VmHWM, and its anonymous and file-backed parts. */
export function readProcessRss(pid: number): {
  rssMiB: number;
  hwmMiB: number;
  anonMiB: number;
  fileMiB: number;
} {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+)`, 'm').exec(status)![1]) / 1024;
  return { rssMiB: kib('VmRSS'), hwmMiB: kib('VmHWM'), anonMiB: kib('RssAnon'), fileMiB: kib('RssFile') };
}

/** Removes a cgroup tree made for the bench from every hierarchy, deepest first; empty ones only. */
export function removeCgroupTree(layout: CgroupLayout, relative: string): void {
  for (const root of layout.hierarchies) {
    const remove = (dir: string): void => {
      if (!existsSync(dir)) return;
      for (const entry of readdirSync(dir, { withFileTypes: true }))
        if (entry.isDirectory()) remove(join(dir, entry.name));
      try {
        rmdirSync(dir);
      } catch {
        // Still has a process (a container being cleaned up): left for the kernel to report.
      }
    };
    remove(join(root, relative));
  }
}
