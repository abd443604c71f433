/*
 * peek: what an app container of a shared-PID pod tries against every other process it can see
 * (test/image/shared-pid.test.ts). Static (musl), so it runs as the only file of its image, as any
 * uid. For --seconds it scans /proc every 2 ms; each process is tried as soon as it appears and as
 * soon as it has exec'd another program, then again every --every-ms while it lives, so a run of a
 * few hundred ms is tried while it holds the handed-over state. Each round prints one JSON line: the process (argv and parent, which /proc
 * shows anyone), its uid and gid, and each try's outcome: an errno name, or what succeeded. It never
 * prints what it read: only whether an environment it read held --canary (the control's).
 * A Node process is also sent SIGUSR1 once, the first time it is seen running Node at least SIGNAL_AGE_MS
 * after it appeared (earlier, before Node handles the signal, its default action would end the process), and the port Node's
 * inspector would then open is tried for 300 ms: 9229 for the agent's (Node's default), the control's
 * --inspect-port (9339) for a process whose argv holds --canary: "inspector opened" or "no inspector".
 *
 *   peek --seconds=N [--every-ms=N] [--canary=TEXT]
 *
 * First line: {"event":"self",...} (its uid, gid and effective capabilities); last: {"event":"done"}.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The same on every architecture since Linux 5.1 (the shared numbering from 424 on). */
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

#define MAX_PROCS 4096
#define SCAN_MS 2
#define BLIND_FDS 10 /* fds tried when the fd directory cannot be listed */
#define MAX_FDS 32   /* at most this many listed fds tried */
#define YOUNG_MS 1000 /* a process this young is watched for its execve */
#define AGENT_INSPECTOR_PORT 9229   /* Node's default: where SIGUSR1 would open an agent's inspector */
#define CONTROL_INSPECTOR_PORT 9339 /* the Node control's --inspect-port */
#define INSPECTOR_WAIT_MS 300
#define SIGNAL_AGE_MS 300

static const char *canary;
static char out[65536];
static size_t used;
static int tries;

static int64_t now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void put(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void put(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(out + used, sizeof out - used, fmt, ap);
  va_end(ap);
  if (n > 0) used = used + (size_t)n < sizeof out ? used + (size_t)n : sizeof out - 1;
}

static void flush_line(void) {
  put("\n");
  fwrite(out, 1, used, stdout);
  fflush(stdout);
  used = 0;
}

/* A JSON string of `len` bytes of `s`; NULs (argv's separators) as spaces. */
static void put_string(const char *s, size_t len) {
  put("\"");
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == 0) put(" ");
    else if (c == '"' || c == '\\') put("\\%c", c);
    else if (c < 0x20 || c > 0x7e) put("\\u%04x", c);
    else put("%c", c);
  }
  put("\"");
}

/* The errno names a refusal or a race gives; any other as its number. */
static const char *errname(int err) {
  static char buf[24];
  switch (err) {
    case EACCES: return "EACCES";
    case EPERM: return "EPERM";
    case ENOENT: return "ENOENT";
    case ESRCH: return "ESRCH";
    case ENXIO: return "ENXIO";
    case EFAULT: return "EFAULT";
    case EIO: return "EIO";
    case EINVAL: return "EINVAL";
    case ENOSYS: return "ENOSYS";
    case EAGAIN: return "EAGAIN";
    case EISDIR: return "EISDIR";
    case ENOTDIR: return "ENOTDIR";
    case EBADF: return "EBADF";
    default: snprintf(buf, sizeof buf, "errno %d", err); return buf;
  }
}

static void outcome(const char *what, const char *result) {
  put("%s\"%s\":\"%s\"", tries++ ? "," : "", what, result);
}

/* Reads up to `max` bytes of a small /proc file into `buf`; -errno on failure. */
static ssize_t slurp(const char *path, char *buf, size_t max) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  size_t got = 0;
  for (ssize_t n; got < max && (n = read(fd, buf + got, max - got)) > 0;) got += (size_t)n;
  close(fd);
  return (ssize_t)got;
}

