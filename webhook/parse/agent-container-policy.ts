import { AGENT_SETTINGS } from '../../agent/contract/agent-settings.ts';
import { ConfigError, quote } from '../../agent/contract/errors.ts';
import { PREFIX } from '../annotations/annotation.ts';
import { VAULT_CLIENT_CERT_DIR } from '../injected-names.ts';
import { IRSA, POD_IDENTITY } from '../eks-identity.ts';
import { mountsOverlap } from './mount-overlap.ts';

/**
 * What a pod may put into the agent container, which holds the pod's backend credentials: a program
 * of its own (secret-agent.io/rotation-command, only where ALLOW_ROTATION_COMMAND says so) and a mount
 * over what the agent runs or reads (never). The trust boundary is docs/security.md's.
 */

/** The agent container's own paths, and what each holds: the secrets volume may not be mounted at, above or below one. */
export const AGENT_OWN_PATHS: readonly { readonly path: string; readonly holds: string }[] = [
  // Dockerfile.agent: WORKDIR /app and the distroless image's Node.
  { path: '/app', holds: 'the agent’s code' },
  { path: '/nodejs', holds: 'the agent’s Node.js' },
  { path: '/secret-agent', holds: 'the agent’s exec: helpers (/secret-agent/helpers)' },
  { path: VAULT_CLIENT_CERT_DIR, holds: 'the Vault client certificate' },
  { path: IRSA.dir, holds: 'the IRSA token EKS gives the pod' },
  { path: POD_IDENTITY.dir, holds: 'the EKS Pod Identity token' },
  { path: AGENT_SETTINGS.SERVICE_ACCOUNT_DIR.default!, holds: 'the pod’s service-account token' },
];

/**
 * The problems of what a pod puts into the agent container: its mount path (unless `earlier` has a
 * problem with it already) and its rotation command.
 */
export function checkAgentContainer(
  request: { readonly mountPath?: string; readonly rotationCommand: boolean },
  allowRotationCommand: boolean,
  earlier: readonly ConfigError[],
): ConfigError[] {
  const mountPath =
    request.mountPath !== undefined && !earlier.some((e) => e.field === `${PREFIX}mount-path`)
      ? checkMountPath(request.mountPath)
      : undefined;
  const command = checkRotationCommand(request.rotationCommand, allowRotationCommand);
  return [mountPath, command].filter((e) => e !== undefined);
}

/** secret-agent.io/mount-path, which the agent container mounts too, against the agent's own paths. */
function checkMountPath(mountPath: string): ConfigError | undefined {
  const own = AGENT_OWN_PATHS.find((p) => mountsOverlap(p.path, mountPath));
  if (own === undefined) return undefined;
  return new ConfigError(
    `${PREFIX}mount-path`,
    `${quote(mountPath)} overlaps ${quote(own.path)}, where the agent container has ${own.holds}; the agent container mounts the secrets there too`,
    'choose another mount path, e.g. /etc/secrets',
  );
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
