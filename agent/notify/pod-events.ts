import { randomInt } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from '../log.ts';
import { requestErrorReason } from './http-request.ts';
import { createKubernetesClient, ServiceAccountError } from './kubernetes-client.ts';

export type PodEventReason = 'SecretsDelivered' | 'SecretsRotated' | 'SecretRefreshFailing';
export type PodEventType = 'Normal' | 'Warning';

export interface PodEventRecorder {
  /** Queues one event; never throws, never blocks the caller. */
  record(reason: PodEventReason, message: string): void;
  /** Resolves when queued events have been sent or given up on (bounded, for shutdown/tests). */
  flush(): Promise<void>;
  close(): Promise<void>;
}

export interface PodEventRecorderOptions {
  /** `https://HOST:PORT`. */
  readonly apiUrl: string;
  /** Holds `token` and `ca.crt`. */
  readonly serviceAccountDir: string;
  readonly pod: { readonly namespace: string; readonly name: string; readonly uid?: string };
  /** `source.component` and `reportingComponent`, e.g. 'secret-agent'. */
  readonly component: string;
  /** `reportingInstance`, e.g. `${podName}/secret-agent` (the container). */
  readonly instance: string;
  readonly log: Logger;
  /** Told each send's outcome, for a metric: reason and 'ok' or a short failure reason (forbidden, unreachable, …). */
  readonly onOutcome?: (reason: PodEventReason, outcome: string) => void;
  /** Defaults: 5s per request, 1s before the one retry, 10s for flush(); tests shorten them. */
  readonly timing?: {
    readonly requestTimeoutMs?: number;
    readonly retryDelayMs?: number;
    readonly flushTimeoutMs?: number;
  };
}

/** The event type per reason: SecretRefreshFailing is Warning, the rest Normal. */
export function podEventType(reason: PodEventReason): PodEventType {
  return reason === 'SecretRefreshFailing' ? 'Warning' : 'Normal';
}

const ACTION: Readonly<Record<PodEventReason, string>> = {
  SecretsDelivered: 'Deliver',
  SecretsRotated: 'Rotate',
  SecretRefreshFailing: 'Refresh',
};
/** Like client-go's broadcaster queue: bounded, the oldest event goes first. */
const QUEUE_LIMIT = 25;
/** The API's NoteLengthLimit and ReportingInstanceLengthLimit. */
const MESSAGE_LIMIT = 1024;
const INSTANCE_LIMIT = 128;
/** Outcomes worth the one retry: the API may take the same event a second later. */
const TRANSIENT = new Set(['unreachable', 'timeout', 'throttled', 'server-error']);
const FORBIDDEN_FIX =
  "grant `create events` in the pod's namespace: bind the ClusterRole secret-agent-events (deploy/agent-rbac)";

interface QueuedEvent {
  readonly reason: PodEventReason;
  readonly message: string;
  readonly at: Date;
}

interface Attempt {
  readonly outcome: string;
  readonly status?: number;
  readonly apiReason?: string;
  readonly apiMessage?: string;
  readonly code?: string;
}

let lastNanos = 0n;
/**
 * `POD.<16 hex>` like client-go's `%v.%x` of the UnixNano time. The sub-millisecond digits are random
 * and bumped past the last name, so the init container's and the sidecar's events never collide.
 */
function eventName(pod: string, at: Date): string {
  let nanos = BigInt(at.getTime()) * 1_000_000n + BigInt(randomInt(1_000_000));
  if (nanos <= lastNanos) nanos = lastNanos + 1n;
  lastNanos = nanos;
  return `${pod}.${nanos.toString(16).padStart(16, '0').slice(-16)}`;
}

function capMessage(message: string): string {
  const chars = [...message];
  return chars.length <= MESSAGE_LIMIT ? message : `${chars.slice(0, MESSAGE_LIMIT - 1).join('')}…`;
}

