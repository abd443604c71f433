/*
 * env-exec: secrets as environment variables (issue 32, docs/env.md). The webhook makes an app
 * container's command
 *
 *   /.secret-agent/env-exec --dir=MOUNT --wait=SECONDS --set=NAME... -- COMMAND [ARG...]
 *
 * (agent/contract/env-exec.ts, whose constants a test checks these #defines against). It waits up to
 * SECONDS for the agent's set in MOUNT (`MOUNT/..data -> ..data_<ts>_<rand>`, each variable's value in
 * `<payload>/.secret-agent-env/NAME`), reads every value from that one payload, so the variables are one
 * version, sets them over the inherited env and execve()s COMMAND: the app keeps its argv, the rest of
 * its env, its fds, working directory and PID (1, often). It runs in any image: static, no shell.
 *
 * Exits, before exec only: 64 a bad argument, 65 a value an env var cannot hold (a NUL byte, too long),
 * 74 a value that cannot be read (not a regular file, an I/O error), 75 the set did not appear within
 * SECONDS, 126 COMMAND could not be executed, 127 not found, 128+N signal N during the wait.
 * Messages: one line on stderr, `env-exec: ...`. Names and paths are quoted; a value never appears.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The contract (agent/contract/env-exec.ts); test/env-exec/contract.test.ts compares them. */
#define ENV_VALUES_DIR ".secret-agent-env"
#define MAX_ENV_VALUE_BYTES (128 * 1024 - 256)
#define MAX_ENV_VARS 64
#define MAX_ENV_NAME_BYTES 255
#define MAX_WAIT_SECONDS 3600
#define MAX_DIR_BYTES 3072 /* with a payload, ENV_VALUES_DIR and a name: under PATH_MAX */
#define EXIT_USAGE 64
#define EXIT_BAD_VALUE 65
#define EXIT_READ_ERROR 74
#define EXIT_TIMEOUT 75
#define EXIT_CANNOT_EXECUTE 126
#define EXIT_NOT_FOUND 127

/* Limits of the wrapper's own. */
#define DATA_LINK "..data"
#define PAYLOAD_PREFIX "..data_"
#define POLL_FIRST_MS 10
#define POLL_MAX_MS 200
#define MAX_SWAPS 64               /* payloads replaced under one read before it gives up */
#define MAX_INHERITED_ENV 1000000  /* entries of environ looked at: execve's own limit is far below */
#define DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#define PATH_BUF 4096
#define USAGE "usage: env-exec --dir=/ABSOLUTE/PATH --wait=SECONDS --set=NAME... -- COMMAND [ARG...]"

extern char **environ;

static const char *dir;
static long wait_seconds = -1;
static const char *names[MAX_ENV_VARS];
static size_t name_lens[MAX_ENV_VARS], nnames;
static char *values[MAX_ENV_VARS]; /* "NAME=value" each, as the new env takes it */
static int missing[MAX_ENV_VARS];  /* the last look: not in the payload yet */
static int no_payload;             /* the last look: no usable ..data yet */
static char **app_env;             /* what the app gets */

static const int caught[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT};
#define NCAUGHT (sizeof caught / sizeof *caught)
static struct sigaction inherited_action[NCAUGHT];
static sigset_t inherited_mask;

#define MESSAGE_PREFIX "env-exec: "
#define QUOTE_MAX_CHARS 200
#include "messages.h"

static _Noreturn void usage_error(int pos, const char *arg, const char *problem) {
  if (arg) say("argument %d (%s) %s. %s", pos, quoted(arg), problem, USAGE);
  else say("%s. %s", problem, USAGE);
  exit(EXIT_USAGE);
}

static int64_t now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* ---- arguments ---- */

/* POSIX's portable name: a letter or _, then letters, digits, _ (ENV_NAME in the contract). */
static int is_env_name(const char *s, size_t n) {
  if (n == 0 || n > MAX_ENV_NAME_BYTES || (s[0] >= '0' && s[0] <= '9')) return 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (!(c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) return 0;
  }
  return 1;
}

