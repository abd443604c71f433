import { AGENT_SETTINGS } from '../../agent/contract/agent-settings.ts';
import { SECRET_SETTINGS } from '../../agent/contract/secret-settings.ts';
import { ConfigError, quote } from '../../agent/contract/errors.ts';
import { PREFIX } from '../annotations/annotation.ts';
import type { FileAccess, SecretFileRequest } from '../injection-request.ts';
import type { ContainerShape, PodShape } from '../pod-shape.ts';
import { attempt } from './read-annotations.ts';

/** A file mode the pod chose, with the annotation that chose it. */
export interface ChosenMode {
  readonly annotation: string;
  readonly text: string;
  readonly mode: number;
}

export interface FileAccessInput {
  readonly pod: PodShape;
  /** The containers and init containers that get the secrets volume (not the agent's). */
  readonly mounting: readonly ContainerShape[];
  /** `secret-agent.io/agent-run-as-user`, when the pod sets it. */
  readonly agentUser?: number;
  /** Every mode the pod chose (file-mode, file-mode-<file>). */
  readonly chosenModes: readonly ChosenMode[];
  /** AGENT_RUN_AS_USER and AGENT_FILE_GROUP. */
  readonly defaults: { readonly runAsUser: number; readonly fileGroup: number };
}

export interface FileAccessPlan {
  readonly access: FileAccess;
  /** The fallback the webhook chose, told to the user. */
  readonly warnings: readonly string[];
  /** A chosen mode no mounting container could read through. */
  readonly errors: readonly ConfigError[];
}

const SHARED_FILE_MODE = '0440';

/**
 * Who can read the secrets' files once the kubelet runs the pod, worked out from the spec alone: the
 * uid and groups each container that mounts the volume will have (container securityContext over the
 * pod's; the pod's fsGroup and supplementalGroups reach every container), and from them the agent's
 * user and group and the files' mode.
 *
 * - Every mounting container runs as one uid the spec names (not root): the agent runs as it and
 *   writes 0400 files, readable by that user alone.
 * - Otherwise (several uids, root, or a uid the image's USER decides, which the webhook cannot see):
 *   the files are 0440 in a group every mounting container holds, the pod's fsGroup, else their common
 *   runAsGroup, else a group the webhook adds to the pod's supplementalGroups. Never world-readable.
 */
export function planFileAccess(input: FileAccessInput): FileAccessPlan {
  const { pod, mounting, agentUser, defaults } = input;
  const podContext = pod.spec.securityContext;
  const users = mounting.map((c) => ({
    name: c.name,
    uid: id(c.securityContext?.runAsUser) ?? id(podContext?.runAsUser),
    gid: id(c.securityContext?.runAsGroup) ?? id(podContext?.runAsGroup),
  }));
  const gids = new Set(users.map((u) => u.gid));
  const commonGid = gids.size === 1 ? [...gids][0] : undefined;
  const uids = new Set(users.map((u) => u.uid));
  const [onlyUid] = uids;

  const rootGroup = rootGroupErrors(podContext);
  // The agent's group is always set and never 0: left to the runtime, a pod's runAsGroup: 0, or a uid
  // the image's passwd does not list, gives it root's group.
  const ownGroup = commonGid !== undefined && commonGid !== 0 ? commonGid : defaults.fileGroup;

  // Nobody reads: nothing to share (a pod whose `containers` names none of its own).
  if (users.length === 0)
    return {
      access: { runAsUser: agentUser ?? defaults.runAsUser, runAsGroup: ownGroup, sharing: 'owner' },
      warnings: [],
      errors: rootGroup,
    };

  if (uids.size === 1 && onlyUid !== undefined && onlyUid !== 0 && (agentUser ?? onlyUid) === onlyUid)
    return {
      access: { runAsUser: onlyUid, runAsGroup: ownGroup, sharing: 'owner' },
      warnings: [],
      errors: rootGroup,
    };

  const why = ownerImpossible(users, agentUser);
  const fsGroup = id(podContext?.fsGroup);
  const supplemental = Array.isArray(podContext?.supplementalGroups)
    ? (podContext.supplementalGroups as unknown[]).map(id)
    : [];
  const [group, source, add] =
    fsGroup !== undefined && fsGroup !== 0
      ? [fsGroup, 'the pod’s fsGroup', false]
      : commonGid !== undefined && commonGid !== 0
        ? [commonGid, 'the runAsGroup of every container that mounts them', false]
        : [
            defaults.fileGroup,
            supplemental.includes(defaults.fileGroup)
              ? 'in the pod’s supplementalGroups'
              : 'which the webhook added to the pod’s supplementalGroups',
            !supplemental.includes(defaults.fileGroup),
          ];

  const errors = [...rootGroup, ...modeErrors(input.chosenModes, why, group, source)];
  const podMode = input.chosenModes.find((m) => m.annotation === `${PREFIX}file-mode`);
  const mode = podMode?.text ?? SHARED_FILE_MODE;
  return {
    access: {
      runAsUser: agentUser ?? defaults.runAsUser,
      runAsGroup: group,
      sharing: 'group',
      ...(podMode === undefined ? { defaultFileMode: SHARED_FILE_MODE } : {}),
      ...(add ? { addSupplementalGroup: group } : {}),
    },
    warnings: [
      `secret-agent: ${why}: the files are shared through group ${group} (${source}), mode ${mode}. To make them readable by one user alone (0400), run every container that mounts them as one non-root uid (securityContext.runAsUser).`,
    ],
    errors,
  };
}

