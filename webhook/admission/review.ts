import { OPT_IN_LABEL, PREFIX } from '../annotations/annotation.ts';
import { BadReviewError } from './bad-review-error.ts';
import { checkJsonShape, withNull, type JsonShape } from './json-limits.ts';
import { OWN_VOLUME_PREFIX } from '../injected-names.ts';
import { IRSA, POD_IDENTITY } from '../eks-identity.ts';
import type { ContainerShape, PodShape, VolumeShape } from '../pod-shape.ts';

/**
 * The admission.k8s.io/v1 AdmissionReview wire format: decoding untrusted bytes into the few
 * fields we read (shape-checked, never trusted: pod-shape.ts), and encoding responses.
 */

export interface AdmissionRequest {
  readonly uid: string;
  readonly apiVersion: string;
  readonly kind: { readonly group: string; readonly version: string; readonly kind: string };
  readonly operation: string;
  readonly namespace: string;
  readonly dryRun: boolean;
  /** Present only when the request is a Pod CREATE: the shape-checked view of request.object. */
  readonly pod?: PodShape;
  /** The pod's name, else its generateName: for the log only, never an input of the decision. */
  readonly podName?: string;
}

const REVIEW_VERSIONS = ['admission.k8s.io/v1', 'admission.k8s.io/v1beta1'];

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function isStringMap(v: unknown): v is Record<string, string> {
  return isObject(v) && Object.values(v).every((x) => typeof x === 'string');
}

function checkContainers(v: unknown, path: string, required: boolean): void {
  if (v === undefined && !required) return;
  if (!Array.isArray(v) || (required && v.length === 0))
    throw new BadReviewError(`${path} is not a ${required ? 'non-empty ' : ''}list`);
  v.forEach((c: unknown, i) => {
    if (!isObject(c) || typeof c.name !== 'string') throw new BadReviewError(`${path}[${i}] has no name`);
    for (const list of ['env', 'volumeMounts', 'volumeDevices', 'ports'] as const) {
      const items = c[list];
      if (items !== undefined && (!Array.isArray(items) || !items.every(isObject)))
        throw new BadReviewError(`${path}[${i}].${list} is not a list of objects`);
    }
    if (c.securityContext !== undefined && !isObject(c.securityContext))
      throw new BadReviewError(`${path}[${i}].securityContext is not an object`);
  });
}

/** Checks the parts of a Pod the webhook reads; the API server has validated the rest of it already. */
function checkPod(v: unknown): Record<string, unknown> {
  if (!isObject(v)) throw new BadReviewError('request.object is not an object');
  const { metadata, spec } = v;
  if (metadata !== undefined) {
    if (!isObject(metadata)) throw new BadReviewError('request.object.metadata is not an object');
    for (const map of ['annotations', 'labels'] as const)
      if (metadata[map] !== undefined && !isStringMap(metadata[map]))
        throw new BadReviewError(`request.object.metadata.${map} is not a map of strings`);
  }
  if (!isObject(spec)) throw new BadReviewError('request.object.spec is not an object');
  checkContainers(spec.containers, 'spec.containers', true);
  checkContainers(spec.initContainers, 'spec.initContainers', false);
  if (spec.volumes !== undefined && (!Array.isArray(spec.volumes) || !spec.volumes.every(isObject)))
    throw new BadReviewError('spec.volumes is not a list of objects');
  if (spec.securityContext !== undefined && !isObject(spec.securityContext))
    throw new BadReviewError('spec.securityContext is not an object');
  return v;
}

/** Every member of T, each written out (undefined where absent): a view that forgets one does not compile. */
type Listed<T> = { readonly [K in keyof Required<T>]: T[K] };

/** The listed members of an item of the list T. */
type ListedItem<T> = Listed<NonNullable<T> extends readonly (infer I)[] ? I : never>;

/** Each item copied: the list's absence, length and order are kept (patch paths depend on them). */
function listView<T>(list: unknown, copy: (item: Record<string, unknown>) => T): T[] | undefined {
  return list === undefined ? undefined : (list as Record<string, unknown>[]).map(copy);
}

function containerView(c: Record<string, unknown>): ContainerShape {
  const security = c.securityContext as Record<string, unknown> | undefined;
  const view: Listed<ContainerShape> = {
    name: c.name as string,
    // The env wrapper runs it (parse/env-containers.ts checks it is a list of strings).
    command: Array.isArray(c.command) ? [...(c.command as unknown[])] : c.command,
    env: listView(c.env, (e): ListedItem<ContainerShape['env']> => ({ name: e.name, value: e.value })),
    volumeMounts: listView(c.volumeMounts, (m): ListedItem<ContainerShape['volumeMounts']> => ({
      // Only the webhook's names: a mount of the token volume names kube-api-access-<random>.
      name: isOwnVolumeName(m.name) ? m.name : undefined,
      mountPath: m.mountPath,
    })),
    ports: listView(c.ports, (p): ListedItem<ContainerShape['ports']> => ({
      name: p.name,
      containerPort: p.containerPort,
    })),
    volumeDevices: listView(c.volumeDevices, (d): ListedItem<ContainerShape['volumeDevices']> => ({
      devicePath: d.devicePath,
    })),
    terminationMessagePath: c.terminationMessagePath,
    securityContext:
      security &&
      ({
        runAsUser: security.runAsUser,
        runAsGroup: security.runAsGroup,
        privileged: security.privileged,
        capabilities: isObject(security.capabilities) ? { add: security.capabilities.add } : undefined,
      } satisfies Listed<NonNullable<ContainerShape['securityContext']>>),
  };
  return view;
}

