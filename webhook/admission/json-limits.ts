import { BadReviewError } from './bad-review-error.ts';

/**
 * What a request body may make JSON.parse build, checked on the text before it is parsed. Bytes alone
 * do not bound it: 3 MiB of `[[[…]]]` or `[{},{},…]` become 60 to 85 MiB of heap, and nesting that
 * deep overflows the stack of any recursive walk (JSON.stringify included). Each value costs up to 120
 * bytes of heap once parsed (measured: one-member objects whose names are all new, each a hidden class
 * of its own), and V8 keeps a string table and parser stacks beside its heap that grow with them.
 */

/** A Pod's deepest fields (managedFields, affinity terms) are about 15 levels down in an AdmissionReview. */
export const MAX_JSON_DEPTH = 100;

/**
 * Objects, arrays and the members and items in them, counted as `{`, `[` and `,` (those of
 * `request.oldObject`, never parsed, aside): a pod with 20 containers of 100 env vars each has about
 * 10,000. At 250,000 the worst body (3 MiB of one-member objects whose names are all new) needed over
 * 40 MiB of heap, and such bodies one after another on a full admission cache took the webhook to 156
 * to 185 MiB resident; at 150,000 they are admitted in 32 MiB of heap, at 143 to 158 MiB
 * (test/siege/webhook-tenants.test.ts).
 */
export const MAX_JSON_VALUES = 150_000;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACE = 0x7b;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACE = 0x7d;
const CLOSE_BRACKET = 0x5d;
const COMMA = 0x2c;
const COLON = 0x3a;

/** What the shape check found: how much JSON.parse will build, and text the webhook never reads. */
export interface JsonShape {
  /** The values JSON.parse will make (`{`, `[` and `,` outside `request.oldObject`). */
  readonly values: number;
  /**
   * Where each `request.oldObject` value of an AdmissionReview is, [start, end): admission reads
   * `request.object` alone, and an UPDATE's `oldObject` is as large (the API server sends up to 3 MiB
   * together), so it is never made into objects.
   */
  readonly unread: readonly (readonly [number, number])[];
}

/**
 * Throws BadReviewError when `text` nests deeper than MAX_JSON_DEPTH or holds more than
 * MAX_JSON_VALUES values outside `request.oldObject`. One pass over the text that only counts, and
 * notes where the root object's `request` member's `oldObject` members are (every one: JSON.parse keeps
 * the last of a name). Whether it is JSON at all is JSON.parse's to say.
 */
export function checkJsonShape(text: string): JsonShape {
  const unread: [number, number][] = [];
  /** Whether each open container is an object, outermost first. */
  const objects: boolean[] = [];
  let values = 0;
  let inString = false;
  /** In a string that names a member: where the name starts; -1 in any other string. */
  let nameStart = -1;
  let escaped = false;
  /** In an object, the next string names a member. */
  let nameNext = false;
  /** The name of the member being read in the root object, and in its `request` object. */
  let rootMember = '';
  let requestMember = '';
  /** The object being read at depth 2 is the root's `request`. */
  let inRequest = false;
  /** Where the value of the `request.oldObject` being read starts, or -1. */
  let unreadStart = -1;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === BACKSLASH) {
        escaped = true;
        i++;
      } else if (c === QUOTE) {
        inString = false;
        if (nameStart >= 0 && objects.length === 1) rootMember = memberName(text, nameStart, i, escaped);
        else if (nameStart >= 0 && objects.length === 2 && inRequest)
          requestMember = memberName(text, nameStart, i, escaped);
      }
      continue;
    }
    if (c === QUOTE) {
      inString = true;
      escaped = false;
      nameStart = nameNext ? i + 1 : -1;
      nameNext = false;
    } else if (c === COLON) {
      if (inRequest && objects.length === 2 && requestMember === 'oldObject') unreadStart = i + 1;
    } else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      if (c === OPEN_BRACE && objects.length === 1 && objects[0] === true && rootMember === 'request')
        inRequest = true;
      objects.push(c === OPEN_BRACE);
      nameNext = c === OPEN_BRACE;
      if (objects.length > MAX_JSON_DEPTH)
        throw new BadReviewError(`the body nests deeper than ${MAX_JSON_DEPTH} levels, which no Pod does`);
      if (unreadStart < 0 && ++values > MAX_JSON_VALUES) throw tooMany();
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
      if (objects.length === 2 && inRequest) {
        if (unreadStart >= 0) unread.push([unreadStart, i]);
        unreadStart = -1;
        inRequest = false;
        requestMember = '';
      }
      objects.pop();
      nameNext = false;
    } else if (c === COMMA) {
      if (objects.length === 2 && inRequest && unreadStart >= 0) {
        unread.push([unreadStart, i]);
        unreadStart = -1;
      }
      nameNext = objects.at(-1) === true;
      if ((unreadStart < 0 || objects.length === 2) && ++values > MAX_JSON_VALUES) throw tooMany();
    }
  }
  return { values, unread };
}

/** A member's name as JSON.parse reads it: decoded only when it holds an escape. */
function memberName(text: string, start: number, end: number, escaped: boolean): string {
  const raw = text.slice(start, end);
  if (!escaped) return raw;
  try {
    return JSON.parse(`"${raw}"`) as string;
  } catch {
    return raw;
  }
}

/** `text` with each of `ranges` (in order, apart) written as `null`. */
export function withNull(text: string, ranges: readonly (readonly [number, number])[]): string {
  if (ranges.length === 0) return text;
  const parts: string[] = [];
  let at = 0;
  for (const [start, end] of ranges) {
    parts.push(text.slice(at, start), 'null');
    at = end;
  }
  parts.push(text.slice(at));
  return parts.join('');
}

function tooMany(): BadReviewError {
  return new BadReviewError(`the body holds more than ${MAX_JSON_VALUES} JSON values, which no Pod does`);
}
