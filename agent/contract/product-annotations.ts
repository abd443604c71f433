/**
 * The annotations secret-agent writes itself, declared once for the agent and the webhook. What either
 * writes comes back through admission: the agent's restart-on-change annotates a workload's pod
 * template, so every pod of the rollout carries it, and the webhook's own mark stays on its pods. The
 * webhook admits each key declared here unchanged (webhook/admission/parse-annotations.ts): never read
 * as a setting, never quoted in a refusal. A `secret-agent.io/` key written anywhere in agent/ or
 * webhook/ that is neither a user annotation (webhook/annotations.ts) nor declared here fails
 * test/contract/product-annotations.test.ts. To add one: a constant and an entry in PRODUCT_ANNOTATIONS.
 */

/** The prefix of every annotation and label key of ours; webhook/annotations.ts's PREFIX. */
export const ANNOTATION_PREFIX = 'secret-agent.io/';

/** Written by the webhook on every pod it mutated; a pod carrying it is never mutated again. */
export const STATUS_ANNOTATION = `${ANNOTATION_PREFIX}status`;
export const STATUS_INJECTED = 'injected';

/**
 * Written by the webhook beside the status: the warnings it gave at admission, one per line. The API
 * server hands warnings to whoever created the pod, which for a Deployment's pods is a controller
 * that shows them nowhere; on the pod, `kubectl describe pod` shows them.
 */
export const WARNINGS_ANNOTATION = `${ANNOTATION_PREFIX}warnings`;

/** The pod-template annotation whose change makes the owner roll its pods (RESTART_ON_CHANGE). */
export const RESTARTED_FOR_ANNOTATION = `${ANNOTATION_PREFIX}restarted-for`;

export interface ProductAnnotation {
  readonly key: string;
  readonly writtenBy: 'agent' | 'webhook';
  /** The object it is written on, as the docs say it. */
  readonly on: string;
  readonly doc: string;
}

export const PRODUCT_ANNOTATIONS: readonly ProductAnnotation[] = [
  {
    key: STATUS_ANNOTATION,
    writtenBy: 'webhook',
    on: 'each pod it injects',
    doc: `\`${STATUS_INJECTED}\`: the webhook mutated this pod; a pod carrying it is left alone (reinvocation, re-admission).`,
  },
  {
    key: WARNINGS_ANNOTATION,
    writtenBy: 'webhook',
    on: 'each pod it injects with a warning',
    doc: 'The warnings the webhook gave when it injected the pod (a fallback it chose, such as files shared through a group; a risky setting), one per line. A controller’s pods never show admission warnings; `kubectl describe pod` shows this.',
  },
  {
    key: RESTARTED_FOR_ANNOTATION,
    writtenBy: 'agent',
    on: 'the pod template of the pod’s Deployment, StatefulSet or DaemonSet',
    doc: 'restart-on-change: a hash of the secrets’ new versions, as their backends name them (never of a value); its change makes the controller roll the pods, whose new pods carry it through admission.',
  },
];

const KEYS: ReadonlySet<string> = new Set(PRODUCT_ANNOTATIONS.map((a) => a.key));

/** Whether `key` is an annotation secret-agent writes itself (admitted unchanged). */
export function isProductAnnotation(key: string): boolean {
  return KEYS.has(key);
}
