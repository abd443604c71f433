/*
 * resident: what stays of the sidecar between refreshes (issue 31). It runs the agent's refreshes as
 * short processes, keeps what a run hands back in its own memory only (never a file, env var or
 * argument), and serves /healthz, /readyz and /metrics on AGENT_HTTP_ADDR from the last good run.
 *
 *   resident -- RUN_ARGV...            e.g. resident -- /nodejs/bin/node --snapshot-blob /app/agent.blob --
 *
 * Env: AGENT_HTTP_ADDR (HOST:PORT, HOST an IPv4 address, [IPv6] or empty; default ADDR_DEFAULT; port 0
 * picks one, named on stderr), AGENT_RUN_DEADLINE (Go duration 1s..1h, default 2m). Bad values: exit 2.
 *
 * A run gets the resident's env plus AGENT_HANDOFF_FDS=3,4 and stdin/stdout/stderr as they are.
 *   fd 3: the state the last good run handed back (empty at first), then EOF.
 *   fd 4: the run writes its outcome, ASCII lines and sized payloads, each field at most once:
 *     secret-agent-outcome 1\n   ready 0|1\n   next-ms N\n (1000..86400000; may be left out with exit)
 *     refreshed 0|1\n (0: the run could not refresh every secret; left out: it had nothing to refresh)
 *     exit N\n (0..255: the resident exits N after this run; for Jobs whose app exited)
 *     metrics LEN\n<LEN bytes of Prometheus text>\n   state LEN\n<LEN opaque bytes>\n   end\n   then EOF.
 * The run is good when it exits 0 and the outcome is complete. A good run that says `refreshed 0` is
 * still handed on (its state and metrics: a renewed token, the failures it counted) but counted as a
 * failed run, so the runs and consecutive-failure series tell an outage as it is. Anything else (bad line, length out of
 * bounds or not matching, bytes after end, no end, exit != 0, signal, deadline) keeps the previous
 * outcome and state and retries with capped exponential backoff. A run exiting 2 before any run was
 * good is a configuration error: the resident exits 2. Later, exit 2 is a failed run like any other
 * (the env cannot have changed; a rejected AGENT_CONFIG_FILE keeps the last good files).
 * Signals: SIGTERM/SIGINT end it (a run gets SIGTERM and STOP_GRACE_MS, then SIGKILL), exit 0;
 * SIGCHLD reaps (it may be PID 1); SIGPIPE ignored; others keep their defaults.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Every limit, in one place. The HTTP ones are AGENT_PORT_LIMITS' (agent/serve/health-server.ts; a test checks). */
#define MAX_CONNS 64          /* connections held at once */
#define MAX_PER_SOURCE 16     /* ... from one source address, but for newcomers within their grace */
#define GRACE_MS 200          /* from its handshake, a silent connection is never closed to make room */
#define FIRST_REQUEST_MS 3000 /* to send a complete request head */
#define WRITE_MS 10000        /* to take the answer */
#define LINGER_MS 1000        /* to read unread input after the answer, so closing does not reset it */
#define HEAD_MAX 4096         /* request head; also the slot's answer buffer */
#define ACCEPT_PAUSE_MS 100   /* after EMFILE/ENFILE: stop accepting, do not spin */
#define ACCEPT_BATCH 256      /* accepts per turn of the loop: the rest of it runs between batches */
#define LISTEN_BACKLOG 4096   /* the kernel's queue (capped at net.core.somaxconn, 4096 by default) */
#define OUTCOME_LINE_MAX 64          /* an outcome line */
#define METRICS_MAX (256 * 1024)
#define STATE_MAX (1024 * 1024)
#define NEXT_MS_MIN 1000
#define NEXT_MS_MAX 86400000L
#define DEADLINE_DEFAULT_MS 120000L
#define KILL_GRACE_MS 5000  /* SIGTERM to SIGKILL for a run past its deadline */
#define STOP_GRACE_MS 5000  /* the same when the resident is asked to stop */
#define STALLED_MS 30000    /* a run not gone this long after SIGKILL: /healthz fails and the resident exits 1 */
#define BACKOFF_BASE_MS 1000
#define BACKOFF_MAX_MS 300000L
#define MAGIC "secret-agent-outcome 1"
/* The agent's own default (agent/contract/agent-settings.ts, AGENT_HTTP_ADDR): the pod's loopback, which no
   other pod reaches. The webhook renders no AGENT_HTTP_ADDR where its own setting is this: a test compares them. */
#define ADDR_DEFAULT "127.0.0.1:8099"
/* The agent's help texts (agent/serve/metrics.ts, METRIC_DOCS), word for word: a test compares them. */
#define RUNS_HELP \
  "Agent runs by outcome: ok (refreshed every secret), failed (could not refresh every secret, exited " \
  "non-zero, was killed or wrote a bad outcome; the files stay the last good ones), timeout (passed " \
  "AGENT_RUN_DEADLINE)."
#define FAILURES_HELP "Runs failed or timed out since the last ok one: 0 again once every secret is refreshed."
#define HTTP_REFUSED_HELP \
  "Connections to the agent's port it closed unserved, by reason: per-source (to make room, while its " \
  "address held more than its share), full (to make room when the port was full: one that had sent " \
  "nothing, those past their grace first, from the address holding the most such), no-request (no " \
  "complete request within the deadline)."

typedef struct { size_t refs, len; char data[]; } blob; /* refs: answers still sending it */

static blob *metrics, *state; /* the last good run's */
static int ready, ever_ok, stopping, exit_code = -1;
static unsigned long runs_ok, runs_failed, runs_timeout, refused[3], failures_in_row, run_no;
static long last_run_ms = -1; /* how long the last run took, start to reaped */
static long deadline_ms = DEADLINE_DEFAULT_MS, last_next_ms = BACKOFF_MAX_MS;
static int64_t next_at, stop_kill_at, accept_paused_until;
static char **run_argv, **run_env;
static int sig_w, listener = -1;
static char sink[4096]; /* input read to be dropped */

