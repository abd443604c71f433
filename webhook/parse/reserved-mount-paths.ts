import { ENV_EXEC_APP_DIR } from '../../agent/contract/env-exec.ts';
import { DEFAULT_SERVICE_ACCOUNT_DIR } from '../../agent/contract/service-account.ts';
import { IRSA, POD_IDENTITY } from '../eks-identity.ts';
import { mountsOverlap, overlapsAsWritten } from './mount-overlap.ts';

/**
 * Paths of an app container that `secret-agent.io/mount-path` may not be at, above or below: what the
 * runtime, the kubelet, EKS and the webhook itself mount into every container. The secrets volume is
 * mounted read-only, so over one of them it hides what the container needs (its processes, its
 * devices, its name resolution, its service-account token) and under or above one it makes the runtime
 * create a mount point inside a read-only tmpfs, which fails the container's start. `/var/run` is a
 * link to `/run` in most images, and the runtime follows links inside the image when it mounts: both
 * spellings are listed, and so is `/etc/mtab`, a link into /proc in most images. Each is compared in its
 * normal form (mount-overlap.ts). Links an app's own image adds cannot be seen at admission.
 */

/** Both spellings of a path under /var/run. */
function withRunSpelling(path: string): string[] {
  return path.startsWith('/var/run/') ? [path, path.slice('/var'.length)] : [path];
}

export const RESERVED_MOUNT_PATHS: readonly { readonly path: string; readonly holds: string }[] = [
  { path: '/proc', holds: 'the container’s processes, which the runtime mounts' },
  { path: '/sys', holds: 'the kernel’s sysfs, which the runtime mounts' },
  {
    path: '/dev',
    holds:
      'the container’s devices, /dev/shm and the termination log, which the runtime and the kubelet mount',
  },
  { path: '/etc/hosts', holds: 'the kubelet’s hosts file' },
  { path: '/etc/hostname', holds: 'the kubelet’s hostname file' },
  { path: '/etc/resolv.conf', holds: 'the kubelet’s DNS configuration' },
  // A link into /proc: the runtime resolves a mount's destination inside the image and refuses one in /proc.
  {
    path: '/etc/mtab',
    holds:
      'a link to /proc/self/mounts (Debian, Ubuntu, Alpine, BusyBox and most images), where the runtime refuses to mount',
  },
  ...withRunSpelling(DEFAULT_SERVICE_ACCOUNT_DIR).map((path) => ({
    path,
    holds: 'the pod’s service-account token, which the kubelet mounts',
  })),
  ...withRunSpelling(IRSA.dir).map((path) => ({ path, holds: 'the IRSA token EKS mounts' })),
  ...withRunSpelling(POD_IDENTITY.dir).map((path) => ({ path, holds: 'the EKS Pod Identity token' })),
  // Azure Workload Identity's webhook projects its token here (AZURE_FEDERATED_TOKEN_FILE).
  ...withRunSpelling('/var/run/secrets/azure/tokens').map((path) => ({
    path,
    holds: 'the Azure Workload Identity token its webhook mounts',
  })),
  { path: ENV_EXEC_APP_DIR, holds: 'the env wrapper, which the webhook mounts for secret-agent.io/env-*' },
];

/** The reserved path `mountPath` is at, above or below, if any. */
export function reservedMountPath(mountPath: string): (typeof RESERVED_MOUNT_PATHS)[number] | undefined {
  // The entry spelt as the path is, if one overlaps it so; else one through the /var/run link.
  return (
    RESERVED_MOUNT_PATHS.find((r) => overlapsAsWritten(mountPath, r.path)) ??
    RESERVED_MOUNT_PATHS.find((r) => mountsOverlap(mountPath, r.path))
  );
}
