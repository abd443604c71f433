/**
 * The variables the AWS provider's client, the AWS SDK, reads: not parsed by the agent, documented
 * beside its own settings (agent/providers/provider-env.ts joins them with the other providers').
 * Declarations only, so knowing them never loads the SDK.
 */
export const AWS_ENV: readonly { name: string; doc: string }[] = [
  { name: 'AWS_REGION', doc: 'AWS SDK: region for `aws:NAME` references (ARNs carry their own).' },
  {
    name: 'AWS_ENDPOINT_URL_SECRETS_MANAGER',
    doc: 'AWS SDK: Secrets Manager endpoint override (VPC endpoint, local testing).',
  },
  { name: 'AWS_ENDPOINT_URL', doc: 'AWS SDK: endpoint override for every AWS service.' },
  { name: 'AWS_ROLE_ARN', doc: 'AWS SDK: role to assume with a web identity token (IRSA sets it).' },
  { name: 'AWS_WEB_IDENTITY_TOKEN_FILE', doc: 'AWS SDK: projected service-account token for IRSA.' },
  {
    name: 'AWS_CONTAINER_CREDENTIALS_FULL_URI',
    doc: 'AWS SDK: EKS Pod Identity agent endpoint (set by EKS).',
  },
  {
    name: 'AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE',
    doc: 'AWS SDK: EKS Pod Identity token file (set by EKS).',
  },
  {
    name: 'AWS_ACCESS_KEY_ID',
    doc: 'AWS SDK: static credentials (with AWS_SECRET_ACCESS_KEY); prefer IRSA or Pod Identity.',
  },
  { name: 'AWS_DEFAULT_REGION', doc: 'The AWS CLI’s name for the region, read when AWS_REGION is unset.' },
];