enum { P_MAGIC, P_FIELD, P_PAYLOAD, P_PAYLOAD_NL, P_END, P_FAIL };
enum { F_READY, F_NEXT, F_EXIT, F_REFRESHED, F_METRICS, F_STATE, F_END, F_COUNT };
static const char *const field_names[F_COUNT] = {"ready", "next-ms", "exit", "refreshed", "metrics", "state", "end"};
static const long field_max[F_COUNT] = {1, NEXT_MS_MAX, 255, 1, METRICS_MAX, STATE_MAX, 0};

static struct {
  pid_t pid; /* 0: no run */
  int in_fd, out_fd, exited, status, timed_out, killed;
  size_t in_sent;
  int64_t started, term_at, kill_at;
  int phase, seen, got_ready, not_refreshed;
  long next_ms, exit_req;
  char line[OUTCOME_LINE_MAX];
  size_t line_len, got;
  blob *new_metrics, *new_state, *target;
  const char *err;
} run = {.in_fd = -1, .out_fd = -1};

enum { C_FREE, C_READ, C_WRITE, C_LINGER };
static struct conn {
  int fd, phase;
  unsigned char src[16]; /* IPv4 as v4-mapped IPv6 */
  uint64_t seq;
  int64_t born, deadline; /* born: its handshake, by the kernel's clock (it may have waited in the queue) */
  int64_t grace_end;      /* born + GRACE_MS; the past once part of a request has come without the rest */
  size_t len, head, sent; /* READ: len = bytes read; WRITE: buf = head bytes then tail bytes */
  blob *body;
  int head_only, eof;
  char buf[HEAD_MAX];
} conns[MAX_CONNS];
static uint64_t conn_seq;

static int64_t now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

#define MESSAGE_PREFIX "secret-agent resident: "
#define QUOTE_MAX_CHARS 64
#include "messages.h"

static void config_error(const char *field, const char *value, const char *problem, const char *fix) {
  say("%s: %s %s. Fix: %s", field, quoted(value), problem, fix);
  exit(2);
}

/* Strict decimal: digits only, no sign, no leading zero, at most `max`. */
static int parse_uint(const char *s, size_t n, long max, long *out) {
  long v = 0;
  if (n == 0 || n > 10 || (s[0] == '0' && n > 1)) return -1;
  for (size_t i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9') return -1;
    v = v * 10 + (s[i] - '0');
  }
  if (v > max) return -1;
  *out = v;
  return 0;
}