static int contains(const char *hay, size_t len, const char *needle) {
  size_t n = strlen(needle);
  for (size_t i = 0; n && i + n <= len; i++)
    if (!memcmp(hay + i, needle, n)) return 1;
  return 0;
}

/* open(2) of /proc/PID/<what>: "opened" (then, read-only, what a read gave), or the errno. */
static void try_open(int pid, const char *what, int flags, const char *label) {
  char path[128], buf[4096];
  snprintf(path, sizeof path, "/proc/%d/%s", pid, what);
  int fd = open(path, flags | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    outcome(label, errname(errno));
  } else if ((flags & O_ACCMODE) != O_RDONLY || (flags & O_DIRECTORY)) {
    close(fd);
    outcome(label, "opened");
  } else {
    ssize_t n = read(fd, buf, sizeof buf);
    close(fd);
    outcome(label, n >= 0 ? "read" : "opened");
  }
}

/* The environment: read whole, and whether it held the canary (never what it held). */
static void try_environ(int pid) {
  static char env[256 * 1024];
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/environ", pid);
  ssize_t n = slurp(path, env, sizeof env);
  if (n < 0) outcome("environ", errname((int)-n));
  else outcome("environ", canary && contains(env, (size_t)n, canary) ? "read, canary found" : "read");
}

/* The first readable address of the process, from its maps (0 when they cannot be read). */
static uintptr_t first_address(int pid) {
  static char maps[65536];
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/maps", pid);
  ssize_t n = slurp(path, maps, sizeof maps - 1);
  if (n <= 0) return 0;
  maps[n] = 0;
  for (char *l = maps; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
    unsigned long lo = 0;
    char perms[5] = "";
    if (sscanf(l, "%lx-%*x %4s", &lo, perms) == 2 && perms[0] == 'r') return (uintptr_t)lo;
  }
  return 0;
}

static void try_mem(int pid, uintptr_t at) {
  char path[64], b;
  snprintf(path, sizeof path, "/proc/%d/mem", pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) outcome("mem", errname(errno));
  else {
    ssize_t n = at ? pread(fd, &b, 1, (off_t)at) : -1;
    outcome("mem", n == 1 ? "read" : "opened");
    close(fd);
  }
  fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) outcome("mem:rw", errname(errno));
  else close(fd), outcome("mem:rw", "opened");
}

/* Each fd, for reading and for writing (opened only: nothing is written to an agent's fd). */
static void try_fds(int pid) {
  char path[64], label[32];
  int fds[MAX_FDS], nfds = 0;
  snprintf(path, sizeof path, "/proc/%d/fd", pid);
  DIR *d = opendir(path);
  if (d) {
    for (struct dirent *e; (e = readdir(d)) && nfds < MAX_FDS;)
      if (e->d_name[0] != '.') fds[nfds++] = atoi(e->d_name);
    closedir(d);
    put(",\"fdList\":%d", nfds);
  } else {
    put(",\"fdList\":\"%s\"", errname(errno));
    for (nfds = 0; nfds < BLIND_FDS; nfds++) fds[nfds] = nfds;
  }
  put(",\"tries\":{");
  tries = 0;
  for (int i = 0; i < nfds; i++) {
    snprintf(path, sizeof path, "fd/%d", fds[i]);
    snprintf(label, sizeof label, "fd/%d:r", fds[i]);
    try_open(pid, path, O_RDONLY, label);
    snprintf(label, sizeof label, "fd/%d:w", fds[i]);
    try_open(pid, path, O_WRONLY, label);
  }
}

static void try_vm_read(int pid, uintptr_t at) {
  char b;
  struct iovec local = {&b, 1}, remote = {(void *)(at ? at : 0x10000), 1};
  ssize_t n = syscall(SYS_process_vm_readv, pid, &local, 1, &remote, 1, 0);
  outcome("process_vm_readv", n == 1 ? "read" : errname(errno));
}

