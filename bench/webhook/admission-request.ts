/**
 * The bench's request: a realistic AdmissionReview (a pod as a Deployment's ReplicaSet creates it,
 * opting in with 3 secrets), cut once into a template so that each request gets its own uid, and in
 * `distinct` mode its own secret reference, at no cost to the load generator.
 */

/** How the request bodies vary from one request to the next (see bench/webhook/measure.ts). */
export type BodyMode = 'replicas' | 'distinct';
export const MODES: readonly BodyMode[] = ['replicas', 'distinct'];

const UID_PREFIX = '705ab4f5-6393-11e8-b7cc-';
const REF_PREFIX = 'vault:secret/data/shop/web-';
/** Digits of the request number in a uid and a reference: fixed, so every body and answer has one size. */
const UID_DIGITS = 12;
export const REF_DIGITS = 8;

export function admissionReviewBody(
  uid = `${UID_PREFIX}42010a800002`,
  apiKeyRef = `${REF_PREFIX}${'0'.repeat(REF_DIGITS)}#api_key`,
): string {
  const pod = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      generateName: 'web-7d4b9c8f6d-',
      namespace: 'shop',
      labels: {
        app: 'web',
        'app.kubernetes.io/name': 'web',
        'app.kubernetes.io/part-of': 'shop',
        'pod-template-hash': '7d4b9c8f6d',
        'secret-agent.io/inject': 'true',
      },
      annotations: {
        'kubectl.kubernetes.io/restartedAt': '2026-11-20T09:12:44Z',
        'secret-agent.io/inject': 'true',
        'secret-agent.io/secret-db-password':
          'arn:aws:secretsmanager:eu-west-1:123456789012:secret:prod/db-AbCdEf#password',
        'secret-agent.io/secret-api-key': apiKeyRef,
        'secret-agent.io/secret-tls': 'projects/shop-prod-1234/secrets/web-tls',
        'secret-agent.io/format-tls': 'split',
        'secret-agent.io/refresh-interval': '5m',
        'secret-agent.io/rotation-http-url': 'POST http://127.0.0.1:8080/-/reload',
      },
      ownerReferences: [
        {
          apiVersion: 'apps/v1',
          kind: 'ReplicaSet',
          name: 'web-7d4b9c8f6d',
          uid: '0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9',
          controller: true,
          blockOwnerDeletion: true,
        },
      ],
    },
    spec: {
      serviceAccountName: 'web',
      securityContext: { runAsUser: 10001, runAsGroup: 10001, fsGroup: 10001 },
      containers: [
        {
          name: 'web',
          image: 'registry.example.com/shop/web:4.18.2',
          ports: [
            { name: 'http', containerPort: 8080, protocol: 'TCP' },
            { name: 'metrics', containerPort: 9090, protocol: 'TCP' },
          ],
          env: [
            { name: 'NODE_ENV', value: 'production' },
            { name: 'DB_HOST', value: 'db.shop.svc.cluster.local' },
            { name: 'LOG_FORMAT', value: 'json' },
            { name: 'POD_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } },
          ],
          resources: { requests: { cpu: '250m', memory: '256Mi' }, limits: { memory: '512Mi' } },
          readinessProbe: { httpGet: { path: '/ready', port: 'http' }, periodSeconds: 5 },
          livenessProbe: { httpGet: { path: '/live', port: 'http' }, periodSeconds: 10 },
          volumeMounts: [
            {
              name: 'kube-api-access-x7k2p',
              mountPath: '/var/run/secrets/kubernetes.io/serviceaccount',
              readOnly: true,
            },
            { name: 'cache', mountPath: '/var/cache/web' },
          ],
          securityContext: { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true },
          terminationMessagePath: '/dev/termination-log',
          terminationMessagePolicy: 'File',
          imagePullPolicy: 'IfNotPresent',
        },
        {
          name: 'log-shipper',
          image: 'registry.example.com/infra/log-shipper:2.3.0',
          resources: { requests: { cpu: '20m', memory: '32Mi' }, limits: { memory: '64Mi' } },
          volumeMounts: [
            {
              name: 'kube-api-access-x7k2p',
              mountPath: '/var/run/secrets/kubernetes.io/serviceaccount',
              readOnly: true,
            },
          ],
        },
      ],
      volumes: [
        { name: 'cache', emptyDir: {} },
        {
          name: 'kube-api-access-x7k2p',
          projected: {
            defaultMode: 420,
            sources: [
              { serviceAccountToken: { expirationSeconds: 3607, path: 'token' } },
              { configMap: { name: 'kube-root-ca.crt', items: [{ key: 'ca.crt', path: 'ca.crt' }] } },
              {
                downwardAPI: {
                  items: [
                    { path: 'namespace', fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.namespace' } },
                  ],
                },
              },
            ],
          },
        },
      ],
      restartPolicy: 'Always',
      terminationGracePeriodSeconds: 30,
      dnsPolicy: 'ClusterFirst',
      schedulerName: 'default-scheduler',
      enableServiceLinks: true,
      preemptionPolicy: 'PreemptLowerPriority',
      priority: 0,
      tolerations: [
        {
          key: 'node.kubernetes.io/not-ready',
          operator: 'Exists',
          effect: 'NoExecute',
          tolerationSeconds: 300,
        },
        {
          key: 'node.kubernetes.io/unreachable',
          operator: 'Exists',
          effect: 'NoExecute',
          tolerationSeconds: 300,
        },
      ],
    },
  };
  return JSON.stringify({
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid,
      kind: { group: '', version: 'v1', kind: 'Pod' },
      resource: { group: '', version: 'v1', resource: 'pods' },
      requestKind: { group: '', version: 'v1', kind: 'Pod' },
      requestResource: { group: '', version: 'v1', resource: 'pods' },
      name: '',
      namespace: 'shop',
      operation: 'CREATE',
      userInfo: {
        username: 'system:serviceaccount:kube-system:replicaset-controller',
        uid: '1c2b3a49-5867-4e7d-9c0b-a1f2e3d4c5b6',
        groups: ['system:serviceaccounts', 'system:serviceaccounts:kube-system', 'system:authenticated'],
      },
      object: pod,
      oldObject: null,
      dryRun: false,
      options: { apiVersion: 'meta.k8s.io/v1', kind: 'CreateOptions' },
    },
  });
}

/** The bench body cut where the per-request parts go: [before uid, between, after reference]. */
export type BodyTemplate = readonly [string, string, string];

export function bodyTemplate(): BodyTemplate {
  const uid = '\u0000UID\u0000';
  const ref = '\u0000REF\u0000';
  const text = admissionReviewBody(uid, ref);
  const [before, rest] = text.split(JSON.stringify(uid));
  const [between, after] = rest!.split(JSON.stringify(ref));
  return [before!, between!, after!];
}

/**
 * Request `n`'s body: its own uid, as the API server sends; in `distinct` mode its own secret
 * reference too, so its pod is one the webhook has not seen.
 */
export function bodyFor(template: BodyTemplate, mode: BodyMode, n: number): string {
  const uid = `${UID_PREFIX}${String(n).padStart(UID_DIGITS, '0')}`;
  const ref = `${REF_PREFIX}${String(mode === 'distinct' ? n : 0).padStart(REF_DIGITS, '0')}#api_key`;
  return `${template[0]}"${uid}"${template[1]}"${ref}"${template[2]}`;
}
