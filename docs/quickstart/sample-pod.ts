/**
 * The pod the quick start sends through the webhook: what a Deployment's pod looks like when it
 * opts in (the label for the webhook's objectSelector, then annotations), with `file:` references
 * so nothing needs a cloud account. One file is a template (docs/templates.md): a database URL
 * rendered from the demo database secret, and rendered again when it rotates.
 */

/** The file the template writes, and its annotation. */
export const TEMPLATE_FILE = 'db-url';
export const TEMPLATE_ANNOTATION = `secret-agent.io/template-${TEMPLATE_FILE}`;

export interface SamplePod {
  apiVersion: 'v1';
  kind: 'Pod';
  metadata: {
    name: string;
    namespace: string;
    labels: Record<string, string>;
    annotations: Record<string, string>;
  };
  spec: { containers: Record<string, unknown>[] } & Record<string, unknown>;
}

/** What the API server fills in for a real pod; stands in for the downward API when run locally. */
export const DEMO_POD_IDENTITY = {
  name: 'web',
  namespace: 'demo',
  uid: '3f5d2c1e-7b9a-4c2d-8e6f-1a2b3c4d5e6f',
} as const;

/**
 * @param sourceDir where the demo values live (a copy: the rotation step edits it)
 * @param reloadUrl the app's reload endpoint, told after every rotation
 */
export function samplePod(sourceDir: string, reloadUrl: string): SamplePod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: DEMO_POD_IDENTITY.name,
      namespace: DEMO_POD_IDENTITY.namespace,
      labels: { app: 'web', 'secret-agent.io/inject': 'true' },
      annotations: {
        'secret-agent.io/inject': 'true',
        'secret-agent.io/mode': 'init+sidecar',
        'secret-agent.io/secret-db-password': `file:${sourceDir}/database.json#password`,
        'secret-agent.io/secret-db': `file:${sourceDir}/database.json`,
        'secret-agent.io/format-db': 'split',
        'secret-agent.io/secret-api-key': `file:${sourceDir}/api-key`,
        [`secret-agent.io/secret-${TEMPLATE_FILE}`]: `file:${sourceDir}/database.json`,
        [TEMPLATE_ANNOTATION]: 'postgres://{{username}}:{{password}}@{{host}}:{{port}}/app',
        'secret-agent.io/refresh-interval': '1s',
        'secret-agent.io/rotation-http-url': `POST ${reloadUrl}`,
      },
    },
    spec: {
      // The app's uid, named: the agent runs as it, and the files are readable by the app alone (0400).
      securityContext: { runAsUser: 1000, runAsNonRoot: true },
      containers: [{ name: 'app', image: 'nginx:1.27', ports: [{ containerPort: 8080 }] }],
    },
  };
}

/** The AdmissionReview the API server would send for `kubectl apply` of the pod. */
export function admissionReview(pod: SamplePod, uid: string): Record<string, unknown> {
  return {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid,
      kind: { group: '', version: 'v1', kind: 'Pod' },
      resource: { group: '', version: 'v1', resource: 'pods' },
      requestKind: { group: '', version: 'v1', kind: 'Pod' },
      name: pod.metadata.name,
      namespace: pod.metadata.namespace,
      operation: 'CREATE',
      userInfo: { username: 'quickstart' },
      object: pod,
      oldObject: null,
      dryRun: false,
      options: { apiVersion: 'meta.k8s.io/v1', kind: 'CreateOptions' },
    },
  };
}