static void try_ptrace(int pid) {
  if (ptrace(PTRACE_SEIZE, pid, 0, 0) < 0) {
    outcome("ptrace", errname(errno));
    return;
  }
  /* Attached: stop it, so it can be detached, and let it go. */
  int st;
  ptrace(PTRACE_INTERRUPT, pid, 0, 0);
  waitpid(pid, &st, __WALL);
  ptrace(PTRACE_DETACH, pid, 0, 0);
  outcome("ptrace", "attached");
}

static void try_pidfd_getfd(int pid) {
  int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
  if (pidfd < 0) {
    outcome("pidfd_getfd", errname(errno));
    return;
  }
  int fd = (int)syscall(SYS_pidfd_getfd, pidfd, 3, 0);
  outcome("pidfd_getfd", fd >= 0 ? "got fd 3" : errname(errno));
  if (fd >= 0) close(fd);
  close(pidfd);
}

/* Whether something listens on the loopback's `port` within INSPECTOR_WAIT_MS. */
static int listening(int port) {
  int64_t until = now_ms() + INSPECTOR_WAIT_MS;
  for (;;) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int ok = fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
    if (fd >= 0) close(fd);
    if (ok) return 1;
    if (now_ms() >= until) return 0;
    struct timespec nap = {0, 20 * 1000000L};
    nanosleep(&nap, NULL);
  }
}

/* SIGUSR1, which makes a Node process without --disable-sigusr1 open its inspector, then its port. */
static void try_sigusr1(int pid, int control) {
  if (kill(pid, SIGUSR1) < 0) outcome("sigusr1", errname(errno));
  else outcome("sigusr1", listening(control ? CONTROL_INSPECTOR_PORT : AGENT_INSPECTOR_PORT) ? "inspector opened" : "no inspector");
}

/* One round of tries on `pid`; 0 when it was gone before the first. `signalled`: SIGUSR1 sent already. */
static int peek(int pid, int round, int *signalled, int ripe) {
  char path[64], buf[4096];
  snprintf(path, sizeof path, "/proc/%d/cmdline", pid);
  ssize_t n = slurp(path, buf, sizeof buf);
  if (n <= 0) return 0; /* gone, or a kernel thread */
  int node = n > 17 && !memcmp(buf, "/nodejs/bin/node", 17), control = canary && contains(buf, (size_t)n, canary);
  put("{\"event\":\"peek\",\"pid\":%d,\"round\":%d,\"cmd\":", pid, round);
  put_string(buf, (size_t)(buf[n - 1] ? n : n - 1));
  snprintf(path, sizeof path, "/proc/%d/status", pid);
  ssize_t s = slurp(path, buf, sizeof buf - 1);
  if (s > 0) {
    buf[s] = 0;
    const char *ppid = strstr(buf, "\nPPid:"), *uid = strstr(buf, "\nUid:"), *gid = strstr(buf, "\nGid:");
    if (ppid) put(",\"ppid\":%ld", strtol(ppid + 6, NULL, 10));
    if (uid) put(",\"uid\":%ld", strtol(uid + 5, NULL, 10));
    if (gid) put(",\"gid\":%ld", strtol(gid + 5, NULL, 10));
  }
  uintptr_t at = first_address(pid);
  try_fds(pid);
  try_environ(pid);
  try_mem(pid, at);
  try_open(pid, "maps", O_RDONLY, "maps");
  snprintf(path, sizeof path, "task/%d/mem", pid);
  try_open(pid, path, O_RDONLY, "task/mem");
  try_open(pid, "fdinfo/0", O_RDONLY, "fdinfo");
  try_open(pid, "auxv", O_RDONLY, "auxv");
  try_open(pid, "exe", O_RDONLY, "exe");
  try_open(pid, "root/", O_RDONLY | O_DIRECTORY, "root");
  try_open(pid, "cwd/", O_RDONLY | O_DIRECTORY, "cwd");
  try_vm_read(pid, at);
  try_ptrace(pid);
  try_pidfd_getfd(pid);
  if (node && ripe && !*signalled) *signalled = 1, try_sigusr1(pid, control);
  put("}}");
  flush_line();
  return 1;
}

