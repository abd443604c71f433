import type { AgentMode } from '../../agent/contract/agent-config.ts';
import { DISABLE_SIGUSR1 } from '../../agent/contract/no-inspector.ts';
import { AGENT_SETTINGS } from '../../agent/contract/agent-settings.ts';
import { parseDuration } from '../../agent/contract/duration.ts';
import { ENV_EXEC_AGENT_DIR } from '../../agent/contract/env-exec.ts';
import { SIDECAR_V8_FLAGS } from '../../agent/contract/sidecar-v8-flags.ts';
import {
  AGENT_CONTAINER,
  AGENT_INIT_CONTAINER,
  AGENT_PORT_NAME,
  AGENT_SECRETS_DIR,
  VAULT_CLIENT_CERT_DIR,
} from '../injected-names.ts';
import { WILDCARD_HOSTS } from '../config/agent-http-address.ts';
import type { InjectionDefaults } from '../config/injection-defaults.ts';
import { HELPERS_MOUNT_PATH } from '../exec-helpers-volume.ts';
import type { InjectionRequest } from '../injection-request.ts';
import { renderAgentEnv, type EnvVar } from './agent-env.ts';

export interface AgentContainer {
  readonly name: string;
  readonly image: string;
  readonly imagePullPolicy: string;
  readonly command?: readonly string[];
  readonly env: readonly EnvVar[];
  readonly volumeMounts: readonly {
    readonly name: string;
    readonly mountPath: string;
    readonly readOnly?: true;
  }[];
  readonly resources: InjectionRequest['resources'];
  readonly securityContext: Record<string, unknown>;
  readonly restartPolicy?: 'Always';
  readonly ports?: readonly {
    readonly name: string;
    readonly containerPort: number;
    readonly protocol: 'TCP';
  }[];
  readonly lifecycle?: { readonly postStart: { readonly exec: { readonly command: readonly string[] } } };
}

/** On every Node process the agent container starts: SIGUSR1 never opens its inspector. */
export const NO_SIGUSR1_INSPECTOR = DISABLE_SIGUSR1;

/**
 * What the Node sidecar (sidecar-process: node) runs instead of the image's entrypoint (the V8
 * start-up snapshot): the plain bundle. The snapshot starts an init container in about half the CPU,
 * but keeps every provider's evaluated code resident (+6 MiB RSS, measured in bench/); a sidecar starts
 * once and stays for the pod's life, so it is the memory that counts there. With the V8 flags that keep a
 * sidecar small, which NODE_OPTIONS refuses (agent/contract/sidecar-v8-flags.ts). Paths are
 * Dockerfile.agent's.
 */
export const SIDECAR_COMMAND: readonly string[] = [
  '/nodejs/bin/node',
  NO_SIGUSR1_INSPECTOR,
  ...SIDECAR_V8_FLAGS,
  '/app/agent.js',
];

/**
 * The image's entrypoint (Dockerfile.agent's ENTRYPOINT): the agent from the V8 start-up snapshot.
 * An init container runs it as is; a small sidecar runs it for each refresh.
 */
export const AGENT_ENTRYPOINT: readonly string[] = [
  '/nodejs/bin/node',
  NO_SIGUSR1_INSPECTOR,
  '--snapshot-blob',
  '/app/agent.blob',
  '--',
];

/**
 * What an init container runs when the pod reads a GCP secret: the image's second start-up snapshot,
 * which also holds GCP's REST client evaluated (agent/snapshot.ts). It starts a GCP init run in about
 * 100 ms less CPU; the entrypoint's snapshot leaves GCP out because every run deserialises its whole
 * snapshot, and AWS and Vault pods would pay for it. Paths are Dockerfile.agent's.
 */
export const GCP_INIT_COMMAND: readonly string[] = [
  '/nodejs/bin/node',
  NO_SIGUSR1_INSPECTOR,
  '--snapshot-blob',
  '/app/agent-gcp.blob',
  '--',
];

