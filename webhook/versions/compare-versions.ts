import type { HeldFile, PodHolding } from './held-versions.ts';

/** Where a file stands against the newest version seen for its reference. */
export type FileState = 'current' | 'behind' | 'unversioned' | 'unknown';

export interface ComparedFile extends HeldFile {
  readonly state: FileState;
}

export interface ComparedPod {
  readonly holding: PodHolding;
  readonly files: readonly ComparedFile[];
}

/** A reference's newest version: the one whose change was seen last (AWS version ids are not ordered). */
export interface Newest {
  readonly ref: string;
  readonly version: string;
  readonly since: string;
  readonly pods: number;
  readonly behind: number;
}

/**
 * Marks each file against the newest version seen for its reference across the pods read. A pod whose
 * holding is unknown gets its spec's secrets, each `unknown`; a version its backend does not name is
 * `unversioned` (nothing to compare).
 */
export function compareHoldings(holdings: readonly PodHolding[]): { pods: ComparedPod[]; newest: Newest[] } {
  const newest = new Map<string, { version: string; since: string }>();
  for (const h of holdings)
    for (const f of h.files) {
      if (f.version === '' || f.ref === '') continue;
      const seen = newest.get(f.ref);
      if (seen === undefined || f.since > seen.since)
        newest.set(f.ref, { version: f.version, since: f.since });
    }
  const counts = new Map<string, { pods: number; behind: number }>();
  const pods = holdings.map((holding) => {
    const files: ComparedFile[] =
      holding.problem !== undefined
        ? holding.pod.secrets.map((s) => ({
            ...s,
            provider: s.ref.split(':')[0] ?? '',
            version: '',
            since: '',
            state: 'unknown',
          }))
        : holding.files.map((f) => ({
            ...f,
            state:
              f.version === ''
                ? 'unversioned'
                : f.version === newest.get(f.ref)?.version
                  ? 'current'
                  : 'behind',
          }));
    for (const ref of new Set(files.map((f) => f.ref))) {
      const c = counts.get(ref) ?? { pods: 0, behind: 0 };
      c.pods++;
      if (files.some((f) => f.ref === ref && f.state !== 'current' && f.state !== 'unversioned')) c.behind++;
      counts.set(ref, c);
    }
    return { holding, files };
  });
  return {
    pods,
    newest: [...newest].map(([ref, n]) => ({ ref, ...n, ...(counts.get(ref) ?? { pods: 0, behind: 0 }) })),
  };
}

/** Why a pod is not (yet) on `version` of `ref`, or undefined when it is. */
export function whyBehind(pod: ComparedPod, ref: string, version: string): string | undefined {
  const files = pod.files.filter((f) => f.ref === ref);
  if (files.length > 0 && files.every((f) => f.version === version)) return undefined;
  const reasons: string[] = [];
  const held = [...new Set(files.map((f) => f.version).filter((v) => v !== ''))];
  if (pod.holding.problem !== undefined) reasons.push(pod.holding.problem);
  else if (held.length > 0) reasons.push(`holds ${held.join(', ')}`);
  if (!pod.holding.pod.ready) reasons.push(`not ready (${pod.holding.pod.phase})`);
  if (pod.holding.lastError !== undefined) reasons.push(`its agent's last error: ${pod.holding.lastError}`);
  if (pod.holding.pod.agent === 'init-only')
    reasons.push('init only: it holds what it fetched at start until it is restarted');
  return reasons.join('; ');
}
