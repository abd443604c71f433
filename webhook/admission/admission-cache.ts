import { hash } from 'node:crypto';
import type { InjectionDefaults } from '../config/injection-defaults.ts';
import {
  admitPod,
  decideAdmission,
  type AdmissionInput,
  type AdmissionResult,
  type DecisionLog,
} from './admit-pod.ts';
import { decodeAdmissionReview, isUid, reviewText, type AdmissionRequest } from './review.ts';

/** A decision whose answer is longer than this is not kept. */
export const MAX_CACHED_CHARS = 64 * 1024;

/**
 * What the cache holds in all, decisions and body shapes together, whatever ADMISSION_CACHE_SIZE says:
 * counted as the UTF-8 bytes of their text (never less than V8 holds) plus ITEM_OVERHEAD each. A
 * sixth of the heap the Deployment gives the webhook.
 */
export const MAX_CACHE_BYTES = 16 * 1024 * 1024;

/** What an item costs besides its text: the Map's slot, the objects around the strings. */
const ITEM_OVERHEAD = 256;

/** What every cached item carries: its cost, counted once when it is made. */
interface Sized {
  readonly bytes: number;
}

/** The `result` label of the cache's lookup counter. */
export type CacheLookup = 'hit' | 'miss';

/**
 * A decision as the cache keeps it: what an answer and its log line need, no more (the parsed
 * request and the patch as objects die young; what lives on is one string and the log fields).
 */
interface Entry extends Sized {
  readonly outcome: AdmissionResult['outcome'];
  /** The log line's fields, without the pod's name. */
  readonly log: DecisionLog;
  /** JSON.stringify of the answer's fields (all but the uid), made once. */
  readonly fieldsJson: string;
}

/** An admission as the server sends and logs it. */
export interface CachedAdmission {
  readonly outcome: AdmissionResult['outcome'];
  /** The decision's log fields, the pod's name first: names only, never a value. */
  readonly log: DecisionLog;
  /** The AdmissionReview answer, as JSON text: JSON.stringify(admitPod(…).review), byte for byte. */
  readonly text: string;
  /** Undefined when the cache was not asked (off, or not a Pod CREATE). */
  readonly lookup?: CacheLookup;
}

/** What the answer and the log line take from a request besides its uid. */
type Envelope = Pick<AdmissionRequest, 'apiVersion' | 'namespace' | 'dryRun' | 'podName'>;

export interface AdmittedBody extends CachedAdmission {
  readonly request: Envelope & Pick<AdmissionRequest, 'uid'>;
}

/** A request body cut at its first `"uid":"`: the text before, the uid's text, the text after. */
interface UidCut {
  readonly start: number;
  readonly end: number;
  readonly uid: string;
}

/** Bodies that differ in their uid's text alone: one shape, one decision. */
interface BodyShape extends Sized {
  readonly envelope: Envelope;
  readonly entryKey: string;
  readonly firstUid: string;
  /** Set once a body of the shape with another uid decoded to that uid (see admitBody). */
  verified: boolean;
}

const UID_FIELD = '"uid":"';

/**
 * Admission decisions, least recently used evicted first, keyed by a SHA-256 of exactly what decides
 * them: the webhook's InjectionDefaults, the request's namespace and the pod view (PodShape in
 * review.ts, which copies the fields admission reads and nothing else). The replicas of a workload
 * arrive with the same view (their names, uids and other labels are not in it), so a rollout of N pods
 * is parsed, checked and rendered once; each answer still carries its own request's uid.
 *
 * A decision is computed from the key's inputs alone (decideAdmission is given nothing else), so an
 * entry can only ever answer the input it was made for. Keys are hashes and entries hold what the
 * answer holds (names, references, the patch): none of it is logged.
 */
export class AdmissionCache {
  readonly #capacity: number;
  readonly #maxBytes: number;
  /** Maps keep insertion order: the first key is the least recently used. */
  readonly #entries = new Map<string, Entry>();
  readonly #shapes = new Map<string, BodyShape>();
  readonly #settings = new WeakMap<InjectionDefaults, string>();
  #bytes = 0;
  #unparsed = 0;

