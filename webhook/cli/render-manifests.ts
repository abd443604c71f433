import { admitPod } from '../admission/admit-pod.ts';
import { BadReviewError } from '../admission/bad-review-error.ts';
import { decodeAdmissionReview } from '../admission/review.ts';
import { PREFIX } from '../annotations/annotation.ts';
import { applyJsonPatch, type JsonPatchOperation } from '../apply-patch.ts';
import type { InjectionDefaults } from '../config/injection-defaults.ts';
import { getIn, isJsonObject, listItems, podTemplatePath, setIn, type JsonObject } from './pod-templates.ts';

/**
 * `render`'s core: each Pod or pod template goes through the server's own admission code (decode,
 * decide, validate, render: admitPod) as the AdmissionReview the API server would send for its pods,
 * and the JSONPatch it answers is applied to the template. Nothing here decides about injection.
 */

export interface RenderContext {
  readonly defaults: InjectionDefaults;
  /** For objects that name none (kubectl's --namespace). */
  readonly namespace: string;
  /**
   * --check: a template that asks for injection but would run without it (no opt-in label) fails the
   * check, as a refusal does; rendering only warns, and prints it unchanged.
   */
  readonly check?: boolean;
}

/** One line for the user about one object. Messages come from the admission code, which never echoes values. */
export interface Diagnostic {
  /** KIND/NAMESPACE/NAME */
  readonly object: string;
  readonly severity: 'refused' | 'warning';
  readonly message: string;
}

export function formatDiagnostic(d: Diagnostic): string {
  return d.severity === 'refused' ? `${d.object}: ${d.message}` : `${d.object}: warning: ${d.message}`;
}

export interface RenderedDocument {
  /** The document with every injection applied and refused objects left out; undefined: all of it refused. */
  readonly value: unknown;
  readonly changed: boolean;
  /** Objects that would be refused, or fail --check (and are not in `value`). */
  readonly refused: number;
  readonly diagnostics: readonly Diagnostic[];
}

type ObjectResult =
  { readonly outcome: 'unchanged' | 'injected'; readonly value: unknown } | { readonly outcome: 'refused' };

const INJECT = `${PREFIX}inject`;
/** deploy/base's namespaceSelector keeps these from the webhook, besides its own namespace. */
const EXCLUDED_NAMESPACES = new Set(['kube-system']);
/** Requests the API server sends carry one; ours only has to be valid. */
const RENDER_UID = 'secret-agent-render';

/** Renders one document: an object, or a `kind: List` of them. */
export function renderDocument(value: unknown, context: RenderContext): RenderedDocument {
  const diagnostics: Diagnostic[] = [];
  if (!isJsonObject(value)) return { value, changed: false, refused: 0, diagnostics };
  const items = listItems(value);
  if (items === undefined) {
    const result = renderObject(value, context, diagnostics);
    return result.outcome === 'refused'
      ? { value: undefined, changed: true, refused: 1, diagnostics }
      : { value: result.value, changed: result.outcome === 'injected', refused: 0, diagnostics };
  }
  const kept: unknown[] = [];
  let changed = false;
  let refused = 0;
  for (const item of items) {
    const result = isJsonObject(item)
      ? renderObject(item, context, diagnostics)
      : { outcome: 'unchanged' as const, value: item };
    if (result.outcome === 'refused') refused++;
    else kept.push(result.value);
    changed ||= result.outcome !== 'unchanged';
  }
  return { value: changed ? { ...value, items: kept } : value, changed, refused, diagnostics };
}

