import { AWS_ENV } from './aws/env.ts';
import { EXEC_SETTINGS } from './exec/env.ts';
import { GCP_ENV } from './gcp/env.ts';
import { VAULT_ENV } from './vault/env.ts';

/**
 * The env every provider reads, joined from the declarations in each provider's folder (its env.ts),
 * as the registry joins their code. Declarations only: knowing a provider's variables never loads its
 * client, which stays behind the registry's lazy import.
 */

/** Variables the backend client libraries read, not parsed by the agent: one table in the docs. */
export const CLIENT_ENV: readonly { name: string; doc: string }[] = [...AWS_ENV, ...GCP_ENV];

/** Every variable a provider or its client reads, in the order the docs list them. */
export const PROVIDER_ENV: readonly string[] = [
  ...CLIENT_ENV.map((v) => v.name),
  ...VAULT_ENV.map((v) => v.name),
  ...Object.keys(EXEC_SETTINGS),
];