static struct {
  int pid, rounds, signalled;
  int64_t born, next;
  char comm[32];
} seen[MAX_PROCS];
static int nseen;

int main(int argc, char **argv) {
  long seconds = 0, every_ms = 1000;
  for (int i = 1; i < argc; i++) {
    if (!strncmp(argv[i], "--seconds=", 10)) seconds = atol(argv[i] + 10);
    else if (!strncmp(argv[i], "--every-ms=", 11)) every_ms = atol(argv[i] + 11);
    else if (!strncmp(argv[i], "--canary=", 9)) canary = argv[i] + 9;
    else return fprintf(stderr, "peek: unknown argument\n"), 64;
  }
  if (seconds < 1 || every_ms < 1) return fprintf(stderr, "peek: --seconds=N (1 or more) is required\n"), 64;
  char status[4096];
  ssize_t s = slurp("/proc/self/status", status, sizeof status - 1);
  status[s > 0 ? s : 0] = 0;
  const char *cap = strstr(status, "\nCapEff:");
  put("{\"event\":\"self\",\"pid\":%d,\"uid\":%d,\"gid\":%d,\"capEff\":\"%.16s\"}", getpid(), (int)getuid(),
      (int)getgid(), cap ? cap + 9 : "");
  flush_line();
  int64_t end = now_ms() + seconds * 1000;
  long scans = 0;
  int self = getpid();
  while (now_ms() < end) {
    DIR *d = opendir("/proc");
    if (!d) return fprintf(stderr, "peek: cannot list /proc\n"), 1;
    for (struct dirent *e; (e = readdir(d));) {
      int pid = atoi(e->d_name);
      if (pid <= 1 || pid == self) continue;
      int k = 0;
      while (k < nseen && seen[k].pid != pid) k++;
      int64_t now = now_ms();
      if (k == nseen) {
        if (nseen == MAX_PROCS) continue;
        memset(&seen[nseen], 0, sizeof seen[nseen]);
        seen[nseen].pid = pid, seen[nseen++].born = now;
      }
      /* A young process is watched for its execve (its comm changes: `runc init` becomes node, the
         resident's fork becomes a run), to be tried as soon as it runs the new program. */
      int changed = 0;
      if (now - seen[k].born < YOUNG_MS) {
        char path[64], comm[32];
        snprintf(path, sizeof path, "/proc/%d/comm", pid);
        ssize_t n = slurp(path, comm, sizeof comm - 1);
        comm[n > 0 ? n : 0] = 0;
        if (n > 0 && strcmp(comm, seen[k].comm)) changed = 1, memcpy(seen[k].comm, comm, sizeof comm);
      }
      if (!changed && now < seen[k].next) continue;
      if (peek(pid, seen[k].rounds, &seen[k].signalled, now - seen[k].born >= SIGNAL_AGE_MS)) seen[k].rounds++;
      seen[k].next = now_ms() + every_ms;
      /* A young process is tried again once old enough for SIGUSR1, so a run of a few hundred ms gets it. */
      if (!seen[k].signalled && seen[k].born + SIGNAL_AGE_MS > now_ms() && seen[k].born + SIGNAL_AGE_MS < seen[k].next)
        seen[k].next = seen[k].born + SIGNAL_AGE_MS;
    }
    closedir(d);
    scans++;
    struct timespec nap = {0, SCAN_MS * 1000000L};
    nanosleep(&nap, NULL);
  }
  put("{\"event\":\"done\",\"scans\":%ld,\"processes\":%d}", scans, nseen);
  flush_line();
  return 0;
}