  /**
   * `capacity` decisions (and as many body shapes) at most (ADMISSION_CACHE_SIZE), `maxBytes` in all;
   * capacity 0 turns the cache off.
   */
  constructor(capacity: number, maxBytes = MAX_CACHE_BYTES) {
    this.#capacity = capacity;
    this.#maxBytes = maxBytes;
  }

  get size(): number {
    return this.#entries.size;
  }

  /** What the decisions and body shapes it holds count for, against MAX_CACHE_BYTES. */
  get bytes(): number {
    return this.#bytes;
  }

  /** Admissions answered from a body's shape, without decoding the body. */
  get unparsed(): number {
    return this.#unparsed;
  }

  /**
   * A request body's answer, as decodeAdmissionReview and admit would give it (BadReviewError
   * included); a body that differs from known ones in its uid alone is answered without parsing it.
   *
   * A body is cut at its first `"uid":"`. The first body of a shape (the text around the cut) is
   * decoded, and is kept only if its request.uid is the text at the cut. A second body of the shape,
   * with other text there, is decoded too and must give that text as its request.uid: then the cut is
   * request.uid's string (were request.uid read from anywhere else, it would not have changed), its
   * delimiters are real quotes (the one before follows `:`, the one after follows no backslash), and
   * any plain text there gives the same document but for request.uid. From then on a body of that
   * shape is answered from the shape's decision, under its own uid, without JSON.parse.
   */
  admitBody(body: string, defaults: InjectionDefaults): AdmittedBody {
    const cut = this.#capacity > 0 ? cutAtUid(body) : undefined;
    const shapeKey = cut && this.#shapeKey(body, cut, defaults);
    const shape = shapeKey === undefined ? undefined : this.#shapes.get(shapeKey);
    const entry = shape?.verified ? this.#entries.get(shape.entryKey) : undefined;
    if (shape && entry) {
      touch(this.#shapes, shapeKey!, shape);
      touch(this.#entries, shape.entryKey, entry);
      this.#unparsed++;
      const request = { ...shape.envelope, uid: cut!.uid };
      return { request, ...answer(request, entry), lookup: 'hit' };
    }
    const request = decodeAdmissionReview(body);
    const { entryKey, ...admitted } = this.#admit(request, defaults);
    if (shapeKey !== undefined && entryKey !== undefined && request.uid === cut!.uid)
      this.#learn(shapeKey, request, entryKey);
    return { request, ...admitted };
  }

  /** admitPod's answer: its outcome, log fields and JSON text. */
  admit(request: AdmissionRequest, defaults: InjectionDefaults): CachedAdmission {
    const { entryKey: _, ...admitted } = this.#admit(request, defaults);
    return admitted;
  }

  #admit(request: AdmissionRequest, defaults: InjectionDefaults): CachedAdmission & { entryKey?: string } {
    if (this.#capacity <= 0 || request.pod === undefined) {
      const { outcome, log, review } = admitPod(request, defaults);
      return { outcome, log, text: JSON.stringify(review) };
    }
    const input: AdmissionInput = { namespace: request.namespace, pod: request.pod };
    const key = this.#entryKey(input, defaults);
    let entry = this.#entries.get(key);
    let lookup: CacheLookup = 'hit';
    let kept = true;
    if (entry) touch(this.#entries, key, entry);
    else {
      lookup = 'miss';
      const { outcome, log, fields } = decideAdmission(input, defaults);
      const fieldsJson = JSON.stringify(fields);
      kept = fieldsJson.length <= MAX_CACHED_CHARS;
      const bytes = kept ? ITEM_OVERHEAD + textBytes(key, fieldsJson, JSON.stringify(log)) : 0;
      entry = { outcome, log, fieldsJson, bytes };
      // Answers share its log fields from now on: frozen, so no caller can change the next one's.
      if (kept) this.#keep(this.#entries, key, deepFreeze(entry));
    }
    return { ...answer(request, entry), lookup, ...(kept ? { entryKey: key } : {}) };
  }

  #learn(shapeKey: string, request: AdmissionRequest, entryKey: string): void {
    const envelope: Envelope = {
      apiVersion: request.apiVersion,
      namespace: request.namespace,
      dryRun: request.dryRun,
      ...(request.podName === undefined ? {} : { podName: request.podName }),
    };
    const shape = this.#shapes.get(shapeKey);
    if (
      shape !== undefined &&
      shape.entryKey === entryKey &&
      JSON.stringify(shape.envelope) === JSON.stringify(envelope)
    ) {
      if (request.uid !== shape.firstUid) shape.verified = true;
      touch(this.#shapes, shapeKey, shape);
      return;
    }
    const bytes = ITEM_OVERHEAD + textBytes(shapeKey, entryKey, request.uid, JSON.stringify(envelope));
    this.#keep(this.#shapes, shapeKey, { envelope, entryKey, firstUid: request.uid, verified: false, bytes });
  }

  /** Keeps `value` as the most recently used of `map`, then drops the least recently used past the bounds. */
  #keep<T extends Sized>(map: Map<string, T>, key: string, value: T): void {
    this.#drop(map, key);
    map.set(key, value);
    this.#bytes += value.bytes;
    while (map.size > this.#capacity) this.#drop(map, map.keys().next().value!);
    // Past the bytes, the map that grew gives way first, then the other one (never the new item).
    const other: Map<string, Sized> =
      (map as Map<string, Sized>) === this.#entries ? this.#shapes : this.#entries;
    while (this.#bytes > this.#maxBytes && map.size > 1) this.#drop(map, map.keys().next().value!);
    while (this.#bytes > this.#maxBytes && other.size > 0) this.#drop(other, other.keys().next().value!);
  }

  #drop(map: Map<string, Sized>, key: string): void {
    const old = map.get(key);
    if (old === undefined) return;
    map.delete(key);
    this.#bytes -= old.bytes;
  }

  #settingsOf(defaults: InjectionDefaults): string {
    let settings = this.#settings.get(defaults);
    if (settings === undefined)
      this.#settings.set(defaults, (settings = hash('sha256', JSON.stringify(defaults), 'base64')));
    return settings;
  }

  #entryKey(input: AdmissionInput, defaults: InjectionDefaults): string {
    // One JSON array: no two different inputs serialize to the same text.
    return hash('sha256', JSON.stringify([this.#settingsOf(defaults), input.namespace, input.pod]), 'base64');
  }

  #shapeKey(body: string, cut: UidCut, defaults: InjectionDefaults): string {
    // The settings' hash has a fixed length, and the cut's offset fixes where the text before it ends.
    const around = `${this.#settingsOf(defaults)}${cut.start}:${body.slice(0, cut.start)}${body.slice(cut.end)}`;
    return hash('sha256', around, 'base64');
  }
}

/** The entry as the answer to `request`: its uid and apiVersion, its pod's name in the log. */
function answer(
  request: Pick<AdmissionRequest, 'apiVersion' | 'uid' | 'podName'>,
  entry: Entry,
): Omit<CachedAdmission, 'lookup'> {
  return {
    outcome: entry.outcome,
    log: request.podName === undefined ? entry.log : { pod: request.podName, ...entry.log },
    text: reviewText(request, entry.fieldsJson),
  };
}

function cutAtUid(body: string): UidCut | undefined {
  const at = body.indexOf(UID_FIELD);
  if (at < 0) return undefined;
  const start = at + UID_FIELD.length;
  const end = body.indexOf('"', start);
  if (end < 0) return undefined;
  const uid = body.slice(start, end);
  return isUid(uid) && isPlain(uid) ? { start, end, uid } : undefined;
}

/** Text a JSON string holds as it is: no quote, no backslash (escape), no control character. */
function isPlain(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x20 || c === 0x22 || c === 0x5c) return false;
  }
  return true;
}

/** The UTF-8 bytes of `texts`: never fewer than V8 stores them in (one byte a character, or two). */
function textBytes(...texts: string[]): number {
  return texts.reduce((sum, text) => sum + Buffer.byteLength(text), 0);
}

/** Marks `key` most recently used. */
function touch<T>(map: Map<string, T>, key: string, value: T): void {
  map.delete(key);
  map.set(key, value);
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const member of Object.values(value)) deepFreeze(member);
  }
  return value;
}