/* Returns the index of the command's first word. */
static int parse_args(int argc, char **argv) {
  int i = 1;
  for (; i < argc && strcmp(argv[i], "--"); i++) {
    const char *a = argv[i];
    if (!strncmp(a, "--dir=", 6)) {
      if (dir) usage_error(i, a, "repeats --dir=");
      dir = a + 6;
      size_t n = strlen(dir);
      if (dir[0] != '/') usage_error(i, a, "is not an absolute path");
      if (n > MAX_DIR_BYTES) usage_error(i, a, "is longer than 3072 bytes");
    } else if (!strncmp(a, "--wait=", 7)) {
      const char *s = a + 7;
      size_t n = strlen(s);
      long v = 0;
      if (wait_seconds >= 0) usage_error(i, a, "repeats --wait=");
      if (n == 0 || n > 4 || (s[0] == '0' && n > 1) || strspn(s, "0123456789") != n)
        usage_error(i, a, "is not whole seconds from 0 to 3600");
      for (size_t k = 0; k < n; k++) v = v * 10 + (s[k] - '0');
      if (v > MAX_WAIT_SECONDS) usage_error(i, a, "is not whole seconds from 0 to 3600");
      wait_seconds = v;
    } else if (!strncmp(a, "--set=", 6)) {
      const char *name = a + 6;
      size_t n = strlen(name);
      if (!is_env_name(name, n))
        usage_error(i, a, "does not name a variable: letters, digits and _, not starting with a digit, "
                          "at most 255 bytes");
      for (size_t k = 0; k < nnames; k++)
        if (name_lens[k] == n && !memcmp(names[k], name, n)) usage_error(i, a, "sets a variable twice");
      if (nnames == MAX_ENV_VARS) usage_error(i, a, "is one --set= more than the 64 allowed");
      names[nnames] = name, name_lens[nnames++] = n;
    } else {
      usage_error(i, a, "is not --dir=, --wait=, --set= or --");
    }
  }
  if (i >= argc) usage_error(0, NULL, "no -- before the command");
  if (i + 1 >= argc) usage_error(0, NULL, "no command after --");
  if (!dir) usage_error(0, NULL, "no --dir=");
  if (wait_seconds < 0) usage_error(0, NULL, "no --wait=");
  if (!nnames) usage_error(0, NULL, "no --set=");
  return i + 1;
}

/* ---- signals: it may be PID 1, which ignores a signal without a handler ---- */

static void on_signal(int s) {
#define SIGNAL_LINE(name, code) "env-exec: " name " while waiting for the agent's set; exiting " #code "\n"
  static const char *const lines[] = {SIGNAL_LINE("SIGTERM", 143), SIGNAL_LINE("SIGINT", 130),
                                      SIGNAL_LINE("SIGHUP", 129), SIGNAL_LINE("SIGQUIT", 131)};
  for (size_t i = 0; i < NCAUGHT; i++) /* write(2) only: async-signal-safe */
    if (caught[i] == s && write(2, lines[i], strlen(lines[i])) < 0) { /* nothing left to tell */ }
  _exit(128 + s);
}

static void catch_signals(void) {
  struct sigaction sa = {.sa_handler = on_signal};
  sigfillset(&sa.sa_mask); /* one message, one exit */
  sigprocmask(SIG_SETMASK, NULL, &inherited_mask);
  for (size_t i = 0; i < NCAUGHT; i++) sigaction(caught[i], &sa, &inherited_action[i]);
  sigset_t ours = inherited_mask;
  for (size_t i = 0; i < NCAUGHT; i++) sigdelset(&ours, caught[i]); /* a blocked one would not end the wait */
  sigprocmask(SIG_SETMASK, &ours, NULL);
}

/* The app gets the mask and dispositions the wrapper was started with (execve resets handlers). */
static void restore_signals(void) {
  sigset_t all;
  sigfillset(&all);
  sigprocmask(SIG_BLOCK, &all, NULL); /* no handler of ours runs once the actions are back */
  for (size_t i = 0; i < NCAUGHT; i++) sigaction(caught[i], &inherited_action[i], NULL);
  sigprocmask(SIG_SETMASK, &inherited_mask, NULL);
}

/* ---- reading one consistent set ---- */

enum { READ_OK, READ_WAIT, READ_SWAPPED };

/* `..data`'s target now, or "" when there is none or it is not a payload of the agent's. Returns
 * readlink's errno (0 when it read a link). */
