import { destination, pino, stdTimeFunctions, type DestinationStream, type Logger as PinoLogger } from 'pino';
import type { LogLevel } from './contract/agent-settings.ts';

export type Logger = PinoLogger;

/**
 * Field names that could carry a secret if a future call site got careless. Values never reach the
 * logger by design; redaction is the second line, and the canary tests check both.
 */
const REDACT = [
  'value',
  'bytes',
  'secret',
  'token',
  'password',
  'payload',
  '*.value',
  '*.bytes',
  '*.token',
  '*.password',
  'headers.authorization',
  'headers["x-vault-token"]',
];

/**
 * JSON lines on stdout, written synchronously so nothing is lost or reordered when the agent exits
 * right after (init mode; main() ends with process.exit). pino's default destination writes
 * asynchronously on libuv's threadpool: at exit it writes what is queued while the previous line is
 * still in flight, so the last lines came out of order, and a line whose write met a full pipe was
 * dropped (its retry timer never runs after exit). A sync write on a full pipe waits for the reader.
 */
export function createLogger(
  level: LogLevel,
  base: Record<string, string | undefined> = {},
  stream: DestinationStream = destination({ fd: 1, sync: true }),
): Logger {
  return pino(
    {
      level,
      base: Object.fromEntries(Object.entries(base).filter(([, v]) => v !== undefined)),
      timestamp: stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
      redact: { paths: REDACT, censor: '[redacted]' },
    },
    stream,
  );
}
