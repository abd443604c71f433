import type { AGENT_SETTINGS } from '../agent/contract/agent-settings.ts';
import type { SecretFormat } from '../agent/contract/secret-settings.ts';
import type { ProviderName } from '../agent/contract/reference.ts';
import type { InjectionMode } from './annotations/values.ts';
import type { ExecHelpersVolume } from './exec-helpers-volume.ts';

/**
 * The one typed, validated intermediate between a pod's annotations and the patch: everything the
 * renderers need, with cluster defaults already applied. Built by parse/parse-injection-request.ts.
 */

export interface SecretFileRequest {
  /** The `<file>` part of `secret-agent.io/secret-<file>` (`env-<VAR>` for a variable). */
  readonly file: string;
  /** Set for `secret-agent.io/env-<VAR>`: the variable, whose value the agent writes raw for the env wrapper. */
  readonly env?: string;
  /** The full annotation key of the reference, which errors name. */
  readonly annotation: string;
  /** The reference as written (validated with the agent's grammar). References are not secrets. */
  readonly ref: string;
  /** The backend the reference names. */
  readonly provider: ProviderName;
  /** Path inside the volume; '' only for `split` into the top level. */
  readonly path: string;
  readonly format: SecretFormat;
  readonly mode?: string;
  readonly refreshInterval?: string;
  /** format `template`: the template text (checked at admission). */
  readonly template?: string;
}

/** An agent setting the pod chose through an annotation, passed through unchanged. */
export interface AgentSettingRequest {
  readonly env: keyof typeof AGENT_SETTINGS;
  readonly value: string;
  readonly annotation: string;
}

export interface InjectionRequest {
  readonly mode: InjectionMode;
  readonly secrets: readonly SecretFileRequest[];
  readonly mountPath: string;
  /** Containers (and init containers) that get the mount; undefined means all. */
  readonly containers?: readonly string[];
  readonly agentSettings: readonly AgentSettingRequest[];
  /** Where the sidecar listens, for its probes. */
  readonly httpPort: number;
  /** The agent containers' resources; a small sidecar's memory request is its own (sidecarProcess). */
  readonly resources: AgentResources;
  /** What stays in the sidecar between refreshes; undefined where no sidecar runs. */
  readonly sidecarProcess?: SidecarProcess;
  /** The agent's user and group, and how the app reads the files (parse/plan-file-access.ts). */
  readonly fileAccess: FileAccess;
  readonly volumeSizeLimit: string;
  /** Provider env for the agent: cluster defaults with the pod's safe overrides applied. */
  readonly providerEnv: readonly { readonly name: string; readonly value: string }[];
  /**
   * Token volumes of the AWS identity the app was given (IRSA, EKS Pod Identity), mounted read-only
   * into the agent too; their env is in providerEnv. Empty when the pod has none.
   */
  readonly identityMounts: readonly {
    readonly name: string;
    readonly mountPath: string;
    readonly readOnly: true;
  }[];
  /** The cluster's helpers volume, mounted into the agent containers: only when a reference is `exec:`. */
  readonly execHelpers?: ExecHelpersVolume;
  /**
   * vault-client-cert-secret: a kubernetes.io/tls Secret mounted read-only into the agent only, at
   * VAULT_CLIENT_CERT_DIR (its paths are in providerEnv).
   */
  readonly vaultClientCertSecret?: string;
  /** Secrets as env vars: which app containers run their command through the wrapper. */
  readonly envExec?: EnvExecRequest;
  /** Signal rotation and EXIT_WITH_PROCESS need to see the app's processes. */
  readonly shareProcessNamespace: boolean;
  /** What the pod gets differs from what it asked for, or is risky: told to the user, not refused. */
  readonly warnings: readonly string[];
}

export interface AgentResources {
  readonly requests: { readonly cpu: string; readonly memory: string };
  readonly limits: { readonly cpu?: string; readonly memory: string };
}

/**
 * The sidecar's process (parse/sidecar-process.ts): the whole Node agent, or the small sidecar,
 * /app/resident, which runs the agent for each refresh; it has its own resources (a smaller memory
 * request) and AGENT_RUN_DEADLINE, a whole-unit Go duration as the resident reads it.
 */
export type SidecarProcess =
  | { readonly kind: 'node' }
  | { readonly kind: 'small'; readonly resources: AgentResources; readonly runDeadline: string };

/**
 * Who reads the files and how: the agent's uid and gid, and the mode and group that let every container
 * that mounts the volume read them (worked out by parse/plan-file-access.ts).
 */
export interface FileAccess {
  /** The agent containers' uid and gid: neither ever 0. */
  readonly runAsUser: number;
  readonly runAsGroup: number;
  /** How the app reads: as the files' owner, or through their group (runAsGroup: the agent's gid). */
  readonly sharing: 'owner' | 'group';
  /** FILE_MODE the webhook sets for the agent when the pod chose none: group sharing needs 0440. */
  readonly defaultFileMode?: string;
  /** A gid the patch adds to the pod's supplementalGroups: the group every container then holds. */
  readonly addSupplementalGroup?: number;
}

/**
 * The env wrapper in the app containers (parse/env-containers.ts): the variables it sets, and each
 * container's command as its spec has it, which the wrapper runs.
 */
export interface EnvExecRequest {
  readonly names: readonly string[];
  readonly containers: readonly {
    readonly field: 'containers' | 'initContainers';
    readonly index: number;
    readonly command: readonly string[];
  }[];
}
