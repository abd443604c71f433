import { quote, valueShape, type ConfigError } from '../../agent/contract/errors.ts';
import { REFERENCE_FORMS } from '../../agent/contract/reference.ts';
import { annotationFor, readAnnotationKey } from '../annotations/annotation-keys.ts';
import { PREFIX, type Echo } from '../annotations/annotation.ts';

/**
 * How a refusal shows annotation values: each annotation declares its `echo` (webhook/annotations/),
 * and this applies it to the messages of the errors that name it. Names, enums, durations, paths and
 * the like are shown as written; what could be a secret pasted by mistake is described by its shape.
 * A last pass keeps hidden values out of every other message too, whichever error quoted them.
 */

const QUOTED = /"(?:[^"\\]|\\.)*"/g;
/** Option names of the reference grammar (`?versionStage=`): our words, not the user's text. */
const GRAMMAR = REFERENCE_FORMS.map((f) => f.form).join(' ');
/** Shorter hidden values are not looked for in unquoted text: they would match ordinary words. */
const MIN_UNQUOTED = 8;

interface AnnotationValue {
  readonly key: string;
  readonly value: string;
  readonly echo: Echo;
}

/** A `url` value as a refusal shows it: method, scheme, host and port; the rest `…`. Undefined when no URL. */
export function urlEcho(text: string): string | undefined {
  const m = /^(?:([A-Za-z]{1,10}) +)?(\S+)$/.exec(text.trim());
  if (!m) return undefined;
  let url: URL;
  try {
    url = new URL(m[2]!);
  } catch {
    return undefined;
  }
  // arn:…, mailto:… and the like have no host: nothing in them is known to be safe to show.
  if (url.host === '') return undefined;
  const userinfo = url.username !== '' || url.password !== '' ? '…@' : '';
  const rest = (url.pathname !== '/' && url.pathname !== '') || url.search || url.hash ? '/…' : '';
  return quote(`${m[1] ? `${m[1]} ` : ''}${url.protocol}//${userinfo}${url.host}${rest}`);
}

/** The `secret-agent.io/` annotations of a pod with how each may be shown; unknown keys are hidden. */
function annotationValues(annotations: Readonly<Record<string, string>>): AnnotationValue[] {
  return Object.entries(annotations)
    .filter(([key]) => key.startsWith(PREFIX))
    .map(([key, value]) => ({ key, value, echo: annotationFor(key)?.echo ?? 'shape' }));
}

/**
 * Each error's message as a refusal may show it, given the pod's annotations. A pod may have hundreds
 * of annotations and as many errors: what is the same for every error is worked out once.
 */
export function redactMessages(
  errors: readonly ConfigError[],
  annotations: Readonly<Record<string, string>>,
): string[] {
  const values = annotationValues(annotations);
  const byKey = new Map(values.map((v) => [v.key, v]));
  const hidden = values.filter((v) => v.echo !== 'quote').map((v) => v.value);
  // Only values that are in some message at all are looked for in each.
  const text = errors.map((e) => e.message).join('\n');
  const inText = hidden.filter((h) => h.length >= MIN_UNQUOTED && text.includes(h));
  return errors.map((e) => redactMessage(e, byKey.get(e.field), hidden, inText));
}

/** `error.message` as a refusal may show it; `own` is the annotation it names, if any. */
function redactMessage(
  error: ConfigError,
  own: AnnotationValue | undefined,
  hidden: readonly string[],
  inText: readonly string[],
): string {
  // The file or variable name is part of the key, which every message shows anyway.
  const read = own && readAnnotationKey(own.key);
  const file = read?.kind === 'file' ? read.file : read?.kind === 'env' ? read.variable : undefined;
  const parts: string[] = [];
  let last = 0;
  for (const m of error.message.matchAll(QUOTED)) {
    parts.push(unquoted(error.message.slice(last, m.index), inText));
    parts.push(showQuoted(m[0], own, file, hidden));
    last = m.index + m[0].length;
  }
  parts.push(unquoted(error.message.slice(last), inText));
  return parts.join('');
}

function showQuoted(
  quoted: string,
  own: AnnotationValue | undefined,
  file: string | undefined,
  hidden: readonly string[],
): string {
  let text: string;
  try {
    text = JSON.parse(quoted) as string;
  } catch {
    return quoted;
  }
  const cut = text.endsWith('…');
  const core = cut ? text.slice(0, -1) : text;
  if (core === '') return quoted;
  if (own && own.value.includes(core)) {
    if (own.echo === 'quote' || core === file || isOptionName(core)) return quoted;
    const whole = core === own.value || (cut && own.value.startsWith(core));
    if (own.echo === 'url' && whole) return urlEcho(own.value) ?? valueShape(own.value);
    return valueShape(whole ? own.value : core);
  }
  return hidden.some((h) => leaks(core, h)) ? valueShape(core) : quoted;
}

/** Whether quoted text in another annotation's error gives away (a real piece of) a hidden value. */
function leaks(core: string, hidden: string): boolean {
  return (
    core === hidden ||
    (hidden.length >= 4 && core.includes(hidden)) ||
    (core.length >= MIN_UNQUOTED && hidden.includes(core))
  );
}

/** `text` with each of `hidden` (values of at least MIN_UNQUOTED characters) replaced by its shape. */
function unquoted(text: string, hidden: readonly string[]): string {
  let out = text;
  for (const h of hidden) out = out.split(h).join(valueShape(h));
  return out;
}

function isOptionName(text: string): boolean {
  return /^[A-Za-z]+$/.test(text) && (GRAMMAR.includes(`?${text}=`) || GRAMMAR.includes(`&${text}=`));
}

/** A redacted problem for the log, which shows no annotation value at all: quoted text becomes "…". */
export function forLog(message: string): string {
  return message.replace(QUOTED, '"…"');
}
