/**
 * The names of what the webhook adds to a pod: its containers, their port, its volumes, and the one
 * path it chooses in the agent container. Admission checks that the pod leaves them free; render/
 * gives them.
 */

/** What the names of the volumes the webhook adds start with (render/pod-patch.ts). */
export const OWN_VOLUME_PREFIX = 'secret-agent';

/** Container names the webhook adds; a pod that already uses one cannot be injected. */
export const AGENT_CONTAINER = 'secret-agent';
export const AGENT_INIT_CONTAINER = 'secret-agent-init';
/** The name of the sidecar's HTTP port (probes, /metrics): what the monitoring PodMonitor scrapes. */
export const AGENT_PORT_NAME = 'secret-agent';

/**
 * Where the agent container mounts the secrets volume, whatever the pod's `mount-path` (the app
 * containers' own): a path of the webhook's choosing, so no annotation can put the volume, and what
 * a pod writes into it, over the agent's code, its Node, its home or its SDKs' config files. Beside
 * the exec: helpers' /secret-agent/helpers, never over it.
 */
export const AGENT_SECRETS_DIR = '/secret-agent/secrets';

/** Where the agent container sees vault-client-cert-secret (tls.crt, tls.key). */
export const VAULT_CLIENT_CERT_DIR = '/var/run/secrets/secret-agent/vault-client';
