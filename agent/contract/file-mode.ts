import { ConfigError, quote, valueShape } from './errors.ts';

/** The bits a secret file may have: owner read and write, group and others read. */
const SAFE_MODE_BITS = 0o644;

/** `0640` as `rw-r-----`, so an error says what a mode means. */
function symbolicMode(mode: number): string {
  return [6, 3, 0]
    .map((shift) => (mode >> shift) & 7)
    .map((b) => `${b & 4 ? 'r' : '-'}${b & 2 ? 'w' : '-'}${b & 1 ? 'x' : '-'}`)
    .join('');
}

/**
 * An octal file mode for secret files, shared with the webhook's file-mode annotations. Only the
 * owner may write, nobody may execute, and the owner must read (the sidecar reads its set back to
 * take it over). The leading 0 is required: Kubernetes shows modes in decimal too (420 for 0644), so
 * a bare number is ambiguous, and guessing wrong would hand out the wrong permissions silently.
 */
export function parseFileMode(text: string, field: string): number {
  const m = /^(0o?)?([0-7]{3})$/.exec(text);
  if (!m) {
    // Text made of a mode's characters is a mistyped mode, quoted so the message reads well; anything
    // else may be a value pasted into the wrong field, and is only described.
    const shown = /^[0-9a-z-]{0,12}$/.test(text) ? quote(text) : valueShape(text);
    throw new ConfigError(
      field,
      `${shown} is not an octal mode`,
      'write a 0 and three octal digits, such as 0400 (owner only) or 0440 (owner and the pod’s fsGroup)',
    );
  }
  const digits = m[2]!;
  const mode = parseInt(digits, 8);
  const rwx = symbolicMode(mode);
  if (m[1] === undefined) {
    throw new ConfigError(
      field,
      `${quote(text)} has no leading 0, so it is not clearly an octal file mode`,
      `write 0${digits} for ${rwx} (modes are octal; 420 is how Kubernetes shows 0644 in decimal)`,
    );
  }
  if ((mode & ~SAFE_MODE_BITS) !== 0) {
    throw new ConfigError(
      field,
      `${quote(text)} (${rwx}) lets the group or others write the file, or anyone execute it`,
      'use at most 0644 (owner read and write, group and others read only), such as 0400, 0440 or 0640',
    );
  }
  if ((mode & 0o400) === 0) {
    throw new ConfigError(
      field,
      `${quote(text)} (${rwx}) does not let the owner read the file`,
      'give the owner the read bit, such as 0400 (owner only) or 0440 (owner and the pod’s fsGroup)',
    );
  }
  return mode;
}
