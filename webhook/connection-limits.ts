/**
 * How many connections the webhook holds and for how long. Any pod can reach its port unless a
 * NetworkPolicy says otherwise, and each connection costs memory whether or not it sends a request:
 * measured with the bundle and the Deployment's NODE_OPTIONS, 56 to 72 KiB of private memory for an
 * idle TLS connection after its handshake (the first few hundred cost the most: the heap and OpenSSL
 * grow for them and keep the room), 21 to 27 KiB for a TCP connection that never starts TLS
 * (test/siege/webhook-connections.test.ts measures it again).
 */

/**
 * Connections held at once. The API server keeps a keep-alive pool per replica (Go keeps up to 25 idle
 * per host) and opens more only while calls are in progress; kubelet probes and a Prometheus scrape
 * add a few. 256 is three times what a cluster of three API servers keeps idle, and 20 MiB at most.
 */
export const MAX_CONNECTIONS = 256;

/**
 * Connections held at once from one address. Behind Konnectivity every call of every API server comes
 * from one or a few proxy addresses: a source at its cap closes its longest idle connection between
 * keep-alive requests for its next (replaceIdle in agent/serve/connection-guard.ts), so for the API
 * server the cap binds only calls in progress. At 32, the bench's 1,000 admissions a second from one
 * address (64 keep-alive sockets) had a fifth of its calls refused whenever a pause let more than 32
 * pile up; 64 holds such a burst. It takes 4 sources, each holding 64, to fill MAX_CONNECTIONS, and
 * their request-less connections go first when it is full.
 */
export const MAX_CONNECTIONS_PER_SOURCE = 64;

/**
 * How long a connection may take from TCP accept to its first request's headers, TLS handshake
 * included. The API server sends its call as soon as TLS is up, and gives up on it after the
 * webhook's timeoutSeconds (5 s in deploy/base).
 */
export const FIRST_REQUEST_MS = 5_000;

/**
 * A connection's first moments, from its TCP accept: within them it is closed to make room only for a
 * cap of MAX_CONNECTIONS passed by newcomers (never before it has been read once), after those past
 * theirs. The API server's TLS handshake and call take a few milliseconds inside a cluster; a tenant's
 * connections that keep the port full, from however many addresses, go first once theirs have ended.
 */
export const CONNECTION_GRACE_MS = 1_000;

/**
 * Newcomers within their grace held beyond MAX_CONNECTIONS: none. Every connection the webhook holds
 * is counted in its memory bound (CONNECTION_BYTES each) and in the body budget's slots, so past
 * MAX_CONNECTIONS a newcomer within its grace makes room too (the oldest, from the address holding the
 * most without a request), but never one not read yet.
 */
export const MAX_CONNECTIONS_IN_GRACE = 0;

/**
 * Places newcomers always have (newcomerLane in agent/serve/connection-guard.ts): connections past
 * their first request, idle or with a request arriving, hold at most MAX_CONNECTIONS less these; past
 * that, one of them makes room for a newcomer (the one without progress the longest, whatever its
 * address: by the address holding the most, the API server's few were closed as it reused them)
 * before any newcomer goes. The API server keeps at most 25 idle per replica (its webhook client's transport), three
 * replicas 75, well inside the 192 left. Without a lane, a tenant's pool of keep-alive connections
 * that each sent one request, 255 from 5 addresses, was kept as the API server's pool would be, and a
 * newcomer every 2 ms left the kubelet 10 % of its probes (issue 37, an eighth review).
 */
export const NEWCOMER_LANE = 64;

/**
 * A request whose body is still arriving this long after it began (pipelined: after its connection
 * was last answered in full) is slow: at a cap its connection makes room like one that sent nothing,
 * from the address holding the most connections. The API server writes a call whole, headers and body
 * in a few TLS records, within milliseconds; 256 connections from one address dribbling bodies, each
 * pipelining its next request with its last byte, were never idle nor silent, and kept the API
 * server's and the kubelet's newcomers out (issue 37).
 */
export const SLOW_REQUEST_MS = 250;

/**
 * Requests one connection carries: the answer to the last says `Connection: close` (the API server
 * opens another, one TLS handshake per thousand calls), and a request pipelined past it closes the
 * connection unanswered.
 */
export const MAX_REQUESTS_PER_CONNECTION = 1000;

/** A later request's headers, on a keep-alive connection. */
export const HEADERS_TIMEOUT_MS = 5_000;

/** A request in full, headers and body: a 3 MiB body arrives in milliseconds inside a cluster. */
export const REQUEST_TIMEOUT_MS = 10_000;

/**
 * From a request's headers until its answer is sent: a client that does not read its answer holds
 * its bytes no longer than this. Past the API server's timeoutSeconds, an answer is read by no one.
 */
export const ANSWER_DEADLINE_MS = 15_000;

/** A keep-alive connection's wait for its next request (Go's transport keeps idle ones 90 s). */
export const KEEP_ALIVE_TIMEOUT_MS = 30_000;

/** What one connection is counted as in the webhook's worst case: the most measured, rounded up. */
export const CONNECTION_BYTES = 80 * 1024;
