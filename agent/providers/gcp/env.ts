/**
 * The variables the GCP provider and its Google client read (GCP_TRANSPORT is parsed by transport.ts),
 * documented beside the agent's own settings (agent/providers/provider-env.ts joins them with the
 * other providers'). Declarations only, so knowing them never loads the client.
 */
export const GCP_ENV: readonly { name: string; doc: string }[] = [
  { name: 'GCP_PROJECT', doc: 'Project for `gcp:SECRET` references (else GOOGLE_CLOUD_PROJECT).' },
  { name: 'GOOGLE_CLOUD_PROJECT', doc: 'Project for `gcp:SECRET` references when GCP_PROJECT is unset.' },
  {
    name: 'GCP_SECRET_MANAGER_ENDPOINT',
    doc: '`host:port` instead of secretmanager.googleapis.com:443 for global secrets (Private Service Connect, a local emulator); see docs/gcp.md.',
  },
  {
    name: 'GCP_SECRET_MANAGER_REGIONAL_ENDPOINT',
    doc: '`host:port` instead of secretmanager.LOCATION.rep.googleapis.com:443 for regional secrets; `{location}` in it stands for the secret’s region; see docs/gcp.md.',
  },
  {
    name: 'GCP_TRANSPORT',
    doc: '`rest` or `grpc`: how the agent talks to GCP Secret Manager. Default `rest` in init mode (starts faster, in less memory), `grpc` in a sidecar (less CPU per refresh) and wherever grpc_proxy, https_proxy or http_proxy is set (the REST client ignores proxies); see docs/gcp.md.',
  },
  {
    name: 'GOOGLE_APPLICATION_CREDENTIALS',
    doc: 'Google client: credentials file; not needed on GKE with Workload Identity.',
  },
];
