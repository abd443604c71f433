import { createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { StringDecoder } from 'node:string_decoder';
import { setImmediate } from 'node:timers/promises';
import type { SecureContextOptions } from 'node:tls';
import type { Logger } from '../agent/log.ts';
import { ConnectionGuard } from '../agent/serve/connection-guard.ts';
import { RenderedMetrics } from '../agent/serve/rendered-metrics.ts';
import type { AdmissionCache } from './admission/admission-cache.ts';
import { BadReviewError } from './admission/bad-review-error.ts';
import {
  ANSWER_PIECE_BYTES,
  BODY_BLOCK_MAX_BYTES,
  BODY_BLOCK_MIN_BYTES,
  BodyBudget,
  MAX_BODY_BYTES,
  MAX_BODY_PIECES,
  RETRY_AFTER_SECONDS,
  SHED_LINGER_MS,
  SLOT_BYTES,
  type HeldBytes,
} from './body-budget.ts';
import type { InjectionDefaults } from './config/injection-defaults.ts';
import {
  ANSWER_DEADLINE_MS,
  CONNECTION_GRACE_MS,
  FIRST_REQUEST_MS,
  HEADERS_TIMEOUT_MS,
  KEEP_ALIVE_TIMEOUT_MS,
  MAX_CONNECTIONS,
  MAX_CONNECTIONS_IN_GRACE,
  MAX_CONNECTIONS_PER_SOURCE,
  NEWCOMER_LANE,
  MAX_REQUESTS_PER_CONNECTION,
  REQUEST_TIMEOUT_MS,
  SLOW_REQUEST_MS,
} from './connection-limits.ts';
import type { RequestOutcome, WebhookMetrics } from './metrics.ts';
import { RefusalLog } from './refusal-log.ts';

export interface WebhookServerOptions {
  readonly tls: SecureContextOptions;
  readonly defaults: InjectionDefaults;
  /** Decisions by pod view; one per server, for the life of its defaults. */
  readonly cache: AdmissionCache;
  readonly metrics: WebhookMetrics;
  readonly log: Logger;
  /** /readyz answers 200 only when this is true (e.g. the caBundle is patched in self-managed mode). */
  readonly isReady?: () => boolean;
}

const DECISION_MESSAGES = {
  injected: 'pod injected',
  skipped: 'pod skipped',
  denied: 'pod refused',
} as const;

/** A request whose client closed its connection before the body was all sent. */
class ClientGone extends Error {}

class HttpError extends Error {
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

const SHED_MESSAGE = `the webhook holds as many request bodies as it may; retry in ${RETRY_AFTER_SECONDS} s`;

/**
 * The HTTPS server: POST /mutate, GET /healthz, /readyz, /metrics. Certificates are swapped with
 * server.setSecureContext(), which affects new connections only, so in-flight requests finish.
 * What connections it holds and for how long is bounded (webhook/connection-limits.ts), and so are
 * the bytes of requests and answers in flight (webhook/body-budget.ts): see docs/webhook.md#limits.
 */
export function createWebhookServer(options: WebhookServerOptions): Server {
  const { metrics, log } = options;
  const budget = new BodyBudget();
  const largeBodies = turns();
  // One rendering at a time, its text served again briefly: requests pipelined on a kept-alive
  // connection each rendered their own, and 8 connections of 1,000 ran the heap out (issue 37).
  const metricsText = new RenderedMetrics(options.metrics.registry);
  const server = createServer(
    {
      ...options.tls,
      minVersion: 'TLSv1.2',
      // A handshake that never finishes; the guard's first-request deadline closes it too.
      handshakeTimeout: FIRST_REQUEST_MS,
      headersTimeout: HEADERS_TIMEOUT_MS,
      requestTimeout: REQUEST_TIMEOUT_MS,
      keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS,
      // How often the two timeouts above are checked: Node's 30 s default would let them run 4 times over.
      connectionsCheckingInterval: 1_000,
    },
    (req, res) => {
      // A client that does not read its answer holds it no longer than this: the answer is done
      // ('close' after 'finish') only once the kernel has taken its last piece (sendJson).
      const deadline = setTimeout(() => res.destroy(), ANSWER_DEADLINE_MS);
      res.once('close', () => clearTimeout(deadline));
      serve(req, res);
    },
  );
  const serve = (req: IncomingMessage, res: ServerResponse) => {
    const started = process.hrtime.bigint();
    const finish = (outcome: RequestOutcome) => {
      metrics.requests.inc({ outcome });
      metrics.duration.observe({ outcome }, Number(process.hrtime.bigint() - started) / 1e9);
    };
    route(req, res, options, budget, largeBodies, metricsText, finish).catch((e: unknown) => {
      const err = e as Error;
      // Name and stack come from our code; request content never reaches an error message here.
      log.error({ err: { name: err.name, stack: err.stack } }, 'request failed');
      if (!res.headersSent) send(res, 500, { error: 'internal error' });
      finish('error');
    });
  };
  const refusals = new RefusalLog(log);
  new ConnectionGuard(
    {
      maxConnections: MAX_CONNECTIONS,
      maxPerSource: MAX_CONNECTIONS_PER_SOURCE,
      firstRequestMs: FIRST_REQUEST_MS,
      graceMs: CONNECTION_GRACE_MS,
      maxInGrace: MAX_CONNECTIONS_IN_GRACE,
      newcomerLane: NEWCOMER_LANE,
      replaceIdle: true,
      slowRequestMs: SLOW_REQUEST_MS,
      maxRequests: MAX_REQUESTS_PER_CONNECTION,
    },
    (reason, source) => {
      metrics.connectionsClosed.inc({ reason });
      refusals.note(reason, source);
    },
  ).attach(server);
  server.on('tlsClientError', (err) =>
    log.debug({ code: (err as NodeJS.ErrnoException).code }, 'TLS handshake failed'),
  );
  return server;
}

async function route(
  req: IncomingMessage,
  res: ServerResponse,
  options: WebhookServerOptions,
  budget: BodyBudget,
  largeBodies: () => Promise<void>,
  metricsText: RenderedMetrics,
  finish: (outcome: RequestOutcome) => void,
): Promise<void> {
  const path = (req.url ?? '/').split('?')[0];
  if (path === '/healthz') return sendText(res, 200, 'ok\n');
  if (path === '/readyz') {
    const ready = options.isReady?.() ?? true;
    return sendText(res, ready ? 200 : 503, ready ? 'ready\n' : 'not ready\n');
  }
  // Every answer below counts until it is sent, a request's body before it.
  const bytes = budget.open(req.socket.remoteAddress ?? 'gone');
  res.once('close', bytes.release);
  if (path === '/metrics') {
    const body = await metricsText.text();
    if (!bytes.replace(body.length)) return shed(res, options, finish, 'answer');
    // A scrape takes one answer a connection; what is pipelined behind it is not served.
    res.writeHead(200, { 'content-type': metricsText.contentType, connection: 'close' });
    res.end(body);
    return;
  }
  if (path !== '/mutate') return send(res, 404, { error: 'not found: use POST /mutate' });
  if (req.method !== 'POST') {
    res.setHeader('allow', 'POST');
    return send(res, 405, { error: 'use POST' });
  }
  try {
    const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
    if (type !== 'application/json') throw new HttpError(415, 'content-type must be application/json');
    const declared =
      req.headers['content-length'] === undefined ? undefined : Number(req.headers['content-length']);
    if (declared !== undefined && !(declared <= MAX_BODY_BYTES))
      throw new HttpError(413, `the body is over ${MAX_BODY_BYTES} bytes`);
    const chunks = await readBody(req, declared, bytes);
    // A body past its slot takes up to a few hundred milliseconds to parse and admit: they take turns.
    if (chunks.reduce((sum, c) => sum + c.length, 0) > SLOT_BYTES) {
      // A client gone meanwhile frees its bytes in the budget (bytes.release): its blocks go with them,
      // so bodies waiting for their turn never hold more than the budget counts.
      const gone = () => (chunks.length = 0);
      res.once('close', gone);
      await largeBodies();
      res.off('close', gone);
      if (res.destroyed) return;
    }
    // From here to the answer nothing awaits: one body at a time is text and objects (the parse lane).
    // Bodies still arriving or waiting for their turn are their blocks, counted in `bytes`.
    const body = decode(chunks);
    const { request, outcome, log, text, lookup } = options.cache.admitBody(body, options.defaults);
    if (lookup) options.metrics.admissionCache.inc({ result: lookup });
    // The body is parsed: its answer takes its place until sent.
    if (!bytes.replace(Buffer.byteLength(text))) return shed(res, options, finish, 'answer');
    sendJson(res, 200, text);
    // One line per decision, so "why was my pod (not) injected" is answered from the log alone;
    // after the answer, which need not wait for it. `log` holds names only: annotation values
    // never reach a log.
    options.log.info(
      {
        uid: request.uid,
        namespace: request.namespace,
        ...(request.dryRun ? { dryRun: true } : {}),
        ...log,
      },
      DECISION_MESSAGES[outcome],
    );
    finish(outcome);
  } catch (e) {
    if (e instanceof HttpError && e.status === 429) return shed(res, options, finish, 'body');
    if (e instanceof BadReviewError || e instanceof HttpError) {
      const status = e instanceof HttpError ? e.status : 400;
      // Drain nothing more from an oversized body: close the connection instead.
      if (status === 413) res.setHeader('connection', 'close');
      send(res, status, { error: e.message });
      // Our own words about the request's shape: never its content.
      options.log.info(
        { outcome: 'invalid', status, error: e.message },
        'request refused: not an AdmissionReview',
      );
      finish('invalid');
      return;
    }
    if (e instanceof ClientGone) return options.log.debug('request abandoned by its client while being sent');
    throw e;
  }
}

/**
 * Turns of the event loop, one each in the order asked: a large body's parse waits for its own, so
 * bodies that arrive together are parsed one per turn, and handshakes, requests and answers in between
 * are not held behind a run of them (each takes a few hundred milliseconds at 3 MiB).
 */
function turns(): () => Promise<void> {
  let last = Promise.resolve();
  return () => (last = last.then(() => setImmediate()));
}

/**
 * Answers 429 with Retry-After, which the API server retries; `at` says what did not fit. A body shed
 * part-way is dropped as it arrives (readBody) and its connection closes: the answer says so and goes
 * out whole at once, and the connection ends SHED_LINGER_MS later, so what is dropped is bounded by
 * that time, and nothing waits in the kernel's buffers, which the container is charged for, until the
 * connection closes (128 senders left up to 150 MiB there when their connections were kept open).
 * Ended at once with bytes unread, the connection is reset, and a client still sending may lose the
 * answer to it.
 */
function shed(
  res: ServerResponse,
  options: WebhookServerOptions,
  finish: (outcome: RequestOutcome) => void,
  at: 'body' | 'answer',
): void {
  const text = JSON.stringify({ error: SHED_MESSAGE });
  res.writeHead(429, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
    'retry-after': String(RETRY_AFTER_SECONDS),
    ...(at === 'body' ? { connection: 'close' } : {}),
  });
  if (at === 'body') {
    res.write(text);
    setTimeout(() => res.end(), SHED_LINGER_MS).unref();
  } else res.end(text);
  options.log.warn(
    { outcome: 'shed', status: 429, at },
    'request shed: the bytes of requests and answers in flight are at their limit, the API server retries it',
  );
  finish('shed');
}

/** A piece of a refused body: let go as it arrives. */
const dropPiece = (): void => {};

/**
 * The body, copied as it arrives into blocks that `bytes` counts whole as each is made (BODY_BLOCK_*):
 * what it holds is what is counted, however small the pieces it comes in, and each piece is let go at
 * once. 429 when a block does not fit, 413 past MAX_BODY_BYTES or MAX_BODY_PIECES.
 */
function readBody(req: IncomingMessage, declared: number | undefined, bytes: HeldBytes): Promise<Buffer[]> {
  return new Promise((resolve, reject) => {
    const blocks: Buffer[] = [];
    let block = Buffer.alloc(0);
    let filled = 0;
    let size = 0;
    let pieces = 0;
    const refuse = (refused: HttpError) => {
      req.off('data', onData);
      blocks.length = 0;
      bytes.replace(0);
      // What still arrives is dropped as it comes, until the connection closes with the answer (413,
      // or a shed's linger). Paused instead, the request would queue Node's pieces up to 16 KiB of
      // bytes, however many objects that is: 8 callers in 1-byte chunks, each holding ~19,000 queued
      // pieces, ran the 48 MiB heap out (issue 37, third review).
      req.on('data', dropPiece);
      reject(refused);
    };
    const onData = (piece: Buffer) => {
      pieces += 1;
      if (size + piece.length > MAX_BODY_BYTES)
        return refuse(new HttpError(413, `the body is over ${MAX_BODY_BYTES} bytes`));
      if (pieces > MAX_BODY_PIECES)
        return refuse(
          new HttpError(
            413,
            `the body came in more than ${MAX_BODY_PIECES} pieces (TLS records or chunks): send it in fewer, larger writes`,
          ),
        );
      for (let at = 0; at < piece.length;) {
        if (filled === block.length) {
          const length = Math.min(
            BODY_BLOCK_MAX_BYTES,
            Math.max(BODY_BLOCK_MIN_BYTES, size),
            declared === undefined ? Infinity : declared - size,
          );
          if (!bytes.add(length)) return refuse(new HttpError(429, SHED_MESSAGE));
          // Never a slice of Node's shared pool, which would keep the rest of the pool alive.
          block = Buffer.allocUnsafeSlow(length);
          blocks.push(block);
          filled = 0;
        }
        const copied = piece.copy(block, filled, at);
        filled += copied;
        size += copied;
        at += copied;
      }
    };
    req.on('data', onData);
    // The last block, cut to what arrived (chunked encoding says no length ahead).
    req.on('end', () => {
      if (blocks.length > 0) blocks[blocks.length - 1] = block.subarray(0, filled);
      resolve(blocks);
    });
    // The client went away while sending (its deadline, a reset): no one is left to answer.
    req.on('error', () => reject(new ClientGone()));
  });
}

/**
 * The body's text, decoded chunk by chunk (as Buffer#toString would, characters split between chunks
 * included): a 3 MiB Buffer.concat would be one more copy, and one malloc keeps (glibc raises its mmap
 * threshold to the largest block freed, and the next ones stay in its heap).
 */
function decode(chunks: Buffer[]): string {
  const decoder = new StringDecoder('utf8');
  const parts = chunks.map((chunk) => decoder.write(chunk));
  parts.push(decoder.end());
  chunks.length = 0;
  return parts.join('');
}

function send(res: ServerResponse, status: number, body: unknown): void {
  sendJson(res, status, JSON.stringify(body));
}

/**
 * Sends `text` in pieces of ANSWER_PIECE_BYTES, each once the one before is written: a socket's write
 * completes when the kernel has taken all of its encrypted bytes, so 'finish' (and the 'close' that
 * releases the answer's bytes and its deadline) means the kernel has the whole answer, and TLS never
 * holds more than a piece of it.
 */
function sendJson(res: ServerResponse, status: number, text: string): void {
  const body = Buffer.from(text);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': body.length });
  let sent = 0;
  const next = (err?: Error | null) => {
    // Gone (its deadline, a reset): 'close' has released its bytes.
    if (err || res.destroyed) return;
    const piece = body.subarray(sent, (sent += ANSWER_PIECE_BYTES));
    if (sent >= body.length) res.end(piece);
    else res.write(piece, next);
  };
  next();
}

function sendText(res: ServerResponse, status: number, text: string): void {
  res.writeHead(status, {
    'content-type': 'text/plain; charset=utf-8',
    'content-length': Buffer.byteLength(text),
  });
  res.end(text);
}
