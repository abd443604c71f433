import type { ProviderName, SecretReference } from '../contract/reference.ts';
import type { ProviderFactory } from './provider.ts';

type FactoryFor<P extends ProviderName> = ProviderFactory<Extract<SecretReference, { provider: P }>>;

/**
 * One line per backend. Each is loaded on first use only, so a pod that reads only AWS never pays
 * for loading the GCP or Vault client (each becomes its own chunk in the bundle).
 */
export const PROVIDERS: { readonly [P in ProviderName]?: () => Promise<FactoryFor<P>> } = {
  aws: async () => (await import('./aws.ts')).createAwsProvider,
  exec: async () => (await import('./exec.ts')).createExecProvider,
  file: async () => (await import('./file.ts')).createFileProvider,
  gcp: async () => (await import('./gcp.ts')).createGcpProvider,
  vault: async () => (await import('./vault.ts')).createVaultProvider,
};
