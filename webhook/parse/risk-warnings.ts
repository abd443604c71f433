import { SECRET_SETTINGS } from '../../agent/contract/secret-settings.ts';
import { PREFIX } from '../annotations/annotation.ts';
import { attempt, type FileValues, type PodValues } from './read-annotations.ts';

/** A refresh interval under this is allowed, with a warning: every check is a call to the backend. */
const SHORT_REFRESH_MS = 30_000;

/** What is allowed but risky: told to the user as AdmissionReview warnings (kubectl prints them). */
export function riskWarnings(podValues: PodValues, fileValues: FileValues, sidecar: boolean): string[] {
  const modes: [string, string | undefined][] = [[`${PREFIX}file-mode`, podValues.get('file-mode')]];
  const intervals: [string, string | undefined][] = [
    [`${PREFIX}refresh-interval`, podValues.get('refresh-interval')],
  ];
  for (const [file, values] of [...fileValues].sort(([a], [b]) => a.localeCompare(b))) {
    modes.push([`${PREFIX}file-mode-${file}`, values.get('file-mode')]);
    intervals.push([`${PREFIX}refresh-interval-${file}`, values.get('refresh-interval')]);
  }
  const warnings: string[] = [];
  for (const [key, text] of modes) {
    const mode = text === undefined ? undefined : attempt(() => SECRET_SETTINGS.MODE.parse(text, key));
    if (mode !== undefined && (mode & 0o004) !== 0)
      warnings.push(
        `secret-agent: ${key} is ${text}: the file is readable by every user in the containers that mount the secrets, not only by the app's. Leave the mode unset: the webhook picks 0400 (the agent runs as the app's uid) or 0440 (shared through a group every such container holds).`,
      );
  }
  if (sidecar)
    for (const [key, text] of intervals) {
      const ms =
        text === undefined ? undefined : attempt(() => SECRET_SETTINGS.REFRESH_INTERVAL.parse(text, key));
      if (ms !== undefined && ms < SHORT_REFRESH_MS)
        warnings.push(
          `secret-agent: ${key} is ${text}: the sidecar asks the backend for each secret that often, which costs API calls and may hit rate limits. 30s or more is usually enough.`,
        );
    }
  return warnings;
}
