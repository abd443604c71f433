import { secretVar, type SecretFormat } from './secret-settings.ts';

/** What the webhook (or a person) specifies per secret; rendered to the env parseAgentConfig reads. */
export interface SecretEnvInput {
  readonly ref: string;
  readonly filename: string;
  readonly format?: SecretFormat;
  /** Octal text, e.g. "0440". */
  readonly mode?: string;
  /** Go duration, e.g. "1m". */
  readonly refreshInterval?: string;
  /** What templates call this secret (`{{secrets.NAME.key}}`). */
  readonly name?: string;
  /** FORMAT=template: the template text. */
  readonly template?: string;
}

/** Renders secrets as SECRET_<N>_* env, omitting settings left at their default. */
export function renderSecretEnv(secrets: readonly SecretEnvInput[]): { name: string; value: string }[] {
  const out: { name: string; value: string }[] = [];
  secrets.forEach((s, index) => {
    out.push({ name: secretVar(index, 'REF'), value: s.ref });
    out.push({ name: secretVar(index, 'FILENAME'), value: s.filename });
    if (s.format && s.format !== 'raw') out.push({ name: secretVar(index, 'FORMAT'), value: s.format });
    if (s.mode) out.push({ name: secretVar(index, 'MODE'), value: s.mode });
    if (s.refreshInterval) out.push({ name: secretVar(index, 'REFRESH_INTERVAL'), value: s.refreshInterval });
    if (s.name !== undefined) out.push({ name: secretVar(index, 'NAME'), value: s.name });
    if (s.template !== undefined) out.push({ name: secretVar(index, 'TEMPLATE'), value: s.template });
  });
  return out;
}