/**
 * The volume names admission compares: the webhook's own (`secret-agent…`, which it must not take twice)
 * and EKS's identity volumes. Any other volume stays in the view (its place in the list), nameless: the
 * ServiceAccount admission plugin, which runs before webhooks, names each pod's token volume
 * `kube-api-access-<random>`, and with it every replica of a workload would have a view of its own and
 * the admission cache nothing to share.
 */
function isComparedVolumeName(name: unknown): name is string {
  return isOwnVolumeName(name) || name === IRSA.volume || name === POD_IDENTITY.volume;
}

/** A name of the webhook's volumes, which no volume or mount of the pod may take (parse/app-containers.ts). */
function isOwnVolumeName(name: unknown): name is string {
  return typeof name === 'string' && name.startsWith(OWN_VOLUME_PREFIX);
}

function volumeView(v: Record<string, unknown>): VolumeShape {
  if (!isComparedVolumeName(v.name)) return { name: undefined, projected: undefined };
  const projected = isObject(v.projected) ? v.projected : undefined;
  const sources = Array.isArray(projected?.sources) ? (projected.sources as unknown[]) : undefined;
  const view: Listed<VolumeShape> = {
    name: v.name,
    projected: projected && {
      sources: sources?.map((source) => {
        const token =
          isObject(source) && isObject(source.serviceAccountToken) ? source.serviceAccountToken : undefined;
        return { serviceAccountToken: token && { path: token.path } };
      }),
    },
  };
  return view;
}

function prefixedAnnotations(annotations: Record<string, string>): Record<string, string> {
  const view: Record<string, string> = {};
  // Keys start with PREFIX, so none is __proto__.
  for (const key of Object.keys(annotations)) if (key.startsWith(PREFIX)) view[key] = annotations[key]!;
  return view;
}

/** The PodShape of a checked pod: its fields copied, nothing else. */
function podView(pod: Record<string, unknown>): PodShape {
  const meta = pod.metadata as Record<string, unknown> | undefined;
  const spec = pod.spec as Record<string, unknown>;
  const annotations = meta?.annotations as Record<string, string> | undefined;
  const optIn = (meta?.labels as Record<string, string> | undefined)?.[OPT_IN_LABEL];
  const security = spec.securityContext as Record<string, unknown> | undefined;
  const metadata: Listed<NonNullable<PodShape['metadata']>> | undefined = meta && {
    namespace: meta.namespace as string | undefined,
    annotations: annotations && prefixedAnnotations(annotations),
    labels: optIn === undefined ? undefined : { [OPT_IN_LABEL]: optIn },
  };
  const specView: Listed<PodShape['spec']> = {
    containers: listView(spec.containers, containerView)!,
    initContainers: listView(spec.initContainers, containerView),
    volumes: listView(spec.volumes, volumeView),
    shareProcessNamespace: spec.shareProcessNamespace as boolean | undefined,
    hostPID: spec.hostPID,
    hostNetwork: spec.hostNetwork,
    restartPolicy: spec.restartPolicy,
    automountServiceAccountToken: spec.automountServiceAccountToken,
    securityContext:
      security &&
      ({
        runAsUser: security.runAsUser,
        runAsGroup: security.runAsGroup,
        fsGroup: security.fsGroup,
        // Copied, not aliased: the view must not change if the request object does.
        supplementalGroups: Array.isArray(security.supplementalGroups)
          ? [...(security.supplementalGroups as unknown[])]
          : security.supplementalGroups,
      } satisfies Listed<NonNullable<PodShape['spec']['securityContext']>>),
  };
  return { metadata, spec: specView };
}

/** What decodeAdmissionReview takes for request.uid (the API server's are UUIDs). */
export function isUid(uid: string): boolean {
  return uid !== '' && uid.length <= 128;
}

/**
 * Decodes a request body; throws BadReviewError for anything that is not an AdmissionReview request.
 * `shape` is checkJsonShape(body), when the caller has it already.
 */
