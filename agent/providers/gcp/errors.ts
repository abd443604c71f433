import { ProviderError, type FetchContext } from '../provider.ts';
import { GLOBAL_VARIABLE, REGIONAL_VARIABLE } from './endpoint.ts';

/**
 * A failed Secret Manager call as a ProviderError: the reason, whether it is retried and the fix, from
 * the status code both transports report, and never the body of an answer that could hold a value.
 */

/** google.rpc.Code: what both transports report (gax maps a REST error's status onto it). */
const Code = {
  OK: 0,
  CANCELLED: 1,
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  ALREADY_EXISTS: 6,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  FAILED_PRECONDITION: 9,
  ABORTED: 10,
  OUT_OF_RANGE: 11,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  DATA_LOSS: 15,
  UNAUTHENTICATED: 16,
} as const;
const CODE_NAMES: Readonly<Record<number, string>> = Object.fromEntries(
  Object.entries(Code).map(([name, code]) => [code, name]),
);

/**
 * The server's google.rpc.RetryInfo, as google-gax decodes it from the grpc-status-details-bin
 * trailer into `statusDetails`: how long to wait before the next attempt, honoured as the AWS path
 * honours throttling. Nothing when the server sent none.
 */
function retryInfo(e: unknown): { retryAfterMs?: number } {
  const details = (e as { statusDetails?: unknown } | undefined)?.statusDetails;
  if (!Array.isArray(details)) return {};
  for (const detail of details) {
    const delay = (detail as { retryDelay?: { seconds?: unknown; nanos?: unknown } } | null)?.retryDelay;
    if (!delay) continue;
    // seconds is an int64: a Long object, a string or a number, depending on the decoder's options.
    const ms = Number(String(delay.seconds ?? 0)) * 1000 + Number(delay.nanos ?? 0) / 1e6;
    if (Number.isFinite(ms) && ms >= 0) return { retryAfterMs: Math.round(ms) };
  }
  return {};
}

/** Where google-gax keeps the body of a REST error answer (googleError.js). */
const RAW_HTTP_RESPONSE_PAYLOAD = Symbol.for('google-gax.rawHttpResponsePayload');

/**
 * REST only: an answer that is not Secret Manager's JSON (another server behind the endpoint, a proxy's
 * page, a body cut short). The library's message for it quotes the body, which could be anything, a
 * value included, so it is never shown. An error status is trusted when its body was a Google error
 * (`{"error": {"message": …}}`); an error without one, when it is a transport failure (its cause has
 * a system error code: ECONNREFUSED…) or a cancelled or timed-out call. What is left failed while
 * reading an answer. gRPC errors carry neither an HTTP status nor a cause.
 */
function unreadableAnswer(e: unknown, code: number | undefined): boolean {
  const err = e as
    | { message?: unknown; cause?: unknown; httpStatusCode?: unknown; [RAW_HTTP_RESPONSE_PAYLOAD]?: unknown }
    | undefined;
  if (typeof err?.message === 'string' && / could not be decoded: /.test(err.message)) return true;
  if (typeof err?.httpStatusCode === 'number') {
    let body = err[RAW_HTTP_RESPONSE_PAYLOAD];
    if (body === undefined) return false; // the library's own words ("Request failed with status code 403")
    if (typeof body === 'string') {
      try {
        body = JSON.parse(body) as unknown;
      } catch {
        return true;
      }
    }
    return typeof (body as { error?: { message?: unknown } } | null)?.error?.message !== 'string';
  }
  const cause = err?.cause as { code?: unknown } | undefined;
  return (
    cause instanceof Error &&
    typeof cause.code !== 'string' &&
    code !== Code.CANCELLED &&
    code !== Code.DEADLINE_EXCEEDED
  );
}

/**
 * Maps status codes (gRPC's, or REST's mapped onto them by gax) to reasons and fixes; the message is
 * the API's own, which never carries a value.
 */
