import type { ContainerShape, PodShape } from './review.ts';

/**
 * The AWS identity EKS's pod-identity-webhook gave the app, for the agent too.
 *
 * IRSA and EKS Pod Identity reach a container through that webhook: env (AWS_ROLE_ARN and the token
 * file, or the Pod Identity agent's URI and token file) and a projected token volume, added to the
 * containers it sees. It is usually called before ours (webhooks run in name order) and, with
 * reinvocationPolicy Never (its common setting, aws/amazon-eks-pod-identity-webhook#91, #187), never
 * again, so the agent's containers would get nothing and the SDK would fall back to the node's role.
 * The agent takes what the app was given: the same env names and read-only mounts of the same volume.
 * These are role ARNs, URIs and file paths, never credentials.
 */

/** What the pod-identity-webhook sets, IRSA and Pod Identity; AWS_REGION only where we have none. */
const IDENTITY_ENV = [
  'AWS_ROLE_ARN',
  'AWS_WEB_IDENTITY_TOKEN_FILE',
  'AWS_STS_REGIONAL_ENDPOINTS',
  'AWS_CONTAINER_CREDENTIALS_FULL_URI',
  'AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE',
  'AWS_REGION',
  'AWS_DEFAULT_REGION',
] as const;
/** The env vars that name a token file, whose directory is the mounted token volume. */
const TOKEN_FILE_ENV = new Set(['AWS_WEB_IDENTITY_TOKEN_FILE', 'AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE']);
/** Only a container that carries one of these was given an identity. */
const IDENTITY_MARKERS = new Set(['AWS_ROLE_ARN', 'AWS_CONTAINER_CREDENTIALS_FULL_URI']);

export interface InheritedIdentity {
  readonly env: readonly { readonly name: string; readonly value: string }[];
  readonly volumeMounts: readonly {
    readonly name: string;
    readonly mountPath: string;
    readonly readOnly: true;
  }[];
}

/** The identity of the first app container that has one (regular containers first), or none. */
export function inheritCloudIdentity(pod: PodShape): InheritedIdentity {
  const candidates: readonly ContainerShape[] = [...pod.spec.containers, ...(pod.spec.initContainers ?? [])];
  for (const container of candidates) {
    const env = literalEnv(container);
    if (![...IDENTITY_MARKERS].some((name) => env.has(name))) continue;
    const inherited = IDENTITY_ENV.filter((name) => env.has(name)).map((name) => ({
      name,
      value: env.get(name)!,
    }));
    const volumeMounts = inherited
      .filter((e) => TOKEN_FILE_ENV.has(e.name))
      .flatMap((e) => {
        const mount = mountHolding(container, e.value);
        return mount ? [{ name: mount.name, mountPath: mount.mountPath, readOnly: true as const }] : [];
      });
    return { env: inherited, volumeMounts: uniqueBy(volumeMounts, (m) => m.mountPath) };
  }
  return { env: [], volumeMounts: [] };
}

/** Env entries with a literal value (the pod-identity-webhook writes literals; nothing else is copied). */
function literalEnv(container: ContainerShape): Map<string, string> {
  const env = new Map<string, string>();
  for (const e of container.env ?? []) {
    const entry = e as { name?: unknown; value?: unknown };
    if (typeof entry.name === 'string' && typeof entry.value === 'string' && !env.has(entry.name))
      env.set(entry.name, entry.value);
  }
  return env;
}

/** The container's volume mount a file lives under: the deepest mount path containing it. */
function mountHolding(
  container: ContainerShape,
  file: string,
): { name: string; mountPath: string } | undefined {
  let best: { name: string; mountPath: string } | undefined;
  for (const m of container.volumeMounts ?? []) {
    if (typeof m.name !== 'string' || typeof m.mountPath !== 'string') continue;
    const dir = m.mountPath.endsWith('/') ? m.mountPath : `${m.mountPath}/`;
    if (file.startsWith(dir) && (!best || m.mountPath.length > best.mountPath.length))
      best = { name: m.name, mountPath: m.mountPath };
  }
  return best;
}

function uniqueBy<T>(items: readonly T[], key: (item: T) => string): T[] {
  const seen = new Set<string>();
  return items.filter((item) => !seen.has(key(item)) && seen.add(key(item)));
}