/** A chosen mode without the group's read bit, where the files must be shared through a group. */
function modeErrors(modes: readonly ChosenMode[], why: string, group: number, source: string): ConfigError[] {
  return modes
    .filter((m) => (m.mode & 0o040) === 0)
    .map(
      (m) =>
        new ConfigError(
          m.annotation,
          `${quote(m.text)} lets only the file’s owner read it, but ${why}: no single owner can be every reader`,
          `use ${SHARED_FILE_MODE} (the files are then shared through group ${group}, ${source}), or run every container that mounts the secrets as one non-root uid (securityContext.runAsUser)`,
        ),
    );
}

/**
 * The pod's fsGroup and supplementalGroups are every container's, the agent's too, and no container
 * field takes them away: 0 there would give the agent, which holds the pod's backend credentials,
 * root's group. A pod-wide runAsGroup: 0 is not refused: the agent sets its own.
 */
function rootGroupErrors(context: PodShape['spec']['securityContext']): ConfigError[] {
  const supplemental = Array.isArray(context?.supplementalGroups)
    ? (context.supplementalGroups as unknown[])
    : [];
  const fields = [
    ...(id(context?.fsGroup) === 0 ? ['spec.securityContext.fsGroup'] : []),
    ...(supplemental.some((g) => id(g) === 0) ? ['spec.securityContext.supplementalGroups'] : []),
  ];
  return fields.map(
    (field) =>
      new ConfigError(
        `${PREFIX}inject`,
        `${field} gives every container, the agent included, group 0 (root’s), which the agent never runs with`,
        `remove 0 from ${field}: to share files with a group, use a non-root gid such as 1000`,
      ),
  );
}

/**
 * The modes the pod chose (`file-mode`, then each `file-mode-<file>`), with their annotations. A pod-wide
 * mode that does not parse is left out: its own error is reported already; per-file ones were checked.
 */
export function chosenModes(
  podFileMode: string | undefined,
  secrets: readonly Pick<SecretFileRequest, 'file' | 'mode'>[],
): ChosenMode[] {
  const modes: ChosenMode[] = [];
  if (podFileMode !== undefined) {
    const annotation = `${PREFIX}file-mode`;
    const mode = attempt(() => AGENT_SETTINGS.FILE_MODE.parse(podFileMode, annotation));
    if (mode !== undefined) modes.push({ annotation, text: podFileMode, mode });
  }
  for (const { file, mode } of secrets)
    if (mode !== undefined) {
      const annotation = `${PREFIX}file-mode-${file}`;
      modes.push({ annotation, text: mode, mode: SECRET_SETTINGS.MODE.parse(mode, annotation) });
    }
  return modes;
}

/** Why one owner cannot serve every reader, naming the containers and uids (never a value). */
function ownerImpossible(
  users: readonly { readonly name: string; readonly uid: number | undefined }[],
  agentUser: number | undefined,
): string {
  const unknown = users.filter((u) => u.uid === undefined).map((u) => quote(u.name));
  if (unknown.length > 0)
    return `${unknown.length === 1 ? `container ${unknown[0]} sets` : `containers ${unknown.join(', ')} set`} no runAsUser (the image’s USER decides, which the webhook cannot see)`;
  const uids = new Set(users.map((u) => u.uid));
  if (uids.size > 1)
    return `the containers that mount the secrets run as different users (${users.map((u) => `${quote(u.name)} ${u.uid}`).join(', ')})`;
  const [uid] = uids;
  if (uid === 0)
    return 'the containers that mount the secrets run as root (uid 0), which the agent never does';
  return `${PREFIX}agent-run-as-user is ${agentUser}, not ${uid}, the uid of the containers that mount the secrets`;
}

/** A uid or gid as the API takes it: a non-negative integer; anything else is as if unset. */
function id(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isInteger(v) && v >= 0 ? v : undefined;
}
