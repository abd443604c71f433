import assert from 'node:assert/strict';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { BlockList } from 'node:net';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { parseAllDocuments } from 'yaml';
import { OPT_IN_LABEL } from '../../webhook/annotations/annotation.ts';
import { AGENT_PORT_NAME } from '../../webhook/injected-names.ts';
import { ROOT } from '../support/run-agent.ts';
import {
  DEPLOY,
  kubectlKustomize,
  parseYaml,
  tempOverlay,
  validate,
  type KubeObject,
} from './kustomize-render.ts';

/**
 * The webhook's NetworkPolicy as the default install renders it, and the patches docs/install gives
 * each platform to name the webhook's callers (docs/install/network.md): what each admits, rendered by
 * kubectl kustomize and checked against the Kubernetes schema.
 */

interface Peer {
  readonly ipBlock?: { cidr: string; except?: string[] };
  readonly namespaceSelector?: { matchLabels?: Record<string, string> };
  readonly podSelector?: { matchLabels?: Record<string, string> };
}
interface Rule {
  readonly from?: Peer[];
  readonly to?: Peer[];
  readonly ports: { protocol: string; port: number | string }[];
}
interface PolicySpec {
  readonly podSelector: { matchLabels: Record<string, string> };
  readonly policyTypes: string[];
  readonly ingress: Rule[];
  readonly egress: Rule[];
}
interface PodTemplate {
  readonly metadata: { labels: Record<string, string> };
  readonly spec: {
    containers: {
      name: string;
      ports: { name: string; containerPort: number }[];
      readinessProbe: { httpGet: { port: string | number } };
      livenessProbe: { httpGet: { port: string | number } };
    }[];
  };
}

const NAMESPACE = 'platform-secrets';
const ENTRIES = ['.', 'overlays/cert-manager', 'overlays/self-managed'];
const PATCHES = join(ROOT, 'docs/install/network');
const PLATFORMS = ['eks', 'gke', 'kubeadm'];

/** An overlay of `entry` in its own namespace, with `patch` (a file's text) as its only patch. */
function renderOverlay(entry: string, patch?: string): KubeObject[] {
  using dir = tempOverlay({
    resources: [join(DEPLOY, entry)],
    namespace: NAMESPACE,
    ...(patch ? { patches: [{ path: 'webhook-ingress.yaml' }] } : {}),
    transformers: [join(DEPLOY, 'transformers')],
  });
  if (patch) writeFileSync(join(dir.path, 'webhook-ingress.yaml'), patch);
  return kubectlKustomize(dir.path);
}

function onePolicy(objects: KubeObject[], where: string): PolicySpec {
  const policies = objects.filter((o) => o.kind === 'NetworkPolicy');
  assert.equal(policies.length, 1, `${where}: one NetworkPolicy`);
  assert.equal(policies[0]!.metadata.namespace, NAMESPACE, `${where}: in the webhook's namespace`);
  return policies[0]!.spec as unknown as PolicySpec;
}

function webhookPod(objects: KubeObject[]): PodTemplate {
  const deployments = objects.filter((o) => o.kind === 'Deployment');
  assert.equal(deployments.length, 1);
  return (deployments[0]!.spec as { template: PodTemplate }).template;
}

/** The webhook container's one port, which its probes use too. */
function webhookPort(pod: PodTemplate): number {
  const webhook = pod.spec.containers.find((c) => c.name === 'webhook')!;
  assert.equal(webhook.ports.length, 1);
  const [port] = webhook.ports;
  for (const probe of [webhook.readinessProbe, webhook.livenessProbe])
    assert.ok([port!.name, port!.containerPort].includes(probe.httpGet.port), 'the probes use that port');
  return port!.containerPort;
}

function selects(selector: { matchLabels: Record<string, string> }, labels: Record<string, string>): boolean {
  return Object.entries(selector.matchLabels).every(([k, v]) => labels[k] === v);
}

/** A CIDR Node itself accepts, of the family its address says; throws otherwise. */
function checkCidr(cidr: string): void {
  const [address, prefix] = cidr.split('/');
  const family = address!.includes(':') ? 'ipv6' : 'ipv4';
  assert.match(prefix ?? '', /^\d+$/, `${cidr}: a prefix length`);
  new BlockList().addSubnet(address!, Number(prefix), family);
}

/** Every address of IPv4 and IPv6: a source list holding one of these admits every source. */
const EVERYWHERE = new Set(['0.0.0.0/0', '::/0']);

