import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { parseAllDocuments } from 'yaml';
import { AGENT_SETTINGS } from '../../agent/contract/agent-settings.ts';
import { CLIENT_ENV } from '../../agent/providers/provider-env.ts';
import { isProductAnnotation } from '../../agent/contract/product-annotations.ts';
import { parseReference, type SecretReference } from '../../agent/contract/reference.ts';
import { VAULT_ENV } from '../../agent/providers/vault/env.ts';
import { admitPod } from '../../webhook/admission/admit-pod.ts';
import { decodeAdmissionReview } from '../../webhook/admission/review.ts';
import { AGENT_CONTAINER, AGENT_INIT_CONTAINER } from '../../webhook/injected-names.ts';
import { FILE_ANNOTATIONS, matchFileAnnotation } from '../../webhook/annotations/file-annotations.ts';
import { OPT_IN_LABEL, PREFIX, type Annotation } from '../../webhook/annotations/annotation.ts';
import { POD_ANNOTATIONS } from '../../webhook/annotations/pod-annotations.ts';
import { WEBHOOK_SETTINGS } from '../../webhook/config/settings.ts';
import {
  decodePatch,
  injectionDefaults,
  mutate,
  review,
  validatePod,
  type PodDoc,
} from '../webhook/fixtures.ts';

/**
 * Anti-drift checks for docs/install/*.md: the IAM policy, GCP permissions and Vault policy the
 * guides give are derived again here from the code that makes the calls, and every pod the guides
 * show goes through the real webhook. Each check is a function that throws; the last describe block
 * feeds them tampered guides to prove they can fail.
 */

const ROOT = new URL('../../', import.meta.url).pathname;
const read = (path: string): string => readFileSync(join(ROOT, path), 'utf8');
const GUIDES = ['eks', 'gke', 'vault', 'upgrade', 'network'] as const;
type Guide = (typeof GUIDES)[number];
const guide = (name: Guide): string => read(`docs/install/${name}.md`);

// ---------------------------------------------------------------------------------------------
// Markdown and YAML

interface Block {
  readonly lang: string;
  readonly text: string;
}

