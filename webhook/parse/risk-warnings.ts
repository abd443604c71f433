import { SECRET_SETTINGS } from '../../agent/contract/secret-settings.ts';
import { PREFIX } from '../annotations/annotation.ts';
import { attempt, type FileValues, type PodValues } from './read-annotations.ts';

/** A refresh interval under this is allowed, with a warning: every check is a call to the backend. */
const SHORT_REFRESH_MS = 30_000;

/** What is allowed but risky: told to the user as AdmissionReview warnings (kubectl prints them). */
export function riskWarnings(podValues: PodValues, fileValues: FileValues, sidecar: boolean): string[] {
  const modes: [string, string | undefined][] = [[`${PREFIX}file-mode`, podValues.get('file-mode')]];
  const intervals: [string, string | undefined][] = [
    [`${PREFIX}refresh-interval`, podValues.get('refresh-interval')],
  ];
  for (const [file, values] of [...fileValues].sort(([a], [b]) => a.localeCompare(b))) {
    modes.push([`${PREFIX}file-mode-${file}`, values.get('file-mode')]);
    intervals.push([`${PREFIX}refresh-interval-${file}`, values.get('refresh-interval')]);
  }
  const warnings: string[] = [];
  for (const [key, text] of modes) {
    const mode = text === undefined ? undefined : attempt(() => SECRET_SETTINGS.MODE.parse(text, key));
    if (mode !== undefined && (mode & 0o004) !== 0)
      warnings.push(
        `secret-agent: ${key} is ${text}: the file is readable by every user in the containers that mount the secrets, not only by the app's. Leave the mode unset: the webhook picks 0400 (the agent runs as the app's uid) or 0440 (shared through a group every such container holds).`,
      );
  }
  if (sidecar)
    for (const [key, text] of intervals) {
      const ms =
        text === undefined ? undefined : attempt(() => SECRET_SETTINGS.REFRESH_INTERVAL.parse(text, key));
      if (ms !== undefined && ms < SHORT_REFRESH_MS)
        warnings.push(
          `secret-agent: ${key} is ${text}: the sidecar asks the backend for each secret that often, which costs API calls and may hit rate limits. 30s or more is usually enough.`,
        );
    }
  return warnings;
}

/**
 * Privileges that pass the kernel's checks by which another process of the agent's uid and gid is
 * refused the agent's processes (its programs are execute-only: images/execute-only.ts). SYS_PTRACE
 * opens their /proc files and memory, where the container sees them (a shared process namespace or
 * hostPID), and CHECKPOINT_RESTORE their memory maps; PERFMON, SYS_ADMIN and BPF sample or probe any
 * process's memory on the node through perf or BPF, whatever namespace it is in; SYS_MODULE loads code
 * into the kernel, SYS_RAWIO reads physical memory, DAC_READ_SEARCH opens any file of the node by its
 * handle (open_by_handle_at); and so does a privileged container. Runtimes give none of them.
 */
const PEEKING_WHEN_SHARED = ['SYS_PTRACE', 'CHECKPOINT_RESTORE'] as const;
const PEEKING_ANYWHERE = [
  'SYS_ADMIN',
  'PERFMON',
  'BPF',
  'SYS_MODULE',
  'SYS_RAWIO',
  'DAC_READ_SEARCH',
] as const;

/** What processPeekWarnings reads of the pod: whether it shares processes, and each container's privileges. */
export interface ProcessPeekInput {
  /** shareProcessNamespace, the pod's or turned on by the webhook (rotation-signal, exit-with-process), or hostPID. */
  readonly sharesProcesses: boolean;
  readonly containers: readonly {
    readonly name: string;
    readonly securityContext?: {
      readonly privileged?: unknown;
      readonly capabilities?: { readonly add?: unknown };
    };
  }[];
}

/**
 * A container of the pod that can read the agent's processes. Allowed (debuggers and profilers need
 * it: the pod's author asked), with a warning naming it: what the agent holds (a Vault token, cloud
 * credentials, the secrets) is then that container's too. Ephemeral containers, which nobody reviews
 * at CREATE, are refused the same privileges outright (deploy/base/admission-policies.yaml).
 */
export function processPeekWarnings(input: ProcessPeekInput): string[] {
  const warnings: string[] = [];
  for (const c of input.containers) {
    const sc = c.securityContext;
    const added = Array.isArray(sc?.capabilities?.add)
      ? sc.capabilities.add
          .filter((a): a is string => typeof a === 'string')
          .map((a) => a.toUpperCase().replace(/^CAP_/, ''))
      : [];
    const peeking = added.includes('ALL')
      ? ['ALL']
      : [...(input.sharesProcesses ? PEEKING_WHEN_SHARED : []), ...PEEKING_ANYWHERE].filter((cap) =>
          added.includes(cap),
        );
    const what =
      sc?.privileged === true
        ? 'is privileged'
        : peeking.length > 0
          ? `adds ${peeking.join(', ')}`
          : undefined;
    if (what)
      warnings.push(
        `secret-agent: container "${c.name}" ${what}: it can read the agent's memory, environment and open files (its Vault token, cloud credentials, every secret), which no other container of the pod can. Drop that from the container${input.sharesProcesses ? ", or keep the pod's processes apart (shareProcessNamespace and hostPID off; rotation-http-url or rotation-sentinel-file instead of rotation-signal)" : ''}.`,
      );
  }
  return warnings;
}
