/** Where Kubernetes mounts a pod's service-account token, ca.crt and namespace: the agent's and the webhook's. */
export const DEFAULT_SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';