/* A Go duration of whole units (ms, s, m, h), e.g. 90s, 2m, 1m30s. -1 when it is not one. */
static long parse_duration(const char *s) {
  static const struct { const char *unit; long ms; } units[] = {{"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}};
  long total = 0;
  if (!*s) return -1;
  while (*s) {
    size_t d = strspn(s, "0123456789"), u = strspn(s + d, "mhs");
    long v, k = -1;
    if (parse_uint(s, d, 3600000, &v)) return -1;
    for (size_t i = 0; i < 4; i++)
      if (strlen(units[i].unit) == u && !strncmp(s + d, units[i].unit, u)) k = units[i].ms;
    if (k < 0 || v > 3600000 / k) return -1;
    total += v * k;
    s += d + u;
  }
  return total;
}

static void open_listener(void) {
  const char *text = getenv("AGENT_HTTP_ADDR");
  const char *addr = text ? text : ADDR_DEFAULT, *colon = strrchr(addr, ':');
  char host[64];
  long port;
  struct sockaddr_in6 a6 = {.sin6_family = AF_INET6};
  struct sockaddr_in a4 = {.sin_family = AF_INET};
  int v6 = addr[0] == '[';
  size_t hl = colon ? (size_t)(colon - addr) : 0;
  int ok = colon && hl < sizeof host && (!v6 || (hl >= 2 && addr[hl - 1] == ']')) &&
           !parse_uint(colon + 1, strlen(colon + 1), 65535, &port);
  if (ok) {
    memcpy(host, addr + v6, hl - 2 * (size_t)v6);
    host[hl - 2 * (size_t)v6] = 0;
    if (!v6 && (!*host || !strcmp(host, "localhost"))) strcpy(host, *host ? "127.0.0.1" : "0.0.0.0");
    ok = (v6 ? inet_pton(AF_INET6, host, &a6.sin6_addr) : inet_pton(AF_INET, host, &a4.sin_addr)) == 1;
  }
  if (!ok)
    config_error("AGENT_HTTP_ADDR", addr, "is not HOST:PORT (HOST an IPv4 address or [IPv6])",
                 "write it like 0.0.0.0:8099, 127.0.0.1:9000 or [::]:8099");
  a6.sin6_port = a4.sin_port = htons((uint16_t)port);
  listener = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr *sa = v6 ? (struct sockaddr *)&a6 : (struct sockaddr *)&a4;
  socklen_t sl = v6 ? sizeof a6 : sizeof a4;
  if (listener < 0 || bind(listener, sa, sl) || listen(listener, LISTEN_BACKLOG)) {
    int e = errno;
    config_error("AGENT_HTTP_ADDR", addr,
                 e == EADDRINUSE ? "is already in use (EADDRINUSE): another container of the pod listens there"
                 : e == EACCES   ? "needs privileges the agent does not have (EACCES)"
                                 : strerror(e),
                 "set AGENT_HTTP_ADDR to a free port above 1023 "
                 "(with the webhook: the secret-agent.io/agent-http-addr annotation)");
  }
  getsockname(listener, sa, &sl);
  say("serving /healthz, /readyz, /metrics on %s%s%s:%u", v6 ? "[" : "", host, v6 ? "]" : "",
      ntohs(v6 ? a6.sin6_port : a4.sin_port));
}

static blob *blob_new(size_t len) {
  blob *b = malloc(sizeof *b + len);
  if (b) b->refs = 1, b->len = len;
  return b;
}

static void blob_drop(blob **b) {
  if (*b && --(*b)->refs == 0) explicit_bzero((*b)->data, (*b)->len), free(*b); /* state may hold tokens */
  *b = NULL;
}

/* ---- the outcome a run writes on fd 4, parsed as it arrives ---- */

static void outcome_fail(const char *why) {
  if (run.phase != P_FAIL) run.err = why;
  run.phase = P_FAIL;
}

/* Prometheus text: UTF-8 without control bytes but tab and newline, ending with a newline. */
static int is_text(const unsigned char *s, size_t n) {
  for (size_t i = 0; i < n; i++) {
    unsigned char c = s[i];
    if (c < 0x80) {
      if ((c < 0x20 && c != '\t' && c != '\n') || c == 0x7f) return 0;
      continue;
    }
    size_t more = c >= 0xc2 && c <= 0xdf ? 1 : (c & 0xf0) == 0xe0 ? 2 : c >= 0xf0 && c <= 0xf4 ? 3 : 0;
    if (!more || i + more >= n) return 0;
    for (size_t k = 1; k <= more; k++)
      if ((s[i + k] & 0xc0) != 0x80) return 0;
    /* overlong forms, surrogates, above U+10FFFF */
    if ((c == 0xe0 && s[i + 1] < 0xa0) || (c == 0xed && s[i + 1] >= 0xa0) || (c == 0xf0 && s[i + 1] < 0x90) ||
        (c == 0xf4 && s[i + 1] >= 0x90))
      return 0;
    i += more;
  }
  return n == 0 || s[n - 1] == '\n';
}

static void outcome_line(char *line) {
  if (run.phase == P_MAGIC) {
    if (strcmp(line, MAGIC)) outcome_fail("the first line is not " MAGIC);
    else run.phase = P_FIELD;
    return;
  }
  char *arg = strchr(line, ' ');
  int f = 0;
  long v = 0;
  if (arg) *arg++ = 0;
  while (f < F_COUNT && strcmp(line, field_names[f])) f++;
  if (f == F_COUNT) return outcome_fail("an unknown field");
  if (run.seen & (1 << f)) return outcome_fail("a field given twice");
  run.seen |= 1 << f;
  if (f == F_END) {
    if (arg) return outcome_fail("end takes no value");
    if (!(run.seen & (1 << F_READY)) || !(run.seen & (1 << F_NEXT | 1 << F_EXIT)))
      return outcome_fail("end before ready and next-ms");
    run.phase = P_END;
    return;
  }
  if (!arg || parse_uint(arg, strlen(arg), field_max[f], &v)) return outcome_fail("a value out of bounds");
  if (f == F_READY) run.got_ready = (int)v;
  if (f == F_REFRESHED) run.not_refreshed = !v;
  if (f == F_NEXT && v < NEXT_MS_MIN) return outcome_fail("next-ms under 1000");
  if (f == F_NEXT) run.next_ms = v;
  if (f == F_EXIT) run.exit_req = v;
  if (f == F_METRICS || f == F_STATE) {
    blob **slot = f == F_METRICS ? &run.new_metrics : &run.new_state;
    if (!(*slot = run.target = blob_new((size_t)v))) return outcome_fail("no memory for a payload");
    run.got = 0;
    run.phase = v ? P_PAYLOAD : P_PAYLOAD_NL;
  }
}

static void outcome_feed(const char *b, size_t n) {
  for (size_t i = 0; i < n && run.phase != P_FAIL;) {
    if (run.phase == P_PAYLOAD) {
      size_t k = run.target->len - run.got < n - i ? run.target->len - run.got : n - i;
      memcpy(run.target->data + run.got, b + i, k);
      i += k, run.got += k;
      if (run.got == run.target->len) run.phase = P_PAYLOAD_NL;
    } else if (run.phase == P_PAYLOAD_NL) {
      if (b[i++] != '\n') outcome_fail("a payload longer than its length");
      else if (run.target == run.new_metrics && !is_text((unsigned char *)run.target->data, run.target->len))
        outcome_fail("metrics that are not Prometheus text");
      else run.phase = P_FIELD;
    } else if (run.phase == P_END) {
      outcome_fail("bytes after end");
    } else {
      char c = b[i++];
      if (c == '\n') run.line[run.line_len] = 0, run.line_len = 0, outcome_line(run.line);
      else if (run.line_len == OUTCOME_LINE_MAX - 1 || c < 0x20 || c > 0x7e)
        outcome_fail("a line too long or not ASCII");
      else run.line[run.line_len++] = c;
    }
  }
}

/* ---- runs ---- */

static void close_fd(int *fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

static void start_run(void) {
  int in[2], out[2];
  memset(&run, 0, sizeof run);
  run.in_fd = run.out_fd = -1;
  run_no++;
  if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC)) {
    say("run %lu not started: pipe: %s", run_no, strerror(errno));
    next_at = now_ms() + BACKOFF_BASE_MS, runs_failed++;
    return;
  }
  sigset_t all, mask;
  sigfillset(&all);
  sigprocmask(SIG_BLOCK, &all, &mask); /* no handler of ours runs in the child before execve */
  pid_t pid = fork();
  if (pid == 0) {
    /* Above 4 first, so that placing one pipe at 3 or 4 cannot close the other. */
    int r = fcntl(in[0], F_DUPFD_CLOEXEC, 10), w = fcntl(out[1], F_DUPFD_CLOEXEC, 10);
    signal(SIGTERM, SIG_DFL), signal(SIGINT, SIG_DFL), signal(SIGCHLD, SIG_DFL), signal(SIGPIPE, SIG_DFL);
    sigprocmask(SIG_SETMASK, &mask, NULL);
    setpgid(0, 0); /* its own group: a deadline reaches what it started */
    if (r < 0 || w < 0 || dup2(r, 3) != 3 || dup2(w, 4) != 4) _exit(127);
    if (syscall(SYS_close_range, 5, ~0U, 0)) /* what the resident inherited is not the run's */
      for (int fd = 5; fd < 65536; fd++) close(fd);
    execve(run_argv[0], run_argv, run_env);
    say("cannot run %s: %s", quoted(run_argv[0]), strerror(errno));
    _exit(127);
  }
  sigprocmask(SIG_SETMASK, &mask, NULL);
  close(in[0]), close(out[1]);
  if (pid < 0) {
    say("run %lu not started: fork: %s", run_no, strerror(errno));
    close(in[1]), close(out[0]);
    next_at = now_ms() + BACKOFF_BASE_MS, runs_failed++;
    return;
  }
  setpgid(pid, pid);
  run.pid = pid;
  run.in_fd = in[1], run.out_fd = out[0];
  fcntl(run.in_fd, F_SETFL, O_NONBLOCK), fcntl(run.out_fd, F_SETFL, O_NONBLOCK);
  if (!state || !state->len) close_fd(&run.in_fd);
  run.started = now_ms();
  run.term_at = run.started + deadline_ms;
}

static void read_outcome(void) {
  for (int i = 0; i < 64 && run.out_fd >= 0; i++) { /* bounded: the loop has other work */
    ssize_t n = read(run.out_fd, sink, sizeof sink);
    if (n > 0) outcome_feed(sink, (size_t)n);
    else if (n == 0 || errno != EINTR) { if (n == 0 || errno != EAGAIN) close_fd(&run.out_fd); return; }
  }
}

static void finish_run(void) {
  char why[96] = "";
  int st = run.status, code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  read_outcome(); /* what it wrote before exiting; a child it left holding fd 4 is not waited for */
  close_fd(&run.in_fd), close_fd(&run.out_fd);
  explicit_bzero(sink, sizeof sink); /* it held the outcome's last bytes */
  if (run.timed_out) snprintf(why, sizeof why, "passed its deadline (%ld ms)", deadline_ms);
  else if (!WIFEXITED(st)) snprintf(why, sizeof why, "was killed by signal %d", WTERMSIG(st));
  else if (code) snprintf(why, sizeof why, "exited %d", code);
  else if (run.phase != P_END) snprintf(why, sizeof why, "wrote a bad outcome: %s", run.err ? run.err : "no end");
  run.pid = 0;
  last_run_ms = now_ms() - run.started;
  if (!*why) {
    blob_drop(&metrics), blob_drop(&state);
    metrics = run.new_metrics, state = run.new_state; /* a run that hands back nothing keeps nothing */
    run.new_metrics = run.new_state = NULL;
    ready |= run.got_ready;
    ever_ok = 1;
    if (run.not_refreshed) {
      /* Handed on, but a failure wherever it is counted; it chose its own backoff (next-ms). */
      runs_failed++, failures_in_row++;
      next_at = now_ms() + (run.seen & (1 << F_NEXT) ? run.next_ms : last_next_ms);
      say("run %lu could not refresh every secret (its log says why); the files are the last good ones; "
          "next run in %ld ms", run_no, (long)(next_at - now_ms()));
    } else {
      runs_ok++, failures_in_row = 0;
      if (run.seen & (1 << F_NEXT)) last_next_ms = run.next_ms;
      next_at = now_ms() + last_next_ms;
    }
    if (run.seen & (1 << F_EXIT)) exit_code = (int)run.exit_req;
  } else {
    long delay = BACKOFF_BASE_MS;
    blob_drop(&run.new_metrics), blob_drop(&run.new_state);
    if (run.timed_out) runs_timeout++;
    else runs_failed++;
    failures_in_row++;
    for (unsigned long i = 1; i < failures_in_row && delay < BACKOFF_MAX_MS; i++) delay *= 2;
    delay = delay < BACKOFF_MAX_MS ? delay : BACKOFF_MAX_MS;
    delay = delay < last_next_ms ? delay : last_next_ms; /* never wait longer than a good run asked */
    if (code == 2 && !run.timed_out && !ever_ok) {
      say("run %lu exited 2 (configuration error) before any good run: exiting 2", run_no);
      exit(2);
    }
    say("run %lu %s; keeping the last good outcome; next run in %ld ms", run_no, why, delay);
    next_at = now_ms() + delay;
  }
}

static void reap(void) {
  int st;
  pid_t p;
  while ((p = waitpid(-1, &st, WNOHANG)) > 0) /* it may be PID 1: orphans are ours to reap */
    if (p == run.pid) run.exited = 1, run.status = st;
}

static void on_signal(int s) {
  int e = errno;
  char c = (char)s;
  if (write(sig_w, &c, 1) < 0) { /* full: a byte is already waiting */ }
  errno = e;
}

/* ---- HTTP ---- */

static void conn_close(struct conn *c) {
  close_fd(&c->fd);
  blob_drop(&c->body);
  c->phase = C_FREE;
}

static void refuse(struct conn *c, int reason) {
  refused[reason]++;
  conn_close(c);
}

/* The resident's resident set, from /proc/self/statm (pages): what a sidecar holds between runs. */
static unsigned long resident_bytes(void) {
  char buf[128];
  int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  unsigned long size = 0, rss = 0;
  if (sscanf(buf, "%lu %lu", &size, &rss) != 2) return 0;
  return rss * (unsigned long)sysconf(_SC_PAGESIZE);
}

static size_t counters(char *o, size_t cap) {
  return (size_t)snprintf(o, cap,
    "# HELP secret_agent_resident_runs_total " RUNS_HELP "\n"
    "# TYPE secret_agent_resident_runs_total counter\n"
    "secret_agent_resident_runs_total{outcome=\"ok\"} %lu\n"
    "secret_agent_resident_runs_total{outcome=\"failed\"} %lu\n"
    "secret_agent_resident_runs_total{outcome=\"timeout\"} %lu\n"
    "# HELP secret_agent_resident_consecutive_failures " FAILURES_HELP "\n"
    "# TYPE secret_agent_resident_consecutive_failures gauge\n"
    "secret_agent_resident_consecutive_failures %lu\n"
    /* The agent's own name and help (agent/serve/metrics.ts): the port is the resident's now. */
    "# HELP secret_agent_http_connections_refused_total " HTTP_REFUSED_HELP "\n"
    "# TYPE secret_agent_http_connections_refused_total counter\n"
    "secret_agent_http_connections_refused_total{reason=\"per-source\"} %lu\n"
    "secret_agent_http_connections_refused_total{reason=\"full\"} %lu\n"
    "secret_agent_http_connections_refused_total{reason=\"no-request\"} %lu\n"
    "# HELP secret_agent_process_resident_memory_bytes Resident memory size in bytes.\n"
    "# TYPE secret_agent_process_resident_memory_bytes gauge\n"
    "secret_agent_process_resident_memory_bytes %lu\n"
    "# HELP secret_agent_resident_last_run_seconds How long the last run took, from its start to its end.\n"
    "# TYPE secret_agent_resident_last_run_seconds gauge\n"
    "secret_agent_resident_last_run_seconds %ld.%03ld\n",
    runs_ok, runs_failed, runs_timeout, failures_in_row, refused[0], refused[1], refused[2],
    resident_bytes(), last_run_ms < 0 ? 0L : last_run_ms / 1000, last_run_ms < 0 ? 0L : last_run_ms % 1000);
}

static void answer(struct conn *c, int status, const char *body, blob *text) {
  static const struct { int code; const char *reason; } reasons[] = {
    {200, "OK"}, {400, "Bad Request"}, {404, "Not Found"}, {405, "Method Not Allowed"},
    {414, "URI Too Long"}, {431, "Request Header Fields Too Large"}, {503, "Service Unavailable"}};
  const char *reason = "";
  char tail[2048];
  size_t tl = text ? counters(tail, sizeof tail) : strlen(body);
  if (text && tl >= sizeof tail) tl = sizeof tail - 1; /* never: the counters' text is ~1.5 KiB */
  for (size_t i = 0; i < sizeof reasons / sizeof *reasons; i++)
    if (reasons[i].code == status) reason = reasons[i].reason;
  c->head = (size_t)snprintf(c->buf, sizeof c->buf,
    "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%sConnection: close\r\n\r\n", status, reason,
    text ? "text/plain; version=0.0.4; charset=utf-8" : "text/plain; charset=utf-8", tl + (text ? text->len : 0),
    status == 405 ? "Allow: GET, HEAD\r\n" : "");
  memcpy(c->buf + c->head, text ? tail : body, tl);
  c->len = c->head + (c->head_only ? 0 : tl);
  if (text && !c->head_only) c->body = text, text->refs++;
  c->sent = 0, c->phase = C_WRITE, c->deadline = now_ms() + WRITE_MS;
}

/* The request head is complete in c->buf[0..c->len): a request line, then header lines. */
static void route(struct conn *c) {
  char *eol = memmem(c->buf, c->len, "\r\n", 2), *sp1 = memchr(c->buf, ' ', (size_t)(eol - c->buf)), *sp2, *q;
  char *line = eol + 2, *end = c->buf + c->len - 2;
  sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t)(eol - sp1 - 1)) : NULL;
  if (!sp1 || sp1 == c->buf || !sp2 || sp1[1] != '/' || (size_t)(eol - sp2) != 9 || memcmp(sp2 + 1, "HTTP/1.", 7) ||
      (sp2[8] != '0' && sp2[8] != '1'))
    return answer(c, 400, "bad request\n", NULL);
  for (char *p = c->buf; p < sp1; p++)
    if (*p < 'A' || *p > 'Z') return answer(c, 400, "bad request\n", NULL);
  while (line < end) { /* each header line is NAME: VALUE, NAME a token */
    char *nl = memmem(line, (size_t)(end - line), "\r\n", 2), *colon = memchr(line, ':', (size_t)(nl - line));
    if (!colon || colon == line) return answer(c, 400, "bad request\n", NULL);
    for (char *p = line; p < colon; p++)
      if (!strchr("!#$%&'*+-.^_`|~", *p) && !((*p | 0x20) >= 'a' && (*p | 0x20) <= 'z') && !(*p >= '0' && *p <= '9'))
        return answer(c, 400, "bad request\n", NULL);
    line = nl + 2;
  }
  size_t ml = (size_t)(sp1 - c->buf), pl;
  c->head_only = ml == 4 && !memcmp(c->buf, "HEAD", 4);
  if (!c->head_only && !(ml == 3 && !memcmp(c->buf, "GET", 3))) return answer(c, 405, "method not allowed\n", NULL);
  q = memchr(sp1 + 1, '?', (size_t)(sp2 - sp1 - 1));
  pl = (size_t)((q ? q : sp2) - sp1 - 1);
