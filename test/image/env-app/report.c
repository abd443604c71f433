/*
 * The app of the env-var tests (test/image/env-app-images.ts): what an app started by the env-exec
 * wrapper sees, reported as JSON lines on stdout, never a value.
 *
 * Its first act in main writes one line:
 *   {"event":"started","pid":N,"uid":N,"argv":[...],"lengths":{"VAR":N|null,...},"env_names":[...]}
 * for the names in REPORT_VARS (comma-separated): each variable's length, null when unset, and the
 * name of every variable in its env. argv is escaped byte by byte (control and non-ASCII bytes as
 * \u00XX), so a test can rebuild the exact bytes it passed.
 * Then REPORT_EXIT=N: exit N. Otherwise it prints {"event":"waiting"} once its handlers are in
 * place, and on SIGTERM, SIGINT, SIGHUP or SIGUSR1 prints {"event":"signal","signal":N} and exits
 * 128+N, as a shell reports a death by signal; after REPORT_MAX_SECONDS (default 300) it exits 124.
 * Written with write(2) only, no stdio buffer: a line is out before the process can die.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

struct out {
  char *data;
  size_t len, cap;
};

static void die(const char *what) {
  /* Names what failed; never a variable's value. */
  (void)!write(2, "report: ", 8);
  (void)!write(2, what, strlen(what));
  (void)!write(2, "\n", 1);
  _exit(2);
}

static void put(struct out *o, const char *s, size_t n) {
  if (o->len + n > o->cap) {
    size_t cap = o->cap ? o->cap : 4096;
    while (cap < o->len + n) cap *= 2;
    char *grown = realloc(o->data, cap);
    if (!grown) die("out of memory");
    o->data = grown;
    o->cap = cap;
  }
  memcpy(o->data + o->len, s, n);
  o->len += n;
}

static void puts_(struct out *o, const char *s) { put(o, s, strlen(s)); }

static void put_long(struct out *o, long v) {
  char digits[24];
  char *p = digits + sizeof digits;
  unsigned long u = v < 0 ? 0UL - (unsigned long)v : (unsigned long)v;
  do *--p = (char)('0' + u % 10); while ((u /= 10) != 0);
  if (v < 0) *--p = '-';
  put(o, p, (size_t)(digits + sizeof digits - p));
}

/* A JSON string of the n bytes at s: ASCII as itself, every other byte as \u00XX of that byte. */
static void put_json(struct out *o, const char *s, size_t n) {
  static const char hex[] = "0123456789abcdef";
  put(o, "\"", 1);
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\') {
      char esc[2] = {'\\', (char)c};
      put(o, esc, 2);
    } else if (c < 0x20 || c >= 0x7f) {
      char esc[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
      put(o, esc, 6);
    } else {
      put(o, (const char *)&c, 1);
    }
  }
  put(o, "\"", 1);
}

static void write_all(const struct out *o) {
  for (size_t done = 0; done < o->len;) {
    ssize_t n = write(1, o->data + done, o->len - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) die("cannot write to stdout");
    done += (size_t)n;
  }
}

/* A whole decimal number in [min, max], or die naming the variable (its value is no secret). */
static long number(const char *name, const char *text, long min, long max) {
  char *end;
  errno = 0;
  long v = strtol(text, &end, 10);
  if (errno || end == text || *end || v < min || v > max) die(name);
  return v;
}

static volatile sig_atomic_t caught;

static void on_signal(int sig) { caught = sig; }

static void report_start(int argc, char **argv) {
  struct out o = {0};
  puts_(&o, "{\"event\":\"started\",\"pid\":");
  put_long(&o, (long)getpid());
  puts_(&o, ",\"uid\":");
  put_long(&o, (long)getuid());
  puts_(&o, ",\"argv\":[");
  for (int i = 0; i < argc; i++) {
    if (i) put(&o, ",", 1);
    put_json(&o, argv[i], strlen(argv[i]));
  }
  puts_(&o, "],\"lengths\":{");
  const char *vars = getenv("REPORT_VARS");
  int first = 1;
  for (const char *p = vars ? vars : ""; *p;) {
    size_t n = strcspn(p, ",");
    if (n > 0) {
      char name[256];
      if (n >= sizeof name) die("REPORT_VARS names a variable longer than 255 bytes");
      memcpy(name, p, n);
      name[n] = 0;
      const char *value = getenv(name);
      if (!first) put(&o, ",", 1);
      first = 0;
      put_json(&o, name, n);
      put(&o, ":", 1);
      if (value) put_long(&o, (long)strlen(value));
      else puts_(&o, "null");
    }
    p += n + (p[n] == ',');
  }
  puts_(&o, "},\"env_names\":[");
  for (char **e = environ; *e; e++) {
    if (e != environ) put(&o, ",", 1);
    /* The name only: what comes before the first '='. */
    put_json(&o, *e, strcspn(*e, "="));
  }
  puts_(&o, "]}\n");
  write_all(&o);
  free(o.data);
}

int main(int argc, char **argv) {
  report_start(argc, argv);

  const char *code = getenv("REPORT_EXIT");
  if (code) return (int)number("REPORT_EXIT is not a number 0-255", code, 0, 255);
  const char *max = getenv("REPORT_MAX_SECONDS");
  long seconds = max ? number("REPORT_MAX_SECONDS is not a number 1-86400", max, 1, 86400) : 300;

  /* Blocked except inside ppoll, so a signal cannot slip in between the check and the wait. */
  static const int signals[] = {SIGTERM, SIGINT, SIGHUP, SIGUSR1};
  sigset_t blocked, waiting;
  sigemptyset(&blocked);
  for (size_t i = 0; i < sizeof signals / sizeof *signals; i++) sigaddset(&blocked, signals[i]);
  if (sigprocmask(SIG_BLOCK, &blocked, &waiting)) die("sigprocmask failed");
  for (size_t i = 0; i < sizeof signals / sizeof *signals; i++) {
    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    if (sigaction(signals[i], &sa, NULL)) die("sigaction failed");
  }
  static const char ready[] = "{\"event\":\"waiting\"}\n";
  struct out w = {(char *)ready, sizeof ready - 1, 0};
  write_all(&w);

  struct timespec now, end;
  clock_gettime(CLOCK_MONOTONIC, &end);
  end.tv_sec += seconds;
  while (!caught) {
    clock_gettime(CLOCK_MONOTONIC, &now);
    struct timespec left = {end.tv_sec - now.tv_sec, end.tv_nsec - now.tv_nsec};
    if (left.tv_nsec < 0) {
      left.tv_sec--;
      left.tv_nsec += 1000000000L;
    }
    if (left.tv_sec < 0) return 124;
    if (ppoll(NULL, 0, &left, &waiting) < 0 && errno != EINTR) die("ppoll failed");
  }
  struct out s = {0};
  puts_(&s, "{\"event\":\"signal\",\"signal\":");
  put_long(&s, (long)caught);
  puts_(&s, "}\n");
  write_all(&s);
  return 128 + caught;
}
