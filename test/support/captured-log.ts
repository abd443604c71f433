import { Writable } from 'node:stream';
import { pino, type Logger } from 'pino';

/** One JSON log line as pino writes it. */
export interface LogLine {
  /** A number from pino's defaults, the label from the programs' own logger (agent/log.ts). */
  readonly level: number | string;
  readonly msg: string;
  readonly [key: string]: unknown;
}

export interface CapturedLog {
  readonly log: Logger;
  /** Everything logged so far (since the last take). */
  text(): string;
  /** The same, parsed. */
  lines(): LogLine[];
  /** What was logged since the last take, which is then forgotten (long fuzz runs stay small). */
  take(): string;
}

/** A logger whose output stays in memory, for tests that check what was logged (and what never is). */
export function captureLog(level: pino.LevelWithSilent = 'debug'): CapturedLog {
  let text = '';
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      text += chunk.toString();
      done();
    },
  });
  return {
    log: pino({ level }, stream),
    text: () => text,
    lines: () =>
      text
        .split('\n')
        .filter((l) => l !== '')
        .map((l) => JSON.parse(l) as LogLine),
    take: () => {
      const since = text;
      text = '';
      return since;
    },
  };
}