#define IS(path) (pl == sizeof path - 1 && !memcmp(sp1 + 1, path, pl))
  if (IS("/healthz")) {
    int stalled = run.pid && now_ms() > run.term_at + KILL_GRACE_MS + STALLED_MS;
    return stalled ? answer(c, 503, "refresh loop stalled\n", NULL) : answer(c, 200, "ok\n", NULL);
  }
  if (IS("/readyz"))
    return ready ? answer(c, 200, "ready\n", NULL) : answer(c, 503, "secrets not written yet\n", NULL);
  if (IS("/metrics")) {
    static blob empty = {1, 0};
    return answer(c, 200, NULL, metrics ? metrics : &empty);
  }
  answer(c, 404, "not found\n", NULL);
}

static void conn_read(struct conn *c) {
  if (c->phase != C_READ) { /* after the request: input is only drained */
    ssize_t n = read(c->fd, sink, sizeof sink);
    if (n == 0 && c->phase == C_WRITE) c->eof = 1; /* half-closed: it still reads the answer */
    else if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) conn_close(c);
    return;
  }
  ssize_t n = read(c->fd, c->buf + c->len, sizeof c->buf - c->len);
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return conn_close(c);
  if (n < 0) return;
  size_t from = c->len;
  c->len += (size_t)n;
  for (size_t i = from; i < c->len; i++) {
    unsigned char ch = (unsigned char)c->buf[i], prev = i ? (unsigned char)c->buf[i - 1] : 0;
    /* CR only before LF, LF only after CR (no bare LF, no header folding tricks), no other controls */
    if ((ch < 0x20 && ch != '\t' && ch != '\r' && ch != '\n') || ch == 0x7f || (ch == '\n') != (prev == '\r'))
      return answer(c, 400, "bad request\n", NULL);
    if (i >= 3 && !memcmp(c->buf + i - 3, "\r\n\r\n", 4)) {
      c->len = i + 1;
      if (c->buf[0] == '\r') return answer(c, 400, "bad request\n", NULL);
      return route(c);
    }
  }
  if (c->len == sizeof c->buf)
    memmem(c->buf, c->len, "\r\n", 2) ? answer(c, 431, "request head too large\n", NULL)
                                     : answer(c, 414, "request line too long\n", NULL);
  else c->grace_end = 0; /* part of a request, not the rest: not a probe (see past_grace) */
}

