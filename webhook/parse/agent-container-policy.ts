import { AGENT_SETTINGS } from '../../agent/contract/agent-settings.ts';
import { NO_SDK_CONFIG_DIR } from '../../agent/contract/sdk-config-env.ts';
import { ConfigError } from '../../agent/contract/errors.ts';
import { PREFIX } from '../annotations/annotation.ts';
import { VAULT_CLIENT_CERT_DIR } from '../injected-names.ts';
import { IRSA, POD_IDENTITY } from '../eks-identity.ts';

/**
 * What a pod may put into the agent container, which holds the pod's backend credentials: a program
 * of its own (secret-agent.io/rotation-command, only where ALLOW_ROTATION_COMMAND says so). Nothing
 * of the pod's is mounted there: the agent mounts the secrets volume at AGENT_SECRETS_DIR whatever
 * the pod's mount-path, and every other mount is the webhook's at a fixed path. The trust boundary is
 * docs/security.md's.
 */

/**
 * The agent container's own paths, and what each holds: no mount of the agent container may be at,
 * above or below one but its own (test/webhook/agent-container-policy.test.ts checks every rendering).
 */
export const AGENT_OWN_PATHS: readonly { readonly path: string; readonly holds: string }[] = [
  // Dockerfile.agent: WORKDIR /app and the distroless image's Node.
  { path: '/app', holds: 'the agent’s code' },
  { path: '/nodejs', holds: 'the agent’s Node.js' },
  { path: '/secret-agent', holds: 'the secrets volume and the exec: helpers (/secret-agent/helpers)' },
  { path: VAULT_CLIENT_CERT_DIR, holds: 'the Vault client certificate' },
  { path: IRSA.dir, holds: 'the IRSA token EKS gives the pod' },
  { path: POD_IDENTITY.dir, holds: 'the EKS Pod Identity token' },
  { path: AGENT_SETTINGS.SERVICE_ACCOUNT_DIR.default!, holds: 'the pod’s service-account token' },
  { path: NO_SDK_CONFIG_DIR, holds: 'its HOME and the SDKs’ config files (none)' },
  // The distroless image's home directory, HOME before it was NO_SDK_CONFIG_DIR.
  { path: '/home', holds: 'the image’s home directories' },
];

/** The problems of what a pod puts into the agent container: its rotation command. */
export function checkAgentContainer(
  request: { readonly rotationCommand: boolean },
  allowRotationCommand: boolean,
): ConfigError[] {
  const command = checkRotationCommand(request.rotationCommand, allowRotationCommand);
  return command === undefined ? [] : [command];
}

/** secret-agent.io/rotation-command runs the pod's program in the agent container: only where the cluster allows it. */
function checkRotationCommand(set: boolean, allowed: boolean): ConfigError | undefined {
  if (!set || allowed) return undefined;
  return new ConfigError(
    `${PREFIX}rotation-command`,
    'runs a program of the pod’s in the agent container, next to the pod’s backend credentials, which this cluster does not allow (ALLOW_ROTATION_COMMAND is false)',
    `tell the app with ${PREFIX}rotation-http-url, rotation-signal or rotation-sentinel-file instead (docs/rotation.md), or ask the cluster admin to set ALLOW_ROTATION_COMMAND=true (docs/security.md)`,
  );
}
