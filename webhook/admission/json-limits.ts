import { BadReviewError } from './bad-review-error.ts';

/**
 * What a request body may make JSON.parse build, checked on the text before it is parsed. Bytes alone
 * do not bound it: 3 MiB of `[[[…]]]` or `[{},{},…]` become 60 to 85 MiB of heap, and nesting that
 * deep overflows the stack of any recursive walk (JSON.stringify included).
 */

/** A Pod's deepest fields (managedFields, affinity terms) are about 15 levels down in an AdmissionReview. */
export const MAX_JSON_DEPTH = 100;

/**
 * Objects, arrays and the members and items in them, counted as `{`, `[` and `,`: a pod with 20
 * containers of 100 env vars each has about 10,000; this is what etcd's 1.5 MiB could hold of them.
 */
export const MAX_JSON_VALUES = 250_000;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACE = 0x7b;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACE = 0x7d;
const CLOSE_BRACKET = 0x5d;
const COMMA = 0x2c;

/**
 * Throws BadReviewError when `text` nests deeper than MAX_JSON_DEPTH or holds more than
 * MAX_JSON_VALUES values. One pass over the text that only counts: whether it is JSON at all is
 * JSON.parse's to say.
 */
export function checkJsonShape(text: string): void {
  let depth = 0;
  let values = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === BACKSLASH) i++;
      else if (c === QUOTE) inString = false;
      continue;
    }
    if (c === QUOTE) inString = true;
    else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      if (++depth > MAX_JSON_DEPTH)
        throw new BadReviewError(`the body nests deeper than ${MAX_JSON_DEPTH} levels, which no Pod does`);
      if (++values > MAX_JSON_VALUES) throw tooMany();
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) depth--;
    else if (c === COMMA && ++values > MAX_JSON_VALUES) throw tooMany();
  }
}

function tooMany(): BadReviewError {
  return new BadReviewError(`the body holds more than ${MAX_JSON_VALUES} JSON values, which no Pod does`);
}