static void conn_write(struct conn *c) {
  size_t blen = c->body ? c->body->len : 0;
  const char *segs[3] = {c->buf, c->body ? c->body->data : NULL, c->buf + c->head};
  size_t lens[3] = {c->head, blen, c->len - c->head}, skip = c->sent;
  struct iovec iov[3];
  int k = 0;
  for (int i = 0; i < 3; i++) {
    if (skip >= lens[i]) { skip -= lens[i]; continue; }
    iov[k].iov_base = (char *)segs[i] + skip, iov[k++].iov_len = lens[i] - skip;
    skip = 0;
  }
  ssize_t n = k ? writev(c->fd, iov, k) : 0;
  if (n < 0 && errno != EAGAIN && errno != EINTR) return conn_close(c);
  if (n > 0) c->sent += (size_t)n;
  if (c->sent == c->len + blen) {
    shutdown(c->fd, SHUT_WR);
    blob_drop(&c->body);
    c->phase = C_LINGER, c->deadline = now_ms() + LINGER_MS;
  }
}

/*
 * Which connections the port keeps when it is full (issue 37). A kubelet probe writes its request as soon
 * as it is connected, so by the time its connection is accepted the request has usually arrived, and it
 * is answered at once without taking a place (accept_conns). If it has not arrived yet, the connection
 * is within its grace: no connection is closed to make room in its first GRACE_MS after its handshake,
 * and the port accepts only while it has room for one more (a free place, or one past its grace), so a
 * newcomer is never closed in the same round it was accepted. When every place is within its grace, the
 * port stops accepting until the first grace ends: what waits in the kernel's queue meanwhile keeps its
 * bytes, and a probe's complete request is answered when it is accepted. A newcomer that already spent
 * its grace in the queue without sending a request is closed at once when the port is full, without
 * costing anyone a place. None of this needs to know any address: it holds for any number of sources.
 *
 * The grace is the kubelet's, and only a silent connection has it. The kubelet writes its small request
 * in one segment, so a probe has sent either nothing or a whole request; one that has sent part of a
 * request and not the rest is not a probe, and its grace ends with those bytes. Otherwise a sender of a
 * byte now and then, from as many addresses as it likes, could keep every place in its grace and the
 * port from accepting (issue 37, "dribbling" connections). And the grace is counted from the handshake
 * whatever a connection sends: bytes cannot make it look newer than it is (kernel_age_ms).
 */
