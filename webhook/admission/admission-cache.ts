import { createHash } from 'node:crypto';
import type { InjectionDefaults } from '../config/injection-defaults.ts';
import {
  admitPod,
  decideAdmission,
  type AdmissionInput,
  type AdmissionResult,
  type DecisionLog,
} from './admit-pod.ts';
import { MAX_BODY_BYTES } from '../body-budget.ts';
import { checkJsonShape, MAX_JSON_VALUES } from './json-limits.ts';
import { decodeAdmissionReview, isUid, reviewText, type AdmissionRequest } from './review.ts';

/** A decision whose answer is longer than this is not kept. */
export const MAX_CACHED_CHARS = 64 * 1024;

/**
 * What the cache holds in all, decisions and body shapes together, whatever ADMISSION_CACHE_SIZE says:
 * counted as V8 stores their text (a byte a character, two in a string that holds any character past
 * Latin-1: one `’` in a warning doubles an answer) plus ITEM_OVERHEAD each.
 */
export const MAX_CACHE_BYTES = 16 * 1024 * 1024;

/**
 * The heap admitting one body may take at once, at most, for each JSON value it holds and each of its
 * characters: JSON.parse's objects, the pod view, its key and the answer. Measured with the worst
 * shapes the JSON limits let through: one-member objects whose names are all new (a hidden class
 * each) allocate 120 bytes a value in all, garbage included; text of two-byte characters, 2 a character.
 */
export const ADMISSION_HEAP_PER_VALUE = 128;
export const ADMISSION_HEAP_PER_CHAR = 2;

/** What admitting a body of `values` JSON values and `chars` characters may take of the heap, at most. */
export function admissionHeapBytes(values: number, chars: number): number {
  return ADMISSION_HEAP_PER_VALUE * values + ADMISSION_HEAP_PER_CHAR * chars;
}

/**
 * What the cache's decisions and the body being admitted hold on the heap together: before a body is
 * parsed, the least recently used decisions make room for what it may take (admissionHeapBytes). An
 * ordinary pod takes nothing from a full cache; a body at the JSON limits empties it.
 */
export const MAX_ADMISSION_HEAP_BYTES = admissionHeapBytes(MAX_JSON_VALUES, MAX_BODY_BYTES);

/** What an item costs besides its text: the Map's slot, the objects around the strings. */
const ITEM_OVERHEAD = 512;

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
    // Here, where a body is parsed, not before the shapes: a replica's body, answered by its text
    // alone, is never parsed, and its shape is one already checked.
    const json = checkJsonShape(body);
    this.#makeRoom(admissionHeapBytes(json.values, body.length));
    const request = decodeAdmissionReview(body, json);
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
      // The log's objects and lists take about three times their JSON (measured).
      const bytes = kept
        ? ITEM_OVERHEAD + textBytes(key, fieldsJson) + 3 * textBytes(JSON.stringify(log))
        : 0;
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

  /** Drops the least recently used, body shapes first, until `bytes` more fit MAX_ADMISSION_HEAP_BYTES. */
  #makeRoom(bytes: number): void {
    const room = MAX_ADMISSION_HEAP_BYTES - bytes;
    for (const map of [this.#shapes, this.#entries] as Map<string, Sized>[])
      while (this.#bytes > room && map.size > 0) this.#drop(map, map.keys().next().value!);
  }

  #drop(map: Map<string, Sized>, key: string): void {
    const old = map.get(key);
    if (old === undefined) return;
    map.delete(key);
    this.#bytes -= old.bytes;
  }

  #settingsOf(defaults: InjectionDefaults): string {
    let settings = this.#settings.get(defaults);
    if (settings === undefined) this.#settings.set(defaults, (settings = sha256(JSON.stringify(defaults))));
    return settings;
  }

  #entryKey(input: AdmissionInput, defaults: InjectionDefaults): string {
    // One JSON array: no two different inputs serialize to the same text.
    return sha256(JSON.stringify([this.#settingsOf(defaults), input.namespace, input.pod]));
  }

  #shapeKey(body: string, cut: UidCut, defaults: InjectionDefaults): string {
    // The settings' hash has a fixed length, and the cut's offset fixes where the text before it ends.
    return sha256(
      `${this.#settingsOf(defaults)}${cut.start}:`,
      body.slice(0, cut.start),
      body.slice(cut.end),
    );
  }
}

/** Text hashed in one piece at most. */
const HASHED_PIECE = 64 * 1024;

/**
 * The base64 SHA-256 of the UTF-8 of `texts` joined, as hash() gives it: fed 64 KiB at a time (never a
 * surrogate pair split), so a 3 MiB body is neither joined on the heap nor encoded in one malloc'd copy.
 */
function sha256(...texts: string[]): string {
  const digest = createHash('sha256');
  for (const text of texts)
    for (let at = 0; at < text.length;) {
      let end = Math.min(at + HASHED_PIECE, text.length);
      // A pair's low surrogate goes with its high one: each alone would be hashed as U+FFFD.
      if ((text.charCodeAt(end - 1) & 0xfc00) === 0xd800 && (text.charCodeAt(end) & 0xfc00) === 0xdc00) end++;
      digest.update(text.slice(at, end));
      at = end;
    }
  return digest.digest('base64');
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

/**
 * The bytes V8 stores `texts` in: one a character, or two in a string that holds any character past
 * Latin-1 (its UTF-8 can be half that); 16 more for each string's header.
 */
function textBytes(...texts: string[]): number {
  return texts.reduce((sum, text) => sum + 16 + text.length * (isOneByte(text) ? 1 : 2), 0);
}

function isOneByte(text: string): boolean {
  for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) > 0xff) return false;
  return true;
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
