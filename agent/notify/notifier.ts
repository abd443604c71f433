import type { PodIdentity, SidecarSettings } from '../contract/agent-config.ts';
import type { Logger } from '../log.ts';

/** One swap that changed the set: what the app is told about. Versions, file names: never values. */
export interface RotationEvent {
  /**
   * Secret id (SECRET_0, …) → the version now written, as its backend names it (SecretValue.backendVersion):
   * never a hash of a value.
   */
  readonly versions: Readonly<Record<string, string>>;
  /** Secret ids whose backend names no version (file:, Vault KV v1, an exec helper without a version line). */
  readonly unnamed: readonly string[];
  /** Files (relative to SECRETS_DIR) whose content changed. */
  readonly changedFiles: readonly string[];
}

/** One way of telling the app; failures are reported, never thrown past the notifier. */
export interface Notifier {
  readonly kind: 'signal' | 'http' | 'command' | 'restart' | 'sentinel';
  notify(event: RotationEvent, signal: AbortSignal): Promise<NotifyOutcome>;
  /**
   * For the small sidecar, whose process ends after each refresh: resolves once what the notifier
   * found to do at its start is done (a sentinel file whose hold is over, removed), and says when it
   * next has work (the end of a hold), so the next run comes by then.
   */
  settle?(): Promise<{ readonly dueAt: number | undefined }>;
}

export type NotifyOutcome = { readonly ok: true } | { readonly ok: false; readonly reason: string };

export interface NotifierDeps {
  readonly log: Logger;
  readonly pod: PodIdentity;
  /** Where the service-account token, ca.crt and namespace are (restart-on-change). */
  readonly serviceAccountDir: string;
  /** Kubernetes API base URL; from KUBERNETES_SERVICE_HOST/PORT in a pod. */
  readonly kubernetesApiUrl: string | undefined;
  /** The volume: where the sentinel file goes. */
  readonly secretsDir: string;
}

export type CreateNotifiers = (settings: SidecarSettings, deps: NotifierDeps) => Notifier[];
