/*
 * One-line messages on stderr, and quoting for them, the same in every native program: each defines
 * MESSAGE_PREFIX (its name, as a log reader looks for it) and QUOTE_MAX_CHARS, then includes this
 * once. What is quoted is never a secret (a name, a path, configuration); it is shown as printable
 * ASCII, the rest escaped as \xNN, cut after QUOTE_MAX_CHARS characters.
 */
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#if !defined(MESSAGE_PREFIX) || !defined(QUOTE_MAX_CHARS)
#error "define MESSAGE_PREFIX and QUOTE_MAX_CHARS before including messages.h"
#endif

__attribute__((format(printf, 1, 2))) static void say(const char *fmt, ...) {
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  dprintf(2, MESSAGE_PREFIX "%s\n", line);
}

/* Two buffers, so one message may quote two things. */
static const char *quoted(const char *s) {
  static char bufs[2][QUOTE_MAX_CHARS * 4 + 16];
  static int which;
  char *out = bufs[which ^= 1];
  size_t o = 0;
  out[o++] = '"';
  for (size_t i = 0; s[i]; i++) {
    unsigned char c = (unsigned char)s[i];
    if (i == QUOTE_MAX_CHARS) { o += (size_t)sprintf(out + o, "..."); break; }
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') out[o++] = (char)c;
    else o += (size_t)sprintf(out + o, "\\x%02x", c);
  }
  out[o++] = '"';
  out[o] = 0;
  return out;
}
