import { createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { SecureContextOptions } from 'node:tls';
import type { Logger } from '../agent/log.ts';
import type { AdmissionCache } from './admission/admission-cache.ts';
import { BadReviewError } from './admission/bad-review-error.ts';
import { BodyBudget, MAX_BODY_BYTES, RETRY_AFTER_SECONDS } from './body-budget.ts';
import type { InjectionDefaults } from './config/injection-defaults.ts';
import type { RequestOutcome, WebhookMetrics } from './metrics.ts';

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

/**
 * The HTTPS server: POST /mutate, GET /healthz, /readyz, /metrics. Certificates are swapped with
 * server.setSecureContext(), which affects new connections only, so in-flight requests finish.
 */
export function createWebhookServer(options: WebhookServerOptions): Server {
  const { metrics, log } = options;
  const budget = new BodyBudget();
  const server = createServer({ ...options.tls, minVersion: 'TLSv1.2' }, (req, res) => {
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
  });
  server.keepAliveTimeout = 30_000;
  server.headersTimeout = 10_000;
  server.requestTimeout = 15_000;
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
  if (path === '/metrics') {
    const body = await options.metrics.registry.metrics();
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
    // Counted until the answer is sent; a body without a length may be as large as any.
    const reservation = budget.reserve(declared ?? MAX_BODY_BYTES);
    if (!reservation)
      throw new HttpError(
        429,
        `the webhook holds as many request bodies as it may; retry in ${RETRY_AFTER_SECONDS} s`,
      );
    res.once('close', reservation.release);
    const body = await readBody(req, MAX_BODY_BYTES);
    const { request, outcome, log, text, lookup } = options.cache.admitBody(body, options.defaults);
    if (lookup) options.metrics.admissionCache.inc({ result: lookup });
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
      // The API server retries after Retry-After; the unread body is discarded as it arrives.
      res.setHeader('retry-after', String(RETRY_AFTER_SECONDS));
      send(res, 429, { error: e.message });
      options.log.warn(
        { outcome: 'shed', status: 429, declared: req.headers['content-length'] ?? 'none' },
        'request shed: request bodies in flight are at their limit, the API server retries it',
      );
      finish('shed');
      return;
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

function readBody(req: IncomingMessage, limit: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        req.off('data', onData);
        req.pause();
        reject(new HttpError(413, `the body is over ${limit} bytes`));
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