static int resolve_payload(int dirfd, char *payload, size_t cap) {
  ssize_t n = readlinkat(dirfd, DATA_LINK, payload, cap - 1);
  int e = n < 0 ? errno : 0;
  payload[n > 0 ? n : 0] = 0;
  if (n <= 0 || (size_t)n >= cap - 1 || strncmp(payload, PAYLOAD_PREFIX, sizeof PAYLOAD_PREFIX - 1) ||
      memchr(payload, '/', (size_t)n))
    payload[0] = 0;
  return e;
}

static const char *file_kind(mode_t m) {
  return S_ISLNK(m) ? "is a symbolic link" : S_ISDIR(m) ? "is a directory" : S_ISFIFO(m) ? "is a FIFO"
       : S_ISSOCK(m) ? "is a socket" : S_ISCHR(m) || S_ISBLK(m) ? "is a device" : "is not a regular file";
}

/* `path` cannot be read: exit 74. `what`: "the value of NAME", or "the agent's set". `problem` says what
 * the file is ("is a FIFO"); without one, errno `e` says what went wrong. */
static _Noreturn void cannot_read(const char *what, const char *path, int e, const char *problem) {
  char text[160];
  if (!problem && e == EACCES)
    snprintf(text, sizeof text, "may not be read by this process's uid %u (EACCES)", (unsigned)getuid());
  else if (!problem) snprintf(text, sizeof text, "could not be read (%s)", strerror(e));
  say("cannot read %s: %s %s. Fix: %s", what, quoted(path), problem ? problem : text,
      e == EACCES ? "the agent writes the values for the pod's runAsUser, or for its fsGroup: run this container "
                    "as that uid, or give the pod an fsGroup"
      : problem   ? "the agent writes each value as a regular file; see the agent container's log"
                  : "see the agent container's log");
  exit(EXIT_READ_ERROR);
}

/* Variable k's value (or, with k == nnames, the values directory) in `payload` cannot be read. */
static _Noreturn void read_error(size_t k, const char *payload, int e, const char *problem) {
  char path[PATH_BUF], what[300];
  snprintf(path, sizeof path, "%s/%s/" ENV_VALUES_DIR "/%s", dir, payload, k < nnames ? names[k] : "");
  snprintf(what, sizeof what, "%s%s", k < nnames ? "the value of " : "the agent's set", k < nnames ? names[k] : "");
  cannot_read(what, path, e, problem);
}

static int same_payload(int dirfd, const char *payload) {
  char now[256];
  resolve_payload(dirfd, now, sizeof now);
  return !strcmp(now, payload);
}