static int past_grace(const struct conn *c, int64_t now) {
  return c->phase != C_FREE && now >= c->grace_end;
}

/* Room for one more: a free place, or one that may be taken (past its grace). */
static int room(int64_t now) {
  for (int i = 0; i < MAX_CONNS; i++)
    if (conns[i].phase == C_FREE || past_grace(&conns[i], now)) return 1;
  return 0;
}

/* When the first place's grace ends: the port may accept again then. */
static int64_t first_grace_end(void) {
  int64_t t = INT64_MAX;
  for (int i = 0; i < MAX_CONNS; i++)
    if (conns[i].phase != C_FREE && conns[i].grace_end < t) t = conns[i].grace_end;
  return t;
}

/* How long ago the connection's handshake completed, by the kernel's clock, its wait in the queue
 * included: the time since the port last sent it data. The kernel starts that clock when the handshake
 * completes (tcp_create_openreq_child sets lsndtime) and moves it only when the port sends data, which
 * it has not before it accepts; what the peer sends cannot move it. (tcpi_last_data_recv, the time since
 * the peer's last byte, made a connection sending a byte every < GRACE_MS look new at every accept.) */
static int64_t kernel_age_ms(int fd) {
  struct tcp_info ti;
  socklen_t len = sizeof ti;
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) || len < offsetof(struct tcp_info, tcpi_last_ack_sent))
    return 0;
  return ti.tcpi_last_data_sent;
}

/* The place to take for a newcomer: one past its grace, still reading its request, from `src` if given,
 * else from the address holding the most such, the oldest of those; else (not for `src`) the oldest
 * answer in progress past its grace. Each candidate is read first: a request that arrived since the last
 * poll is answered, not closed. -1: none. The place returned may have been freed by that read. */