export function decodeAdmissionReview(
  body: string,
  shape: JsonShape = checkJsonShape(body),
): AdmissionRequest {
  const { unread } = shape;
  let doc: unknown;
  try {
    // request.oldObject is read as null: admission never reads it, and an UPDATE's is as large as its object.
    doc = JSON.parse(withNull(body, unread));
  } catch {
    throw new BadReviewError('the body is not JSON');
  }
  if (!isObject(doc)) throw new BadReviewError('the body is not a JSON object');
  if (
    doc.kind !== 'AdmissionReview' ||
    typeof doc.apiVersion !== 'string' ||
    !REVIEW_VERSIONS.includes(doc.apiVersion)
  )
    throw new BadReviewError('the body is not an admission.k8s.io/v1 AdmissionReview');
  const r = doc.request;
  if (!isObject(r)) throw new BadReviewError('the AdmissionReview has no request');
  if (typeof r.uid !== 'string' || !isUid(r.uid)) throw new BadReviewError('request.uid is missing');
  const kind = r.kind;
  if (!isObject(kind) || typeof kind.kind !== 'string' || typeof kind.version !== 'string')
    throw new BadReviewError('request.kind is missing');
  if (typeof r.operation !== 'string') throw new BadReviewError('request.operation is missing');
  // A key of the admission cache and a field of every log line: the API server's are names.
  if (typeof r.namespace === 'string' && r.namespace.length > MAX_NAMESPACE)
    throw new BadReviewError(`request.namespace is longer than ${MAX_NAMESPACE} characters`);
  const isPod = (kind.group ?? '') === '' && kind.version === 'v1' && kind.kind === 'Pod';
  const pod = isPod && r.operation === 'CREATE' ? checkPod(r.object) : undefined;
  return {
    uid: r.uid,
    apiVersion: doc.apiVersion,
    kind: { group: typeof kind.group === 'string' ? kind.group : '', version: kind.version, kind: kind.kind },
    operation: r.operation,
    namespace: typeof r.namespace === 'string' ? r.namespace : '',
    dryRun: r.dryRun === true,
    ...(pod ? { pod: podView(pod), ...podName(pod.metadata as Record<string, unknown> | undefined) } : {}),
  };
}

/** A namespace is a DNS label. */
const MAX_NAMESPACE = 63;
/** The longest name Kubernetes gives an object; the webhook sees the pod before its name is validated. */
const MAX_POD_NAME = 253;

function podName(meta: Record<string, unknown> | undefined): { podName?: string } {
  const name = meta?.name ?? meta?.generateName;
  if (typeof name !== 'string') return {};
  return { podName: name.length > MAX_POD_NAME ? `${name.slice(0, MAX_POD_NAME)}…` : name };
}

export interface AdmissionReviewResponse {
  readonly apiVersion: string;
  readonly kind: 'AdmissionReview';
  readonly response: {
    readonly uid: string;
    readonly allowed: boolean;
    readonly patchType?: 'JSONPatch';
    readonly patch?: string;
    readonly status?: { readonly code: number; readonly message: string; readonly reason?: string };
    readonly warnings?: readonly string[];
    readonly auditAnnotations?: Readonly<Record<string, string>>;
  };
}

/** An answer without the request's uid: what the admission cache keeps. */
export type ReviewFields = Omit<AdmissionReviewResponse['response'], 'uid'>;

/**
 * `patchJson` is JSON.stringify of the patch's operations (admission measures it first: answer-limits.ts).
 * `warnings` reach the user as `Warning:` lines from kubectl: allowed, but worth knowing.
 */
export function allowFields(patchJson?: string, warnings: readonly string[] = []): ReviewFields {
  return {
    allowed: true,
    ...(patchJson !== undefined && patchJson !== '[]'
      ? { patchType: 'JSONPatch', patch: Buffer.from(patchJson).toString('base64') }
      : {}),
    ...(warnings.length > 0 ? { warnings } : {}),
  };
}

export function denyFields(message: string): ReviewFields {
  return { allowed: false, status: { code: 400, reason: 'BadRequest', message } };
}

/**
 * JSON.stringify(reviewResponse(request, fields)), byte for byte, from JSON.stringify(fields): a
 * cached answer's patch (most of its bytes) is serialized once, not once per replica.
 */
export function reviewText(
  request: Pick<AdmissionRequest, 'apiVersion' | 'uid'>,
  fieldsJson: string,
): string {
  return `{"apiVersion":${JSON.stringify(request.apiVersion)},"kind":"AdmissionReview","response":{"uid":${JSON.stringify(request.uid)},${fieldsJson.slice(1)}}`;
}

/** The AdmissionReview that answers `request`. */
export function reviewResponse(
  request: Pick<AdmissionRequest, 'apiVersion' | 'uid'>,
  fields: ReviewFields,
): AdmissionReviewResponse {
  return {
    apiVersion: request.apiVersion,
    kind: 'AdmissionReview',
    response: { uid: request.uid, ...fields },
  };
}
