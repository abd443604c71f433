import { AGENT_SETTINGS } from '../../agent/contract/agent-settings.ts';
import { ENV_EXEC_APP_DIR } from '../../agent/contract/env-exec.ts';
import { ConfigError, quote } from '../../agent/contract/errors.ts';
import { PREFIX } from '../annotations/annotation.ts';
import { ENV_ANNOTATION_PREFIX } from '../annotations/env-annotations.ts';
import type { InjectionMode } from '../annotations/values.ts';
import type { AgentSettingRequest, EnvExecRequest } from '../injection-request.ts';
import type { PodShape } from '../pod-shape.ts';
import { mountsOverlap, occupiedPaths } from './mount-overlap.ts';

/**
 * Which app containers run their command through the env wrapper, and whether each can: the wrapper
 * execs the command the pod spec names, so a container must name one (the webhook cannot see an
 * image's entrypoint); a variable the container sets already would be two values for one name (the
 * webhook's own SECRETS_DIR ends in DIR, a name no secret may set: agent/contract/refused-env-names.ts);
 * the wrapper must exist before the app starts, which a classic sidecar alone does not promise. Nothing
 * of the container's may sit at, above or below the wrapper's mount: a volume, a block device or its
 * termination log.
 */

export interface EnvContainers {
  readonly envExec?: EnvExecRequest;
  readonly warnings: readonly string[];
}

export function planEnvContainers(
  input: {
    readonly pod: PodShape;
    /** The variables, by name; none: nothing to plan. */
    readonly names: readonly string[];
    /** `containers` as parsed: undefined selects every container. */
    readonly containers: readonly string[] | undefined;
    readonly mode: InjectionMode | undefined;
    readonly nativeSidecars: boolean;
    readonly agentSettings: readonly AgentSettingRequest[];
  },
  errors: ConfigError[],
): EnvContainers {
  const { pod, names } = input;
  if (names.length === 0) return { warnings: [] };
  const key = (name: string) => `${PREFIX}${ENV_ANNOTATION_PREFIX}${name}`;
  const some = names.length === 1 ? key(names[0]!) : `${PREFIX}${ENV_ANNOTATION_PREFIX}*`;
  const setting = (env: keyof typeof AGENT_SETTINGS) =>
    input.agentSettings.find((s) => s.env === env)?.value ?? AGENT_SETTINGS[env].default;

  if (input.mode === 'sidecar' && !input.nativeSidecars)
    errors.push(
      new ConfigError(
        `${PREFIX}mode`,
        `is "sidecar" on a cluster without native sidecars, where the app would start before the agent has written its variables (${some})`,
        `use ${PREFIX}mode: init+sidecar (the default) or init`,
      ),
    );

  const planned: EnvExecRequest['containers'][number][] = [];
  for (const field of ['initContainers', 'containers'] as const)
    (pod.spec[field] ?? []).forEach((c, index) => {
      if (input.containers !== undefined && !input.containers.includes(c.name)) return;
      const where = `spec.${field}[${index}]`;
      const command = c.command;
      if (command === undefined || (Array.isArray(command) && command.length === 0)) {
        errors.push(
          new ConfigError(
            `${where}.command`,
            `container ${quote(c.name)} has no command in the pod spec, and the webhook cannot see its image’s entrypoint, which the env wrapper must run for ${some}`,
            `set command (and args) to what the image runs, its ENTRYPOINT and CMD (podman image inspect IMAGE --format '{{json .Config.Entrypoint}} {{json .Config.Cmd}}'); secret-agent render then shows the wrapped command. Or leave the container out with ${PREFIX}containers`,
          ),
        );
        return;
      }
      if (!Array.isArray(command) || !command.every((w) => typeof w === 'string')) {
        errors.push(
          new ConfigError(
            `${where}.command`,
            `of container ${quote(c.name)} is not a list of strings`,
            'write it as a list of strings, e.g. ["/app/server", "--port=8080"]',
          ),
        );
        return;
      }
      // A mount, a block device or the termination log there hides the wrapper the command is, or
      // makes the runtime create a mount point inside its read-only volume.
      for (const p of occupiedPaths(c))
        if (mountsOverlap(p.path, ENV_EXEC_APP_DIR))
          errors.push(
            new ConfigError(
              `${where}.${p.field}`,
              `${quote(p.path)} of container ${quote(c.name)} (its ${p.kind}) overlaps ${quote(ENV_EXEC_APP_DIR)}, where the webhook mounts the env wrapper for ${some}`,
              `${p.kind === 'mount' ? 'mount it' : 'put it'} elsewhere, or leave the container out with ${PREFIX}containers`,
            ),
          );
      const own = new Set((c.env ?? []).map((e) => e.name).filter((n) => typeof n === 'string'));
      for (const name of names)
        if (own.has(name))
          errors.push(
            new ConfigError(
              key(name),
              `sets ${quote(name)}, which container ${quote(c.name)} sets already (${where}.env)`,
              `remove one of the two, or leave the container out with ${PREFIX}containers`,
            ),
          );
      planned.push({ field, index, command: command as string[] });
    });

  const warnings: string[] = [];
  const sidecar = input.mode === 'sidecar' || input.mode === 'init+sidecar';
  if (sidecar && setting('RESTART_ON_CHANGE') !== 'true')
    warnings.push(
      `${some}: a process's environment cannot change, so a rotated value reaches the app only when its container next starts. Set ${PREFIX}restart-on-change: "true" to restart the workload on a rotation (docs/env.md)`,
    );
  return { envExec: { names, containers: planned }, warnings };
}