/**
 * A patch's callers: some, each an ipBlock narrower than everything, or pods of kube-system (the
 * control plane's own proxy), never a tenant's namespace.
 */
function checkCallers(peers: readonly Peer[] | undefined): void {
  assert.ok(peers && peers.length > 0, 'it lists its callers (a rule without `from` admits every source)');
  for (const peer of peers) {
    if (peer.ipBlock) {
      checkCidr(peer.ipBlock.cidr);
      assert.ok(!EVERYWHERE.has(peer.ipBlock.cidr), `${peer.ipBlock.cidr} admits every address`);
    } else {
      assert.deepEqual(
        peer.namespaceSelector,
        { matchLabels: { 'kubernetes.io/metadata.name': 'kube-system' } },
        'pods of kube-system only',
      );
      assert.ok(Object.keys(peer.podSelector?.matchLabels ?? {}).length > 0, 'some of its pods only');
    }
  }
}

/** The ```yaml blocks of a Markdown file, parsed. */
function yamlBlocks(md: string): KubeObject[] {
  return [...md.matchAll(/^```yaml\n([\s\S]*?)^```$/gm)].flatMap((m) =>
    parseAllDocuments(m[1]!).map((d) => d.toJS() as KubeObject),
  );
}

/** The egress every rendering keeps: TCP 443 and 6443 to anywhere (on Cilium an ipBlock would miss the API server). */
function checkEgress(spec: PolicySpec, where: string): void {
  assert.deepEqual(
    spec.egress,
    [
      {
        ports: [
          { protocol: 'TCP', port: 443 },
          { protocol: 'TCP', port: 6443 },
        ],
      },
    ],
    `${where}: out, the Kubernetes API only`,
  );
}

describe('the default install: the webhook’s NetworkPolicy', () => {
  it('deploy and both TLS overlays: selects the webhook’s pods only; in, TCP 8443 from any source until the overlay names the callers; out, TCP 443 and 6443 only', async () => {
    for (const entry of ENTRIES) {
      const objects = renderOverlay(entry);
      for (const object of objects) await validate(object, `${entry} (rendered)`);
      const spec = onePolicy(objects, entry);
      const pod = webhookPod(objects);
      assert.ok(selects(spec.podSelector, pod.metadata.labels), 'selects the webhook’s pods');
      const others = objects.filter(
        (o) => o.kind !== 'Deployment' && (o.spec as { template?: PodTemplate } | undefined)?.template,
      );
      assert.deepEqual(others, [], 'no other workload for it to select');
      assert.deepEqual([...spec.policyTypes].sort(), ['Egress', 'Ingress']);
      // No `from`: every source, the only form that admits an API server on a remote node on every
      // network plugin (Cilium matches no node with an ipBlock by default).
      assert.deepEqual(spec.ingress, [{ ports: [{ protocol: 'TCP', port: webhookPort(pod) }] }]);
      checkEgress(spec, entry);
    }
  });

  it('deploy/base alone carries none: the TLS overlays add it', () => {
    const objects = kubectlKustomize(join(DEPLOY, 'base'));
    assert.equal(objects.filter((o) => o.kind === 'NetworkPolicy').length, 0);
  });
});

