import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { requestErrorReason } from './http-request.ts';
import { createKubernetesClient, ServiceAccountError, type KubernetesResponse } from './kubernetes-client.ts';
import type { Notifier, NotifierDeps, NotifyOutcome, RotationEvent } from './notifier.ts';
import { RESTARTED_FOR_ANNOTATION } from '../contract/product-annotations.ts';

/**
 * The annotation value for a set of versions: the same for every replica that saw the same
 * rotation, so N replicas patching it cause one rollout (the template is unchanged after the first).
 */
export function restartValue(versions: Readonly<Record<string, string>>): string {
  // JSON of the sorted pairs: unambiguous whatever characters an id or a version holds.
  const pairs = JSON.stringify(
    Object.keys(versions)
      .sort()
      .map((id) => [id, versions[id]]),
  );
  return createHash('sha256').update(pairs).digest('hex').slice(0, 16);
}

interface OwnerReference {
  readonly apiVersion?: string;
  readonly kind?: string;
  readonly name?: string;
  readonly controller?: boolean;
}

interface KubeObject {
  readonly metadata?: {
    readonly ownerReferences?: readonly OwnerReference[];
    readonly deletionTimestamp?: string;
  };
  readonly spec?: {
    readonly template?: { readonly metadata?: { readonly annotations?: Record<string, string> } };
  };
}

/** Owners whose pod template we patch, by kind (all in the `apps` group). */
const WORKLOAD_RESOURCES: Readonly<Record<string, string>> = {
  Deployment: 'deployments',
  StatefulSet: 'statefulsets',
  DaemonSet: 'daemonsets',
};

interface Workload {
  readonly kind: string;
  readonly resource: string;
  readonly name: string;
}

/** What one API call was, so a failure can say which RBAC rule is missing. */
interface Call {
  readonly verb: 'get' | 'patch' | 'delete';
  readonly resource: string;
  readonly group: '' | 'apps';
  readonly name: string;
}

/** Returned instead of a value when the walk has to stop with an outcome. */
class Stop {
  readonly outcome: NotifyOutcome;
  constructor(outcome: NotifyOutcome) {
    this.outcome = outcome;
  }
}

export interface RestartOwnerOptions {
  readonly deleteBarePod: boolean;
}

/**
 * RESTART_ON_CHANGE: finds the pod's controller (ReplicaSet → Deployment, StatefulSet, DaemonSet)
 * and sets a pod-template annotation derived from the new versions, so its controller rolls the
 * pods. Skips the write when the annotation already has that value (another replica got there
 * first). A pod with no controller is deleted only when RESTART_DELETE_BARE_POD opts in.
 */