function renderObject(object: JsonObject, context: RenderContext, diagnostics: Diagnostic[]): ObjectResult {
  const path = podTemplatePath(object);
  if (path === undefined) return { outcome: 'unchanged', value: object };
  const template = getIn(object, path);
  if (!isJsonObject(template)) return { outcome: 'unchanged', value: object };
  const metadata = isJsonObject(object.metadata) ? object.metadata : {};
  const namespace = typeof metadata.namespace === 'string' ? metadata.namespace : context.namespace;
  const name =
    typeof metadata.name === 'string'
      ? metadata.name
      : typeof metadata.generateName === 'string'
        ? metadata.generateName
        : '(unnamed)';
  const id = `${String(object.kind)}/${namespace}/${name}`;
  const where = path.length === 0 ? '' : `${path.join('.')}.`;
  const tell = (severity: Diagnostic['severity'], message: string) =>
    diagnostics.push({ object: id, severity, message });

  const podMeta = isJsonObject(template.metadata) ? template.metadata : {};
  const labelled = isJsonObject(podMeta.labels) && podMeta.labels[INJECT] === 'true';
  const annotation = isJsonObject(podMeta.annotations) ? podMeta.annotations[INJECT] : undefined;
  if (!labelled) {
    // The MutatingWebhookConfiguration's objectSelector: such pods never reach the webhook, and run
    // without their secrets.
    if (annotation === undefined || annotation === 'false') return { outcome: 'unchanged', value: object };
    tell(
      context.check ? 'refused' : 'warning',
      `not injected: it has the annotation ${INJECT} but not the label ${INJECT}: "true", so the API server never sends its pods to the webhook. Fix: add the label ${INJECT}: "true" to ${where}metadata.labels`,
    );
    return context.check ? { outcome: 'refused' } : { outcome: 'unchanged', value: object };
  }
  if (EXCLUDED_NAMESPACES.has(namespace)) {
    if (annotation !== undefined && annotation !== 'false')
      tell(
        'warning',
        `not injected: the webhook's namespaceSelector excludes ${namespace}. Fix: run the pod in another namespace`,
      );
    return { outcome: 'unchanged', value: object };
  }

  // The pod as its controller creates it: the template's metadata, a generated name, the namespace.
  const added = {
    namespace,
    ...(path.length === 0 ? {} : { generateName: `${name}-` }),
  };
  const pod = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { ...podMeta, ...added, ...pickOwn(podMeta, Object.keys(added)) },
    spec: template.spec,
  };
  let review;
  try {
    const request = decodeAdmissionReview(
      JSON.stringify({
        apiVersion: 'admission.k8s.io/v1',
        kind: 'AdmissionReview',
        request: {
          uid: RENDER_UID,
          kind: { group: '', version: 'v1', kind: 'Pod' },
          resource: { group: '', version: 'v1', resource: 'pods' },
          operation: 'CREATE',
          namespace,
          name: path.length === 0 ? name : '',
          object: pod,
          dryRun: false,
        },
      }),
    );
    review = admitPod(request, context.defaults);
  } catch (e) {
    if (!(e instanceof BadReviewError)) throw e;
    // The server answers 400 to such a pod; the API server would refuse the object before that.
    tell(
      'refused',
      `the webhook cannot read this pod: ${where}${e.message.replace(/^request\.object\.?/, '') || 'it'}. Fix: correct the manifest (the API server would refuse it too)`,
    );
    return { outcome: 'refused' };
  }

  const { response } = review.review;
  for (const warning of response.warnings ?? []) tell('warning', warning);
  if (review.outcome === 'denied') {
    tell('refused', response.status?.message ?? 'refused');
    return { outcome: 'refused' };
  }
  if (review.outcome === 'skipped') {
    if (review.reason === 'own-namespace')
      tell(
        'warning',
        `not injected: ${namespace} is the webhook's own namespace (WEBHOOK_NAMESPACE), where pods are never injected`,
      );
    return { outcome: 'unchanged', value: object };
  }
  if (response.patch === undefined) return { outcome: 'unchanged', value: object };

  // Decoded and applied as the API server does with the response.
  const ops = JSON.parse(Buffer.from(response.patch, 'base64').toString('utf8')) as JsonPatchOperation[];
  const patched = applyJsonPatch(pod, ops);
  // The name and namespace were for the request: the template keeps only what it had.
  const patchedMeta = Object.fromEntries(
    Object.entries(patched.metadata).filter(
      ([key]) => !Object.hasOwn(added, key) || Object.hasOwn(podMeta, key),
    ),
  );
  const rendered = { ...template, metadata: patchedMeta, spec: patched.spec };
  return { outcome: 'injected', value: setIn(object, path, rendered) };
}

/** The members of `object` named in `keys` that it has: what the template says wins over `added`. */
function pickOwn(object: JsonObject, keys: readonly string[]): JsonObject {
  return Object.fromEntries(keys.filter((k) => Object.hasOwn(object, k)).map((k) => [k, object[k]]));
}
