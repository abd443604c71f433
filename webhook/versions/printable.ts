/** The longest field taken from a log or a pod: an agent's versions are far shorter (it cuts them at 128). */
const MAX_FIELD = 256;

// C0 and C1 controls, DEL, line and paragraph separators, bidirectional overrides and isolates.
// eslint-disable-next-line no-control-regex
const UNPRINTABLE = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

/**
 * A string from a log or a pod spec as this command prints it: whoever runs a container writes its
 * log (a pod may call itself injected and name a container secret-agent), and a terminal obeys escape
 * sequences, so control characters become `?` and the length is bounded.
 */
export function printable(v: unknown): string {
  if (typeof v !== 'string') return '';
  return v.slice(0, MAX_FIELD).replace(UNPRINTABLE, '?');
}