/* One value into values[k] as NAME=value, from the values directory `vfd` of `payload`. */
static int read_value(int dirfd, int vfd, const char *payload, size_t k) {
  int fd = openat(vfd, names[k], O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  struct stat st;
  if (fd < 0) {
    int e = errno;
    if (e == ENOENT && !same_payload(dirfd, payload)) return READ_SWAPPED; /* the agent swapped the set */
    read_error(k, payload, e, e == ELOOP ? "is a symbolic link" : NULL);
  }
  if (fstat(fd, &st)) read_error(k, payload, errno, NULL);
  if (!S_ISREG(st.st_mode)) read_error(k, payload, 0, file_kind(st.st_mode));
  size_t head = name_lens[k] + 1, got = 0, cap = head + MAX_ENV_VALUE_BYTES + 2;
  char *v = values[k] ? values[k] : (values[k] = malloc(cap)); /* pages of it touched only as read */
  if (!v) say("no memory for the value of %s", names[k]), exit(EXIT_READ_ERROR);
  memcpy(v, names[k], name_lens[k]);
  v[name_lens[k]] = '=';
  while (st.st_size <= MAX_ENV_VALUE_BYTES && got <= MAX_ENV_VALUE_BYTES) {
    /* up to one byte past the bound: a file that grew after fstat is caught too */
    ssize_t n = read(fd, v + head + got, MAX_ENV_VALUE_BYTES + 1 - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) read_error(k, payload, errno, NULL);
    if (n == 0) break;
    got += (size_t)n;
  }
  close(fd);
  if (st.st_size > MAX_ENV_VALUE_BYTES || got > MAX_ENV_VALUE_BYTES) {
    say("the value of %s is over %d bytes, more than Linux passes in one environment variable. Fix: mount "
        "it as a file instead of an env var (secret-agent.io/env-%s)",
        names[k], MAX_ENV_VALUE_BYTES, names[k]);
    exit(EXIT_BAD_VALUE);
  }
  if (memchr(v + head, 0, got)) {
    say("the value of %s holds a NUL byte, which an environment variable cannot. Fix: store it "
        "base64-encoded, or mount it as a file instead of an env var (secret-agent.io/env-%s)",
        names[k], names[k]);
    exit(EXIT_BAD_VALUE);
  }
  v[head + got] = 0;
  return READ_OK;
}

/* One look at the set: READ_OK with every value read from one payload, READ_WAIT when some part is not
 * there yet (no_payload, missing[] say which), READ_SWAPPED when the agent replaced it meanwhile. */
static int read_set(void) {
  char payload[256];
  /* openat, not open: the same syscalls on every platform (a test holds the 5th with strace) */
  int result = READ_WAIT, dirfd = openat(AT_FDCWD, dir, O_PATH | O_DIRECTORY | O_CLOEXEC), pfd = -1, vfd = -1;
  no_payload = 1;
  for (size_t k = 0; k < nnames; k++) missing[k] = 1;
  int e = dirfd < 0 ? errno : resolve_payload(dirfd, payload, sizeof payload);
  if (e == EACCES) { /* waiting would not change it */
    char path[PATH_BUF];
    snprintf(path, sizeof path, "%s/" DATA_LINK, dir);
    cannot_read("the agent's set", path, e, NULL);
  }
  if (dirfd < 0) return READ_WAIT; /* not mounted yet, or not a directory: the timeout names it */
  if (payload[0]) pfd = openat(dirfd, payload, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (pfd >= 0) {
    /* Opened once: every value comes from this payload, whatever `..data` says meanwhile. */
    no_payload = 0;
    vfd = openat(pfd, ENV_VALUES_DIR, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (vfd < 0 && errno == EACCES) read_error(nnames, payload, EACCES, NULL); /* waiting would not change it */
  }
  if (vfd >= 0) {
    int all = 1;
    for (size_t k = 0; k < nnames; k++) {
      struct stat st;
      if (fstatat(vfd, names[k], &st, AT_SYMLINK_NOFOLLOW)) {
        if (errno != ENOENT) read_error(k, payload, errno, NULL); /* EACCES: waiting would not change it */
        continue;
      }
      missing[k] = 0;
      if (!S_ISREG(st.st_mode)) read_error(k, payload, 0, file_kind(st.st_mode));
    }
    for (size_t k = 0; k < nnames; k++) all &= !missing[k];
    result = all ? READ_OK : READ_WAIT;
    for (size_t k = 0; k < nnames && result == READ_OK; k++) result = read_value(dirfd, vfd, payload, k);
  }
  if (result == READ_WAIT && pfd >= 0 && !same_payload(dirfd, payload)) result = READ_SWAPPED;
  if (vfd >= 0) close(vfd);
  if (pfd >= 0) close(pfd);
  close(dirfd);
  return result;
}

static _Noreturn void timed_out(void) {
  char list[700];
  size_t o = 0, shown = 0, total = 0;
  list[0] = 0;
  for (size_t k = 0; k < nnames; k++) {
    if (!missing[k]) continue;
    total++;
    if (o + name_lens[k] + 16 < sizeof list)
      o += (size_t)snprintf(list + o, sizeof list - o, "%s%s", shown++ ? ", " : "", names[k]);
  }
  if (shown < total) snprintf(list + o, sizeof list - o, " and %zu more", total - shown);
  char path[PATH_BUF];
  size_t first = 0;
  while (first < nnames - 1 && !missing[first]) first++;
  if (no_payload) {
    snprintf(path, sizeof path, "%s/" DATA_LINK, dir);
    say("no set from the agent in %ld s: %s is not there (or not the agent's): %s not set. Fix: see the "
        "agent container's log (its init container's, first)",
        wait_seconds, quoted(path), list);
  } else {
    snprintf(path, sizeof path, "%s/" DATA_LINK "/" ENV_VALUES_DIR "/%s", dir, names[first]);
    say("%s not in the agent's set in %ld s (no %s). Fix: see the agent container's log; each variable "
        "needs the annotation secret-agent.io/env-NAME",
        list, wait_seconds, quoted(path));
  }
  exit(EXIT_TIMEOUT);
}

static void wait_and_read(void) {
  int64_t deadline = now_ms() + wait_seconds * 1000;
  long pause = POLL_FIRST_MS;
  for (int swaps = 0;;) {
    int r = read_set();
    if (r == READ_OK) return;
    if (r == READ_SWAPPED) {
      if (++swaps > MAX_SWAPS) {
        say("the agent replaced its set in %s %d times while it was read. Fix: see the agent container's log",
            quoted(dir), MAX_SWAPS);
        exit(EXIT_READ_ERROR);
      }
      continue;
    }
    int64_t left = deadline - now_ms();
    if (left <= 0) timed_out();
    long ms = pause < left ? pause : (long)left;
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) && errno == EINTR) {}
    pause = pause * 2 < POLL_MAX_MS ? pause * 2 : POLL_MAX_MS;
  }
}

/* ---- the app ---- */

/* The inherited env without the names set, then NAME=value for each. */
static char **new_env(void) {
  size_t n = 0, k = 0;
  while (environ && environ[n] && n < MAX_INHERITED_ENV) n++;
  char **env = calloc(n + nnames + 1, sizeof *env);
  if (!env) say("no memory for the environment"), exit(EXIT_CANNOT_EXECUTE);
  for (size_t i = 0; i < n; i++) {
    const char *e = environ[i], *eq = strchr(e, '=');
    size_t len = eq ? (size_t)(eq - e) : strlen(e);
    int replaced = 0;
    for (size_t j = 0; j < nnames && !replaced; j++) replaced = name_lens[j] == len && !memcmp(names[j], e, len);
    if (!replaced) env[k++] = environ[i];
  }
  for (size_t j = 0; j < nnames; j++) env[k++] = values[j];
  env[k] = NULL;
  return env;
}

/* execvp's search (musl's rules): each PATH entry in turn, an empty one the working directory; EACCES is
 * remembered and the search goes on, ENOENT and ENOTDIR go on, anything else stops. Never /bin/sh. */
static void exec_on_path(char **argv, char **env) {
  const char *path = getenv("PATH"), *file = argv[0];
  size_t fl = strlen(file);
  int seen_eacces = 0;
  if (!path) path = DEFAULT_PATH;
  if (fl == 0) { errno = ENOENT; return; }
  if (fl > 255) { errno = ENAMETOOLONG; return; }
  for (const char *p = path;; p++) {
    char buf[PATH_BUF];
    const char *z = strchrnul(p, ':');
    size_t l = (size_t)(z - p);
    if (l + 1 + fl < sizeof buf) {
      memcpy(buf, p, l);
      buf[l] = '/';
      memcpy(buf + l + !!l, file, fl + 1); /* "" is the working directory: the bare name */
      execve(buf, argv, env);
      if (errno == EACCES) seen_eacces = 1;
      else if (errno != ENOENT && errno != ENOTDIR) return;
    }
    if (!*z) break;
    p = z;
  }
  errno = seen_eacces ? EACCES : ENOENT;
}

int main(int argc, char **argv) {
  int first = parse_args(argc, argv);
  char **command = argv + first;
  catch_signals();
  wait_and_read();
  app_env = new_env();
  restore_signals();
  if (strchr(command[0], '/')) execve(command[0], command, app_env);
  else exec_on_path(command, app_env);
  int e = errno;
  if (e == E2BIG)
    say("cannot run %s: the environment and arguments are too large for execve (E2BIG; Linux takes at most "
        "a quarter of the stack limit in all, %d bytes in one string). Fix: take fewer or shorter values "
        "as env vars; mount the large ones as files",
        quoted(command[0]), 128 * 1024);
  else if (e == ENOENT || e == ENOTDIR || e == ENAMETOOLONG)
    say("cannot run %s: %s%s. Fix: give the command as the image has it (a path, or a name on PATH)",
        quoted(command[0]), strerror(e), strchr(command[0], '/') ? "" : " (searched PATH)");
  else
    say("cannot run %s: %s%s", quoted(command[0]), strerror(e),
        e == ENOEXEC ? " (not an executable this machine runs, and env-exec never falls back to /bin/sh)" : "");
  return e == ENOENT || e == ENOTDIR || e == ENAMETOOLONG ? EXIT_NOT_FOUND : EXIT_CANNOT_EXECUTE;
}
