import { quote } from '../../agent/contract/errors.ts';
import { AWS_REGION } from '../annotations/values.ts';
import { IRSA, POD_IDENTITY } from '../eks-identity.ts';
import { podContainers, type ContainerShape, type PodShape, type VolumeShape } from '../pod-shape.ts';

/**
 * The AWS identity EKS's pod-identity-webhook gave the app, for the agent too: exactly what that
 * webhook writes, nothing the app chose.
 *
 * IRSA and EKS Pod Identity reach a container through that webhook: env (AWS_ROLE_ARN and the token
 * file, or the Pod Identity agent's URI and token file) and a projected token volume, added to the
 * containers it sees. It is usually called before ours (webhooks run in name order) and, with
 * reinvocationPolicy Never (its common setting, aws/amazon-eks-pod-identity-webhook#91, #187), never
 * again, so the agent's containers would get nothing and the SDK would fall back to the node's role.
 *
 * But the app's env is the pod author's: copied as it is, `AWS_CONTAINER_CREDENTIALS_FULL_URI` and
 * `AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE` made the agent send a file of its own container to a
 * listener of the app's, and a token file under `/app` mounted an app volume over the agent's code
 * (issue 26). So the agent gets an identity only in EKS's own shape: the URI is one of the Pod
 * Identity agent's two, the token files and mount paths are the webhook's constants (never the
 * app's text), the volume is EKS's by name and a projected service-account token, the role is a role
 * ARN and the region a region. Anything else is not inherited, and a warning names the variable.
 */

/** An IAM role ARN in any partition, with an optional path: what `eks.amazonaws.com/role-arn` holds. */
const ROLE_ARN = /^arn:aws(?:-[a-z]+)*:iam::\d{12}:role\/[A-Za-z0-9+=,.@_/-]{1,512}$/;
const STS_ENDPOINTS = new Set(['regional', 'legacy']);

/** Only a container that carries one of these was given an identity. */
const IDENTITY_ENV = [
  'AWS_ROLE_ARN',
  'AWS_WEB_IDENTITY_TOKEN_FILE',
  'AWS_CONTAINER_CREDENTIALS_FULL_URI',
  'AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE',
] as const;

export interface InheritedIdentity {
  readonly env: readonly { readonly name: string; readonly value: string }[];
  readonly volumeMounts: readonly {
    readonly name: string;
    readonly mountPath: string;
    readonly readOnly: true;
  }[];
  /** For the user (AdmissionReview warnings): each variable not inherited, and why. Never a value. */
  readonly warnings: readonly string[];
}

type Env = ReadonlyMap<string, string>;

/** The identity of the first app container that has one (regular containers first), or none. */
export function inheritCloudIdentity(pod: PodShape): InheritedIdentity {
  const candidates = podContainers(pod);
  for (const container of candidates) {
    const env = literalEnv(container);
    if (!IDENTITY_ENV.some((name) => env.has(name))) continue;
    const warnings: string[] = [];
    const skip = (variable: string, why: string, what: string) =>
      warnings.push(
        `secret-agent: container ${quote(container.name)} sets ${variable}, but ${why}, so the agent does not inherit its ${what}; only what EKS's pod-identity-webhook writes is (docs/security.md).`,
      );
    const volumes = pod.spec.volumes ?? [];
    const irsa = irsaOf(env, volumes, (variable, why) => skip(variable, why, 'IRSA role'));
    const podIdentity = podIdentityOf(env, volumes, (variable, why) =>
      skip(variable, why, 'EKS Pod Identity'),
    );
    const region = regionOf(env, (variable, why) =>
      warnings.push(
        `secret-agent: container ${quote(container.name)} sets ${variable}, but ${why}, so the agent does not inherit it.`,
      ),
    );
    return {
      env: [...(irsa?.env ?? []), ...(podIdentity?.env ?? []), ...region],
      volumeMounts: [irsa?.mount, podIdentity?.mount].filter((m) => m !== undefined),
      warnings,
    };
  }
  return { env: [], volumeMounts: [], warnings: [] };
}

interface Wired {
  readonly env: readonly { readonly name: string; readonly value: string }[];
  readonly mount: { readonly name: string; readonly mountPath: string; readonly readOnly: true };
}

type Refuse = (variable: string, why: string) => void;