static int make_room(int64_t now, const unsigned char *src) {
  for (int tries = 0; tries <= MAX_CONNS; tries++) {
    int best = -1, best_count = 0, answering = -1;
    for (int i = 0; i < MAX_CONNS; i++) {
      struct conn *c = &conns[i];
      if (!past_grace(c, now)) continue;
      if (c->phase != C_READ) {
        if (!src && (answering < 0 || c->born < conns[answering].born)) answering = i;
        continue;
      }
      if (src && memcmp(c->src, src, 16)) continue;
      int count = 0;
      for (int k = 0; k < MAX_CONNS; k++)
        count += conns[k].phase == C_READ && !memcmp(conns[k].src, c->src, 16);
      if (best < 0 || count > best_count || (count == best_count && c->seq < conns[best].seq))
        best = i, best_count = count;
    }
    if (best < 0) return answering;
    conn_read(&conns[best]);
    if (conns[best].phase == C_WRITE) conn_write(&conns[best]);
    if (conns[best].phase == C_READ || conns[best].phase == C_FREE) return best;
  }
  return -1;
}

static struct conn incoming; /* a newcomer, read before it is given a place: it may never need one */

/* Gives the newcomer (`incoming`, not answered in full yet) a place, or closes it. An address past its
 * share (MAX_PER_SOURCE) makes room from its own connections past their grace; one within its grace is
 * never refused for its address (the node's may be shared: hostNetwork pods, traffic SNATed to it), so
 * an address holds more than its share only with connections in their first GRACE_MS. A connection
 * closed while its address holds more than its share counts as per-source, else as full. */
static void place(int64_t now) {
  struct conn *in = &incoming;
  int held = 0, free_slot = -1, v = -1;
  /* young: within GRACE_MS of its handshake. One that has sent part of a request may still take a place
   * then (a request longer than a segment, caught between two), but keeps no grace in it (past_grace). */
  int waiting = in->phase == C_READ, young = !waiting || now - in->born < GRACE_MS;
  for (int i = 0; i < MAX_CONNS; i++) {
    if (conns[i].phase == C_FREE) free_slot = free_slot < 0 ? i : free_slot;
    else held += !memcmp(conns[i].src, in->src, 16);
  }
  if (waiting && held >= MAX_PER_SOURCE) v = make_room(now, in->src);
  if (v < 0 && !young && (held >= MAX_PER_SOURCE || free_slot < 0)) /* it spent its grace in the queue */
    return refuse(in, held >= MAX_PER_SOURCE ? 0 : 1);
  if (v < 0) v = free_slot >= 0 ? free_slot : make_room(now, NULL);
  if (v < 0) return refuse(in, 1); /* never: the port accepts only with room */
  if (conns[v].phase != C_FREE) { /* per-source while its address holds more than its share, the newcomer counted */
    int its = !memcmp(conns[v].src, in->src, 16);
    for (int i = 0; i < MAX_CONNS; i++) its += conns[i].phase != C_FREE && !memcmp(conns[i].src, conns[v].src, 16);
    refuse(&conns[v], its > MAX_PER_SOURCE ? 0 : 1);
  }
  conns[v] = *in;
  in->phase = C_FREE, in->fd = -1, in->body = NULL;
}

static void accept_conns(void) {
  for (int round = 0; round < ACCEPT_BATCH; round++) {
    int64_t now = now_ms();
    if (!room(now)) return; /* the loop leaves the listener out until a grace ends */
    struct sockaddr_in6 peer;
    socklen_t pl = sizeof peer;
    int fd = accept4(listener, (struct sockaddr *)&peer, &pl, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
        accept_paused_until = now + ACCEPT_PAUSE_MS;
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return;
    }
    struct conn *c = &incoming;
    c->fd = fd, c->phase = C_READ, c->seq = ++conn_seq, c->len = 0, c->body = NULL, c->eof = c->head_only = 0;
    c->born = now - kernel_age_ms(fd);
    c->grace_end = c->born + GRACE_MS;
    c->deadline = c->born + FIRST_REQUEST_MS;
    memset(c->src, 0, 10), c->src[10] = c->src[11] = 0xff;
    if (peer.sin6_family == AF_INET6) memcpy(c->src, &peer.sin6_addr, 16);
    else memcpy(c->src + 12, &((struct sockaddr_in *)&peer)->sin_addr, 4);
    /* What it has sent already: a complete request is answered now, and closed if the answer went out
     * whole and nothing is left to read (closing then sends no reset): it never takes a place. */
    conn_read(c);
    if (c->phase == C_WRITE) conn_write(c);
    if (c->phase == C_LINGER) {
      ssize_t n = read(c->fd, sink, sizeof sink);
      if (n == 0 || (n < 0 && errno == EAGAIN)) conn_close(c);
    }
    if (c->phase != C_FREE) place(now);
  }
}

/* ---- the loop ---- */

