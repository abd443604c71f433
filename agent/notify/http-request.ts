import { setTimeout as sleep } from 'node:timers/promises';
import { request, type Dispatcher } from 'undici';
import type { Logger } from '../log.ts';
import type { Notifier, NotifyOutcome, RotationEvent } from './notifier.ts';

export interface HttpRequestOptions {
  readonly method: string;
  readonly url: string;
  /** Per attempt, connect to end of body. */
  readonly timeoutMs?: number;
  /** Attempts in all, including the first. */
  readonly attempts?: number;
  /** Delay before the second attempt; doubles after each. */
  readonly retryDelayMs?: number;
  /**
   * The longest Retry-After (on 429 and 503) that is waited for; a longer one ends the retries, as
   * the rotation's notifications have a budget (60 s) and the next rotation tells the app again.
   */
  readonly maxRetryAfterMs?: number;
  /** How a delay between attempts is waited out (tests see the delays asked for through it). */
  readonly wait?: (ms: number, signal: AbortSignal) => Promise<void>;
}

/** An attempt's outcome, with how long the app asked to wait before the next one (Retry-After). */
type Attempt = NotifyOutcome & { readonly retryAfterMs?: number };

const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH']);

/**
 * ROTATION_HTTP_URL: one request to the app, retried a bounded number of times on network errors,
 * 429 and 5xx (the app may be busy or restarting its listener). Any 2xx is success. The body names
 * the new versions and changed files, never a value.
 */
export function createHttpRequestNotifier(options: HttpRequestOptions, log: Logger): Notifier {
  const timeoutMs = options.timeoutMs ?? 5000;
  const attempts = options.attempts ?? 3;
  const retryDelayMs = options.retryDelayMs ?? 250;
  const maxRetryAfterMs = options.maxRetryAfterMs ?? 30_000;
  const wait = options.wait ?? ((ms: number, signal: AbortSignal) => sleep(ms, undefined, { signal }));
  const method = options.method.toUpperCase() as Dispatcher.HttpMethod;
  const target = describeUrl(options.url);
  const httpLog = log.child({ notifier: 'http', method, target });

  const attempt = async (event: RotationEvent, signal: AbortSignal): Promise<Attempt> => {
    const carriesBody = BODY_METHODS.has(method);
    const deadline = AbortSignal.timeout(timeoutMs);
    try {
      const res = await request(options.url, {
        method,
        signal: AbortSignal.any([signal, deadline]),
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
        headers: {
          'user-agent': 'secret-agent',
          ...(carriesBody ? { 'content-type': 'application/json' } : {}),
        },
        ...(carriesBody
          ? {
              body: JSON.stringify({
                versions: event.versions,
                unnamed: event.unnamed,
                changedFiles: event.changedFiles,
              }),
            }
          : {}),
      });
      // The app's answer is not ours to log (it could echo anything); read it only to free the socket.
      await res.body.dump();
      if (res.statusCode >= 200 && res.statusCode < 300) return { ok: true };
      const retryAfterMs =
        res.statusCode === 429 || res.statusCode === 503 ? retryAfter(res.headers['retry-after']) : undefined;
      return {
        ok: false,
        reason: `http-${res.statusCode}`,
        ...(retryAfterMs !== undefined ? { retryAfterMs } : {}),
      };
    } catch (e) {
      if (deadline.aborted && !signal.aborted) return { ok: false, reason: 'timeout' };
      return { ok: false, reason: requestErrorReason(e, signal) };
    }
  };

  return {
    kind: 'http',
    async notify(event, signal) {
      let outcome: Attempt = { ok: false, reason: 'aborted' };
      for (let n = 1; n <= attempts && !signal.aborted; n++) {
        outcome = await attempt(event, signal);
        if (outcome.ok) {
          httpLog.info({ attempt: n }, 'rotation: the app acknowledged the HTTP notification');
          return { ok: true };
        }
        const asked = outcome.retryAfterMs;
        const tooLong = asked !== undefined && asked > maxRetryAfterMs;
        const retryable = outcome.reason !== 'aborted' && isRetryable(outcome.reason) && !tooLong;
        httpLog.warn(
          {
            attempt: n,
            reason: outcome.reason,
            willRetry: retryable && n < attempts,
            ...(asked !== undefined ? { retryAfterMs: asked } : {}),
          },
          tooLong
            ? 'rotation: HTTP notification failed, and the app asks to wait longer than a rotation allows'
            : 'rotation: HTTP notification failed',
        );
        if (!retryable || n === attempts) break;
        try {
          // The app's Retry-After, when it gave one, is the least we wait: it knows when it is back.
          await wait(Math.max(asked ?? 0, retryDelayMs * 2 ** (n - 1)), signal);
        } catch {
          return { ok: false, reason: 'aborted' };
        }
      }
      return { ok: false, reason: outcome.ok ? 'internal' : outcome.reason };
    },
  };
}

/**
 * Retry-After as milliseconds from now: delay-seconds or an HTTP-date (RFC 9110 §10.2.3);
 * undefined when absent or unreadable (then the usual backoff applies).
 */
export function retryAfter(header: string | string[] | undefined, now = Date.now()): number | undefined {
  const text = (Array.isArray(header) ? header[0] : header)?.trim();
  if (!text) return undefined;
  if (/^\d{1,9}$/.test(text)) return Number(text) * 1000;
  const at = Date.parse(text);
  return Number.isNaN(at) || !/[A-Za-z]/.test(text) ? undefined : Math.max(0, at - now);
}

function isRetryable(reason: string): boolean {
  if (reason === 'timeout' || reason === 'network' || reason === 'http-429') return true;
  return /^http-5\d\d$/.test(reason);
}

const TLS_CODES = /^(?:ERR_TLS_|CERT_|UNABLE_TO_|DEPTH_ZERO_|SELF_SIGNED_)/;

/**
 * A short stable word for a failed request (a metrics label): aborted by the caller, timeout,
 * tls, or network.
 */
export function requestErrorReason(e: unknown, signal: AbortSignal): string {
  if (signal.aborted) return 'aborted';
  const err = e as { name?: unknown; code?: unknown; cause?: unknown } | undefined;
  const code = typeof err?.code === 'string' ? err.code : '';
  const causeCode =
    typeof (err?.cause as { code?: unknown })?.code === 'string' ? (err!.cause as { code: string }).code : '';
  if (err?.name === 'TimeoutError' || /TIMEOUT/.test(code) || /TIMEOUT/.test(causeCode)) return 'timeout';
  if (TLS_CODES.test(code) || TLS_CODES.test(causeCode)) return 'tls';
  return 'network';
}

/** The URL as logged: no credentials or query string, which may carry a token. */
function describeUrl(url: string): string {
  const u = new URL(url);
  return `${u.protocol}//${u.host}${u.pathname}`;
}
