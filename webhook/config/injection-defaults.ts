import type { SidecarProcessName } from '../annotations/values.ts';
import type { ExecHelpersVolume } from '../exec-helpers-volume.ts';
import type { VaultPolicy } from '../vault-policy.ts';
import type { NativeSidecarsSetting } from './setting-values.ts';

/**
 * The part of the webhook's config that shapes what it injects: the defaults every pod starts from,
 * which its annotations may override where the cluster lets them.
 */

export interface ClusterDefaults {
  readonly awsRegion?: string;
  readonly gcpProject?: string;
  readonly vaultAddr?: string;
  readonly vaultRole?: string;
  readonly vaultAuthMount?: string;
  readonly vaultAuthMethod?: string;
  readonly vaultNamespace?: string;
  readonly vaultAuthNamespace?: string;
  /** PEM. */
  readonly vaultCaCert?: string;
  readonly vaultTlsServerName?: string;
  readonly vaultRevokeOnShutdown?: string;
  readonly vaultAwsRegion?: string;
  readonly vaultAwsStsEndpoint?: string;
  readonly vaultAwsIamServerId?: string;
}

/** What rendering needs: the part of the config that shapes patches. */
export interface InjectionDefaults {
  readonly agentImage: string;
  readonly imagePullPolicy: 'Always' | 'IfNotPresent' | 'Never';
  readonly nativeSidecars: boolean;
  readonly allowFileReferences: boolean;
  /** Where exec: helpers come from; undefined: exec: references are refused (ALLOW_EXEC_REFERENCES). */
  readonly execHelpers?: ExecHelpersVolume;
  readonly runAsUser: number;
  /** AGENT_FILE_GROUP: the group added to share files when no group of the pod's can. */
  readonly fileGroup: number;
  readonly resources: {
    readonly cpuRequest: string;
    readonly cpuLimit?: string;
    readonly memoryRequest: string;
    readonly memoryLimit: string;
    /** AGENT_SMALL_SIDECAR_MEMORY_REQUEST: a small sidecar's, in place of memoryRequest. */
    readonly smallSidecarMemoryRequest: string;
  };
  /** AGENT_SIDECAR_PROCESS: what a pod that does not say gets, where it suits the pod. */
  readonly sidecarProcess: SidecarProcessName;
  /** AGENT_RUN_DEADLINE, in ms: a small sidecar's longest refresh run, before a pod's INIT_DEADLINE raises it. */
  readonly runDeadlineMs: number;
  /** AGENT_HTTP_ADDR: where a sidecar serves its port when the pod does not say (the loopback by default). */
  readonly agentHttpAddr: string;
  readonly volumeSizeLimit: string;
  readonly cluster: ClusterDefaults;
  /** secret-agent.io/rotation-command is allowed (ALLOW_ROTATION_COMMAND). */
  readonly allowRotationCommand: boolean;
  /** What a pod may choose of its Vault login (ALLOW_VAULT_AUTH_METHODS, VAULT_NAMESPACE_PINS). */
  readonly vaultPolicy: VaultPolicy;
  /** Never inject here. */
  readonly ownNamespace: string;
}

/** The config's injection part: InjectionDefaults before NATIVE_SIDECARS=auto is resolved at start. */
export type InjectionSettings = Omit<InjectionDefaults, 'nativeSidecars'> & {
  readonly nativeSidecars: NativeSidecarsSetting;
};