export function gcpError(e: unknown, name: string, ctx: FetchContext): ProviderError {
  if (e instanceof ProviderError) return e;
  const regional = name.includes('/locations/');
  const variable = regional ? REGIONAL_VARIABLE : GLOBAL_VARIABLE;
  const err = (e ?? {}) as { code?: unknown; details?: unknown; message?: unknown };
  const code = typeof err.code === 'number' ? err.code : undefined;
  const text = typeof err.details === 'string' && err.details !== '' ? err.details : String(err.message ?? e);
  const detail = `${code === undefined ? 'Error' : (CODE_NAMES[code] ?? code)}: ${text}`;

  if (unreadableAnswer(e, code)) {
    const status = (e as { httpStatusCode?: unknown }).httpStatusCode;
    return new ProviderError(
      'invalid',
      `${name}: the answer${typeof status === 'number' ? ` (HTTP ${status})` : ''} is not Secret Manager's JSON`,
      `${variable} does not reach Secret Manager's REST API: check it (GCP_TRANSPORT=grpc speaks gRPC instead)`,
      { transient: false },
    );
  }

  if (
    ctx.signal.aborted &&
    (code === undefined || code === Code.CANCELLED || code === Code.DEADLINE_EXCEEDED)
  ) {
    return new ProviderError(
      'timeout',
      `${name}: the request was cancelled at the attempt deadline`,
      'retried until INIT_DEADLINE; check network reach to Secret Manager',
    );
  }
  switch (code) {
    case Code.NOT_FOUND:
      return new ProviderError(
        'not-found',
        detail,
        `check the project, secret id and version of ${name}, and that the secret has versions (gcloud secrets versions list)`,
      );
    case Code.PERMISSION_DENIED:
      return new ProviderError(
        'permission-denied',
        detail,
        'grant roles/secretmanager.secretAccessor on the secret (or its project) to the pod’s identity: the Workload Identity principal of its Kubernetes service account, or the Google service account it impersonates',
      );
    case Code.UNAUTHENTICATED:
      return new ProviderError(
        'auth',
        detail,
        'give the pod Google credentials: GKE Workload Identity on the node pool and service account, or GOOGLE_APPLICATION_CREDENTIALS',
      );
    case Code.FAILED_PRECONDITION:
      if (/DESTROYED/.test(text)) {
        return new ProviderError(
          'deleted',
          detail,
          'the version is destroyed for good: reference another version, or add a new version (`latest` names the newest, whatever its state)',
        );
      }
      return new ProviderError(
        'disabled',
        detail,
        'enable the version (gcloud secrets versions enable VERSION --secret SECRET) or reference an enabled one; `latest` names the newest version, whatever its state',
      );
    case Code.RESOURCE_EXHAUSTED:
      return new ProviderError(
        'throttled',
        detail,
        'retried with backoff; spread start-ups or raise the Secret Manager quota',
        retryInfo(e),
      );
    case Code.DEADLINE_EXCEEDED:
      return new ProviderError(
        'timeout',
        detail,
        'retried until INIT_DEADLINE; check network reach to Secret Manager',
      );
    case Code.UNAVAILABLE:
      if (/metadata from plugin/i.test(text)) {
        // A token could not be had: on GKE the metadata server can lag a starting pod, so retry.
        return new ProviderError(
          'auth',
          detail,
          'check GKE Workload Identity (the metadata server must answer for the pod) or GOOGLE_APPLICATION_CREDENTIALS; retried until the deadline',
          { transient: true },
        );
      }
      return new ProviderError(
        'unavailable',
        detail,
        'a Secret Manager or network fault; retried with backoff',
        retryInfo(e),
      );
    case Code.INTERNAL:
    case Code.UNKNOWN:
    case Code.ABORTED:
    case Code.CANCELLED:
      return new ProviderError('unavailable', detail, 'a Secret Manager fault; retried with backoff');
    case Code.INVALID_ARGUMENT:
    case Code.OUT_OF_RANGE:
      // The global endpoint refuses a regional name, and a region's endpoint another region's.
      return new ProviderError(
        'invalid',
        detail,
        regional
          ? `check the reference (projects/PROJECT/locations/LOCATION/secrets/SECRET[/versions/VERSION]) and, if ${REGIONAL_VARIABLE} is set, that it reaches the endpoint of that location`
          : 'check the reference: projects/PROJECT/secrets/SECRET[/versions/VERSION]',
      );
    case Code.UNIMPLEMENTED:
      return new ProviderError('invalid', detail, `${variable} does not serve Secret Manager v1: check it`, {
        transient: false,
      });
    case undefined:
      // Before any call: the client found no usable credentials (ADC found nothing, a bad key file).
      return new ProviderError(
        'auth',
        detail,
        'give the pod Google credentials: GKE Workload Identity (the metadata server), or GOOGLE_APPLICATION_CREDENTIALS naming a readable credentials file',
        { transient: false },
      );
  }
  return new ProviderError('internal', detail, 'see the message; report it if it persists', {
    transient: false,
  });
}
