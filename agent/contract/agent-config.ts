import type { LogLevel } from './agent-settings.ts';
import type { SecretReference } from './reference.ts';
import type { SecretFormat } from './secret-settings.ts';

/**
 * The agent's configuration as every module reads it: what parseAgentConfig (agent/config/) makes of
 * the env the contract declares (agent-settings.ts, secret-settings.ts).
 */

export type AgentMode = 'init' | 'sidecar';

export interface SecretSpec {
  /** The env prefix the secret came from (`SECRET_0`, or `SECRET_ARN` for the legacy form): what errors name. */
  readonly id: string;
  readonly ref: SecretReference;
  /** Path inside the secrets directory; for `split`, the directory the keys go into ('' = top level). */
  readonly filename: string;
  readonly format: SecretFormat;
  readonly mode: number;
  /** Sidecar refresh period for this secret (defaults to REFRESH_INTERVAL). */
  readonly refreshIntervalMs: number;
  /** The name templates reach this secret's value by (`{{secrets.NAME.key}}`). */
  readonly name?: string;
  /** FORMAT=template: the template text (compiled at start-up by agent/format/load-formats.ts). */
  readonly template?: string;
}

export interface PodIdentity {
  readonly namespace?: string;
  readonly name?: string;
  readonly uid?: string;
}

export interface AgentConfig {
  readonly mode: AgentMode;
  readonly secretsDir: string;
  /**
   * Name of the file set this agent owns in the directory. Distinct sets let several agents share one
   * volume, as Flyte's one-init-container-per-secret layout does with the legacy env.
   */
  readonly setName: string;
  readonly secrets: readonly SecretSpec[];
  readonly initDeadlineMs: number;
  readonly logLevel: LogLevel;
  readonly requireMemoryFs: boolean;
  readonly pod: PodIdentity;
  /** Service-account token, ca.crt and namespace, for the Kubernetes API (restart-on-change). */
  readonly serviceAccountDir: string;
  /**
   * Kubernetes Events on the pod (KUBERNETES_EVENTS); `failingAfter`: failed refresh cycles in a row
   * before SecretRefreshFailing.
   */
  readonly events?: { readonly failingAfter: number };
  /** ENV_EXEC_DIR: where the env wrapper is installed (from `program`) before anything is written. */
  readonly envExec?: { readonly dir: string; readonly program: string };
  readonly sidecar: SidecarSettings;
}

/** How the sidecar tells the app about a rotation, and where it serves probes and metrics. */
export interface SidecarSettings {
  readonly refreshIntervalMs: number;
  readonly httpAddr: { readonly host: string; readonly port: number };
  readonly signal?: { readonly name: NodeJS.Signals; readonly process?: string; readonly pidFile?: string };
  readonly http?: { readonly method: string; readonly url: string };
  readonly command?: string;
  readonly restartOnChange: boolean;
  readonly deleteBarePod: boolean;
  readonly configFile?: string;
  readonly exitWithProcess?: string;
  /** Rotations landing this close together are told to the app once. */
  readonly debounceMs: number;
  /** A file in SECRETS_DIR that exists for `holdMs` after each rotation, for a liveness probe. */
  readonly sentinel?: { readonly path: string; readonly holdMs: number };
  /**
   * The small sidecar (AGENT_HANDOFF_FDS, set by /app/resident): this process makes one refresh, hands
   * what must survive to the resident through these fds and exits.
   */
  readonly handoff?: { readonly stateFd: number; readonly outcomeFd: number };
}
