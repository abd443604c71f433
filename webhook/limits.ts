import { MAX_SETTING_BYTES, MAX_TEMPLATE_BYTES } from '../agent/contract/value-limits.ts';
import {
  ADMISSION_HEAP_PER_VALUE,
  MAX_ADMISSION_HEAP_BYTES,
  MAX_CACHE_BYTES,
  MAX_CACHED_CHARS,
} from './admission/admission-cache.ts';
import { ACCEPTED_ENV_LIMIT, MAX_SHOWN_PROBLEMS } from './admission/admit-pod.ts';
import {
  MAX_ANSWER_BYTES,
  MAX_CONTAINERS,
  MAX_PATCH_BYTES,
  MAX_REFUSAL_CHARS,
  MAX_WARNINGS_BYTES,
} from './admission/answer-limits.ts';
import {
  MAX_ANNOTATION_NAME,
  MAX_ANNOTATION_TOTAL_BYTES,
  MAX_ANNOTATIONS,
} from './admission/annotation-limits.ts';
import { MAX_JSON_DEPTH, MAX_JSON_VALUES } from './admission/json-limits.ts';
import { PREFIX } from './annotations/annotation.ts';
import { MAX_CPU_QUANTITY, MAX_MEMORY_QUANTITY, MAX_MOUNT_PATH_BYTES } from './annotations/values.ts';
import {
  ANSWER_PIECE_BYTES,
  BODY_BLOCK_MAX_BYTES,
  BODY_BLOCK_MIN_BYTES,
  MAX_BODY_BYTES,
  MAX_BODY_PIECES,
  MAX_LARGE_IN_FLIGHT_BYTES,
  MAX_LARGE_PER_SOURCE_BYTES,
  MAX_SLOT_BYTES,
  RETRY_AFTER_SECONDS,
  SHED_LINGER_MS,
  SLOT_BYTES,
} from './body-budget.ts';
import {
  ANSWER_DEADLINE_MS,
  CONNECTION_BYTES,
  CONNECTION_GRACE_MS,
  FIRST_REQUEST_MS,
  HEADERS_TIMEOUT_MS,
  KEEP_ALIVE_TIMEOUT_MS,
  NEWCOMER_LANE,
  MAX_CONNECTIONS,
  MAX_CONNECTIONS_PER_SOURCE,
  MAX_REQUESTS_PER_CONNECTION,
  SLOW_REQUEST_MS,
  REQUEST_TIMEOUT_MS,
} from './connection-limits.ts';
import { MEMORY_LIMIT_MIB, oldSpaceMiB, SEMI_SPACE_MIB } from './heap-limit.ts';

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

const MiB = 1024 * 1024;

/** The V8 heap the webhook starts with, MiB (measured with the bundle: 13 to 14 MiB committed). */
export const HEAP_AT_START_MIB = 14;

/** V8's whole heap under the Deployment's NODE_OPTIONS: old space and a young generation of 3 semi-spaces. */
export const HEAP_CAP_MIB = oldSpaceMiB(MEMORY_LIMIT_MIB) + 3 * SEMI_SPACE_MIB;

/**
 * The webhook's resident memory at worst, under any mix of what tenants can send and however many
 * send it at once: every term held at its limit at the same time. Bodies are parsed one at a time
 * (admission is synchronous), so what a parse builds is in V8's heap, whose cap NODE_OPTIONS sets:
 * objects, strings, the admission cache and garbage not yet collected alike. Outside it are what is
 * counted as it arrives (request and answer bytes), connections, and what is measured (with the bundle
 * and the Deployment's NODE_OPTIONS): Node itself, what V8 keeps beside its heap, and read buffers let go
 * but not yet freed. test/siege/webhook-connections.test.ts checks the first term and
 * test/siege/webhook-tenants.test.ts the sum under load. It stays under three quarters of the
 * Deployment's memory limit: the cgroup is charged for kernel socket buffers and page cache besides.
 */
export const WORST_CASE_MEMORY: readonly { readonly what: string; readonly mib: number }[] = [
  {
    what: `Node, started and warmed up (58 MiB of its binary and code once every path has run, 12 MiB private, ${HEAP_AT_START_MIB} MiB of V8 heap)`,
    mib: 58 + 12 + HEAP_AT_START_MIB,
  },
  {
    what: `V8’s heap past what it starts with, up to its cap (${oldSpaceMiB(MEMORY_LIMIT_MIB)} MiB old space + 3 × ${SEMI_SPACE_MIB} MiB young: NODE_OPTIONS)`,
    mib: HEAP_CAP_MIB - HEAP_AT_START_MIB,
  },
  {
    // Its string table grows with a body's new names and short strings, its parser's stacks with its
    // values: for 250,000, up to 6 MiB of table while it is copied to a larger one and 3 MiB of stacks
    // (measured with heaptrack).
    what: `what V8 keeps beside its heap to parse a body of ${MAX_JSON_VALUES.toLocaleString('en')} values`,
    mib: 8,
  },
  {
    what: `${MAX_CONNECTIONS} connections × ${size(CONNECTION_BYTES)}`,
    mib: (MAX_CONNECTIONS * CONNECTION_BYTES) / MiB,
  },
  { what: 'every request’s first bytes', mib: MAX_SLOT_BYTES / MiB },
  { what: 'bytes past them', mib: MAX_LARGE_IN_FLIGHT_BYTES / MiB },
  {
    // A body's chunks once it is parsed or shed, and the decoded TLS records of connections mid-request,
    // until V8's next collection frees them (measured: 3 to 10 MiB past the bytes counted in flight,
    // under 8 to 128 senders of 2 to 3 MB bodies), and the holes they and V8's freed pages leave in the
    // process's memory (the worst bodies one after another on a full admission cache peaked at 142 to
    // 167 MiB, with next to no connections or request bytes).
    what: 'read buffers let go until V8 frees them, and the holes left behind',
    mib: 24,
  },
];

