import { AGENT_SETTINGS } from '../../agent/contract/agent-settings.ts';
import { formatDuration, parseDuration } from '../../agent/contract/duration.ts';
import { ConfigError, quote } from '../../agent/contract/errors.ts';
import { SMALL_SIDECAR_MIN_INTERVAL_MS } from '../agent-sizing.ts';
import { PREFIX } from '../annotations/annotation.ts';
import type { InjectionMode, SidecarProcessName } from '../annotations/values.ts';
import type { InjectionDefaults } from '../config/injection-defaults.ts';
import type {
  AgentResources,
  AgentSettingRequest,
  InjectionRequest,
  SecretFileRequest,
  SidecarProcess,
} from '../injection-request.ts';

/**
 * What stays in the sidecar between refreshes. The small sidecar (/app/resident, agent/native/resident.c)
 * holds the port and runs the agent from the start-up snapshot for each refresh, so between refreshes a
 * pod pays ~2 MiB instead of a whole Node process. It suits most pods, not all: a pod that does not say
 * gets it where it suits (AGENT_SIDECAR_PROCESS=small), else the Node agent as before, silently (it gets
 * what it always had, and has nothing to fix); a pod that asks for it and does not suit it is refused,
 * with why and the fix. Only the sidecar changes: an init container is one run whatever this says.
 */

export interface SidecarProcessInput {
  /** The annotation as parsed; undefined when unset (or bad: its error is reported already). */
  readonly chosen: SidecarProcessName | undefined;
  /** The mode the pod gets (after run-to-completion). */
  readonly mode: InjectionMode;
  readonly agentSettings: readonly AgentSettingRequest[];
  readonly secrets: readonly SecretFileRequest[];
  readonly providerEnv: InjectionRequest['providerEnv'];
  /** Whether the pod set vault-revoke-on-shutdown itself, so a refusal names what to change. */
  readonly revokeChosen: boolean;
  /** A small sidecar's resources (parse/agent-resources.ts). */
  readonly smallResources: AgentResources;
}

const ANNOTATION = `${PREFIX}sidecar-process`;

/**
 * How much longer than INIT_DEADLINE the first run may take before the resident stops it: its own fill
 * retries for INIT_DEADLINE, then reports; as the native sidecar's postStart hook waits (15 s more).
 */
const FIRST_RUN_MARGIN_MS = 15_000;
/** The resident takes AGENT_RUN_DEADLINE up to 1h. */
const MAX_RUN_DEADLINE_MS = 3_600_000;

/** The sidecar's process, or undefined where no sidecar runs; a refusal goes to `errors`. */
export function chooseSidecarProcess(
  input: SidecarProcessInput,
  defaults: Pick<InjectionDefaults, 'sidecarProcess' | 'runDeadlineMs'>,
  errors: ConfigError[],
): SidecarProcess | undefined {
  if (input.mode === 'init') return undefined;
  if (input.chosen === 'node') return { kind: 'node' };
  // Every reason at once, so a pod that asks for small fixes them in one pass.
  const reasons = unsuited(input);
  if (input.chosen === 'small') errors.push(...reasons);
  else if (defaults.sidecarProcess === 'node' || reasons.length > 0) return { kind: 'node' };
  return {
    kind: 'small',
    resources: input.smallResources,
    runDeadline: runDeadline(input.agentSettings, defaults.runDeadlineMs),
  };
}

/** Why the small sidecar does not suit this pod, each as the refusal of a pod that asks for it. */
function unsuited(input: SidecarProcessInput): ConfigError[] {
  const reasons: ConfigError[] = [];
  const floor = `${SMALL_SIDECAR_MIN_INTERVAL_MS / 1000}s`;
  // Each run starts Node from the snapshot (0.1–0.3 CPU-s): more often than once a minute, the runs'
  // CPU outweighs the memory the small sidecar saves (agent-sizing.ts, SMALL_SIDECAR_MIN_INTERVAL_MS).
  for (const [key, text] of shortIntervals(input))
    reasons.push(
      new ConfigError(
        ANNOTATION,
        `"small" does not suit this pod: ${key} is ${quote(text)}, and a small sidecar starts the agent anew for each refresh, which under ${floor} costs more CPU than keeping the Node agent`,
        `set ${key} to ${floor} or more, or ${ANNOTATION} to node`,
      ),
    );
  // Exiting once the app has ended needs a process that watches it between refreshes; the resident
  // does not, and the agent refuses EXIT_WITH_PROCESS in a run (AGENT_HANDOFF_FDS).
  if (input.agentSettings.some((s) => s.env === 'EXIT_WITH_PROCESS'))
    reasons.push(
      new ConfigError(
        ANNOTATION,
        `"small" does not suit this pod: ${PREFIX}exit-with-process needs the agent running between refreshes to see the app end`,
        `set ${ANNOTATION} to node`,
      ),
    );
  // Revoking the Vault token when the pod stops needs the process that holds it, at SIGTERM; between
  // refreshes no agent runs. Only Vault logs in, so only a pod that reads Vault is concerned.
  const revoke = input.providerEnv.find((e) => e.name === 'VAULT_REVOKE_ON_SHUTDOWN')?.value === 'true';
  if (revoke && input.secrets.some((s) => s.provider === 'vault')) {
    const source = input.revokeChosen
      ? `${PREFIX}vault-revoke-on-shutdown`
      : 'the cluster’s AGENT_VAULT_REVOKE_ON_SHUTDOWN';
    reasons.push(
      new ConfigError(
        ANNOTATION,
        `"small" does not suit this pod: Vault revoke-on-shutdown is on (${source}), which needs the agent that holds the token running when the pod stops`,
        `set ${PREFIX}vault-revoke-on-shutdown to "false", or ${ANNOTATION} to node`,
      ),
    );
  }
  // Not a reason: a file: reference. The file provider watches nothing; it reads the file at each
  // refresh (agent/providers/file/file-provider.ts), which a run does as the Node agent would.
  return reasons;
}

/** The interval annotations that give some secret a refresh interval under the small sidecar's floor. */
function shortIntervals(input: SidecarProcessInput): [string, string][] {
  const podWide = input.agentSettings.find((s) => s.env === 'REFRESH_INTERVAL');
  const short = new Map<string, string>();
  for (const s of input.secrets) {
    const chosen: [string, string] | undefined =
      s.refreshInterval !== undefined
        ? [`${PREFIX}refresh-interval-${s.file}`, s.refreshInterval]
        : podWide && [podWide.annotation, podWide.value];
    // Unset: the agent's default (5m). Both were validated before.
    if (chosen && parseDuration(chosen[1])! < SMALL_SIDECAR_MIN_INTERVAL_MS) short.set(...chosen);
  }
  return [...short];
}

/**
 * AGENT_RUN_DEADLINE: the cluster's, raised to the pod's INIT_DEADLINE + 15 s so the first run, which
 * fills the volume and retries for INIT_DEADLINE, is never stopped first; at most the resident's 1h.
 * Whole units, as the resident reads it.
 */
function runDeadline(agentSettings: readonly AgentSettingRequest[], clusterMs: number): string {
  const init =
    agentSettings.find((s) => s.env === 'INIT_DEADLINE')?.value ?? AGENT_SETTINGS.INIT_DEADLINE.default!;
  const ms = Math.max(clusterMs, parseDuration(init)! + FIRST_RUN_MARGIN_MS);
  return formatDuration(Math.min(MAX_RUN_DEADLINE_MS, Math.ceil(ms)));
}
