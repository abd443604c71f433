import type { AgentConfig } from '../contract/agent-config.ts';
import { ConfigError, ConfigErrors } from '../contract/errors.ts';
import type { SecretReference } from '../contract/reference.ts';
import type { Env } from '../contract/settings.ts';
import { parseExecSettings, resolveHelper, type ExecSettings } from '../providers/exec/config.ts';
import { gcpTransport } from '../providers/gcp/transport.ts';
import { ProviderError } from '../providers/provider.ts';
import { parseVaultSettings } from '../providers/vault/config.ts';

/**
 * What the backends need from the agent's env, checked after parseAgentConfig and before any
 * provider is loaded or called: a region for `aws:NAME`, a project for `gcp:SECRET`, a Vault address
 * and usable Vault settings, the exec settings and every helper an `exec:` reference names. Without this the first fetch would find the same gap, retry nothing, and exit 1 as if a
 * backend had failed. It reads the same variables the providers read, the same way.
 *
 * Not part of parseAgentConfig on purpose: the webhook parses the env it renders with that, and
 * other admission webhooks (EKS pod identity, IRSA) add AWS_REGION to the container after it.
 */
export function checkBackendSettings(config: AgentConfig, env: Env): ConfigError[] {
  const errors: ConfigError[] = [];
  const refs = config.secrets.map((s) => ({ id: s.id, ref: s.ref }));

  // agent/providers/aws/aws-provider.ts: `AWS_REGION ?? AWS_DEFAULT_REGION`, and an empty one counts as none.
  const regionless = refs.filter((r) => r.ref.provider === 'aws' && r.ref.region === undefined);
  if (regionless.length > 0 && !(env.AWS_REGION ?? env.AWS_DEFAULT_REGION)) {
    const secrets = regionless.map((r) => r.id).join(', ');
    errors.push(
      new ConfigError(
        'AWS_REGION',
        `is not set, but secrets named without a region (aws:NAME) need it: ${secrets}`,
        'set AWS_REGION (with the webhook: the secret-agent.io/aws-region annotation or AGENT_AWS_REGION), or reference the secret by its full ARN',
      ),
    );
  }

  // agent/providers/gcp/gcp-provider.ts: `GCP_PROJECT || GOOGLE_CLOUD_PROJECT`.
  const projectless = refs.filter((r) => r.ref.provider === 'gcp' && r.ref.project === undefined);
  if (projectless.length > 0 && !(env.GCP_PROJECT || env.GOOGLE_CLOUD_PROJECT)) {
    const secrets = projectless.map((r) => r.id).join(', ');
    errors.push(
      new ConfigError(
        'GCP_PROJECT',
        `is not set, but secrets named without a project (gcp:SECRET) need it: ${secrets}`,
        'set GCP_PROJECT (with the webhook: the secret-agent.io/gcp-project annotation or AGENT_GCP_PROJECT), or write the reference as projects/PROJECT/secrets/SECRET',
      ),
    );
  }

  if (refs.some((r) => r.ref.provider === 'gcp')) {
    try {
      gcpTransport(env, config.mode);
    } catch (e) {
      errors.push(settingError(e, 'GCP_TRANSPORT'));
    }
  }

  const vault = refs.filter((r) => r.ref.provider === 'vault');
  if (vault.length > 0) {
    // The Vault CLI's default, https://127.0.0.1:8200, is nothing in a pod unless Vault runs there:
    // without this the agent would retry a refused connection until INIT_DEADLINE.
    if (!env.VAULT_ADDR?.trim()) {
      const secrets = vault.map((r) => r.id).join(', ');
      errors.push(
        new ConfigError(
          'VAULT_ADDR',
          `is not set, but secrets read from Vault need it: ${secrets}`,
          'set it to the Vault server’s URL, e.g. https://vault.vault.svc:8200 (with the webhook: AGENT_VAULT_ADDR); write https://127.0.0.1:8200 out if Vault really listens in the pod',
        ),
      );
    }
    try {
      parseVaultSettings(env);
    } catch (e) {
      errors.push(settingError(e, 'VAULT_ADDR'));
    }
  }
  errors.push(...checkExecHelpers(refs, env));
  return errors;
}

/**
 * `exec:` references: EXEC_* parse, and each helper named is in EXEC_HELPERS_DIR, a regular file
 * there and executable, so a helper missing from the volume stops the agent before any run.
 */
function checkExecHelpers(refs: readonly { id: string; ref: SecretReference }[], env: Env): ConfigError[] {
  const helpers = new Map<string, string[]>();
  for (const { id, ref } of refs)
    if (ref.provider === 'exec') helpers.set(ref.helper, [...(helpers.get(ref.helper) ?? []), id]);
  if (helpers.size === 0) return [];
  let settings: ExecSettings;
  try {
    settings = parseExecSettings(env);
  } catch (e) {
    if (e instanceof ConfigErrors) return [...e.errors];
    throw e;
  }
  const errors: ConfigError[] = [];
  for (const [helper, ids] of helpers) {
    try {
      resolveHelper(settings.helpersDir, helper);
    } catch (e) {
      if (!(e instanceof ProviderError)) throw e;
      // resolveHelper's messages read `EXEC_HELPERS_DIR: problem`.
      const problem = e.message.replace(/^EXEC_HELPERS_DIR: /, '');
      errors.push(new ConfigError('EXEC_HELPERS_DIR', `${problem}, which ${ids.join(', ')} run`, e.fix));
    }
  }
  return errors;
}

/**
 * A provider's settings error as a ConfigError. Those errors read `VARIABLE: problem`
 * (docs/troubleshooting.md lists them with their provider's `invalid` failures): split them back into
 * field and problem.
 */
function settingError(e: unknown, fallbackField: string): ConfigError {
  if (!(e instanceof ProviderError)) throw e;
  const m = /^([A-Z][A-Z0-9_]*): ([^]*)$/.exec(e.message);
  const [field, problem] = m ? [m[1]!, m[2]!] : [fallbackField, e.message];
  return new ConfigError(field, problem, e.fix);
}
