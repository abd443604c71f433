/**
 * The Node sidecar's own liveness check. No liveness probe watches its port (other pods' connections
 * could starve a probe: docs/security.md), so a refresh loop that has stopped is the sidecar's to notice:
 * every `everyMs` it asks `live()`, and the first time the answer is no it calls `onStalled` (which ends
 * the process, and the kubelet restarts the container), then checks no more.
 */
export const LIVENESS_CHECK_MS = 10_000;

export function watchLiveness(
  live: () => boolean,
  onStalled: () => void,
  everyMs = LIVENESS_CHECK_MS,
): { stop(): void } {
  const timer = setInterval(() => {
    if (live()) return;
    clearInterval(timer);
    onStalled();
  }, everyMs);
  // The sidecar's server and schedule keep the process alive; this must not.
  timer.unref();
  return { stop: () => clearInterval(timer) };
}
