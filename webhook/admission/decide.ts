import { ConfigError, quote } from '../../agent/contract/errors.ts';
import { STATUS_ANNOTATION, STATUS_INJECTED } from '../../agent/contract/product-annotations.ts';
import { OPT_IN_LABEL, PREFIX } from '../annotations/annotation.ts';
import { containerCountError } from './answer-limits.ts';
import type { AdmissionRequest } from './review.ts';
import type { PodShape } from '../pod-shape.ts';

/** Why a request is let through unchanged; also the `reason` label of the skip metric. */
export type SkipReason = 'not-a-pod-create' | 'own-namespace' | 'not-opted-in' | 'already-injected';

export type Decision =
  | { readonly action: 'skip'; readonly reason: SkipReason; readonly warnings?: readonly string[] }
  | { readonly action: 'deny'; readonly error: ConfigError }
  | { readonly action: 'inject'; readonly pod: PodShape };

/** Whether this request is ours to mutate, before any annotation beyond the opt-in is read. */
export function decide(request: Pick<AdmissionRequest, 'namespace' | 'pod'>, ownNamespace: string): Decision {
  const pod = request.pod;
  if (!pod) return { action: 'skip', reason: 'not-a-pod-create' };
  // The webhook must never be able to block its own pods, or a broken release could not be rolled back.
  if ((request.namespace || pod.metadata?.namespace) === ownNamespace)
    return { action: 'skip', reason: 'own-namespace' };
  const annotations = pod.metadata?.annotations ?? {};
  if (annotations[STATUS_ANNOTATION] === STATUS_INJECTED)
    return { action: 'skip', reason: 'already-injected' };
  const inject = annotations[`${PREFIX}inject`];
  if (inject === undefined || inject === 'false') {
    // The label sends the pod here; without the annotation the user half opted in and would
    // otherwise never learn why nothing happened.
    if (pod.metadata?.labels?.[OPT_IN_LABEL] !== 'true') return { action: 'skip', reason: 'not-opted-in' };
    const has =
      inject === undefined
        ? `not the annotation ${PREFIX}inject: "true"`
        : `the annotation ${PREFIX}inject: "false"`;
    return {
      action: 'skip',
      reason: 'not-opted-in',
      warnings: [
        `secret-agent: this pod has the label ${OPT_IN_LABEL}: "true" but ${has}, so nothing was injected. To inject the agent, set the annotation ${PREFIX}inject: "true"; otherwise remove the label (the webhook is called for every pod that carries it).`,
      ],
    };
  }
  if (inject !== 'true')
    return {
      action: 'deny',
      error: new ConfigError(
        `${PREFIX}inject`,
        `${quote(inject)} is not a boolean`,
        'set it to "true" (or "false" to opt out)',
      ),
    };
  // Counted before any annotation is parsed: the patch grows with each container (answer-limits.ts).
  const tooMany = containerCountError(pod);
  if (tooMany) return { action: 'deny', error: tooMany };
  return { action: 'inject', pod };
}
