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
import type { AdmissionRequest } from './review.ts';

/** A decision whose answer is longer than this is not kept, so the cache holds at most size × 64 KiB. */
export const MAX_CACHED_CHARS = 64 * 1024;

/** The `result` label of the cache's lookup counter. */
export type CacheLookup = 'hit' | 'miss';

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
  readonly #entries = new Map<string, AdmissionDecision>();
  readonly #defaultsText = new WeakMap<InjectionDefaults, string>();

  /** `capacity` decisions at most (ADMISSION_CACHE_SIZE); 0 turns the cache off. */
  constructor(capacity: number) {
    this.#capacity = capacity;
  }

  get size(): number {
    return this.#entries.size;
  }

  /** admitPod's answer; `lookup` is undefined when the cache was not asked (off, or not a Pod CREATE). */
  admit(
    request: AdmissionRequest,
    defaults: InjectionDefaults,
  ): { readonly result: AdmissionResult; readonly lookup?: CacheLookup } {
    if (this.#capacity <= 0 || request.pod === undefined) return { result: admitPod(request, defaults) };
    const input: AdmissionInput = { namespace: request.namespace, pod: request.pod };
    const key = this.#key(input, defaults);
    const cached = this.#entries.get(key);
    if (cached) {
      this.#entries.delete(key);
      this.#entries.set(key, cached);
      return { result: answer(request, cached), lookup: 'hit' };
    }
    const decision = decideAdmission(input, defaults);
    if (answerChars(decision) <= MAX_CACHED_CHARS) {
      // Answers share it from now on: frozen, so no caller can change what the next replica gets.
      this.#entries.set(key, deepFreeze(decision));
      if (this.#entries.size > this.#capacity) this.#entries.delete(this.#entries.keys().next().value!);
    }
    return { result: answer(request, decision), lookup: 'miss' };
  }

  #key(input: AdmissionInput, defaults: InjectionDefaults): string {
    let settings = this.#defaultsText.get(defaults);
    if (settings === undefined) this.#defaultsText.set(defaults, (settings = JSON.stringify(defaults)));
    // One JSON array: no two different inputs serialize to the same text.
    return hash('sha256', JSON.stringify([settings, input.namespace, input.pod]), 'base64');
  }
}

/** About what an entry holds: its patch, refusal and warnings (the rest is small or a part of them). */
function answerChars(decision: AdmissionDecision): number {
  const { patch, status, warnings } = decision.fields;
  return (
    (patch?.length ?? 0) + (status?.message.length ?? 0) + (warnings ?? []).reduce((n, w) => n + w.length, 0)
  );
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const member of Object.values(value)) deepFreeze(member);
  }
  return value;
}
