import { writeSync } from 'node:fs';

/** For Atomics.wait: the sleep between retries of a write the pipe has no room for. */
const SLEEP = new Int32Array(new SharedArrayBuffer(4));
const RETRY_MS = 10;

/**
 * Where the webhook's log lines go: a file descriptor (stdout), the lines of one event-loop turn in
 * one write. A write of its own per admission, each waking the log reader, cost more CPU than
 * answering a cached admission; under load one turn ends several admissions. A line waits at most
 * until the end of its turn (setImmediate), and exit writes what is left ('exit' runs on
 * process.exit() and after an uncaught exception), so lines come out whole and in order, as the
 * agent's synchronous writes do.
 */
export class TurnWriter {
  readonly #fd: number;
  #pending = '';
  #scheduled = false;
  readonly #flush = () => this.flushSync();

  constructor(fd: number) {
    this.#fd = fd;
    process.on('exit', this.#flush);
  }

  /** pino's destination interface: one formatted line, newline included. */
  write(line: string): void {
    this.#pending += line;
    if (this.#scheduled) return;
    this.#scheduled = true;
    setImmediate(this.#flush);
  }

  /** Writes every pending line now. */
  flushSync(): void {
    this.#scheduled = false;
    if (this.#pending === '') return;
    let bytes = Buffer.from(this.#pending);
    this.#pending = '';
    while (bytes.length > 0) {
      try {
        bytes = bytes.subarray(writeSync(this.#fd, bytes));
      } catch (e) {
        // A non-blocking pipe that is full: wait for the reader, as a blocking write would.
        if ((e as NodeJS.ErrnoException).code === 'EAGAIN') Atomics.wait(SLEEP, 0, 0, RETRY_MS);
        // Nowhere to log to (the reader is gone): losing lines beats failing admissions over them.
        else return;
      }
    }
  }
}
