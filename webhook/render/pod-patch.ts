import {
  ENV_EXEC_APP_DIR,
  ENV_EXEC_MAX_WAIT_SECONDS,
  envExecCommand,
} from '../../agent/contract/env-exec.ts';
import type { ContainerShape, PodShape } from '../pod-shape.ts';
import { OWN_VOLUME_PREFIX } from '../injected-names.ts';
import {
  STATUS_ANNOTATION,
  STATUS_INJECTED,
  WARNINGS_ANNOTATION,
} from '../../agent/contract/product-annotations.ts';
import type { InjectionDefaults } from '../config/injection-defaults.ts';
import type { InjectionRequest } from '../injection-request.ts';
import { addToArray, addToObject, pointer, setMember, type PatchOperation } from '../patch.ts';
import { appHoldSeconds, renderAgentContainers } from './agent-containers.ts';

/** The env var app containers read to find the files. */
export const SECRETS_DIR_ENV = 'SECRETS_DIR';
// Each starts with OWN_VOLUME_PREFIX, which no volume or mount of the pod may use (parse/app-containers.ts).
const VOLUME_NAME = `${OWN_VOLUME_PREFIX}-secrets`;
const HELPERS_VOLUME_NAME = `${OWN_VOLUME_PREFIX}-helpers`;
const CLIENT_CERT_VOLUME_NAME = `${OWN_VOLUME_PREFIX}-vault-client`;
const ENV_EXEC_VOLUME_NAME = `${OWN_VOLUME_PREFIX}-exec`;
/** The env wrapper is tens of KiB; the agent writes one copy and a temporary one beside it. */
const ENV_EXEC_VOLUME_SIZE = '1Mi';

/**
 * The JSON Patch that injects a request into a pod. Order matters: existing init containers are
 * patched by their original indexes before the agent is inserted in front of them.
 */
export function renderPodPatch(
  pod: PodShape,
  request: InjectionRequest,
  defaults: InjectionDefaults,
): PatchOperation[] {
  const ops: PatchOperation[] = [];
  const volumeName = VOLUME_NAME;
  const wanted = (c: ContainerShape) =>
    request.containers === undefined || request.containers.includes(c.name);

  const helpersVolumeName = request.execHelpers ? HELPERS_VOLUME_NAME : undefined;
  // The client certificate's key goes to the agent container only, never to the app's.
  const clientCertVolume = request.vaultClientCertSecret ? CLIENT_CERT_VOLUME_NAME : undefined;
  const envExec = request.envExec;
  const envExecVolume = envExec ? ENV_EXEC_VOLUME_NAME : undefined;
  const volumes: Record<string, unknown>[] = [
    { name: volumeName, emptyDir: { medium: 'Memory', sizeLimit: request.volumeSizeLimit } },
    // The helpers of exec: references, for the agent containers only (renderAgentContainers mounts it).
    ...(request.execHelpers && helpersVolumeName
      ? [{ name: helpersVolumeName, ...request.execHelpers }]
      : []),
    ...(clientCertVolume
      ? [{ name: clientCertVolume, secret: { secretName: request.vaultClientCertSecret } }]
      : []),
    // The env wrapper, which the agent installs and the app containers run, read-only.
    ...(envExecVolume
      ? [{ name: envExecVolume, emptyDir: { medium: 'Memory', sizeLimit: ENV_EXEC_VOLUME_SIZE } }]
      : []),
  ];
  volumes.forEach((volume, i) => {
    // Each one after the pod's and those added before it.
    const before = i === 0 ? pod.spec.volumes : [...(pod.spec.volumes ?? []), ...volumes.slice(0, i)];
    ops.push(addToArray(before, '/spec/volumes', volume, 'last'));
  });
  const mountInto = (list: readonly ContainerShape[], field: 'containers' | 'initContainers') => {
    list.forEach((c, i) => {
      if (!wanted(c)) return;
      const base = pointer('spec', field, i);
      ops.push(
        addToArray(
          c.volumeMounts,
          `${base}/volumeMounts`,
          { name: volumeName, mountPath: request.mountPath, readOnly: true },
          'last',
        ),
      );
      // An app that already names its own SECRETS_DIR keeps it.
      if (!(c.env ?? []).some((e) => e.name === SECRETS_DIR_ENV))
        ops.push(
          addToArray(c.env, `${base}/env`, { name: SECRETS_DIR_ENV, value: request.mountPath }, 'last'),
        );
    });
  };
  mountInto(pod.spec.initContainers ?? [], 'initContainers');
  mountInto(pod.spec.containers, 'containers');
  // Secrets as env vars: the container's own command runs through the wrapper, its args unchanged. It
  // waits for the set as long as the native sidecar's hook holds the app, within the wrapper's bound.
  const waitSeconds = Math.min(appHoldSeconds(request), ENV_EXEC_MAX_WAIT_SECONDS);
  for (const c of envExec?.containers ?? []) {
    const container = pod.spec[c.field]![c.index]!;
    const base = pointer('spec', c.field, c.index);
    // After mountInto's: its mount went last, and this one goes after it.
    const mounts = [...(container.volumeMounts ?? []), { name: volumeName }];
    ops.push(
      addToArray(
        mounts,
        `${base}/volumeMounts`,
        { name: envExecVolume, mountPath: ENV_EXEC_APP_DIR, readOnly: true },
        'last',
      ),
      {
        op: 'replace',
        path: `${base}/command`,
        value: envExecCommand(request.mountPath, waitSeconds, envExec!.names, c.command),
      },
    );
  }

  const placement = renderAgentContainers(
    request,
    defaults,
    volumeName,
    helpersVolumeName,
    clientCertVolume,
    envExecVolume,
  );
  if (placement.initContainer)
    ops.push(addToArray(pod.spec.initContainers, '/spec/initContainers', placement.initContainer, 'first'));
  if (placement.sidecar)
    ops.push(addToArray(pod.spec.containers, '/spec/containers', placement.sidecar, 'last'));
  if (request.shareProcessNamespace && pod.spec.shareProcessNamespace !== true)
    ops.push(setMember('/spec/shareProcessNamespace', true));
  const group = request.fileAccess.addSupplementalGroup;
  if (group !== undefined) {
    const context = pod.spec.securityContext;
    const groups = Array.isArray(context?.supplementalGroups) ? context.supplementalGroups : undefined;
    ops.push(
      context === undefined
        ? setMember('/spec/securityContext', { supplementalGroups: [group] })
        : addToArray(groups, '/spec/securityContext/supplementalGroups', group, 'last'),
    );
  }
  // A controller's pods show admission warnings nowhere (the API server returns them to the
  // controller only): the pod keeps them, for `kubectl describe pod`.
  const ours: Record<string, string> = { [STATUS_ANNOTATION]: STATUS_INJECTED };
  if (request.warnings.length > 0) ours[WARNINGS_ANNOTATION] = request.warnings.join('\n');
  const existing = pod.metadata?.annotations;
  if (pod.metadata === undefined) ops.push(setMember('/metadata', { annotations: ours }));
  else if (existing === undefined) ops.push(setMember('/metadata/annotations', ours));
  else {
    for (const [key, value] of Object.entries(ours))
      ops.push(addToObject(existing, '/metadata/annotations', key, value));
    // Both are the webhook's own: warnings a pod brought along (a copied manifest) are not this admission's.
    if (ours[WARNINGS_ANNOTATION] === undefined && Object.hasOwn(existing, WARNINGS_ANNOTATION))
      ops.push({ op: 'remove', path: pointer('metadata', 'annotations', WARNINGS_ANNOTATION) });
  }
  return ops;
}
