import { hash } from 'node:crypto';
import type { InjectionDefaults } from '../config.ts';
import {
  admitPod,
  answer,
  decideAdmission,
  type AdmissionDecision,
  type AdmissionInput,
  type AdmissionResult,
} from './admit-pod.ts';
import { reviewText, type AdmissionRequest } from './review.ts';

/** A decision whose answer is longer than this is not kept, so the cache holds about size × 64 KiB at most. */
export const MAX_CACHED_CHARS = 64 * 1024;

/** The `result` label of the cache's lookup counter. */
export type CacheLookup = 'hit' | 'miss';

interface Entry {
  readonly decision: AdmissionDecision;
  /** JSON.stringify(decision.fields), made once. */
  readonly fieldsJson: string;
}

export interface CachedAdmission {
  readonly result: AdmissionResult;
  /** result.review as JSON text, to send. */
  readonly text: string;
  /** Undefined when the cache was not asked (off, or not a Pod CREATE). */
  readonly lookup?: CacheLookup;
}

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
  /** Map keeps insertion order: the first key is the least recently used. */
  readonly #entries = new Map<string, Entry>();
  readonly #defaultsText = new WeakMap<InjectionDefaults, string>();

  /** `capacity` decisions at most (ADMISSION_CACHE_SIZE); 0 turns the cache off. */
  constructor(capacity: number) {
    this.#capacity = capacity;
  }

  get size(): number {
    return this.#entries.size;
  }

  /** admitPod's answer, and its JSON text. */
  admit(request: AdmissionRequest, defaults: InjectionDefaults): CachedAdmission {
    if (this.#capacity <= 0 || request.pod === undefined) {
      const result = admitPod(request, defaults);
      return { result, text: JSON.stringify(result.review) };
    }
    const input: AdmissionInput = { namespace: request.namespace, pod: request.pod };
    const key = this.#key(input, defaults);
    let entry = this.#entries.get(key);
    let lookup: CacheLookup = 'hit';
    if (entry) {
      this.#entries.delete(key);
      this.#entries.set(key, entry);
    } else {
      lookup = 'miss';
      const decision = decideAdmission(input, defaults);
      entry = { decision, fieldsJson: JSON.stringify(decision.fields) };
      if (entry.fieldsJson.length <= MAX_CACHED_CHARS) {
        // Answers share it from now on: frozen, so no caller can change what the next replica gets.
        this.#entries.set(key, deepFreeze(entry));
        if (this.#entries.size > this.#capacity) this.#entries.delete(this.#entries.keys().next().value!);
      }
    }
    return {
      result: answer(request, entry.decision),
      text: reviewText(request, entry.fieldsJson),
      lookup,
    };
  }

  #key(input: AdmissionInput, defaults: InjectionDefaults): string {
    let settings = this.#defaultsText.get(defaults);
    if (settings === undefined) this.#defaultsText.set(defaults, (settings = JSON.stringify(defaults)));
    // One JSON array: no two different inputs serialize to the same text.
    return hash('sha256', JSON.stringify([settings, input.namespace, input.pod]), 'base64');
  }
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const member of Object.values(value)) deepFreeze(member);
  }
  return value;
}