/** WORST_CASE_MEMORY summed, MiB. */
export const WORST_CASE_MIB = WORST_CASE_MEMORY.reduce((sum, term) => sum + term.mib, 0);

export const WEBHOOK_LIMITS: readonly Limit[] = [
  {
    what: 'A request body',
    limit: size(MAX_BODY_BYTES),
    past: 'HTTP 413, before more is read',
    why: 'The API server sends no more (its own request limit).',
  },
  {
    what: 'The pieces a request body arrives in (TLS records, or chunks of its chunked encoding)',
    limit: MAX_BODY_PIECES.toLocaleString('en'),
    past: 'HTTP 413 naming the limit, before more is read; the connection closes',
    why: `Each piece is a buffer of its own, a few hundred bytes whatever its length: a body is copied as it arrives into blocks of ${size(BODY_BLOCK_MIN_BYTES)} to ${size(BODY_BLOCK_MAX_BYTES)}, counted whole below, and its pieces let go. The API server sends a 3 MiB body in about 300 records.`,
  },
  {
    what: 'Connections held at once',
    limit: String(MAX_CONNECTIONS),
    past: `one that has sent no request is closed for the newcomer: past its grace (${CONNECTION_GRACE_MS / 1000} s from its accept) first, from the address holding the most such, the oldest of those; then one whose request is still arriving ${SLOW_REQUEST_MS} ms after it began (pipelined: after its connection was last answered in full), from the address holding the most connections, the slowest of its own; else one within its grace read once already: from an address holding more than 8 such, the one holding the most, its oldest, else the oldest of all; else the longest idle between requests; when every one is answering a request that has arrived, the newcomer. None is closed before it has been read once, nor while it answers a request that has arrived whole`,
    why: `The API server keeps a few idle per replica and opens more only for calls in progress; probes and a scrape add a few. ${MAX_CONNECTIONS} × ${size(CONNECTION_BYTES)} at most.`,
  },
  {
    what: 'Of those, connections past their first request (idle between requests, a request still arriving, or an answer its reader has not taken)',
    limit: String(MAX_CONNECTIONS - NEWCOMER_LANE),
    past: `when the port is full, one of them is closed for the newcomer before any newcomer is: the one without progress the longest, whatever its address (idle since its last answer; an answer unread or a request still arriving since it began, however recently); never one whose whole request is being answered; so newcomers always have ${NEWCOMER_LANE} places`,
    why: 'The API server keeps at most 25 idle connections per replica. Who is the API server cannot be told from how its connections behave: a tenant’s keep-alive pool was kept as the API server’s would be, and the kubelet’s probes were closed mid-handshake.',
  },
  {
    what: 'Connections held at once from one address',
    limit: String(MAX_CONNECTIONS_PER_SOURCE),
    past: `every connection counted, that address’s oldest connection past its grace that has sent no request, else its longest idle between requests, else its slowest request still arriving ${SLOW_REQUEST_MS} ms after it began, is closed for the newcomer; a newcomer within its grace is never refused for its address (the node’s, whose kubelet probes, may be shared)`,
    why: 'One pod cannot take the rest. Behind Konnectivity all API server calls come from one or a few addresses: only its calls in progress count against this.',
  },
  {
    what: 'Requests on one connection',
    limit: MAX_REQUESTS_PER_CONNECTION.toLocaleString('en'),
    past: 'the last is answered with `Connection: close`; a request pipelined after it closes the connection unanswered',
    why: 'The API server opens another: one TLS handshake per thousand calls. A connection does not carry requests for ever.',
  },
  {
    what: 'From a connection’s TCP accept to its first request’s headers, TLS handshake included',
    limit: `${FIRST_REQUEST_MS / 1000} s`,
    past: 'the connection is closed',
    why: 'The API server sends its call as soon as TLS is up, and gives up after `timeoutSeconds` (5 s).',
  },
  {
    what: 'A later request’s headers; a whole request; from its headers until its answer is sent; an idle keep-alive connection',
    limit: `${HEADERS_TIMEOUT_MS / 1000} s; ${REQUEST_TIMEOUT_MS / 1000} s; ${ANSWER_DEADLINE_MS / 1000} s; ${KEEP_ALIVE_TIMEOUT_MS / 1000} s`,
    past: 'the connection is closed (HTTP 408 for a request still arriving)',
    why: `A slow sender, or a reader that never reads its answer, holds its bytes no longer than this. An answer goes out ${size(ANSWER_PIECE_BYTES)} at a time, each once the kernel took the one before, and is sent when the kernel has its last byte: TLS holds a piece of it at most.`,
  },
  {
    what: 'A request’s first bytes, its body’s then its answer’s',
    limit: `${size(SLOT_BYTES)}, from a pool of ${size(MAX_SLOT_BYTES)}: one for each connection held`,
    past: 'the rest are counted below',
    why: 'Bytes are counted as they arrive, never from a declared length. No one can use this pool up: an ordinary pod (2 to 20 KiB) and its answer always get in, whatever slow or large bodies hold.',
  },
  {
    what: 'Request and answer bytes past their request’s first ones, all in flight together',
    limit: `${size(MAX_LARGE_IN_FLIGHT_BYTES)}; ${size(MAX_LARGE_PER_SOURCE_BYTES)} from one address`,
    past: `HTTP 429 with \`Retry-After: ${RETRY_AFTER_SECONDS}\`; nothing more of the body is read, and its connection closes ${SHED_LINGER_MS / 1000} s after the answer. The API server retries within \`timeoutSeconds\``,
    why: 'Two of the largest bodies the API server sends. A body counts from its first byte until its answer takes its place (the blocks it is copied into, each whole), its answer until the kernel has taken it. Bodies past their first bytes are parsed one a turn of the event loop, and wait for theirs as these bytes.',
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
    why: 'A value costs up to 120 bytes of heap once parsed, and V8 keeps a string table and parser stacks beside its heap that grow with them: at 250,000 the worst body needed over 40 MiB of heap, at 150,000 under 32 MiB. `request.oldObject` is never parsed and its values are not counted.',
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
    what: 'Containers and init containers of a pod it injects',
    limit: String(MAX_CONTAINERS),
    past: 'the pod is refused, naming their number and the limit, before any annotation is parsed',
    why: 'Real pods have a handful; a service mesh adds a few. Each gets a volume mount and an env var in the patch: a 0.29 MB pod of 9,000 containers was a 27 MB answer.',
  },
  {
    what: 'The JSON Patch of an injection, before base64',
    limit: size(MAX_PATCH_BYTES),
    past: `the pod is refused, naming the patch’s size and what makes it large`,
    why: 'With base64, the warnings and the rest, the answer stays within its limit. The largest pod admitted otherwise renders 676 KB when its templates are plain text (the agent’s env twice: `init+sidecar` without native sidecars), 753 KB when they are JSON; only templates mostly of quotes, backslashes, newlines or control characters reach it.',
  },
  {
    what: 'An answer’s warnings, as JSON',
    limit: size(MAX_WARNINGS_BYTES),
    past: `the rest are counted in a last warning; the pod’s \`${PREFIX}warnings\` annotation holds them all`,
    why: 'The API server passes on at most 4,096 characters of warnings.',
  },
  {
    what: 'A refusal’s message',
    limit: `${MAX_REFUSAL_CHARS.toLocaleString('en')} characters`,
    past: 'cut, ending in `…`',
    why: 'The problems it shows are a few KiB; a pod’s own text (a container name, say) cannot make it longer.',
  },
  {
    what: 'An answer (the AdmissionReview it sends)',
    limit: size(MAX_ANSWER_BYTES),
    past: 'never reached: the container count, the patch, the warnings and the message are bounded',
    why: 'Whatever a request of up to 3 MiB holds; two such requests at once stay within the webhook’s memory.',
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
    why: `Whatever ADMISSION_CACHE_SIZE says: counted as V8 stores what it keeps (two bytes a character in text that holds any past Latin-1). A body being admitted takes room from it (${ADMISSION_HEAP_PER_VALUE} bytes a JSON value, 2 a character), so the two hold ${(MAX_ADMISSION_HEAP_BYTES / MiB).toFixed(1)} MiB at most together. Keys are SHA-256 digests.`,
  },
  {
    what: 'Agent env already checked by the agent’s parser',
    limit: `${ACCEPTED_ENV_LIMIT.toLocaleString('en')} SHA-256 digests`,
    past: 'the least recently used is dropped',
    why: 'A rollout’s replicas render the same env: it is parsed once.',
  },
  {
    what: 'The webhook’s resident memory, all of the above at once',
    limit: `${WORST_CASE_MIB} MiB at most`,
    past: 'the Deployment’s limit is 256Mi',
    why: `${WORST_CASE_MEMORY.map((t) => `${t.mib} MiB ${t.what}`).join(' + ')}.`,
  },
];
