import type { Env } from '../contract/settings.ts';

/** The in-cluster API server address the kubelet gives every container, or undefined outside a pod. */
export function kubernetesApiUrl(env: Env): string | undefined {
  const host = env.KUBERNETES_SERVICE_HOST;
  const port = env.KUBERNETES_SERVICE_PORT ?? '443';
  if (!host) return undefined;
  return `https://${host.includes(':') ? `[${host}]` : host}:${port}`;
}
