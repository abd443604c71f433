import type { ConfigError } from '../../agent/contract/errors.ts';
import { PREFIX, type Annotation } from '../annotations/annotation.ts';
import { POD_ANNOTATIONS, type PodAnnotationName } from '../annotations/pod-annotations.ts';
import type { AgentSettingRequest } from '../injection-request.ts';
import { attempt, type PodValues } from './read-annotations.ts';

/**
 * The pod-wide annotations that are agent settings under another name (rotation, events, logging,
 * the sidecar's address…): each checked by the agent's own parser and passed through unchanged, in
 * declaration order. One that does not parse is left out, its error in `errors`.
 */
export function agentSettingRequests(values: PodValues, errors: ConfigError[]): AgentSettingRequest[] {
  const settings: AgentSettingRequest[] = [];
  for (const [name, a] of Object.entries(POD_ANNOTATIONS) as [PodAnnotationName, Annotation<unknown>][]) {
    const value = values.get(name);
    if (a.env === undefined || value === undefined) continue;
    if (attempt(() => a.parse(value, PREFIX + name), errors) !== undefined)
      settings.push({ env: a.env, value, annotation: PREFIX + name });
  }
  return settings;
}