export function createRestartOwnerNotifier(
  options: RestartOwnerOptions,
  deps: NotifierDeps & { readonly kubernetesApiUrl: string; readonly podName: string },
): Notifier {
  const client = createKubernetesClient({
    apiUrl: deps.kubernetesApiUrl,
    serviceAccountDir: deps.serviceAccountDir,
  });
  const log = deps.log.child({ notifier: 'restart' });
  const podName = deps.podName;

  const namespace = async (): Promise<string> => {
    if (deps.pod.namespace) return deps.pod.namespace;
    try {
      return (await readFile(join(deps.serviceAccountDir, 'namespace'), 'utf8')).trim();
    } catch (e) {
      throw new ServiceAccountError('namespace', e);
    }
  };

  /** Runs one call; a non-2xx answer becomes a Stop with a reason and a log line that says why. */
  const call = async (
    ns: string,
    c: Call,
    run: (path: string) => Promise<KubernetesResponse>,
  ): Promise<KubeObject> => {
    const prefix = c.group === '' ? '/api/v1' : `/apis/${c.group}/v1`;
    const res = await run(
      `${prefix}/namespaces/${encodeURIComponent(ns)}/${c.resource}/${encodeURIComponent(c.name)}`,
    );
    if (res.ok) return (res.body ?? {}) as KubeObject;
    const resource = c.group === '' ? c.resource : `${c.resource}.${c.group}`;
    const fields = {
      verb: c.verb,
      resource,
      name: c.name,
      namespace: ns,
      status: res.status,
      apiReason: res.failure.reason,
    };
    if (res.status === 403) {
      log.warn(
        { ...fields, apiMessage: res.failure.message },
        `restart-on-change: the pod's service account may not ${c.verb} ${resource} in namespace ${ns}; grant it with the Role in docs/rotation.md`,
      );
      throw new Stop({ ok: false, reason: 'forbidden' });
    }
    const reason =
      res.status === 401
        ? 'unauthorized'
        : res.status === 404
          ? 'not-found'
          : res.status === 409
            ? 'conflict'
            : res.status === 422
              ? 'invalid'
              : res.status === 429
                ? 'throttled'
                : `http-${res.status}`;
    log.warn(
      { ...fields, apiMessage: res.failure.message },
      `restart-on-change: ${c.verb} ${resource} failed`,
    );
    throw new Stop({ ok: false, reason });
  };

  const findWorkload = async (
    ns: string,
    pod: KubeObject,
    signal: AbortSignal,
  ): Promise<Workload | undefined> => {
    const owner = controllerOf(pod);
    if (!owner) return undefined;
    if (owner.kind === 'ReplicaSet' && owner.apiVersion === 'apps/v1') {
      const rs = await call(
        ns,
        { verb: 'get', resource: 'replicasets', group: 'apps', name: owner.name },
        (p) => client.get(p, signal),
      );
      const deployment = controllerOf(rs);
      if (deployment?.kind === 'Deployment' && deployment.apiVersion === 'apps/v1')
        return { kind: 'Deployment', resource: 'deployments', name: deployment.name };
      throw unsupported(
        deployment
          ? `${deployment.kind} owning ReplicaSet ${owner.name}`
          : `ReplicaSet ${owner.name} (no Deployment)`,
      );
    }
    const resource = WORKLOAD_RESOURCES[owner.kind];
    if (resource && owner.apiVersion === 'apps/v1') return { kind: owner.kind, resource, name: owner.name };
    throw unsupported(`${owner.kind} ${owner.name}`);
  };

  const unsupported = (what: string): Stop => {
    log.warn(
      { owner: what },
      `restart-on-change: the pod is controlled by ${what}, which a template annotation does not restart; nothing done`,
    );
    return new Stop({ ok: false, reason: 'unsupported-owner' });
  };

  const restartWorkload = async (
    ns: string,
    workload: Workload,
    value: string,
    signal: AbortSignal,
  ): Promise<NotifyOutcome> => {
    const target = { group: 'apps', resource: workload.resource, name: workload.name } as const;
    const current = await call(ns, { ...target, verb: 'get' }, (p) => client.get(p, signal));
    const fields = {
      kind: workload.kind,
      name: workload.name,
      namespace: ns,
      annotation: RESTARTED_FOR_ANNOTATION,
      value,
    };
    if (current.spec?.template?.metadata?.annotations?.[RESTARTED_FOR_ANNOTATION] === value) {
      log.info(
        fields,
        `restart-on-change: ${workload.kind} ${workload.name} is already restarting for these versions`,
      );
      return { ok: true };
    }
    const patch = {
      spec: { template: { metadata: { annotations: { [RESTARTED_FOR_ANNOTATION]: value } } } },
    };
    await call(ns, { ...target, verb: 'patch' }, (p) =>
      client.patch(`${p}?fieldManager=secret-agent`, patch, 'application/strategic-merge-patch+json', signal),
    );
    log.info(
      fields,
      `restart-on-change: annotated the pod template of ${workload.kind} ${workload.name}; it rolls its pods`,
    );
    return { ok: true };
  };

  const deleteBarePod = async (ns: string, pod: KubeObject, signal: AbortSignal): Promise<NotifyOutcome> => {
    if (!options.deleteBarePod) {
      log.warn(
        { pod: podName, namespace: ns },
        'restart-on-change: the pod has no controller to restart it; set RESTART_DELETE_BARE_POD=true to delete it instead (nothing recreates a bare pod)',
      );
      return { ok: false, reason: 'bare-pod' };
    }
    if (pod.metadata?.deletionTimestamp) return { ok: true };
    try {
      await call(ns, { verb: 'delete', resource: 'pods', group: '', name: podName }, (p) =>
        client.delete(p, signal),
      );
    } catch (e) {
      // Already gone is what we wanted.
      if (e instanceof Stop && !e.outcome.ok && e.outcome.reason === 'not-found') return { ok: true };
      throw e;
    }
    log.info({ pod: podName, namespace: ns }, 'restart-on-change: deleted the bare pod');
    return { ok: true };
  };

  return {
    kind: 'restart',
    async notify(event: RotationEvent, signal: AbortSignal): Promise<NotifyOutcome> {
      // Replicas agree on the annotation only through versions they all see; one derived from a value
      // (a hash) would be on the pod template, where whoever may read the workload could guess a short
      // value from it. A source without a version its backend names cannot restart the workload.
      if (event.unnamed.length > 0) {
        log.error(
          {
            secrets: event.unnamed,
            fix: 'use a backend that names versions (AWS, GCP, Vault KV v2 or a dynamic secret), or have the exec helper print a `secret-agent-version:` line; else notify the app another way (signal, http, command)',
          },
          'restart-on-change: a secret has no version its backend names, and a restart value is never derived from a value',
        );
        return { ok: false, reason: 'unversioned' };
      }
      const value = restartValue(event.versions);
      try {
        const ns = await namespace();
        const pod = await call(ns, { verb: 'get', resource: 'pods', group: '', name: podName }, (p) =>
          client.get(p, signal),
        );
        const workload = await findWorkload(ns, pod, signal);
        if (!workload) return await deleteBarePod(ns, pod, signal);
        return await restartWorkload(ns, workload, value, signal);
      } catch (e) {
        if (e instanceof Stop) return e.outcome;
        if (e instanceof ServiceAccountError) {
          log.warn({ file: e.file }, `restart-on-change: ${e.message}`);
          return { ok: false, reason: 'no-service-account' };
        }
        const reason = requestErrorReason(e, signal);
        log.warn(
          { reason, code: errorCode(e) },
          'restart-on-change: the Kubernetes API could not be reached',
        );
        return { ok: false, reason };
      }
    },
  };
}

function controllerOf(object: KubeObject): (OwnerReference & { kind: string; name: string }) | undefined {
  const owner = object.metadata?.ownerReferences?.find((o) => o.controller === true);
  return owner?.kind && owner.name ? (owner as OwnerReference & { kind: string; name: string }) : undefined;
}

function errorCode(e: unknown): string | undefined {
  const code = (e as { code?: unknown } | undefined)?.code;
  return typeof code === 'string' ? code : undefined;
}
