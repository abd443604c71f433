import { MAX_SETTING_BYTES, MAX_TEMPLATE_BYTES } from '../agent/contract/value-limits.ts';
import { MAX_CACHE_BYTES, MAX_CACHED_CHARS } from './admission/admission-cache.ts';
import { ACCEPTED_ENV_LIMIT, MAX_SHOWN_PROBLEMS } from './admission/admit-pod.ts';
import {
  MAX_ANNOTATION_NAME,
  MAX_ANNOTATION_TOTAL_BYTES,
  MAX_ANNOTATIONS,
} from './admission/annotation-limits.ts';
import { MAX_JSON_DEPTH, MAX_JSON_VALUES } from './admission/json-limits.ts';
import { PREFIX } from './annotations/annotation.ts';
import { MAX_CPU_QUANTITY, MAX_MEMORY_QUANTITY, MAX_MOUNT_PATH_BYTES } from './annotations/values.ts';
import {
  LARGE_BODY_BYTES,
  MAX_BODY_BYTES,
  MAX_LARGE_IN_FLIGHT_BYTES,
  MAX_SMALL_IN_FLIGHT_BYTES,
  RETRY_AFTER_SECONDS,
} from './body-budget.ts';

/**
 * What one request, one pod and the caches may cost the webhook, declared once as data for the docs
 * (docs/tables.ts renders it into docs/webhook.md). Each value is the constant the code enforces.
 * Together they keep its memory within the heap the Deployment gives it, whatever a tenant's pods hold.
 */
export interface Limit {
  readonly what: string;
  readonly limit: string;
  /** What happens past it. */
  readonly past: string;
  readonly why: string;
}

function size(bytes: number): string {
  return bytes >= 1024 * 1024 ? `${bytes / (1024 * 1024)} MiB` : `${bytes / 1024} KiB`;
}

const REFUSED = 'the pod is refused, naming the annotation and the limit';

export const WEBHOOK_LIMITS: readonly Limit[] = [
  {
    what: 'A request body',
    limit: size(MAX_BODY_BYTES),
    past: 'HTTP 413, before more is read',
    why: 'The API server sends no more (its own request limit).',
  },
  {
    what: `Request bodies in flight, over ${size(LARGE_BODY_BYTES)} each`,
    limit: `${size(MAX_LARGE_IN_FLIGHT_BYTES)} together`,
    past: `HTTP 429 with \`Retry-After: ${RETRY_AFTER_SECONDS}\`, before the body is read; the API server retries within \`timeoutSeconds\``,
    why: 'Ordinary pods are a few KiB: a few large bodies cannot crowd them out. A body counts until its answer is sent.',
  },
  {
    what: 'Other request bodies in flight',
    limit: `${size(MAX_SMALL_IN_FLIGHT_BYTES)} together`,
    past: `HTTP 429 with \`Retry-After: ${RETRY_AFTER_SECONDS}\``,
    why: 'Over a thousand ordinary pods at once; what is parsed is parsed one at a time.',
  },
  {
    what: 'JSON nesting of a body',
    limit: `${MAX_JSON_DEPTH} levels`,
    past: 'HTTP 400, before it is parsed',
    why: 'A Pod nests about 15 levels deep; deeper text overflows the stack of any recursive walk.',
  },
  {
    what: 'JSON values in a body (`{`, `[` and `,`)',
    limit: MAX_JSON_VALUES.toLocaleString('en'),
    past: 'HTTP 400, before it is parsed',
    why: '3 MiB of empty objects or arrays would become 60 to 85 MiB of heap.',
  },
  {
    what: `\`${PREFIX}\` annotations on a pod`,
    limit: String(MAX_ANNOTATIONS),
    past: REFUSED,
    why: 'A pod with 100 files and 4 settings each has about 400.',
  },
  {
    what: `A name after \`${PREFIX}\``,
    limit: `${MAX_ANNOTATION_NAME} characters`,
    past: REFUSED,
    why: 'Kubernetes’ own limit, which it checks only after the webhook.',
  },
  {
    what: `A \`${PREFIX}template-<file>\` value (and the agent’s \`SECRET_<N>_TEMPLATE\`)`,
    limit: size(MAX_TEMPLATE_BYTES),
    past: `${REFUSED}; the agent exits 2 naming the variable`,
    why: 'Half of Linux’s 128 KiB for one env string (the agent gets it as env); its parser makes a token per character.',
  },
  {
    what: `Any other \`${PREFIX}\` value (and the agent setting it becomes)`,
    limit: size(MAX_SETTING_BYTES),
    past: `${REFUSED}; the agent exits 2 naming the variable`,
    why: 'Twice the longest reference, URL or command anyone writes (a reference is at most 2,048 characters).',
  },
  {
    what: `\`${PREFIX}mount-path\``,
    limit: `${MAX_MOUNT_PATH_BYTES} bytes`,
    past: REFUSED,
    why: 'Real mount paths are a few dozen bytes; every refusal or warning that quotes one stays small.',
  },
  {
    what: `\`${PREFIX}agent-memory-request\`, \`agent-memory-limit\`, \`volume-size-limit\` (and their cluster defaults)`,
    limit: MAX_MEMORY_QUANTITY,
    past: REFUSED,
    why: 'The agent works in about 30 MiB; past this a value is a typo, and the heap cap it renders (NODE_OPTIONS) must be one Node starts with.',
  },
  {
    what: `\`${PREFIX}agent-cpu-request\`, \`agent-cpu-limit\` (and AGENT_CPU_REQUEST)`,
    limit: `${MAX_CPU_QUANTITY} cores`,
    past: REFUSED,
    why: 'The agent uses under a millicore when idle and under a CPU-second to start.',
  },
  {
    what: `All \`${PREFIX}\` annotations of a pod, names and values`,
    limit: size(MAX_ANNOTATION_TOTAL_BYTES),
    past: `${REFUSED}, and the largest three`,
    why: 'Kubernetes’ own limit for all annotations together, which it checks only after the webhook.',
  },
  {
    what: 'Problems a refusal shows',
    limit: String(MAX_SHOWN_PROBLEMS),
    past: 'the rest are counted (`problemsNotShown` in the log)',
    why: 'Enough to fix in one pass; the answer and the log line stay a few KiB.',
  },
  {
    what: 'The admission cache (`ADMISSION_CACHE_SIZE`)',
    limit: `${size(MAX_CACHE_BYTES)} in all; an answer over ${size(MAX_CACHED_CHARS)} is not kept`,
    past: 'the least recently used decisions are dropped',
    why: 'Whatever ADMISSION_CACHE_SIZE says: counted as the UTF-8 bytes of what it keeps. Keys are SHA-256 digests.',
  },
  {
    what: 'Agent env already checked by the agent’s parser',
    limit: `${ACCEPTED_ENV_LIMIT.toLocaleString('en')} SHA-256 digests`,
    past: 'the least recently used is dropped',
    why: 'A rollout’s replicas render the same env: it is parsed once.',
  },
];
