/**
 * Bad input from a user: an env var, an annotation, a reference, a path.
 * It names the field, says what is wrong with the value's shape and how to fix it.
 * It never carries a secret value: callers pass only configuration text, quoted with `quote`.
 */
export class ConfigError extends Error {
  readonly field: string;
  readonly problem: string;
  readonly fix: string;

  constructor(field: string, problem: string, fix: string) {
    super(`${field}: ${problem}. Fix: ${fix}`);
    this.name = 'ConfigError';
    this.field = field;
    this.problem = problem;
    this.fix = fix;
  }
}

/** Every problem found in one pass, so a user fixes them all at once instead of one per deploy. */
export class ConfigErrors extends Error {
  readonly errors: readonly ConfigError[];

  constructor(errors: readonly ConfigError[]) {
    super(
      errors.length === 1
        ? errors[0]!.message
        : `${errors.length} configuration errors:\n${errors.map((e) => `  - ${e.message}`).join('\n')}`,
    );
    this.name = 'ConfigErrors';
    this.errors = errors;
  }
}

const MAX_QUOTED = 80;

/** Configuration text (never a secret) as it appears in an error: JSON-quoted and cut to a readable length. */
export function quote(text: string): string {
  const cut = text.length > MAX_QUOTED ? `${text.slice(0, MAX_QUOTED)}…` : text;
  return JSON.stringify(cut);
}

/**
 * Text that may be a secret pasted by mistake (anything that failed to parse as a reference), as an
 * error shows it: by its length, never its characters. The webhook words the values it hides the same.
 */
export function valueShape(text: string): string {
  return `(a value of ${text.length} characters)`;
}
