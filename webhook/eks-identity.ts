/**
 * What EKS's pod-identity-webhook writes into a pod, as constants: the names, paths and addresses the
 * agent may inherit (parse/inherit-cloud-identity.ts), which nothing may mount over
 * (parse/agent-container-policy.ts), and whose volumes the pod view keeps by name (admission/review.ts).
 */

/** What EKS writes for IRSA (aws/amazon-eks-pod-identity-webhook pkg/handler: NewModifier's defaults). */
export const IRSA = {
  volume: 'aws-iam-token',
  dir: '/var/run/secrets/eks.amazonaws.com/serviceaccount',
  tokenPath: 'token',
} as const;

/** What EKS writes for Pod Identity: the Pod Identity agent's IPv4 and IPv6 addresses, its token volume. */
export const POD_IDENTITY = {
  volume: 'eks-pod-identity-token',
  dir: '/var/run/secrets/pods.eks.amazonaws.com/serviceaccount',
  tokenPath: 'eks-pod-identity-token',
  uris: ['http://169.254.170.23/v1/credentials', 'http://[fd00:ec2::23]/v1/credentials'],
} as const;
