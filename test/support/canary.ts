import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';

/**
 * Every secret value a test stores in a backend contains this marker, so any output a test
 * captures (logs, stderr, errors, responses, metrics) can be scanned for leaks.
 */
export const CANARY_MARKER = 'CANARY7f3e';

/** A fresh secret value that is easy to spot if it leaks. */
export function canary(label = 'value'): string {
  return `${CANARY_MARKER}-${label}-${randomBytes(6).toString('hex')}`;
}

/**
 * Fails if `text` contains a canary value, also as base64, hex, or a list of byte values (the shape a
 * client library's debug log dumps a payload in).
 */
export function assertNoCanary(text: string, where: string): void {
  const bytes = Buffer.from(CANARY_MARKER);
  const needles = [
    CANARY_MARKER,
    bytes.toString('base64').slice(0, 12),
    bytes.toString('hex'),
    [...bytes].join(','),
    [...bytes].join(', '),
  ];
  for (const needle of needles) {
    assert.ok(!text.includes(needle), `a secret value leaked into ${where}: found ${JSON.stringify(needle)}`);
  }
}
