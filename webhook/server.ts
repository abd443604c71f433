import { createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { SecureContextOptions } from 'node:tls';
import type { Logger } from '../agent/log.ts';
import { ConnectionGuard } from '../agent/serve/connection-guard.ts';
import type { AdmissionCache } from './admission/admission-cache.ts';
import { BadReviewError } from './admission/bad-review-error.ts';
import { BodyBudget, MAX_BODY_BYTES, RETRY_AFTER_SECONDS, type HeldBytes } from './body-budget.ts';
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
  REQUEST_TIMEOUT_MS,
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
      // A client that does not read its answer holds it no longer than this.
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
    route(req, res, options, budget, finish).catch((e: unknown) => {
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
      replaceIdle: true,
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
    const body = await options.metrics.registry.metrics();
    if (!bytes.replace(Buffer.byteLength(body))) return shed(res, options, finish, 'answer');
    res.writeHead(200, { 'content-type': options.metrics.registry.contentType });
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
    const body = await readBody(req, MAX_BODY_BYTES, bytes);
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
    if (e instanceof HttpError && e.status === 429) {
      // Its rest is dropped as it arrives, but no longer than a request may take: Node's request
      // timeout ends with the answer, and a sender dripping a byte a second would keep the connection.
      const cut = setTimeout(() => req.socket.destroy(), REQUEST_TIMEOUT_MS);
      cut.unref();
      req.once('end', () => clearTimeout(cut));
      req.socket.once('close', () => clearTimeout(cut));
      return shed(res, options, finish, 'body');
    }
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
    throw e;
  }
}

/** Answers 429 with Retry-After, which the API server retries; `at` says what did not fit. */
function shed(
  res: ServerResponse,
  options: WebhookServerOptions,
  finish: (outcome: RequestOutcome) => void,
  at: 'body' | 'answer',
): void {
  res.setHeader('retry-after', String(RETRY_AFTER_SECONDS));
  send(res, 429, { error: SHED_MESSAGE });
  options.log.warn(
    { outcome: 'shed', status: 429, at },
    'request shed: the bytes of requests and answers in flight are at their limit, the API server retries it',
  );
  finish('shed');
}

/** The body, each chunk counted in `bytes` as it arrives: 429 when one does not fit, 413 past `limit`. */
function readBody(req: IncomingMessage, limit: number, bytes: HeldBytes): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      const refused =
        size > limit
          ? new HttpError(413, `the body is over ${limit} bytes`)
          : !bytes.add(chunk.length)
            ? new HttpError(429, SHED_MESSAGE)
            : undefined;
      if (refused) {
        req.off('data', onData);
        chunks.length = 0;
        bytes.replace(0);
        // Past the limit the connection is closed with the answer; a shed body's rest is read and
        // dropped as it arrives (within the request timeout), so the 429 reaches a client still sending.
        if (refused.status === 413) req.pause();
        else req.resume();
        reject(refused);
        return;
      }
      chunks.push(chunk);
    };
    req.on('data', onData);
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function send(res: ServerResponse, status: number, body: unknown): void {
  sendJson(res, status, JSON.stringify(body));
}

function sendJson(res: ServerResponse, status: number, text: string): void {
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function sendText(res: ServerResponse, status: number, text: string): void {
  res.writeHead(status, {
    'content-type': 'text/plain; charset=utf-8',
    'content-length': Buffer.byteLength(text),
  });
  res.end(text);
}
