/**
 * A few lines a person can read about what the webhook's patch did to a pod: the volume, the
 * agent container(s) with their env (references and settings, never values), and the mounts in
 * the app's containers.
 */

interface EnvEntry {
  readonly name: string;
  readonly value?: string;
  readonly valueFrom?: { readonly fieldRef?: { readonly fieldPath?: string } };
}

export interface ContainerDoc {
  readonly name: string;
  readonly image?: string;
  readonly restartPolicy?: string;
  readonly env?: readonly EnvEntry[];
  readonly volumeMounts?: readonly { name: string; mountPath: string; readOnly?: boolean }[];
  readonly lifecycle?: { readonly postStart?: { readonly exec?: { readonly command?: readonly string[] } } };
  readonly securityContext?: {
    readonly runAsUser?: number;
    readonly runAsNonRoot?: boolean;
    readonly readOnlyRootFilesystem?: boolean;
    readonly allowPrivilegeEscalation?: boolean;
    readonly capabilities?: { readonly drop?: readonly string[] };
    readonly seccompProfile?: { readonly type?: string };
  };
}

export interface PodDoc {
  readonly metadata?: { readonly annotations?: Readonly<Record<string, string>> };
  readonly spec: {
    readonly containers: readonly ContainerDoc[];
    readonly initContainers?: readonly ContainerDoc[];
    readonly volumes?: readonly { name: string; emptyDir?: { medium?: string; sizeLimit?: string } }[];
  };
}

/** `NAME=value`, or `NAME ← fieldRef` for the downward API. */
export function describeEnv(e: EnvEntry): string {
  if (e.value !== undefined) return `${e.name}=${e.value}`;
  return `${e.name} ← downward API ${e.valueFrom?.fieldRef?.fieldPath ?? '(unknown source)'}`;
}

function mounts(c: ContainerDoc): string {
  return (c.volumeMounts ?? [])
    .map((m) => `${m.name} → ${m.mountPath}${m.readOnly ? ' (read-only)' : ''}`)
    .join(', ');
}

function security(c: ContainerDoc): string {
  const s = c.securityContext ?? {};
  return [
    s.runAsUser !== undefined ? `runAsUser ${s.runAsUser}` : undefined,
    s.runAsNonRoot ? 'runAsNonRoot' : undefined,
    s.readOnlyRootFilesystem ? 'readOnlyRootFilesystem' : undefined,
    s.allowPrivilegeEscalation === false ? 'no privilege escalation' : undefined,
    s.capabilities?.drop?.length ? `drop ${s.capabilities.drop.join(',')}` : undefined,
    s.seccompProfile?.type ? `seccomp ${s.seccompProfile.type}` : undefined,
  ]
    .filter((x) => x !== undefined)
    .join(', ');
}

function role(c: ContainerDoc, list: 'initContainers' | 'containers'): string {
  if (list === 'containers') return 'classic sidecar';
  if (c.restartPolicy !== 'Always') return 'init container';
  // The hook's own arguments say what it waits for and how long (webhook/render/agent-containers.ts).
  const hook = c.lifecycle?.postStart?.exec?.command ?? [];
  const arg = (name: string) => hook.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
  const [url, deadline] = [arg('url'), arg('deadline')];
  return `native sidecar: restartPolicy Always${url ? `, postStart holds the app until GET ${url} answers 200 (at most ${deadline})` : ''}`;
}

/** The lines describing `after` (the patched pod) against `before`. */
export function summariseInjection(before: PodDoc, after: PodDoc): string[] {
  const lines: string[] = [];
  const pad = (label: string) => label.padEnd(9);
  const existing = new Set(
    [...(before.spec.initContainers ?? []), ...before.spec.containers].map((c) => c.name),
  );
  const oldVolumes = new Set((before.spec.volumes ?? []).map((v) => v.name));
  for (const v of after.spec.volumes ?? []) {
    if (oldVolumes.has(v.name)) continue;
    const d = v.emptyDir;
    lines.push(
      `volume ${v.name}: emptyDir${d?.medium ? `, medium ${d.medium}` : ''}${d?.sizeLimit ? `, sizeLimit ${d.sizeLimit}` : ''}`,
    );
  }
  for (const list of ['initContainers', 'containers'] as const) {
    (after.spec[list] ?? []).forEach((c, i) => {
      const where = `${list}[${i}] ${c.name}`;
      if (!existing.has(c.name)) {
        lines.push(`${where}  (added; ${role(c, list)})`);
        lines.push(`  ${pad('image')}${c.image ?? ''}`);
        lines.push(`  ${pad('mounts')}${mounts(c)}`);
        lines.push(`  ${pad('security')}${security(c)}`);
        (c.env ?? []).forEach((e, n) => lines.push(`  ${pad(n === 0 ? 'env' : '')}${describeEnv(e)}`));
      } else {
        const ours = (c.env ?? []).filter((e) => e.name === 'SECRETS_DIR').map(describeEnv);
        lines.push(`${where}  (the app's container)`);
        lines.push(`  ${pad('mounts')}${mounts(c)}`);
        if (ours.length) lines.push(`  ${pad('env')}${ours.join(', ')}`);
      }
    });
  }
  for (const [key, value] of Object.entries(after.metadata?.annotations ?? {}))
    if (before.metadata?.annotations?.[key] === undefined) lines.push(`annotation ${key}: ${value}`);
  return lines;
}
