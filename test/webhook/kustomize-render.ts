import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { ROOT } from '../support/run-agent.ts';

/**
 * Rendering deploy/ as a cluster would get it: `kubectl kustomize` over an entry point or a temporary
 * overlay, and every object checked against the Kubernetes schema (kubernetes-models).
 */

export const DEPLOY = join(ROOT, 'deploy');

export type KubeObject = {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; annotations?: Record<string, string> };
} & Record<string, unknown>;

export function parseYaml(text: string, where: string): KubeObject[] {
  return parseAllDocuments(text).flatMap((doc) => {
    assert.deepEqual(doc.errors, [], `${where}: ${doc.errors.map((e) => e.message).join('; ')}`);
    const value = doc.toJS() as KubeObject | null;
    return value ? [value] : [];
  });
}

/** The kubernetes-models class for an apiVersion/kind, or undefined for CRDs it does not know. */
async function modelFor(
  apiVersion: string,
  kind: string,
): Promise<(new (data: unknown) => { validate(): void }) | undefined> {
  const [group, version] = apiVersion.includes('/') ? apiVersion.split('/') : ['', apiVersion];
  // The Prometheus Operator's CRDs (the monitoring component) come from their own models package.
  const path =
    group === 'monitoring.coreos.com'
      ? `@kubernetes-models/prometheus-operator/${group}/${version}`
      : group
        ? `kubernetes-models/${group}/${version}`
        : `kubernetes-models/${version}`;
  try {
    const module = (await import(path)) as Record<string, new (data: unknown) => { validate(): void }>;
    return module[kind];
  } catch {
    return undefined;
  }
}

/** cert-manager kinds are CRDs kubernetes-models does not ship: check the fields we rely on. */
function checkCertManager(object: KubeObject): void {
  assert.equal(object.apiVersion, 'cert-manager.io/v1');
  const spec = object.spec as Record<string, unknown>;
  if (object.kind === 'Issuer') assert.ok(spec.selfSigned || spec.ca, 'an Issuer needs selfSigned or ca');
  else if (object.kind === 'Certificate') {
    assert.equal(typeof spec.secretName, 'string');
    assert.ok(Array.isArray(spec.dnsNames) && spec.dnsNames.length > 0);
    assert.ok((spec.issuerRef as { name?: string }).name);
  } else assert.fail(`unexpected cert-manager kind ${object.kind}`);
}

export async function validate(object: KubeObject, where: string): Promise<void> {
  // kustomize's own files: kustomizations, and transformer configs (deploy/transformers).
  if (object.apiVersion.startsWith('kustomize.config.k8s.io/') || object.apiVersion === 'builtin') return;
  if (object.apiVersion.startsWith('cert-manager.io/')) return checkCertManager(object);
  const Model = await modelFor(object.apiVersion, object.kind);
  assert.ok(Model, `${where}: no schema for ${object.apiVersion} ${object.kind}`);
  // Strategic-merge patch directives are not part of the schema; drop them before validating.
  const clean = JSON.parse(JSON.stringify(object), (key, value: unknown) =>
    key === '$patch' ? undefined : value,
  ) as unknown;
  try {
    new Model(clean).validate();
  } catch (e) {
    assert.fail(`${where}: ${object.kind} ${object.metadata.name}: ${(e as Error).message}`);
  }
}

const KUBECTL_HINT =
  'kubectl with kustomize v5 (kubectl ≥ 1.27) renders deploy/; it ships with this project’s machine image (google-cloud-cli’s kubectl). Elsewhere install kubectl from the Kubernetes release you run.';

/** The objects `kubectl kustomize` renders from a directory; fails loudly without kubectl. */
export function kubectlKustomize(path: string): KubeObject[] {
  const out = spawnSync('kubectl', ['kustomize', path], { encoding: 'utf8' });
  if (out.error) throw new Error(`kubectl is not installed. ${KUBECTL_HINT}`);
  assert.equal(out.status, 0, `kubectl kustomize ${path}: ${out.stderr}`);
  return parseYaml(out.stdout, path);
}

/**
 * A kustomization in a fresh directory, removed on dispose. `resources`, `transformers` and
 * `components` are absolute paths here, made relative there (kustomize takes no absolute root).
 */
export function tempOverlay(
  kustomization: Record<string, unknown> & {
    resources: string[];
    transformers: string[];
    components?: string[];
  },
): { path: string; [Symbol.dispose](): void } {
  const path = mkdtempSync(join(tmpdir(), 'secret-agent-overlay-'));
  kustomization.resources = kustomization.resources.map((r) => relative(path, r));
  kustomization.transformers = kustomization.transformers.map((r) => relative(path, r));
  if (kustomization.components)
    kustomization.components = kustomization.components.map((r) => relative(path, r));
  writeFileSync(
    join(path, 'kustomization.yaml'),
    JSON.stringify({
      apiVersion: 'kustomize.config.k8s.io/v1beta1',
      kind: 'Kustomization',
      ...kustomization,
    }),
  );
  return { path, [Symbol.dispose]: () => rmSync(path, { recursive: true, force: true }) };
}
