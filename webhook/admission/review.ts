import type { PatchOperation } from '../patch.ts';

/**
 * The admission.k8s.io/v1 AdmissionReview wire format: decoding untrusted bytes into the few
 * fields we read (shape-checked, never trusted), and encoding responses.
 */

export interface ContainerShape {
  readonly name: string;
  readonly env?: readonly { readonly name?: unknown }[];
  readonly volumeMounts?: readonly { readonly name?: unknown; readonly mountPath?: unknown }[];
  readonly ports?: readonly { readonly name?: unknown; readonly containerPort?: unknown }[];
  readonly [key: string]: unknown;
}

export interface PodShape {
  readonly metadata?: {
    readonly name?: string;
    readonly generateName?: string;
    readonly namespace?: string;
    readonly annotations?: Readonly<Record<string, string>>;
    readonly labels?: Readonly<Record<string, string>>;
  };
  readonly spec: {
    readonly containers: readonly ContainerShape[];
    readonly initContainers?: readonly ContainerShape[];
    readonly volumes?: readonly { readonly name?: unknown }[];
    readonly shareProcessNamespace?: boolean;
    readonly restartPolicy?: unknown;
    readonly automountServiceAccountToken?: unknown;
    readonly securityContext?: { readonly runAsUser?: unknown; readonly runAsGroup?: unknown };
  };
}

export interface AdmissionRequest {
  readonly uid: string;
  readonly apiVersion: string;
  readonly kind: { readonly group: string; readonly version: string; readonly kind: string };
  readonly operation: string;
  readonly namespace: string;
  readonly dryRun: boolean;
  /** Present only when the request is a Pod; a shape-checked view of request.object. */
  readonly pod?: PodShape;
}

/** A request that is not an AdmissionReview we can answer: the HTTP layer answers 400. */
export class BadReviewError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'BadReviewError';
  }
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
    for (const list of ['env', 'volumeMounts', 'ports'] as const) {
      const items = c[list];
      if (items !== undefined && (!Array.isArray(items) || !items.every(isObject)))
        throw new BadReviewError(`${path}[${i}].${list} is not a list of objects`);
    }
  });
}

/** Checks the parts of a Pod the webhook reads; the API server has validated the rest of it already. */
function checkPod(v: unknown): PodShape {
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
  return v as unknown as PodShape;
}

/** Decodes a request body; throws BadReviewError for anything that is not an AdmissionReview request. */
export function decodeAdmissionReview(body: string): AdmissionRequest {
  let doc: unknown;
  try {
    doc = JSON.parse(body);
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
  if (typeof r.uid !== 'string' || r.uid === '' || r.uid.length > 128)
    throw new BadReviewError('request.uid is missing');
  const kind = r.kind;
  if (!isObject(kind) || typeof kind.kind !== 'string' || typeof kind.version !== 'string')
    throw new BadReviewError('request.kind is missing');
  if (typeof r.operation !== 'string') throw new BadReviewError('request.operation is missing');
  const isPod = (kind.group ?? '') === '' && kind.version === 'v1' && kind.kind === 'Pod';
  return {
    uid: r.uid,
    apiVersion: doc.apiVersion,
    kind: { group: typeof kind.group === 'string' ? kind.group : '', version: kind.version, kind: kind.kind },
    operation: r.operation,
    namespace: typeof r.namespace === 'string' ? r.namespace : '',
    dryRun: r.dryRun === true,
    ...(isPod && r.operation === 'CREATE' ? { pod: checkPod(r.object) } : {}),
  };
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

/** `warnings` reach the user as `Warning:` lines from kubectl: allowed, but worth knowing. */
export function allowResponse(
  request: AdmissionRequest,
  patch?: readonly PatchOperation[],
  warnings: readonly string[] = [],
): AdmissionReviewResponse {
  return {
    apiVersion: request.apiVersion,
    kind: 'AdmissionReview',
    response: {
      uid: request.uid,
      allowed: true,
      ...(patch && patch.length > 0
        ? { patchType: 'JSONPatch', patch: Buffer.from(JSON.stringify(patch)).toString('base64') }
        : {}),
      ...(warnings.length > 0 ? { warnings } : {}),
    },
  };
}

export function denyResponse(request: AdmissionRequest, message: string): AdmissionReviewResponse {
  return {
    apiVersion: request.apiVersion,
    kind: 'AdmissionReview',
    response: { uid: request.uid, allowed: false, status: { code: 400, reason: 'BadRequest', message } },
  };
}