function statusOutcome(status: number): string {
  const known: Record<number, string> = {
    400: 'bad-request',
    401: 'unauthorized',
    403: 'forbidden',
    404: 'not-found',
    409: 'conflict',
    422: 'invalid',
    429: 'throttled',
  };
  return known[status] ?? (status >= 500 ? 'server-error' : `http-${status}`);
}

/**
 * Kubernetes Events (core/v1) on the agent's own pod, so `kubectl describe pod` shows what the agent
 * did. Sends one at a time from a small queue, off the caller's path: an event is a courtesy, never a
 * reason to delay or fail delivering secrets. Messages carry file names and secret ids, never values.
 */
export function createPodEventRecorder(options: PodEventRecorderOptions): PodEventRecorder {
  const { pod, log } = options;
  const requestTimeoutMs = options.timing?.requestTimeoutMs ?? 5_000;
  const retryDelayMs = options.timing?.retryDelayMs ?? 1_000;
  const flushTimeoutMs = options.timing?.flushTimeoutMs ?? 10_000;
  const client = createKubernetesClient({
    apiUrl: options.apiUrl,
    serviceAccountDir: options.serviceAccountDir,
    timeoutMs: requestTimeoutMs,
  });
  const path = `/api/v1/namespaces/${encodeURIComponent(pod.namespace)}/events`;
  const queue: QueuedEvent[] = [];
  let running: Promise<void> | undefined;
  let giveUp = new AbortController();
  let closed = false;
  let warnedOverflow = false;
  /** The failure last logged at warn: a streak of the same failure is logged once. */
  let warned: string | undefined;

  const tell = (reason: PodEventReason, outcome: string) => {
    try {
      options.onOutcome?.(reason, outcome);
    } catch {
      // A metric callback failing must not stop the queue.
    }
  };

  const eventObject = (event: QueuedEvent) => {
    const time = event.at.toISOString().replace(/\.\d+Z$/, 'Z');
    // eventTime stays unset: core/v1 then validates it as a legacy event, which needs only the
    // involvedObject's namespace to match; firstTimestamp/lastTimestamp/count are what describe shows.
    return {
      apiVersion: 'v1',
      kind: 'Event',
      metadata: { name: eventName(pod.name, event.at), namespace: pod.namespace },
      involvedObject: {
        apiVersion: 'v1',
        kind: 'Pod',
        name: pod.name,
        namespace: pod.namespace,
        ...(pod.uid ? { uid: pod.uid } : {}),
      },
      reason: event.reason,
      message: capMessage(event.message),
      type: podEventType(event.reason),
      action: ACTION[event.reason],
      source: { component: options.component },
      reportingComponent: options.component,
      reportingInstance: options.instance.slice(0, INSTANCE_LIMIT),
      firstTimestamp: time,
      lastTimestamp: time,
      count: 1,
    };
  };

  const attempt = async (body: unknown, stop: AbortSignal): Promise<Attempt> => {
    const timeout = AbortSignal.timeout(requestTimeoutMs + 1_000);
    const signal = AbortSignal.any([stop, timeout]);
    // undici does not end a request on abort while its TLS handshake hangs, so race the signal too;
    // the abandoned request ends on its own at the connect timeout.
    let unlisten = () => {};
    const aborted = new Promise<never>((_, reject) => {
      const onAbort = () => reject(signal.reason as Error);
      signal.addEventListener('abort', onAbort, { once: true });
      unlisten = () => signal.removeEventListener('abort', onAbort);
    });
    try {
      const pending = client.post(path, body, signal);
      pending.catch(() => undefined);
      const res = await Promise.race([pending, aborted]);
      if (res.ok) return { outcome: 'ok', status: res.status };
      const { reason: apiReason, message } = res.failure;
      return {
        outcome: statusOutcome(res.status),
        status: res.status,
        apiReason,
        apiMessage: message.slice(0, 300),
      };
    } catch (e) {
      if (e instanceof ServiceAccountError) return { outcome: 'no-service-account', apiMessage: e.message };
      const code = (e as { code?: unknown } | undefined)?.code;
      const reason = stop.aborted ? 'aborted' : timeout.aborted ? 'timeout' : requestErrorReason(e, stop);
      return {
        outcome: reason === 'network' ? 'unreachable' : reason,
        ...(typeof code === 'string' ? { code } : {}),
      };
    } finally {
      unlisten();
    }
  };

  const deliver = async (event: QueuedEvent, stop: AbortSignal): Promise<void> => {
    const body = eventObject(event);
    let result = await attempt(body, stop);
    if (TRANSIENT.has(result.outcome) && !stop.aborted) {
      log.debug({ eventReason: event.reason, outcome: result.outcome }, 'kubernetes-events: retrying once');
      await sleep(retryDelayMs, undefined, { signal: stop }).catch(() => undefined);
      result = stop.aborted ? { outcome: 'aborted' } : await attempt(body, stop);
      // The same name already there: the first attempt landed and only its answer was lost.
      if (result.outcome === 'conflict') result = { outcome: 'ok', status: result.status };
    }
    tell(event.reason, result.outcome);
    const fields = { eventReason: event.reason, namespace: pod.namespace, pod: pod.name, ...result };
    if (result.outcome === 'ok') {
      warned = undefined;
      log.debug(
        { ...fields, message: body.message, name: body.metadata.name },
        'kubernetes-events: recorded',
      );
      return;
    }
    const level = warned === result.outcome || result.outcome === 'aborted' ? 'debug' : 'warn';
    warned = level === 'warn' ? result.outcome : warned;
    if (result.outcome === 'forbidden') {
      log[level](
        fields,
        `kubernetes-events: the pod's service account may not create events; ${FORBIDDEN_FIX}`,
      );
    } else {
      log[level](fields, `kubernetes-events: the ${event.reason} event was not recorded (${result.outcome})`);
    }
  };

  const drain = async (): Promise<void> => {
    for (let next = queue.shift(); next; next = queue.shift()) {
      try {
        await deliver(next, giveUp.signal);
      } catch (e) {
        log.debug({ err: (e as Error).name }, 'kubernetes-events: an event failed unexpectedly');
      }
    }
    running = undefined; // in the same turn as the empty check, so record() never misses a start
  };

  const flush = async (): Promise<void> => {
    const drained = running;
    if (!drained) return;
    let timer: NodeJS.Timeout | undefined;
    const timedOut = await Promise.race([
      drained.then(() => false),
      new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(true), flushTimeoutMs))),
    ]);
    clearTimeout(timer);
    if (!timedOut) return;
    const dropped = queue.splice(0);
    giveUp.abort();
    giveUp = new AbortController();
    for (const event of dropped) tell(event.reason, 'aborted');
    log.warn(
      { queued: dropped.length, flushTimeoutMs },
      'kubernetes-events: gave up on events the Kubernetes API did not take in time',
    );
    await drained;
  };

  return {
    record(reason, message) {
      try {
        if (closed) {
          log.debug({ eventReason: reason }, 'kubernetes-events: recorder closed, event not sent');
          return;
        }
        queue.push({ reason, message, at: new Date() });
        if (queue.length > QUEUE_LIMIT) {
          const dropped = queue.shift()!;
          tell(dropped.reason, 'dropped');
          log[warnedOverflow ? 'debug' : 'warn'](
            { eventReason: dropped.reason, limit: QUEUE_LIMIT },
            'kubernetes-events: the Kubernetes API is slower than events come in; dropping the oldest',
          );
          warnedOverflow = true;
        }
        if (!running) running = drain();
      } catch (e) {
        log.debug({ err: (e as Error).name }, 'kubernetes-events: could not queue an event');
      }
    },
    flush,
    async close() {
      closed = true;
      await flush();
      await client.destroy(); // after flush, only requests it gave up on can be in flight
    },
  };
}