/**
 * The small sidecar (agent/native/resident.c): holds the port and serves the probes and /metrics between
 * refreshes, and runs `resident -- RUN...` for each refresh. A run is an init run: the same command (the
 * snapshot, GCP's where the pod reads GCP, in about half the CPU of the plain bundle) and the same flags,
 * the heap cap in NODE_OPTIONS, which the resident passes on. Not SIDECAR_V8_FLAGS: they bound what a
 * long-running process accumulates (compiled code, the compilers' memory), and a run exits within a
 * second. Paths are Dockerfile.agent's.
 */
export const RESIDENT_PATH = '/app/resident';
/** What the resident sets AGENT_HANDOFF_FDS to for each run: never rendered, for admission's check alone. */
export const RESIDENT_HANDOFF_FDS = '3,4';

export function smallSidecarCommand(readsGcp: boolean): readonly string[] {
  return [RESIDENT_PATH, '--', ...(readsGcp ? GCP_INIT_COMMAND : AGENT_ENTRYPOINT)];
}

/**
 * The native sidecar's postStart hook (agent/post-start/main.ts, built as /app/wait-ready.cjs): it
 * asks /readyz every 20 ms at first and returns once it answers 200, and the kubelet starts the pod's
 * next container only when a postStart handler has returned. A startupProbe holds the app until the
 * probe's next period instead: a second more per pod on a real node (docs/webhook.md, Start-up).
 * Paths are Dockerfile.agent's.
 */
const POST_START_COMMAND: readonly string[] = [
  '/nodejs/bin/node',
  NO_SIGUSR1_INSPECTOR,
  '/app/wait-ready.cjs',
];

/**
 * How long the app is held for the agent's first set: the agent retries for INIT_DEADLINE, and what
 * waits for it (the native sidecar's postStart hook, the env wrapper) waits 15 s longer, so the agent's
 * own error is logged first. 75 s by default: what the startupProbe the hook replaces allowed
 * (failureThreshold × periodSeconds).
 */
export function appHoldSeconds(request: Pick<InjectionRequest, 'agentSettings'>): number {
  const deadline =
    request.agentSettings.find((s) => s.env === 'INIT_DEADLINE')?.value ??
    AGENT_SETTINGS.INIT_DEADLINE.default!;
  return Math.ceil(parseDuration(deadline)! / 1000) + 15;
}

/** Where the agent goes: first in initContainers, appended to containers, or both. */
export interface AgentPlacement {
  readonly initContainer?: AgentContainer;
  readonly sidecar?: AgentContainer;
}

/**
 * The agent container(s) for a request. init+sidecar on a cluster with native sidecars is ONE
 * init container with restartPolicy Always: the kubelet starts the app only once its postStart hook
 * has seen the agent's /readyz answer 200 (every file written), so secrets exist before the app starts.
 */
