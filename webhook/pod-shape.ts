/**
 * Admission's view of a pod: the shape-checked fields admission/review.ts copies out of an
 * AdmissionReview, which the checks (parse/) and the patch (render/) read.
 */

/** The container fields admission reads: no other field of a container reaches it. */
export interface ContainerShape {
  readonly name: string;
  /** As the pod has it: what the env wrapper runs (secret-agent.io/env-*); unchecked here. */
  readonly command?: unknown;
  readonly env?: readonly { readonly name?: unknown; readonly value?: unknown }[];
  /**
   * Their paths, and their names where a name is the webhook's (`secret-agent…`, which no container of
   * the pod may mount): the identity the agent inherits is EKS's volume, by name, never the app's mount.
   */
  readonly volumeMounts?: readonly { readonly name?: unknown; readonly mountPath?: unknown }[];
  readonly ports?: readonly { readonly name?: unknown; readonly containerPort?: unknown }[];
  /** Where the runtime creates each block device of the container: no mount of the webhook's over one. */
  readonly volumeDevices?: readonly { readonly devicePath?: unknown }[];
  /** Where the kubelet mounts the termination log (default /dev/termination-log): no mount path over it. */
  readonly terminationMessagePath?: unknown;
  /**
   * Who the container runs as, where its spec says (the image's USER decides otherwise), and what
   * privileges would let it read the agent's processes (parse/risk-warnings.ts processPeekWarnings).
   */
  readonly securityContext?: {
    readonly runAsUser?: unknown;
    readonly runAsGroup?: unknown;
    readonly privileged?: unknown;
    readonly capabilities?: { readonly add?: unknown };
  };
}

/**
 * The part of a Pod admission reads, and nothing else: everything that decides the patch or the
 * refusal. decodeAdmissionReview copies exactly these fields out of request.object (podView), so
 * code that reads a field not listed here reads nothing, and the admission cache, keyed by a hash of
 * this view, covers every input by construction. A field added here must be copied in podView: the
 * compiler insists.
 */
export interface PodShape {
  readonly metadata?: {
    readonly namespace?: string;
    /** Only the secret-agent.io/ annotations: no other is read (a rollout's restartedAt differs). */
    readonly annotations?: Readonly<Record<string, string>>;
    /** Only the opt-in label: no other is read (a StatefulSet's pod-name label differs per pod). */
    readonly labels?: Readonly<Record<string, string>>;
  };
  readonly spec: {
    readonly containers: readonly ContainerShape[];
    readonly initContainers?: readonly ContainerShape[];
    readonly volumes?: readonly VolumeShape[];
    readonly shareProcessNamespace?: boolean;
    /** The node's process namespace: every container sees the agent's processes, as with shareProcessNamespace. */
    readonly hostPID?: unknown;
    /** The node's network namespace: the agent's loopback port would be the node's (agent-http-port.ts). */
    readonly hostNetwork?: unknown;
    readonly restartPolicy?: unknown;
    readonly automountServiceAccountToken?: unknown;
    readonly securityContext?: {
      readonly runAsUser?: unknown;
      readonly runAsGroup?: unknown;
      readonly fsGroup?: unknown;
      readonly supplementalGroups?: unknown;
    };
  };
}

/**
 * A volume as admission reads it: its name and, for a projected volume, which of its sources are
 * service-account tokens and at what path (what EKS's identity volumes are; inherit-cloud-identity.ts).
 */
export interface VolumeShape {
  readonly name?: unknown;
  readonly projected?: {
    /** One entry per source, in order; a source of another kind has no serviceAccountToken. */
    readonly sources?: readonly { readonly serviceAccountToken?: { readonly path?: unknown } }[];
  };
}

/** Every container of the pod: its containers, then its init containers. */
export function podContainers(pod: PodShape): readonly ContainerShape[] {
  return [...pod.spec.containers, ...(pod.spec.initContainers ?? [])];
}
