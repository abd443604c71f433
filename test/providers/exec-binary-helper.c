/*
 * An exec: helper as docs/exec-helpers.md allows it, a static binary, for
 * test/providers/exec-readable-helpers.test.ts: built with -DVALUE='"…"' -DSCRATCH='"/dir"'. It
 * appends to SCRATCH/ran-VALUE (so a test knows it ran, and how often), then prints VALUE. With the
 * argument "hold" it first waits for SCRATCH/go, at most 30 s (then exits 75), so a test can look
 * at its process while it runs.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
  char path[4096];
  snprintf(path, sizeof path, "%s/ran-%s", SCRATCH, VALUE);
  int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0666);
  if (fd >= 0) {
    ssize_t written = write(fd, "x", 1);
    (void)written;
    close(fd);
  }
  if (argc > 1 && strcmp(argv[1], "hold") == 0) {
    snprintf(path, sizeof path, "%s/go", SCRATCH);
    const struct timespec tick = {0, 10 * 1000 * 1000};
    for (int i = 0; access(path, F_OK) != 0; i++) {
      if (i >= 3000) return 75;
      nanosleep(&tick, NULL);
    }
  }
  fputs(VALUE, stdout);
  return 0;
}