function irsaOf(env: Env, volumes: readonly VolumeShape[], refuse: Refuse): Wired | undefined {
  const role = env.get('AWS_ROLE_ARN');
  const file = env.get('AWS_WEB_IDENTITY_TOKEN_FILE');
  if (role === undefined && file === undefined) return undefined;
  const tokenFile = `${IRSA.dir}/${IRSA.tokenPath}`;
  if (role === undefined) refuse('AWS_WEB_IDENTITY_TOKEN_FILE', 'not AWS_ROLE_ARN with it');
  else if (!ROLE_ARN.test(role)) refuse('AWS_ROLE_ARN', 'its value is not an IAM role ARN');
  else if (file === undefined) refuse('AWS_ROLE_ARN', 'not AWS_WEB_IDENTITY_TOKEN_FILE with it');
  else if (file !== tokenFile)
    refuse('AWS_WEB_IDENTITY_TOKEN_FILE', `its value is not ${quote(tokenFile)}, where EKS puts the token`);
  else if (!isTokenVolume(volumes, IRSA.volume, IRSA.tokenPath))
    refuse('AWS_WEB_IDENTITY_TOKEN_FILE', tokenVolumeProblem(IRSA.volume, IRSA.tokenPath));
  else
    return {
      env: [
        { name: 'AWS_ROLE_ARN', value: role },
        { name: 'AWS_WEB_IDENTITY_TOKEN_FILE', value: tokenFile },
      ],
      mount: { name: IRSA.volume, mountPath: IRSA.dir, readOnly: true },
    };
  return undefined;
}

function podIdentityOf(env: Env, volumes: readonly VolumeShape[], refuse: Refuse): Wired | undefined {
  const uri = env.get('AWS_CONTAINER_CREDENTIALS_FULL_URI');
  const file = env.get('AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE');
  if (uri === undefined && file === undefined) return undefined;
  const tokenFile = `${POD_IDENTITY.dir}/${POD_IDENTITY.tokenPath}`;
  const knownUri = POD_IDENTITY.uris.find((u) => u === uri);
  if (uri === undefined)
    refuse('AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE', 'not AWS_CONTAINER_CREDENTIALS_FULL_URI with it');
  else if (knownUri === undefined)
    refuse(
      'AWS_CONTAINER_CREDENTIALS_FULL_URI',
      `its value is not the EKS Pod Identity agent's address (${POD_IDENTITY.uris.join(' or ')})`,
    );
  else if (file === undefined)
    refuse('AWS_CONTAINER_CREDENTIALS_FULL_URI', 'not AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE with it');
  else if (file !== tokenFile)
    refuse(
      'AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE',
      `its value is not ${quote(tokenFile)}, where EKS puts the token`,
    );
  else if (!isTokenVolume(volumes, POD_IDENTITY.volume, POD_IDENTITY.tokenPath))
    refuse(
      'AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE',
      tokenVolumeProblem(POD_IDENTITY.volume, POD_IDENTITY.tokenPath),
    );
  else
    return {
      env: [
        { name: 'AWS_CONTAINER_CREDENTIALS_FULL_URI', value: knownUri },
        { name: 'AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE', value: tokenFile },
      ],
      mount: { name: POD_IDENTITY.volume, mountPath: POD_IDENTITY.dir, readOnly: true },
    };
  return undefined;
}

/** The region EKS set (AWS_REGION only where we have none: provider-env.ts decides) and STS's endpoint kind. */
function regionOf(env: Env, refuse: Refuse): { name: string; value: string }[] {
  const out: { name: string; value: string }[] = [];
  for (const name of ['AWS_STS_REGIONAL_ENDPOINTS', 'AWS_REGION', 'AWS_DEFAULT_REGION']) {
    const value = env.get(name);
    if (value === undefined) continue;
    const ok = name === 'AWS_STS_REGIONAL_ENDPOINTS' ? STS_ENDPOINTS.has(value) : AWS_REGION.test(value);
    if (ok) out.push({ name, value });
    else
      refuse(
        name,
        name === 'AWS_STS_REGIONAL_ENDPOINTS'
          ? 'its value is not regional or legacy'
          : 'its value is not an AWS region',
      );
  }
  return out;
}

/** The pod's volume of that name is a projected service-account token at that path, and nothing else. */
function isTokenVolume(volumes: readonly VolumeShape[], name: string, tokenPath: string): boolean {
  const sources = volumes.find((v) => v.name === name)?.projected?.sources;
  return sources?.length === 1 && sources[0]!.serviceAccountToken?.path === tokenPath;
}

function tokenVolumeProblem(volume: string, tokenPath: string): string {
  return `the pod has no volume ${quote(volume)} that is a projected service-account token at ${quote(tokenPath)}, as EKS adds it`;
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