export function renderAgentContainers(
  request: InjectionRequest,
  defaults: InjectionDefaults,
  volumeName: string,
  helpersVolumeName?: string,
  /** The volume of vault-client-cert-secret, when the pod names one. */
  clientCertVolume?: string,
  /** The env wrapper's volume, when the pod takes variables from secrets: the agent installs it there. */
  envExecVolume?: string,
): AgentPlacement {
  // exec: helpers, read-only, where the agent looks for them by default (EXEC_HELPERS_DIR).
  const helpersMount =
    helpersVolumeName === undefined
      ? []
      : [{ name: helpersVolumeName, mountPath: HELPERS_MOUNT_PATH, readOnly: true as const }];
  const container = (name: string, mode: AgentMode): AgentContainer => ({
    name,
    image: defaults.agentImage,
    imagePullPolicy: defaults.imagePullPolicy,
    env: renderAgentEnv(request, mode).env,
    volumeMounts: [
      // The webhook's path, not the pod's mount-path: nothing a pod chooses lands in the agent's tree.
      { name: volumeName, mountPath: AGENT_SECRETS_DIR },
      ...helpersMount,
      ...request.identityMounts,
      ...(clientCertVolume
        ? [{ name: clientCertVolume, mountPath: VAULT_CLIENT_CERT_DIR, readOnly: true as const }]
        : []),
      ...(envExecVolume ? [{ name: envExecVolume, mountPath: ENV_EXEC_AGENT_DIR }] : []),
    ],
    resources: request.resources,
    securityContext: {
      runAsNonRoot: true,
      runAsUser: request.fileAccess.runAsUser,
      runAsGroup: request.fileAccess.runAsGroup,
      readOnlyRootFilesystem: true,
      allowPrivilegeEscalation: false,
      capabilities: { drop: ['ALL'] },
      seccompProfile: { type: 'RuntimeDefault' },
    },
  });
  const setting = (env: 'AGENT_HTTP_ADDR') =>
    request.agentSettings.find((s) => s.env === env)?.value ?? AGENT_SETTINGS[env].default!;
  const holdSeconds = appHoldSeconds(request);
  // The hook runs inside the agent's container, so it asks over the loopback of the family the agent
  // binds (the webhook lets it bind only the loopback or every address).
  const { host } = AGENT_SETTINGS.AGENT_HTTP_ADDR.parse(setting('AGENT_HTTP_ADDR'), 'AGENT_HTTP_ADDR');
  const loopback =
    host === '::' || host === '::1' ? '[::1]' : host === 'localhost' ? 'localhost' : '127.0.0.1';
  const readyz = `http://${loopback}:${request.httpPort}/readyz`;
  // Declared only where Prometheus can reach it (deploy/components/monitoring's PodMonitor scrapes it by name).
  const exposed = WILDCARD_HOSTS.has(host);
  // No startupProbe beside the hook: the kubelet would then wait for the probe's next period too.
  const holdApp = {
    postStart: {
      exec: { command: [...POST_START_COMMAND, `--url=${readyz}`, `--deadline=${holdSeconds}s`] },
    },
  };
  const readsGcp = request.secrets.some((s) => s.provider === 'gcp');
  const small = request.sidecarProcess?.kind === 'small' ? request.sidecarProcess : undefined;
  const sidecar = (native: boolean, gate: boolean): AgentContainer => ({
    ...container(AGENT_CONTAINER, 'sidecar'),
    ...(small
      ? { command: smallSidecarCommand(readsGcp), resources: small.resources }
      : { command: SIDECAR_COMMAND }),
    ...(native ? { restartPolicy: 'Always' as const } : {}),
    ...(exposed
      ? { ports: [{ name: AGENT_PORT_NAME, containerPort: request.httpPort, protocol: 'TCP' as const }] }
      : {}),
    // No readiness or liveness probe: neither buys anything (docs/security.md, "A pod cannot take another
    // pod's agent down through its port"). Ready is for good once a whole set is written, which the
    // postStart hook (native) or the init container (classic) waits for before the app starts; an agent
    // whose refreshes stall ends itself, and the kubelet restarts it.
    ...(gate ? { lifecycle: holdApp } : {}),
  });

  // The entrypoint (the default snapshot) unless the pod reads GCP.
  const init = (): AgentContainer => ({
    ...container(AGENT_INIT_CONTAINER, 'init'),
    ...(readsGcp ? { command: GCP_INIT_COMMAND } : {}),
  });

  switch (request.mode) {
    case 'init':
      return { initContainer: init() };
    case 'sidecar':
      return defaults.nativeSidecars
        ? { initContainer: sidecar(true, false) }
        : { sidecar: sidecar(false, false) };
    case 'init+sidecar':
      return defaults.nativeSidecars
        ? { initContainer: sidecar(true, true) }
        : { initContainer: init(), sidecar: sidecar(false, false) };
  }
}
