/**
 * The names of what the webhook adds to a pod: its containers, their port, its volumes. Admission
 * checks that the pod leaves them free; render/ gives them.
 */

/** What the names of the volumes the webhook adds start with (render/pod-patch.ts). */
export const OWN_VOLUME_PREFIX = 'secret-agent';

/** Container names the webhook adds; a pod that already uses one cannot be injected. */
export const AGENT_CONTAINER = 'secret-agent';
export const AGENT_INIT_CONTAINER = 'secret-agent-init';
/** The name of the sidecar's HTTP port (probes, /metrics): what the monitoring PodMonitor scrapes. */
export const AGENT_PORT_NAME = 'secret-agent';