int main(int argc, char **argv) {
  int sig[2];
  struct pollfd pfd[4 + MAX_CONNS];
  int slot[MAX_CONNS], nfds; /* only open connections are polled: nfds may not pass RLIMIT_NOFILE */
  if (argc < 3 || strcmp(argv[1], "--")) {
    say("usage: resident -- COMMAND [ARG...] (runs COMMAND for each refresh; see agent/native/resident.c)");
    return 2;
  }
  run_argv = argv + 2;
  const char *dl = getenv("AGENT_RUN_DEADLINE");
  if (dl && ((deadline_ms = parse_duration(dl)) < 1000 || deadline_ms > 3600000))
    config_error("AGENT_RUN_DEADLINE", dl, "is not a duration from 1s to 1h", "write it like 2m or 90s");
  open_listener();
  { /* the run's env: ours, with the handoff fds named (a number, never state) */
    extern char **environ;
    size_t n = 0, k = 0;
    while (environ[n]) n++;
    run_env = calloc(n + 2, sizeof *run_env);
    for (size_t i = 0; i < n; i++)
      if (strncmp(environ[i], "AGENT_HANDOFF_FDS=", 18)) run_env[k++] = environ[i];
    run_env[k] = "AGENT_HANDOFF_FDS=3,4";
  }
  /* No core dump, no ptrace or /proc/PID/mem by the app's uid (a shared process namespace): state is in here.
     In the image the resident and Node are execute-only (0511), which makes every process non-dumpable at
     execve already (its runs too: exec resets this flag); this keeps a copy run from a readable file closed. */
  prctl(PR_SET_DUMPABLE, 0);
  if (pipe2(sig, O_CLOEXEC | O_NONBLOCK)) return 1;
  sig_w = sig[1];
  struct sigaction sa = {.sa_handler = on_signal, .sa_flags = SA_RESTART | SA_NOCLDSTOP};
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, NULL), sigaction(SIGINT, &sa, NULL), sigaction(SIGCHLD, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);
  for (int i = 0; i < MAX_CONNS; i++) conns[i].fd = -1;
  next_at = now_ms();
  for (;;) {
    int64_t now = now_ms(), wake = now + 60000;
    if (run.pid && run.exited) finish_run();
    if (!run.pid && (stopping || exit_code >= 0)) exit(exit_code >= 0 ? exit_code : 0);
    if (!run.pid && now >= next_at) start_run();
    if (run.pid && !run.exited && !stopping && !run.timed_out && now >= run.term_at) {
      say("run %lu passed its deadline (%ld ms): SIGTERM, SIGKILL in %d ms", run_no, deadline_ms, KILL_GRACE_MS);
      kill(-run.pid, SIGTERM);
      run.timed_out = 1, run.kill_at = now + KILL_GRACE_MS;
    }
    if (run.pid && !run.exited && stopping && now >= stop_kill_at) kill(-run.pid, SIGKILL), exit(0);
    if (run.pid && !run.exited && run.timed_out && !run.killed && now >= run.kill_at)
      kill(-run.pid, SIGKILL), run.killed = 1; /* its SIGCHLD ends the wait; an unkillable run shows in /healthz */
    /* No liveness probe watches the port (a probe could be starved by other pods' connections): a run that
       even SIGKILL does not end stalls every refresh, so the resident ends itself and the kubelet restarts
       the container, which takes the run with it. */
    if (run.pid && !run.exited && run.killed && now >= run.kill_at + STALLED_MS) {
      say("run %lu is not gone %d ms after SIGKILL: exiting 1 so that the container restarts", run_no, STALLED_MS);
      exit(1);
    }
    /* wake at the nearest deadline */
#define SOONER(t) (wake = (t) < wake ? (t) : wake)
    if (!run.pid) SOONER(next_at);
    else if (!run.exited && stopping) SOONER(stop_kill_at);
    else if (!run.exited && !run.killed) SOONER(run.timed_out ? run.kill_at : run.term_at);
    else if (!run.exited) SOONER(run.kill_at + STALLED_MS);
    pfd[0] = (struct pollfd){sig[0], POLLIN, 0};
    pfd[2] = (struct pollfd){run.out_fd, POLLIN, 0};
    pfd[3] = (struct pollfd){run.in_fd, POLLOUT, 0};
    nfds = 4;
    for (int i = 0; i < MAX_CONNS; i++) {
      struct conn *c = &conns[i];
      if (c->phase != C_FREE && now >= c->deadline) c->phase == C_READ ? refuse(c, 2) : conn_close(c);
      if (c->phase == C_FREE) continue;
      SOONER(c->deadline);
      slot[nfds - 4] = i;
      pfd[nfds++] = (struct pollfd){c->fd, (short)((c->eof ? 0 : POLLIN) | (c->phase == C_WRITE ? POLLOUT : 0)), 0};
    }
    int accepting = now >= accept_paused_until && room(now); /* without room, the queue keeps them */
    pfd[1] = (struct pollfd){accepting ? listener : -1, POLLIN, 0};
    if (now < accept_paused_until) SOONER(accept_paused_until);
    else if (!accepting) SOONER(first_grace_end());
    if (poll(pfd, (nfds_t)nfds, (int)(wake > now ? wake - now : 0)) < 0) {
      if (errno != EINTR) poll(NULL, 0, ACCEPT_PAUSE_MS); /* ENOMEM: wait, do not spin */
      continue;
    }
    if (pfd[0].revents) {
      char got[16];
      ssize_t n = read(sig[0], got, sizeof got);
      for (ssize_t i = 0; i < n; i++)
        if ((got[i] == SIGTERM || got[i] == SIGINT) && !stopping) {
          stopping = 1, stop_kill_at = now_ms() + STOP_GRACE_MS;
          if (run.pid && !run.exited) kill(-run.pid, SIGTERM);
        }
      reap();
    }
    if (pfd[1].revents) accept_conns();
    if (pfd[2].revents) read_outcome();
    if (pfd[3].revents && run.in_fd >= 0) {
      ssize_t n = write(run.in_fd, state->data + run.in_sent, state->len - run.in_sent);
      if (n > 0) run.in_sent += (size_t)n;
      if ((n < 0 && errno != EAGAIN && errno != EINTR) || run.in_sent == state->len) close_fd(&run.in_fd);
    }
    for (int k = 4; k < nfds; k++) {
      struct conn *c = &conns[slot[k - 4]];
      if (c->phase == C_FREE || pfd[k].fd != c->fd || !pfd[k].revents) continue; /* closed, or reused */
      if (pfd[k].revents & (POLLIN | POLLHUP | POLLERR)) conn_read(c);
      if (c->phase == C_WRITE) conn_write(c); /* an answer is tried at once, not a poll later */
    }
  }
}
