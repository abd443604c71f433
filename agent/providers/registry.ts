import type { ProviderName, SecretReference } from '../contract/reference.ts';
import type { ProviderFactory } from './provider.ts';

type FactoryFor<P extends ProviderName> = ProviderFactory<Extract<SecretReference, { provider: P }>>;

/**
 * One line per backend, each the entry module of the backend's folder. Each is loaded on first use
 * only, so a pod that reads only AWS never pays for loading the GCP or Vault client (each becomes its
 * own chunk in the bundle).
 */
export const PROVIDERS: { readonly [P in ProviderName]?: () => Promise<FactoryFor<P>> } = {
  aws: async () => (await import('./aws/aws-provider.ts')).createAwsProvider,
  exec: async () => (await import('./exec/exec-provider.ts')).createExecProvider,
  file: async () => (await import('./file/file-provider.ts')).createFileProvider,
  gcp: async () => (await import('./gcp/gcp-provider.ts')).createGcpProvider,
  vault: async () => (await import('./vault/vault-provider.ts')).createVaultProvider,
};