/** Fenced code blocks, also indented ones inside list items (dedented). */
export function codeBlocks(md: string): Block[] {
  const blocks: Block[] = [];
  const re = /^( *)(`{3,})([\w-]*)[^\n]*\n([\s\S]*?)^\1\2 *$/gm;
  for (const m of md.matchAll(re)) {
    const indent = m[1]!.length;
    const text = m[4]!
      .split('\n')
      .map((line) => line.slice(Math.min(indent, line.length - line.trimStart().length)))
      .join('\n');
    blocks.push({ lang: m[3]!, text });
  }
  return blocks;
}

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Every YAML value in the guide's ```yaml blocks (objects and lists); each block must parse. */
function yamlValues(md: string): unknown[] {
  return codeBlocks(md)
    .filter((b) => b.lang === 'yaml')
    .flatMap((b) =>
      parseAllDocuments(b.text).map((doc) => {
        assert.deepEqual(
          doc.errors.map((e) => e.message),
          [],
          `a yaml block does not parse:\n${b.text}`,
        );
        return doc.toJS() as unknown;
      }),
    );
}

const yamlDocs = (md: string): Json[] => yamlValues(md).filter(isObject);

/** The parsed `patch:` strings of kustomize patch entries anywhere in `value`. */
function patchBodies(value: unknown): unknown[] {
  return [...walk(value)]
    .filter((o) => typeof o.patch === 'string')
    .map((o) => {
      const doc = parseAllDocuments(o.patch as string)[0]!;
      assert.deepEqual(
        doc.errors.map((e) => e.message),
        [],
        `a patch does not parse:\n${String(o.patch)}`,
      );
      return doc.toJS() as unknown;
    });
}

/** Container env entries (`{ name: UPPER_CASE, value }`), also as a JSON-patch op's value. */
function envEntries(value: unknown): { name: string; value: string }[] {
  return [...walk(value)].flatMap((o) =>
    [o, o.value]
      .filter(
        (c): c is { name: string; value: unknown } =>
          isObject(c) && typeof c.name === 'string' && /^[A-Z][A-Z0-9_]*$/.test(c.name) && 'value' in c,
      )
      .map((c) => ({ name: c.name, value: String(c.value) })),
  );
}

function jsonDocs(md: string): Json[] {
  return codeBlocks(md)
    .filter((b) => b.lang === 'json')
    .map((b) => {
      const value: unknown = JSON.parse(b.text);
      assert.ok(isObject(value), `a json block is not an object:\n${b.text}`);
      return value;
    });
}

/** Every object in a tree, depth first. */
function* walk(value: unknown): Generator<Json> {
  if (Array.isArray(value)) for (const v of value) yield* walk(v);
  else if (isObject(value)) {
    yield value;
    for (const v of Object.values(value)) yield* walk(v);
  }
}

interface PodTemplate {
  readonly metadata: { labels?: Record<string, string>; annotations?: Record<string, string> };
  readonly spec: PodDoc['spec'] & { serviceAccountName?: string };
  /** Namespace of the workload that holds it. */
  readonly namespace: string;
}

/** Pod templates of workloads (and bare pods) that carry secret-agent annotations. */
function podTemplates(md: string): PodTemplate[] {
  const out: PodTemplate[] = [];
  for (const doc of yamlDocs(md)) {
    const meta = (isObject(doc.metadata) ? doc.metadata : {}) as { namespace?: string };
    const spec = isObject(doc.spec) ? doc.spec : {};
    const candidate = doc.kind === 'Pod' ? doc : isObject(spec.template) ? spec.template : undefined;
    if (!candidate || !isObject(candidate.metadata) || !isObject(candidate.spec)) continue;
    const annotations = (candidate.metadata.annotations ?? {}) as Record<string, string>;
    if (!Object.keys(annotations).some((k) => k.startsWith(PREFIX))) continue;
    out.push({
      metadata: candidate.metadata as PodTemplate['metadata'],
      spec: candidate.spec as PodTemplate['spec'],
      namespace: meta.namespace ?? 'default',
    });
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Annotations and references

/** Every `secret-agent.io/*` annotation in the guide's YAML exists and its value parses. */
export function checkAnnotations(md: string): SecretReference[] {
  const refs: SecretReference[] = [];
  for (const obj of walk(yamlDocs(md))) {
    const annotations = isObject(obj.metadata) ? obj.metadata.annotations : undefined;
    if (!isObject(annotations)) continue;
    for (const [key, raw] of Object.entries(annotations)) {
      if (!key.startsWith(PREFIX)) continue;
      assert.equal(typeof raw, 'string', `${key}: annotation values are strings; quote it`);
      const value = raw as string;
      const name = key.slice(PREFIX.length);
      assert.ok(!isProductAnnotation(key), `${key} is written by secret-agent, never in a manifest`);
      let annotation: Annotation<unknown>;
      if (Object.hasOwn(POD_ANNOTATIONS, name)) {
        annotation = POD_ANNOTATIONS[name as keyof typeof POD_ANNOTATIONS] as Annotation<unknown>;
      } else {
        const match = matchFileAnnotation(name);
        assert.ok(match, `${key} is not in webhook/annotations/ (POD_ANNOTATIONS / FILE_ANNOTATIONS)`);
        annotation = FILE_ANNOTATIONS[match.name] as Annotation<unknown>;
        if (match.name === 'secret') refs.push(parseReference(value, key));
      }
      annotation.parse(value, key);
    }
  }
  return refs;
}

/** Webhook settings the guide's overlays set with patches (kustomizations only, not alternatives). */
function webhookEnvFromPatches(md: string): Record<string, string> {
  const env: Record<string, string> = {};
  // A whole Kustomization, or a fragment of one to add to the overlay (`patches:` only).
  for (const k of yamlDocs(md).filter(
    (d) => d.kind === 'Kustomization' || (d.kind === undefined && 'patches' in d),
  ))
    for (const e of envEntries(patchBodies(k))) env[e.name] = e.value;
  return env;
}

/** Runs each pod template of the guide through the real admission code, with the guide's webhook env. */
export function checkAdmission(md: string): PodDoc[] {
  // The guide's overlay env, resolved as the running webhook resolves it.
  const defaults = injectionDefaults({ WEBHOOK_NAMESPACE: 'platform-secrets', ...webhookEnvFromPatches(md) });
  const templates = podTemplates(md);
  assert.ok(templates.length > 0, 'the guide shows no annotated pod template');
  return templates.map((t) => {
    const annotations = t.metadata.annotations ?? {};
    if (annotations[`${PREFIX}inject`] === 'true')
      assert.equal(
        t.metadata.labels?.[OPT_IN_LABEL],
        'true',
        `the pod opts in by annotation but lacks the label ${OPT_IN_LABEL}: "true" (objectSelector)`,
      );
    const pod: PodDoc = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { ...t.metadata, name: 'guide-pod', namespace: t.namespace },
      spec: t.spec,
    };
    const request = decodeAdmissionReview(JSON.stringify(review(pod, { namespace: t.namespace })));
    const result = admitPod(request, defaults);
    assert.equal(
      result.outcome,
      'injected',
      result.outcome === 'denied' ? result.review.response.status?.message : result.outcome,
    );
    const mutated = mutate(pod, decodePatch(result.review.response));
    validatePod(mutated);
    return mutated;
  });
}

// ---------------------------------------------------------------------------------------------
// AWS

/** `secretsmanager:<Name>` for every `<Name>Command` agent/providers/aws/aws-provider.ts imports and sends. */
export function awsActionsFromCode(source: string): Set<string> {
  const sdkImports = [...source.matchAll(/from\s+'(@aws-sdk\/[^']+)'/g)].map((m) => m[1]);
  assert.deepEqual(
    sdkImports,
    ['@aws-sdk/client-secrets-manager'],
    'aws.ts talks to another AWS service now: document its IAM actions in eks.md and teach this test',
  );
  const imported = /import\s*\{([^}]*)\}\s*from\s*'@aws-sdk\/client-secrets-manager'/.exec(source)?.[1] ?? '';
  const commands = imported
    .split(',')
    .map((s) => s.trim())
    .filter((s) => /^\w+Command$/.test(s))
    .filter((s) => source.includes(`new ${s}(`));
  assert.ok(commands.length > 0, 'found no Secrets Manager command in aws.ts');
  return new Set(commands.map((c) => `secretsmanager:${c.slice(0, -'Command'.length)}`));
}

interface Statement {
  readonly Effect: string;
  readonly Action: string | string[];
  readonly Resource: string | string[];
  readonly Principal?: Json;
  readonly Condition?: Record<string, Record<string, string>>;
}

const list = (v: string | string[] | undefined): string[] => (v === undefined ? [] : [v].flat());
const statements = (policy: Json): Statement[] => list(policy.Statement as never) as unknown as Statement[];

/** The IAM glob: `*` any run of characters, `?` one. */
function iamGlob(pattern: string): RegExp {
  return new RegExp(
    `^${pattern
      .replace(/[.+^${}()|[\]\\]/g, '\\$&')
      .replace(/\*/g, '.*')
      .replace(/\?/g, '.')}$`,
  );
}

/** Actions AWS defines without a resource type: a statement granting them must say Resource "*". */
const RESOURCELESS = new Set(['secretsmanager:BatchGetSecretValue']);

/** The one permissions policy in eks.md against the actions the code sends and the references it shows. */
export function checkAwsPolicy(
  md: string,
  codeActions: ReadonlySet<string>,
  actionsNamedInCode: string[],
): void {
  const policies = jsonDocs(md).filter((doc) =>
    statements(doc).some((s) => list(s.Action).some((a) => a.startsWith('secretsmanager:'))),
  );
  assert.equal(
    policies.length,
    1,
    'eks.md must hold exactly one ```json policy with secretsmanager: actions',
  );
  const all = statements(policies[0]!);
  for (const s of all) assert.equal(s.Effect, 'Allow');

  const granted = new Set(all.flatMap((s) => list(s.Action)).filter((a) => a.startsWith('secretsmanager:')));
  assert.deepEqual(
    [...granted].sort(),
    [...codeActions].sort(),
    'the policy must list exactly the Secrets Manager requests agent/providers/aws/aws-provider.ts sends',
  );
  for (const action of actionsNamedInCode)
    assert.ok(
      all.some((s) => list(s.Action).includes(action)),
      `aws.ts tells users to allow ${action}; the policy lacks it`,
    );

  for (const s of all) {
    const resources = list(s.Resource);
    if (resources.includes('*'))
      for (const a of list(s.Action)) assert.ok(RESOURCELESS.has(a), `${a} on Resource "*": scope it by ARN`);
    for (const a of list(s.Action))
      if (RESOURCELESS.has(a))
        assert.deepEqual(resources, ['*'], `${a} has no resource type: its statement needs Resource "*"`);
  }
  const reads = all.filter((s) => list(s.Action).includes('secretsmanager:GetSecretValue'));
  const patterns = reads.flatMap((s) => list(s.Resource));
  assert.ok(patterns.length > 0, 'no GetSecretValue statement');
  for (const r of patterns)
    assert.match(r, /^arn:aws:secretsmanager:[^:]+:[^:]+:secret:[^*]+\*$/, `${r}: scope by a name prefix`);

  const kms = all.filter((s) => list(s.Action).includes('kms:Decrypt'));
  assert.equal(kms.length, 1, 'one kms:Decrypt statement, for customer-managed keys');
  for (const r of list(kms[0]!.Resource)) assert.match(r, /^arn:aws:kms:[^:]+:[^:]+:key\/.+$/);
  assert.match(
    kms[0]!.Condition?.StringEquals?.['kms:ViaService'] ?? '',
    /^secretsmanager\.[^.]+\.amazonaws\.com$/,
    'kms:Decrypt must be conditioned on kms:ViaService = secretsmanager.REGION.amazonaws.com',
  );

  // Every secret the guide's pods read is covered (an ARN ends in the name, `-` and 6 characters).
  const refs = checkAnnotations(md).filter((r) => r.provider === 'aws');
  assert.ok(refs.length > 0, 'eks.md shows no aws reference');
  for (const ref of refs) {
    const name = ref.secretId.startsWith('arn:') ? ref.secretId.split(':secret:')[1]! : ref.secretId;
    const arnTail = /-[A-Za-z0-9]{6}$/.test(name) ? name : `${name}-AbCdEf`;
    assert.ok(
      patterns.some((p) => iamGlob(p.split(':secret:')[1]!).test(arnTail)),
      `${ref.text} is not covered by the GetSecretValue resources ${patterns.join(', ')}`,
    );
  }
}

/** The trust policies match the service account the guide's workload runs as. */
export function checkAwsTrust(md: string): void {
  const template = podTemplates(md)[0]!;
  const subject = `system:serviceaccount:${template.namespace}:${template.spec.serviceAccountName}`;
  const docs = jsonDocs(md).flatMap(statements);

  const irsa = docs.filter((s) => list(s.Action).includes('sts:AssumeRoleWithWebIdentity'));
  assert.equal(irsa.length, 1, 'one IRSA trust statement');
  assert.match(String(irsa[0]!.Principal?.Federated), /^arn:aws:iam::[^:]+:oidc-provider\/oidc\.eks\./);
  const conditions = irsa[0]!.Condition?.StringEquals ?? {};
  const key = (suffix: string) => Object.keys(conditions).find((k) => k.endsWith(suffix));
  assert.equal(
    conditions[key(':sub') ?? ''],
    subject,
    'the IRSA :sub must name the workload’s service account',
  );
  assert.equal(conditions[key(':aud') ?? ''], 'sts.amazonaws.com');

  const podIdentity = docs.filter((s) => s.Principal?.Service === 'pods.eks.amazonaws.com');
  assert.equal(podIdentity.length, 1, 'one EKS Pod Identity trust statement');
  assert.deepEqual(list(podIdentity[0]!.Action).sort(), ['sts:AssumeRole', 'sts:TagSession']);
  assert.match(
    md,
    new RegExp(
      `create-pod-identity-association[^\\n]*(?:\\\\\\n[^\\n]*)*--namespace ${template.namespace} --service-account ${template.spec.serviceAccountName}`,
    ),
    'the pod identity association must name the workload’s namespace and service account',
  );
  const serviceAccounts = yamlDocs(md).filter((d) => d.kind === 'ServiceAccount');
  assert.ok(
    serviceAccounts.some(
      (sa) =>
        isObject(sa.metadata) &&
        sa.metadata.name === template.spec.serviceAccountName &&
        sa.metadata.namespace === template.namespace &&
        isObject(sa.metadata.annotations) &&
        typeof sa.metadata.annotations['eks.amazonaws.com/role-arn'] === 'string',
    ),
    'the IRSA ServiceAccount must carry eks.amazonaws.com/role-arn',
  );
}

// ---------------------------------------------------------------------------------------------
// GCP

/** The permission each Secret Manager RPC needs (cloud.google.com/secret-manager/docs/access-control). */
const GCP_PERMISSION: Record<string, string> = {
  AccessSecretVersion: 'secretmanager.versions.access',
  GetSecretVersion: 'secretmanager.versions.get',
  ListSecretVersions: 'secretmanager.versions.list',
  GetSecret: 'secretmanager.secrets.get',
  ListSecrets: 'secretmanager.secrets.list',
};

/** Permissions for the Secret Manager RPCs agent/providers/gcp/gcp-provider.ts calls, by the client's method names. */
export function gcpPermissionsFromCode(source: string): Set<string> {
  const protos = createRequire(import.meta.url)('@google-cloud/secret-manager/build/protos/protos.json') as {
    nested: Record<string, Json>;
  };
  const service = (protos.nested.google as never as { nested: { cloud: { nested: Json } } }).nested.cloud
    .nested.secretmanager as { nested: { v1: { nested: { SecretManagerService: { methods: Json } } } } };
  const rpcs = Object.keys(service.nested.v1.nested.SecretManagerService.methods);
  const called = rpcs.filter((rpc) => source.includes(`.${rpc[0]!.toLowerCase()}${rpc.slice(1)}(`));
  assert.ok(called.length > 0, 'found no Secret Manager RPC in gcp.ts');
  return new Set(
    called.map((rpc) => {
      const permission = GCP_PERMISSION[rpc];
      assert.ok(permission, `gcp.ts calls ${rpc}: add its permission to gke.md and GCP_PERMISSION here`);
      return permission;
    }),
  );
}

export function checkGcpGuide(md: string, permissions: ReadonlySet<string>): void {
  const role = /gcloud iam roles create[\s\S]*?--permissions ([\w.,]+)/.exec(md);
  assert.ok(role, 'gke.md must create a custom role with --permissions');
  assert.deepEqual(
    role[1]!.split(',').sort(),
    [...permissions].sort(),
    'the custom role must hold exactly the permissions of the RPCs agent/providers/gcp/gcp-provider.ts calls',
  );
  for (const p of permissions) assert.ok(md.includes(`\`${p}\``), `gke.md must explain ${p}`);

  const template = podTemplates(md)[0]!;
  const [ns, sa] = [template.namespace, template.spec.serviceAccountName];
  assert.ok(
    md.includes(
      `principal://iam.googleapis.com/projects/PROJECT_NUMBER/locations/global/workloadIdentityPools/PROJECT_ID.svc.id.goog/subject/ns/${ns}/sa/${sa}`,
    ),
    'the Workload Identity principal must name the workload’s namespace and service account',
  );
  assert.ok(
    md.includes(`serviceAccount:PROJECT_ID.svc.id.goog[${ns}/${sa}]`),
    'the GSA impersonation member',
  );
  assert.ok(
    yamlDocs(md).some(
      (d) =>
        d.kind === 'ServiceAccount' &&
        isObject(d.metadata) &&
        isObject(d.metadata.annotations) &&
        typeof d.metadata.annotations['iam.gke.io/gcp-service-account'] === 'string',
    ),
    'the GSA form needs the iam.gke.io/gcp-service-account annotation',
  );
  const refs = checkAnnotations(md).filter((r) => r.provider === 'gcp');
  assert.ok(refs.length > 0, 'gke.md shows no gcp reference');
}

// ---------------------------------------------------------------------------------------------
// Vault

interface VaultRule {
  readonly path: string;
  readonly capabilities: readonly string[];
}

/** `path "…" { capabilities = [...] }` blocks; anything else in the block is an error. */
export function parseHcl(text: string): VaultRule[] {
  const rules: VaultRule[] = [];
  const re = /path\s+"([^"]+)"\s*\{\s*capabilities\s*=\s*\[([^\]]*)\]\s*\}/g;
  for (const m of text.matchAll(re)) {
    rules.push({ path: m[1]!, capabilities: [...m[2]!.matchAll(/"([^"]+)"/g)].map((c) => c[1]!) });
  }
  const rest = text.replace(re, '').replace(/#[^\n]*/g, '');
  assert.equal(rest.trim(), '', `the policy holds something this test does not understand: ${rest.trim()}`);
  return rules;
}

/** Vault's glob: a trailing `*` is a prefix match, `+` one path segment. */
function vaultGlob(pattern: string): RegExp {
  const body = pattern
    .replace(/[.?^${}()|[\]\\]/g, '\\$&')
    .replace(/\+/g, '[^/]+')
    .replace(/\*$/, '.*');
  return new RegExp(`^${body}$`);
}

/** The capabilities of the most specific rule matching `path` (exact beats glob, longer beats shorter). */
function capabilitiesOf(rules: readonly VaultRule[], path: string): readonly string[] {
  const matching = rules.filter((r) => vaultGlob(r.path).test(path));
  matching.sort((a, b) => Number(b.path === path) - Number(a.path === path) || b.path.length - a.path.length);
  return matching[0]?.capabilities ?? [];
}

/** Capabilities the session's own requests need, from node-vault's command table (method → capability). */
export function vaultUpkeepFromCode(httpSource: string): Map<string, string> {
  const commands = createRequire(import.meta.url)('node-vault/src/commands.js') as Record<
    string,
    { method: string; path: string }
  >;
  // `revoke` (sys/leases/revoke) serves only static tokens with VAULT_REVOKE_ON_SHUTDOWN; the guide
  // logs in with Kubernetes auth, whose token revokes itself (and its leases) with revoke-self.
  const used = [...httpSource.matchAll(/nodeVault\.(\w+)\(/g)]
    .map((m) => m[1]!)
    .filter((name) => name !== 'read' && name !== 'write' && name !== 'revoke');
  assert.ok(used.length > 0, 'found no node-vault command in vault/http.ts');
  const needs = new Map<string, string>();
  for (const name of used) {
    const command = commands[name];
    assert.ok(command, `node-vault has no command ${name}`);
    needs.set(command.path.replace(/^\//, ''), command.method === 'GET' ? 'read' : 'update');
  }
  return needs;
}

export function checkVaultGuide(md: string, upkeep: ReadonlyMap<string, string>): void {
  const blocks = codeBlocks(md).filter((b) => b.lang === 'hcl');
  assert.equal(blocks.length, 1, 'vault.md must hold exactly one ```hcl policy');
  const rules = parseHcl(blocks[0]!.text);

  const kv2 = rules.filter((r) => /^[^/]+\/data\//.test(r.path));
  assert.ok(kv2.length > 0, 'the policy must grant read on a KV v2 data/ path');
  for (const rule of kv2) {
    assert.ok(rule.capabilities.includes('read'), `${rule.path}: read`);
    const metadata = rule.path.replace(/^([^/]+)\/data\//, '$1/metadata/');
    assert.ok(
      capabilitiesOf(rules, metadata).includes('read'),
      `${metadata}: read (the sidecar's version check reads <mount>/metadata/<key>)`,
    );
  }
  for (const [path, capability] of upkeep)
    assert.ok(
      capabilitiesOf(rules, path).includes(capability),
      `${path}: ${capability} (the agent's session calls it)`,
    );

  // Every reference the guide's pods use is readable, with its metadata for KV v2 mounts.
  const kv2Mounts = new Set(kv2.map((r) => r.path.split('/')[0]!));
  const refs = checkAnnotations(md).filter((r) => r.provider === 'vault');
  assert.ok(refs.length > 0, 'vault.md shows no vault reference');
  for (const ref of refs) {
    const [mount, ...rest] = ref.path.split('/');
    if (kv2Mounts.has(mount!)) {
      const key = (rest[0] === 'data' ? rest.slice(1) : rest).join('/');
      for (const path of [`${mount}/data/${key}`, `${mount}/metadata/${key}`])
        assert.ok(capabilitiesOf(rules, path).includes('read'), `${ref.text}: read on ${path}`);
    } else {
      assert.ok(capabilitiesOf(rules, ref.path).includes('read'), `${ref.text}: read on ${ref.path}`);
    }
  }

  // The role binds the workload's service account, carries the policy, and is the one the pod names.
  const template = podTemplates(md)[0]!;
  const policyName = /vault policy write ([\w-]+)/.exec(md)?.[1];
  const role = /vault write auth\/kubernetes\/role\/([\w-]+)((?:[^\n]*\\\n)*[^\n]*)/.exec(md);
  assert.ok(policyName && role, 'vault.md must write a policy and a kubernetes auth role');
  assert.match(role[2]!, new RegExp(`bound_service_account_names=${template.spec.serviceAccountName}\\b`));
  assert.match(role[2]!, new RegExp(`bound_service_account_namespaces=${template.namespace}\\b`));
  assert.match(role[2]!, new RegExp(`token_policies=${policyName}\\b`));
  assert.equal(template.metadata.annotations?.[`${PREFIX}vault-role`], role[1], 'the pod names the role');
}

// ---------------------------------------------------------------------------------------------
// Manifests, names, upgrade facts

function baseObjects(): Json[] {
  return ['deployment.yaml', 'mutatingwebhookconfiguration.yaml', 'poddisruptionbudget.yaml'].flatMap((f) =>
    parseAllDocuments(read(`deploy/base/${f}`)).map((d) => d.toJS() as Json),
  );
}

const baseDeployment = () => baseObjects().find((o) => o.kind === 'Deployment')!;
const podSpecOf = (deployment: Json) =>
  (deployment.spec as { template: { spec: { containers: Json[]; initContainers: Json[] } } }).template.spec;

/** Kustomizations in the guides name the base's images and keep deploy/transformers last. */
export function checkOverlays(md: string): void {
  const spec = podSpecOf(baseDeployment());
  const baseImages = [...spec.containers, ...spec.initContainers].map((c) => String(c.image).split(':')[0]);
  for (const k of yamlDocs(md).filter((d) => d.kind === 'Kustomization')) {
    const names = ((k.images ?? []) as { name: string }[]).map((i) => i.name);
    assert.deepEqual(
      [...new Set(names)].sort(),
      [...new Set(baseImages)].sort(),
      'images: must name both images',
    );
    const transformers = (k.transformers ?? []) as string[];
    assert.match(
      transformers.at(-1) ?? '',
      /deploy\/transformers/,
      'deploy/transformers must be listed last',
    );
  }
}

/** `-c NAME` and jsonpath `@.name=="NAME"` in the guides' commands name containers that exist. */
export function checkContainerNames(md: string): void {
  const spec = podSpecOf(baseDeployment());
  const known = new Set([
    AGENT_CONTAINER,
    AGENT_INIT_CONTAINER,
    ...[...spec.containers, ...spec.initContainers].map((c) => String(c.name)),
    ...podTemplates(md).flatMap((t) => t.spec.containers.map((c) => String(c.name))),
  ]);
  const shell = codeBlocks(md)
    .filter((b) => b.lang === 'sh')
    .map((b) => b.text)
    .join('\n');
  const used = [
    ...[...shell.matchAll(/\s-c\s+([a-z0-9][-a-z0-9]*)/g)].map((m) => m[1]!),
    ...[...md.matchAll(/@\.name=="([^"]+)"/g)].map((m) => m[1]!),
  ];
  for (const name of used) assert.ok(known.has(name), `container ${name} does not exist`);
}

/** Backticked setting-like names are real settings: a renamed one must not survive in the guides. */
const NOT_SETTINGS = new Set(['NODE_EXTRA_CA_CERTS', 'PERMISSION_DENIED']);
export function checkSettingNames(md: string): void {
  const known = new Set([
    ...Object.keys(WEBHOOK_SETTINGS),
    ...Object.keys(AGENT_SETTINGS),
    ...CLIENT_ENV.map((v) => v.name),
    ...VAULT_ENV.map((v) => v.name),
    'GCP_PROJECT',
  ]);
  // The guide's own placeholders (its "Placeholders:" paragraph) are not settings either.
  const placeholders = new Set(
    [
      ...(/^Placeholders:[\s\S]*?(?=\n\n|(?![\s\S]))/m.exec(md)?.[0] ?? '').matchAll(/`([A-Z][A-Z0-9_]*)`/g),
    ].map((m) => m[1]!),
  );
  for (const m of md.matchAll(/`([A-Z][A-Z0-9]*_[A-Z0-9_]+)(?:=[^`]*)?`/g)) {
    if (NOT_SETTINGS.has(m[1]!) || placeholders.has(m[1]!)) continue;
    assert.ok(known.has(m[1]!), `${m[1]} is not a setting of the webhook or the agent`);
  }
  for (const m of md.matchAll(/TLS_MODE=([\w-]+)/g)) WEBHOOK_SETTINGS.TLS_MODE.parse(m[1]!, 'TLS_MODE');
  // Env set in the guides' YAML and kustomize patches is the webhook's, with values it accepts.
  const values = yamlValues(md);
  for (const e of envEntries([values, patchBodies(values)])) {
    const setting = (WEBHOOK_SETTINGS as Record<string, { parse(text: string, field: string): unknown }>)[
      e.name
    ];
    assert.ok(setting, `${e.name} is not a webhook setting (webhook/config/settings.ts)`);
    setting.parse(e.value, e.name);
  }
}

export function checkUpgradeFacts(md: string): void {
  const objects = baseObjects();
  const hook = (objects.find((o) => o.kind === 'MutatingWebhookConfiguration')!.webhooks as Json[])[0]!;
  const deployment = baseDeployment();
  const strategy = (deployment.spec as { strategy: { rollingUpdate: Json } }).strategy.rollingUpdate;
  const pdb = objects.find((o) => o.kind === 'PodDisruptionBudget')!.spec as Json;
  for (const fact of [
    `failurePolicy: ${String(hook.failurePolicy)}`,
    `timeoutSeconds: ${String(hook.timeoutSeconds)}`,
    `maxSurge: ${String(strategy.maxSurge)}`,
    `maxUnavailable: ${String(strategy.maxUnavailable)}`,
    `minAvailable: ${String(pdb.minAvailable)}`,
    `keeps ${String((deployment.spec as Json).revisionHistoryLimit)} revisions`,
  ])
    assert.ok(md.includes(fact), `upgrade.md must say ${fact} (deploy/base)`);

  const spec = podSpecOf(deployment);
  const init = spec.initContainers.find((c) => c.name === 'agent-image');
  assert.deepEqual(
    init?.args,
    ['--version'],
    'deploy/base runs the agent image with --version as agent-image',
  );
  assert.ok(
    (spec.containers[0]!.env as { name: string }[]).some((e) => e.name === 'AGENT_IMAGE'),
    'AGENT_IMAGE is set in the base',
  );
  for (const [main, binary] of [
    ['agent/run-agent.ts', 'agent'],
    ['webhook/main.ts', 'webhook'],
  ] as const) {
    const prefix = /process\.stdout\.write\(`([\w-]+) \$\{packageJson\.version\}/.exec(read(main))?.[1];
    assert.ok(prefix, `${main} prints its version`);
    assert.ok(
      md.includes(`${prefix} X.Y.Z`),
      `upgrade.md must show what ${binary} --version prints (${prefix})`,
    );
  }
  const entrypoint = /ENTRYPOINT \["([^"]+)", "([^"]+)"\]/.exec(read('Dockerfile.webhook'));
  assert.ok(md.includes(`${entrypoint![1]} ${entrypoint![2]} --version`), 'the webhook --version command');
}

// ---------------------------------------------------------------------------------------------

const awsSource = read('agent/providers/aws/aws-provider.ts');
const awsActions = awsActionsFromCode(awsSource);
const awsNamed = [...new Set([...awsSource.matchAll(/\b(?:secretsmanager|kms):[A-Z]\w+/g)].map((m) => m[0]))];
const gcpPermissions = gcpPermissionsFromCode(read('agent/providers/gcp/gcp-provider.ts'));
const vaultUpkeep = vaultUpkeepFromCode(read('agent/providers/vault/http.ts'));

describe('install guides: what the code calls is what they grant', () => {
  it('eks.md: the IAM policy lists exactly the Secrets Manager requests aws.ts sends, scoped, plus kms:Decrypt', () => {
    assert.ok(awsActions.has('secretsmanager:GetSecretValue'));
    checkAwsPolicy(guide('eks'), awsActions, awsNamed);
  });

  it('eks.md: the IRSA and Pod Identity trust policies name the workload’s service account', () => {
    checkAwsTrust(guide('eks'));
  });

  it('gke.md: the custom role holds exactly the permissions of the RPCs gcp.ts calls', () => {
    assert.ok(gcpPermissions.has('secretmanager.versions.access'));
    checkGcpGuide(guide('gke'), gcpPermissions);
  });

  it('vault.md: read on data/ and metadata/, and what the token and lease upkeep calls', () => {
    assert.equal(vaultUpkeep.get('auth/token/renew-self'), 'update');
    checkVaultGuide(guide('vault'), vaultUpkeep);
  });
});

describe('install guides: every annotation, reference, pod, setting and name is real', () => {
  for (const name of GUIDES) {
    it(`${name}.md`, () => {
      const md = guide(name);
      checkAnnotations(md);
      if (podTemplates(md).length > 0) checkAdmission(md);
      checkOverlays(md);
      checkContainerNames(md);
      checkSettingNames(md);
    });
  }

  it('eks.md: the TLS_MODE values in its table are the webhook’s', () => {
    const row = guide('eks')
      .split('\n')
      .filter(
        (l) => l.startsWith('|') && /`(file|self-managed|[\w-]+)`\s*\|\s*(cert-manager|The webhook)/.test(l),
      );
    assert.equal(row.length, 2);
    for (const line of row) {
      const value = /\|\s*`([\w-]+)`\s*\|\s*(?:cert-manager|The webhook)/.exec(line)![1]!;
      WEBHOOK_SETTINGS.TLS_MODE.parse(value, 'TLS_MODE');
    }
  });

  it('upgrade.md: failurePolicy, rollout strategy, agent-image and --version match deploy/ and the code', () => {
    checkUpgradeFacts(guide('upgrade'));
  });
});

describe('install guides: the checks catch drift', () => {
  const eks = guide('eks');
  const throwsOn = (fn: () => unknown, what: RegExp) => assert.throws(fn, what);

  it('an IAM policy without BatchGetSecretValue, with an extra action, or unscoped', () => {
    throwsOn(
      () =>
        checkAwsPolicy(
          eks.replace('"Action": "secretsmanager:BatchGetSecretValue"', '"Action": []'),
          awsActions,
          awsNamed,
        ),
      /exactly the Secrets Manager requests/,
    );
    throwsOn(
      () =>
        checkAwsPolicy(
          eks.replace(
            '"Action": "secretsmanager:GetSecretValue"',
            '"Action": ["secretsmanager:GetSecretValue", "secretsmanager:DescribeSecret"]',
          ),
          awsActions,
          awsNamed,
        ),
      /exactly the Secrets Manager requests/,
    );
    throwsOn(
      () => checkAwsPolicy(eks.replace(':secret:shop/web/*"', ':secret:other/*"'), awsActions, awsNamed),
      /is not covered/,
    );
    throwsOn(
      () => checkAwsPolicy(eks, new Set([...awsActions, 'secretsmanager:DescribeSecret']), awsNamed),
      /exactly/,
    );
    throwsOn(
      () => checkAwsPolicy(eks.replace('"kms:ViaService"', '"kms:CallerAccount"'), awsActions, awsNamed),
      /ViaService/,
    );
  });

  it('a code change that sends a new command or calls another AWS service', () => {
    const more =
      awsSource.replace('GetSecretValueCommand,', 'GetSecretValueCommand,\n  DescribeSecretCommand,') +
      '\nnew DescribeSecretCommand({});';
    assert.ok(awsActionsFromCode(more).has('secretsmanager:DescribeSecret'));
    throwsOn(
      () => awsActionsFromCode(`${awsSource}\nimport { KMSClient } from '@aws-sdk/client-kms';`),
      /another AWS service/,
    );
  });

  it('a trust policy for another service account', () => {
    throwsOn(
      () => checkAwsTrust(eks.replace('system:serviceaccount:shop:web', 'system:serviceaccount:shop:api')),
      /:sub/,
    );
  });

  it('a GCP role without secretmanager.versions.get, or a new RPC in gcp.ts', () => {
    throwsOn(
      () =>
        checkGcpGuide(
          guide('gke').replace(
            'secretmanager.versions.access,secretmanager.versions.get',
            'secretmanager.versions.access',
          ),
          gcpPermissions,
        ),
      /exactly the permissions/,
    );
    throwsOn(() => gcpPermissionsFromCode('client.rotateSecret({ name })'), /RotateSecret/);
  });

  it('a Vault policy without metadata/, without renew-self, or with an unknown construct', () => {
    const vault = guide('vault');
    throwsOn(
      () =>
        checkVaultGuide(
          vault.replace('path "secret/metadata/shop/web/*"', 'path "secret/metadata/other/*"'),
          vaultUpkeep,
        ),
      /metadata/,
    );
    throwsOn(
      () =>
        checkVaultGuide(
          vault.replace('path "auth/token/renew-self"', 'path "auth/token/renew-other"'),
          vaultUpkeep,
        ),
      /renew-self/,
    );
    throwsOn(() => parseHcl('path "a/*" { policy = "read" }'), /does not understand/);
    throwsOn(
      () =>
        checkVaultGuide(
          vault.replace('bound_service_account_names=web', 'bound_service_account_names=api'),
          vaultUpkeep,
        ),
      /bound_service_account_names/,
    );
  });

  it('an unknown annotation, a bad reference, a pod without the label, a renamed setting, a wrong container', () => {
    throwsOn(
      () =>
        checkAnnotations(eks.replace('secret-agent.io/rotation-http-url', 'secret-agent.io/rotation-url')),
      /not in webhook\/annotations\//,
    );
    throwsOn(() => checkAnnotations(eks.replace("'aws:shop/web/api-key'", "'aws:shop web'")), /white space/);
    throwsOn(
      () =>
        checkAdmission(
          eks.replace("        secret-agent.io/inject: 'true'\n      annotations:", '      annotations:'),
        ),
      /lacks the label/,
    );
    throwsOn(() => checkSettingNames(`${eks}\n\`AGENT_REGION\``), /AGENT_REGION is not a setting/);
    throwsOn(
      () => checkSettingNames(eks.replace('name: NATIVE_SIDECARS', 'name: NATIVE_SIDECAR')),
      /NATIVE_SIDECAR is not a webhook setting/,
    );
    throwsOn(() => checkSettingNames(eks.replace("value: 'false'", "value: 'no'")), /NATIVE_SIDECARS/);
    throwsOn(
      () => checkContainerNames(`${eks}\n\`\`\`sh\nkubectl logs "$POD" -c secret-agent-sidecar\n\`\`\`\n`),
      /does not exist/,
    );
    throwsOn(
      () => checkUpgradeFacts(guide('upgrade').replace('failurePolicy: Fail', 'failurePolicy: Ignore')),
      /failurePolicy: Fail/,
    );
  });
});