describe('docs/install/network: each platform’s patch names the webhook’s callers', () => {
  const patchFiles = readdirSync(PATCHES).filter((f) => f.endsWith('.yaml'));
  const guide = readFileSync(join(ROOT, 'docs/install/network.md'), 'utf8');

  it('one patch per platform, each linked from docs/install/network.md', () => {
    assert.deepEqual(patchFiles.sort(), PLATFORMS.map((p) => `${p}.yaml`).sort());
    for (const file of patchFiles)
      assert.ok(guide.includes(`](network/${file})`), `network.md links ${file}`);
  });

  const patches = [
    ...PLATFORMS.map((p) => ({ name: `network/${p}.yaml`, path: join(PATCHES, `${p}.yaml`) })),
    {
      name: 'example-overlay/webhook-ingress.yaml',
      path: join(ROOT, 'docs/install/example-overlay/webhook-ingress.yaml'),
    },
  ];
  it('each platform’s patch (EKS, GKE, kubeadm) and the example overlay’s: applies to every entry point; the policy stays one, valid, admits TCP 8443 from its callers only, egress unchanged', async () => {
    for (const { name, path } of patches) {
      const text = readFileSync(path, 'utf8');
      const [patch] = parseYaml(text, name);
      await validate(patch!, name);
      const callers = (patch!.spec as unknown as PolicySpec).ingress;
      assert.equal(callers.length, 1, 'one rule');
      const peers = callers[0]!.from!;
      checkCallers(peers);
      for (const entry of ['.', 'overlays/self-managed']) {
        const objects = renderOverlay(entry, text);
        for (const object of objects) await validate(object, `${entry} + ${name}`);
        const spec = onePolicy(objects, `${entry} + ${name}`);
        const pod = webhookPod(objects);
        assert.ok(selects(spec.podSelector, pod.metadata.labels));
        assert.deepEqual([...spec.policyTypes].sort(), ['Egress', 'Ingress']);
        assert.deepEqual(spec.ingress, [
          { from: peers, ports: [{ protocol: 'TCP', port: webhookPort(pod) }] },
        ]);
        checkEgress(spec, `${entry} + ${name}`);
      }
    }
  });

  it('gke.yaml admits the Konnectivity agents by GKE’s label; kubeadm.yaml one address per node (/32)', () => {
    const peersOf = (platform: string) =>
      (
        parseYaml(readFileSync(join(PATCHES, `${platform}.yaml`), 'utf8'), platform)[0]!
          .spec as unknown as PolicySpec
      ).ingress[0]!.from!;
    assert.ok(
      peersOf('gke').some((p) => p.podSelector?.matchLabels?.['k8s-app'] === 'konnectivity-agent'),
      'GKE’s Konnectivity agents',
    );
    assert.ok(
      peersOf('gke').some((p) => p.ipBlock),
      'a private cluster’s control-plane range',
    );
    // The guide's command finds the pods the patch admits.
    const konnectivity = peersOf('gke').find((p) => p.podSelector)!.podSelector!.matchLabels!;
    for (const [key, value] of Object.entries(konnectivity))
      assert.ok(
        guide
          .split('\n')
          .some((line) => line.startsWith(`kubectl -n kube-system get pods -l ${key}=${value} `)),
        'network.md finds them',
      );
    for (const peer of peersOf('kubeadm')) assert.match(peer.ipBlock?.cidr ?? '', /\/32$/);
    for (const peer of peersOf('eks')) assert.ok(peer.ipBlock, 'EKS: the cluster’s subnets');
  });

  it('the checks catch a patch that admits every source, every address, a tenant’s namespace or a bad CIDR', () => {
    const peers = (
      parseYaml(readFileSync(join(PATCHES, 'gke.yaml'), 'utf8'), 'gke')[0]!.spec as unknown as PolicySpec
    ).ingress[0]!.from!;
    checkCallers(peers);
    assert.throws(() => checkCallers(undefined), /every source/);
    assert.throws(() => checkCallers([...peers, { ipBlock: { cidr: '0.0.0.0/0' } }]), /every address/);
    assert.throws(() => checkCallers([...peers, { ipBlock: { cidr: '::/0' } }]), /every address/);
    assert.throws(
      () => checkCallers([{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'shop' } } }]),
      /kube-system only/,
    );
    assert.throws(
      () =>
        checkCallers([
          { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'kube-system' } } },
        ]),
      /some of its pods only/,
    );
    assert.throws(() => checkCallers([{ ipBlock: { cidr: '192.0.2.0/33' } }]));
    assert.throws(() => checkCallers([{ ipBlock: { cidr: '192.0.2.0' } }]), /prefix length/);
  });
});

describe('docs/agent.md: the policy that closes the agent’s port in an application namespace', () => {
  const policies = yamlBlocks(readFileSync(join(ROOT, 'docs/agent.md'), 'utf8')).filter(
    (o) => o?.kind === 'NetworkPolicy',
  );

  it('is valid, selects opted-in pods and admits only Prometheus, on the port’s name the webhook gives it', async () => {
    assert.equal(policies.length, 1);
    await validate(policies[0]!, 'docs/agent.md');
    const spec = policies[0]!.spec as unknown as PolicySpec;
    assert.deepEqual(spec.podSelector, { matchLabels: { [OPT_IN_LABEL]: 'true' } });
    assert.deepEqual(spec.policyTypes, ['Ingress']);
    assert.equal(spec.ingress.length, 1);
    assert.deepEqual(spec.ingress[0]!.ports, [{ protocol: 'TCP', port: AGENT_PORT_NAME }]);
    for (const peer of spec.ingress[0]!.from!) {
      assert.equal(peer.ipBlock, undefined);
      assert.ok(peer.namespaceSelector && peer.podSelector, 'a namespace and its pods');
    }
  });
});
