import { quote } from '../agent/contract/errors.ts';

/** One RBAC permission of the webhook's service account, as the API server authorizes a request. */
export interface Permission {
  readonly verb: 'get' | 'create' | 'update' | 'patch';
  /** The plural resource name, e.g. secrets. */
  readonly resource: string;
  /** The API group; '' for the core group. */
  readonly group: string;
  /** The object's name; absent for create, which RBAC cannot limit by name. */
  readonly name?: string;
  /** Absent for a cluster-scoped resource. */
  readonly namespace?: string;
}

/** `get secrets "x" in namespace "y"`, `patch mutatingwebhookconfigurations.admissionregistration.k8s.io "z"`. */
export function describePermission(p: Permission): string {
  const resource = p.group === '' ? p.resource : `${p.resource}.${p.group}`;
  const name = p.name === undefined ? '' : ` ${quote(p.name)}`;
  const scope = p.namespace === undefined ? ' (cluster-scoped)' : ` in namespace ${quote(p.namespace)}`;
  return `${p.verb} ${resource}${name}${scope}`;
}

/**
 * The API server answered 403 Forbidden: the installation lacks an RBAC rule the webhook needs, which
 * is no fault of ours (exit 70 is for those). The problem names the permission, the fix the manifest
 * under deploy/ that grants it; the webhook exits with its own code for it, without a stack
 * (webhook/cli/exit-codes.ts).
 */
export class MissingPermissionError extends Error {
  readonly permission: Permission;
  readonly problem: string;
  readonly fix: string;
  constructor(permission: Permission, problem: string, fix: string) {
    super(`${problem}. Fix: ${fix}`);
    this.name = 'MissingPermissionError';
    this.permission = permission;
    this.problem = problem;
    this.fix = fix;
  }
}
