import assert from 'node:assert/strict';
import { Pod } from 'kubernetes-models/v1';
import { admitPod, type AdmissionResult } from '../../webhook/admission/admit-pod.ts';
import { decodeAdmissionReview } from '../../webhook/admission/review.ts';
import type { Env } from '../../agent/contract/settings.ts';
import { parseWebhookConfig } from '../../webhook/config/parse-webhook-config.ts';
import type { InjectionDefaults } from '../../webhook/config/injection-defaults.ts';
import { applyJsonPatch, type JsonPatchOperation } from '../../webhook/apply-patch.ts';

export const AGENT_IMAGE = 'ghcr.io/example/secret-agent:0.1.0';

/** The defaults the server renders with; NATIVE_SIDECARS=auto resolved as on a ≥ 1.29 control plane. */
export function injectionDefaults(env: Record<string, string> = {}): InjectionDefaults {
  const injection = parseWebhookConfig({ AGENT_IMAGE, WEBHOOK_NAMESPACE: 'secret-agent', ...env }).injection;
  return { ...injection, nativeSidecars: injection.nativeSidecars !== false };
}

export interface PodDoc {
  apiVersion?: string;
  kind?: string;
  metadata: {
    name?: string;
    namespace?: string;
    uid?: string;
    annotations?: Record<string, string>;
    labels?: Record<string, string>;
  };
  spec: Record<string, unknown> & {
    containers: Record<string, unknown>[];
    initContainers?: Record<string, unknown>[];
  };
}

export function review(
  pod: unknown,
  options: { namespace?: string; operation?: string; kind?: string; uid?: string } = {},
): Record<string, unknown> {
  return {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: options.uid ?? '705ab4f5-6393-11e8-b7cc-42010a800002',
      kind: { group: '', version: 'v1', kind: options.kind ?? 'Pod' },
      resource: { group: '', version: 'v1', resource: 'pods' },
      requestKind: { group: '', version: 'v1', kind: options.kind ?? 'Pod' },
      name: '',
      namespace: options.namespace ?? 'apps',
      operation: options.operation ?? 'CREATE',
      userInfo: { username: 'system:serviceaccount:kube-system:replicaset-controller' },
      object: pod,
      oldObject: null,
      dryRun: false,
      options: { apiVersion: 'meta.k8s.io/v1', kind: 'CreateOptions' },
    },
  };
}

/** A pod as a Deployment's ReplicaSet creates it: generateName, no name, namespace possibly absent. */
export function basicPod(annotations: Record<string, string>, spec: Partial<PodDoc['spec']> = {}): PodDoc {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: 'web-7d4b9c-xk2p9',
      namespace: 'apps',
      labels: { app: 'web', 'secret-agent.io/inject': 'true' },
      annotations: { 'secret-agent.io/inject': 'true', ...annotations },
    },
    spec: { containers: [{ name: 'app', image: 'nginx:1.27' }], ...spec },
  };
}

export function decodePatch(response: { patch?: string }): JsonPatchOperation[] {
  return response.patch
    ? (JSON.parse(Buffer.from(response.patch, 'base64').toString('utf8')) as JsonPatchOperation[])
    : [];
}

export function mutate(pod: PodDoc, ops: readonly JsonPatchOperation[]): PodDoc {
  return applyJsonPatch(pod, ops);
}

/** `pod` through the real admission code, from the AdmissionReview's JSON text as the server reads it. */
export function admitThroughWebhook(
  pod: unknown,
  env: Record<string, string> = {},
  options: Parameters<typeof review>[1] = {},
): AdmissionResult {
  return admitPod(decodeAdmissionReview(JSON.stringify(review(pod, options))), injectionDefaults(env));
}

/** The pod as the API server stores it after an injection: the patch applied, the result schema-checked. */
export function injectedPod(pod: PodDoc, result: AdmissionResult): PodDoc {
  assert.equal(result.outcome, 'injected', result.review.response.status?.message);
  const patched = mutate(pod, decodePatch(result.review.response));
  validatePod(patched);
  return patched;
}

/** Throws with the schema error if the pod is not a valid v1 Pod. */
export function validatePod(pod: PodDoc): void {
  new Pod(pod as unknown as ConstructorParameters<typeof Pod>[0]).validate();
}

/** The env a container would see, with downward-API fields resolved from the pod. */
export function containerEnv(container: Record<string, unknown>, pod: PodDoc): Env {
  const env: Record<string, string> = {};
  for (const e of (container.env ?? []) as {
    name: string;
    value?: string;
    valueFrom?: { fieldRef?: { fieldPath: string } };
  }[]) {
    if (e.value !== undefined) env[e.name] = e.value;
    else if (e.valueFrom?.fieldRef) {
      const field = e.valueFrom.fieldRef.fieldPath;
      // What the API server fills in after admission (a generateName pod has no name yet).
      const meta = {
        name: pod.metadata.name ?? 'generated-name',
        namespace: pod.metadata.namespace ?? 'apps',
        uid: pod.metadata.uid ?? '6d1f0c5e-27a1-4a1e-9b55-0d6e8c0f2a11',
      };
      const value =
        field === 'metadata.name'
          ? meta.name
          : field === 'metadata.namespace'
            ? meta.namespace
            : field === 'metadata.uid'
              ? meta.uid
              : undefined;
      if (value === undefined) throw new Error(`unresolved fieldRef ${field}`);
      env[e.name] = value;
    } else throw new Error(`env ${e.name} has neither value nor fieldRef`);
  }
  return env;
}
