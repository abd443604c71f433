import type { AGENT_SETTINGS } from '../../agent/contract/agent-settings.ts';
import { ANNOTATION_PREFIX } from '../../agent/contract/product-annotations.ts';

/**
 * The webhook's public surface on pods, declared once as data: every annotation with its value
 * type, default, parser and one-line doc, pod-wide (pod-annotations.ts) and per file
 * (file-annotations.ts). Parsing, validation messages and the docs tables all come from these
 * declarations (docs/tables.ts renders them into docs/reference/webhook.md). The annotations
 * secret-agent writes itself are not settings: agent/contract/product-annotations.ts. This module:
 * what a declaration holds, and the prefix every key starts with.
 */

export const PREFIX = ANNOTATION_PREFIX;

/** The label the MutatingWebhookConfiguration's objectSelector matches (see deploy/base). */
export const OPT_IN_LABEL = `${PREFIX}inject`;

/**
 * How an error may show an annotation's value (webhook/admission/redact.ts applies it to refusals).
 * `quote`: names, enums, booleans, durations, modes, quantities, paths, container names: never a
 * secret, shown as written so the message is readable. `shape`: text that could be a secret pasted
 * by mistake (a reference, a command, free text): only its length. `url`: method, scheme, host and
 * port only; userinfo, path, query and fragment (where credentials and tokens live) become `…`.
 */
export type Echo = 'quote' | 'shape' | 'url';

export interface Annotation<T> {
  /** Type of the value, as the docs show it. */
  readonly type: string;
  /** How a refusal may show a bad value of this annotation. */
  readonly echo: Echo;
  /** The default as written in an annotation; undefined means unset unless the pod sets it. */
  readonly default: string | undefined;
  readonly doc: string;
  readonly parse: (text: string, field: string) => T;
  /** The agent env var the value is passed through to unchanged (after validation). */
  readonly env?: keyof typeof AGENT_SETTINGS;
}

/** One declaration, its parser's type inferred. */
export function annotation<T>(a: Annotation<T>): Annotation<T> {
  return a;
}
