import { pino, stdTimeFunctions, type Logger as PinoLogger } from 'pino';
import type { LogLevel } from './contract/env.ts';

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

/** JSON lines on stdout, synchronous so nothing is lost when init mode exits right after. */
export function createLogger(level: LogLevel, base: Record<string, string | undefined> = {}): Logger {
  return pino({
    level,
    base: Object.fromEntries(Object.entries(base).filter(([, v]) => v !== undefined)),
    timestamp: stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
    redact: { paths: REDACT, censor: '[redacted]' },
  });
}
