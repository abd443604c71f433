import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { describe, it } from 'node:test';
import { METRIC_DOCS } from '../../agent/serve/metrics.ts';
import { parseWebhookConfig } from '../../webhook/config/parse-webhook-config.ts';
import { AGENT_CONTAINER, AGENT_INIT_CONTAINER, AGENT_PORT_NAME } from '../../webhook/injected-names.ts';
import { OPT_IN_LABEL } from '../../webhook/annotations/annotation.ts';
import { WEBHOOK_SETTINGS } from '../../webhook/config/settings.ts';
import { MAX_LARGE_IN_FLIGHT_BYTES, MAX_SLOT_BYTES } from '../../webhook/body-budget.ts';
import { heapOptions, oldSpaceMiB } from '../../webhook/heap-limit.ts';
import { createWebhookMetrics } from '../../webhook/metrics.ts';
import { ROOT } from '../support/run-agent.ts';
import { deployedWebhook } from './deployed-webhook.ts';
import {
  DEPLOY,
  kubectlKustomize,
  parseYaml,
  tempOverlay,
  validate,
  type KubeObject,
} from './kustomize-render.ts';

function yamlFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? yamlFiles(path) : /\.ya?ml$/.test(name) ? [path] : [];
  });
}

const PROMTOOL_HINT =
  'It checks the monitoring component’s alerts: apt-get install prometheus (Debian’s package ships promtool); .ci/run installs it.';

function tempDir(): { path: string; [Symbol.dispose](): void } {
  const path = mkdtempSync(join(tmpdir(), 'secret-agent-rules-'));
  return { path, [Symbol.dispose]: () => rmSync(path, { recursive: true, force: true }) };
}

const render = (dir: string) => kubectlKustomize(join(DEPLOY, dir));

describe('deploy/', () => {
  it('every YAML file parses and every object validates against the Kubernetes schema', async () => {
    const files = yamlFiles(DEPLOY);
    assert.ok(files.length >= 12);
    // Patches are partial objects: they are validated once applied, in the rendered output below.
    const patches = new Set(
      files
        .filter((f) => f.endsWith('kustomization.yaml'))
        .flatMap((f) =>
          (
            (parseYaml(readFileSync(f, 'utf8'), f)[0] as { patches?: { path?: string }[] }).patches ?? []
          ).flatMap((p) => (p.path ? [join(dirname(f), p.path)] : [])),
        ),
    );
    for (const file of files.filter((f) => !patches.has(f))) {
      for (const object of parseYaml(readFileSync(file, 'utf8'), relative(ROOT, file)))
        await validate(object, relative(ROOT, file));
    }
  });

  it('every kustomization lists files and directories that exist', () => {
    for (const file of yamlFiles(DEPLOY).filter((f) => f.endsWith('kustomization.yaml'))) {
      const k = parseYaml(readFileSync(file, 'utf8'), file)[0] as {
        resources?: string[];
        patches?: { path?: string }[];
      };
      for (const entry of [
        ...(k.resources ?? []),
        ...(k.patches ?? []).flatMap((p) => (p.path ? [p.path] : [])),
      ]) {
        const target = join(dirname(file), entry);
        assert.ok(existsSync(target), `${relative(ROOT, file)} lists ${entry}, which does not exist`);
        if (statSync(target).isDirectory())
          assert.ok(existsSync(join(target, 'kustomization.yaml')), `${entry} is not a kustomization`);
      }
    }
  });

  it('the Deployment sets only env the webhook knows', () => {
    const deployment = parseYaml(
      readFileSync(join(DEPLOY, 'base/deployment.yaml'), 'utf8'),
      'deployment',
    )[0]!;
    const env = (deployment.spec as { template: { spec: { containers: { env: { name: string }[] }[] } } })
      .template.spec.containers[0]!.env;
    // NODE_OPTIONS is Node's own: the heap cap below.
    for (const { name } of env.filter((e) => e.name !== 'NODE_OPTIONS'))
      assert.ok(Object.hasOwn(WEBHOOK_SETTINGS, name), `${name} is not a webhook setting`);
  });

  it('the Deployment caps the webhook’s V8 heap as its worst case counts it: 3/16 of its memory limit in old space, 1 MiB semi-spaces', () => {
    const deployed = deployedWebhook();
    assert.equal(deployed.nodeOptions, heapOptions(deployed.memoryLimitMiB));
    const oldSpace = /--max-old-space-size=(\d+)(?:\s|$)/.exec(deployed.nodeOptions);
    assert.ok(oldSpace, `NODE_OPTIONS ${JSON.stringify(deployed.nodeOptions)} caps the heap`);
    assert.equal(Number(oldSpace[1]), oldSpaceMiB(deployed.memoryLimitMiB));
    // The young generation counts too (3 × the semi-space): small, so the heap's whole limit stays
    // well under the container's, with room for Node itself and the request budget's buffers.
    const semiSpace = /--max-semi-space-size=(\d+)(?:\s|$)/.exec(deployed.nodeOptions);
    assert.ok(semiSpace && Number(semiSpace[1]) <= 8, 'the young generation is capped');
    const heap = Number(oldSpace[1]) + 3 * Number(semiSpace[1]);
    assert.ok(
      heap + MAX_LARGE_IN_FLIGHT_BYTES / 2 ** 20 + MAX_SLOT_BYTES / 2 ** 20 < deployed.memoryLimitMiB * 0.75,
    );
  });

  describe('kubectl kustomize renders each entry point', () => {
    {
      for (const dir of [
        'base',
        'overlays/cert-manager',
        'overlays/self-managed',
        'agent-rbac',
        'versions-reader',
        '.',
      ]) {
        it(dir, async () => {
          const objects = render(dir);
          for (const object of objects) await validate(object, `${dir} (rendered)`);
          const find = (kind: string) => objects.filter((o) => o.kind === kind);
          if (dir === 'agent-rbac') {
            const verbs = find('ClusterRole').flatMap((r) =>
              (r.rules as { verbs: string[]; resources: string[] }[]).flatMap((rule) => rule.verbs),
            );
            assert.ok(!verbs.includes('*'));
            return;
          }
          if (dir === 'versions-reader') {
            // Read-only, and never a Secret: `versions` learns versions from the agents' logs.
            const rules = find('ClusterRole').flatMap(
              (r) => r.rules as { verbs: string[]; resources: string[] }[],
            );
            for (const rule of rules) {
              for (const verb of rule.verbs) assert.ok(['get', 'list', 'watch'].includes(verb), verb);
              for (const resource of rule.resources)
                assert.ok(['pods', 'pods/log'].includes(resource), resource);
            }
            return;
          }
          const [webhookConfig] = find('MutatingWebhookConfiguration');
          const hook = (webhookConfig!.webhooks as Record<string, unknown>[])[0]!;
          assert.equal(hook.failurePolicy, 'Fail');
          assert.equal(hook.sideEffects, 'None');
          assert.equal(hook.reinvocationPolicy, 'IfNeeded');
          assert.ok((hook.timeoutSeconds as number) <= 10);
          assert.deepEqual(hook.objectSelector, { matchLabels: { [OPT_IN_LABEL]: 'true' } });
          const excluded = (
            hook.namespaceSelector as {
              matchExpressions: { key: string; operator: string; values: string[] }[];
            }
          ).matchExpressions[0]!;
          assert.equal(excluded.operator, 'NotIn');
          assert.deepEqual([...excluded.values].sort(), ['kube-system', 'secret-agent']);
          const [deployment] = find('Deployment');
          const spec = deployment!.spec as {
            replicas: number;
            template: { spec: Record<string, unknown> & { containers: Record<string, unknown>[] } };
          };
          assert.equal(spec.replicas, 2);
          assert.equal(find('PodDisruptionBudget').length, 1);
          const container = spec.template.spec.containers[0]!;
          const env = container.env as { name: string; value?: string }[];
          assert.equal(env.filter((e) => e.name === 'TLS_MODE').length, 1);
          const tlsMode = env.find((e) => e.name === 'TLS_MODE')!.value;
          // NATIVE_SIDECARS is left to its default, auto, which reads GET /version with the pod's token.
          assert.equal(WEBHOOK_SETTINGS.NATIVE_SIDECARS.default, 'auto');
          assert.ok(!env.some((e) => e.name === 'NATIVE_SIDECARS'), 'NATIVE_SIDECARS left to auto');
          assert.equal(spec.template.spec.automountServiceAccountToken, true, 'GET /version needs the token');
          const roles = [...find('Role'), ...find('ClusterRole')];
          for (const role of roles)
            for (const rule of role.rules as { verbs: string[]; resources: string[] }[]) {
              assert.ok(
                !rule.verbs.includes('*') && !rule.resources.includes('*'),
                `${role.metadata.name} uses a wildcard`,
              );
            }
          if (dir === 'overlays/self-managed') {
            assert.equal(tlsMode, 'self-managed');
            assert.deepEqual(spec.template.spec.volumes ?? [], []);
            assert.deepEqual(container.volumeMounts ?? [], []);
            const secretRules = find('Role').flatMap(
              (r) => r.rules as { resources: string[]; verbs: string[]; resourceNames?: string[] }[],
            );
            for (const rule of secretRules.filter((r) => r.verbs.some((v) => v !== 'create')))
              assert.deepEqual(rule.resourceNames, ['secret-agent-webhook-tls']);
          } else {
            assert.equal(tlsMode, 'file');
            assert.equal(
              roles.filter((r) => r.metadata.name.startsWith('secret-agent-webhook')).length,
              0,
              'file mode needs no RBAC',
            );
          }
          if (dir === 'overlays/cert-manager' || dir === '.') {
            assert.equal(
              webhookConfig!.metadata.annotations?.['cert-manager.io/inject-ca-from'],
              'secret-agent/secret-agent-webhook',
            );
            assert.equal(
              find('Certificate')[0]!.spec &&
                (find('Certificate')[0]!.spec as { secretName: string }).secretName,
              'secret-agent-webhook-tls',
            );
          }
        });
      }
    }
  });

  describe('an overlay with its own namespace and images (set once; deploy/transformers makes every reference follow)', () => {
    const NAMESPACE = 'platform-secrets';
    const WEBHOOK_IMAGE = 'registry.internal.example/secret-agent/webhook';
    const AGENT_IMAGE_NAME = 'registry.internal.example/secret-agent/agent';
    const digest = (c: string) => `sha256:${c.repeat(64)}`;

    /** Every string in the rendered objects, with where it is. */
    function strings(value: unknown, path: string, out: [string, string][] = []): [string, string][] {
      if (typeof value === 'string') out.push([path, value]);
      else if (Array.isArray(value)) value.forEach((v, i) => strings(v, `${path}[${i}]`, out));
      else if (value && typeof value === 'object')
        for (const [k, v] of Object.entries(value)) strings(v, `${path}.${k}`, out);
      return out;
    }

    async function checkFollows(
      objects: KubeObject[],
      where: string,
      images: { webhook: string; agent: string },
    ) {
      for (const object of objects) await validate(object, where);
      const find = (kind: string) => objects.filter((o) => o.kind === kind);
      const cluster = new Set([
        'Namespace',
        'ClusterRole',
        'ClusterRoleBinding',
        'MutatingWebhookConfiguration',
        'ValidatingAdmissionPolicy',
        'ValidatingAdmissionPolicyBinding',
      ]);
      for (const o of objects)
        assert.equal(
          o.metadata.namespace,
          cluster.has(o.kind) ? undefined : NAMESPACE,
          `${where}: ${o.kind} ${o.metadata.name}`,
        );
      const namespaces = find('Namespace').map((n) => n.metadata.name);
      if (namespaces.length > 0) assert.deepEqual(namespaces, [NAMESPACE], `${where}: the Namespace object`);
      // No reference to the default namespace is left, as <namespace>/<name> or in a DNS name.
      for (const o of objects)
        for (const [path, text] of strings(o, `${o.kind}/${o.metadata.name}`))
          assert.ok(!/^secret-agent\/|\.secret-agent\.svc\b/.test(text), `${where}: ${path} = ${text}`);

      const [hookConfig] = find('MutatingWebhookConfiguration');
      const hook = (hookConfig!.webhooks as Record<string, unknown>[])[0] as {
        clientConfig: { service: { namespace: string } };
        namespaceSelector: { matchExpressions: { values: string[] }[] };
      };
      assert.equal(hook.clientConfig.service.namespace, NAMESPACE);
      assert.deepEqual(hook.namespaceSelector.matchExpressions[0]!.values, ['kube-system', NAMESPACE]);
      const injectFrom = hookConfig!.metadata.annotations?.['cert-manager.io/inject-ca-from'];
      const [certificate] = find('Certificate');
      if (certificate) {
        assert.equal(injectFrom, `${NAMESPACE}/${certificate.metadata.name}`);
        assert.deepEqual((certificate.spec as { dnsNames: string[] }).dnsNames, [
          `secret-agent-webhook.${NAMESPACE}.svc`,
          `secret-agent-webhook.${NAMESPACE}.svc.cluster.local`,
        ]);
      } else assert.equal(injectFrom, undefined);
      for (const binding of [...find('RoleBinding'), ...find('ClusterRoleBinding')].filter((b) =>
        b.metadata.name.startsWith('secret-agent-webhook'),
      ))
        for (const subject of binding.subjects as { namespace: string }[])
          assert.equal(subject.namespace, NAMESPACE);

      const pod = (find('Deployment')[0]!.spec as { template: { spec: Record<string, unknown> } }).template
        .spec as {
        initContainers: { name: string; image: string; args: string[] }[];
        containers: { name: string; image: string; env: { name: string; value?: string }[] }[];
      };
      const webhook = pod.containers.find((c) => c.name === 'webhook')!;
      const agentImage = pod.initContainers.find((c) => c.name === 'agent-image')!;
      assert.equal(webhook.image, images.webhook);
      assert.equal(agentImage.image, images.agent);
      assert.deepEqual(agentImage.args, ['--version']);
      assert.equal(webhook.env.find((e) => e.name === 'AGENT_IMAGE')?.value, images.agent);
    }

    for (const entry of ['.', 'overlays/cert-manager', 'overlays/self-managed'])
      it(`on ${entry === '.' ? 'the default install' : entry} with every component: namespace, DNS names, CA injection, self-exclusion, RBAC subjects, scrape TLS name and both images`, async () => {
        // network-policy is in every entry point already.
        const components = ['pod-security-restricted', 'monitoring'];
        using dir = tempOverlay({
          resources: [join(DEPLOY, entry)],
          namespace: NAMESPACE,
          components: components.map((c) => join(DEPLOY, 'components', c)),
          images: [
            { name: 'ghcr.io/example/secret-agent-webhook', newName: WEBHOOK_IMAGE, digest: digest('a') },
            { name: 'ghcr.io/example/secret-agent', newName: AGENT_IMAGE_NAME, digest: digest('b') },
          ],
          transformers: [join(DEPLOY, 'transformers')],
        });
        await checkFollows(kubectlKustomize(dir.path), entry, {
          webhook: `${WEBHOOK_IMAGE}@${digest('a')}`,
          agent: `${AGENT_IMAGE_NAME}@${digest('b')}`,
        });
      });

    it('a tag works as well as a digest', async () => {
      using dir = tempOverlay({
        resources: [DEPLOY],
        namespace: NAMESPACE,
        images: [{ name: 'ghcr.io/example/secret-agent', newTag: '0.2.0' }],
        transformers: [join(DEPLOY, 'transformers')],
      });
      await checkFollows(kubectlKustomize(dir.path), 'tag', {
        webhook: 'ghcr.io/example/secret-agent-webhook:0.1.0',
        agent: 'ghcr.io/example/secret-agent:0.2.0',
      });
    });

    it('the example in docs/install/example-overlay renders and passes the same checks', async () => {
      const example = join(ROOT, 'docs/install/example-overlay');
      const k = parseYaml(
        readFileSync(join(example, 'kustomization.yaml'), 'utf8'),
        'example',
      )[0] as unknown as {
        namespace: string;
        images: { newName: string; digest: string }[];
      };
      assert.equal(k.namespace, NAMESPACE);
      const objects = kubectlKustomize(example);
      await checkFollows(objects, 'docs/install/example-overlay', {
        webhook: `${k.images[0]!.newName}@${k.images[0]!.digest}`,
        agent: `${k.images[1]!.newName}@${k.images[1]!.digest}`,
      });
      // It uses the network-policy component's knob: the webhook's port, from ipBlocks only.
      const policy = objects.find((o) => o.kind === 'NetworkPolicy')!;
      const ingress = (policy.spec as { ingress: { from?: { ipBlock?: unknown }[] }[] }).ingress;
      assert.ok(
        ingress.length > 0 &&
          ingress.every((rule) => (rule.from ?? []).length > 0 && rule.from!.every((f) => f.ipBlock)),
      );
    });
  });
});

describe('deploy/components: optional pieces an overlay adds', () => {
  type PodSpec = Record<string, unknown> & {
    securityContext?: Record<string, unknown>;
    initContainers?: Record<string, unknown>[];
    containers: Record<string, unknown>[];
    volumes?: Record<string, unknown>[];
  };
  const overlay = (entry: string, components: string[]) =>
    tempOverlay({
      resources: [join(DEPLOY, entry)],
      namespace: 'platform-secrets',
      components: components.map((c) => join(DEPLOY, 'components', c)),
      transformers: [join(DEPLOY, 'transformers')],
    });

  it('pod-security-restricted: the namespace enforces `restricted`, and the webhook’s pods meet it', async () => {
    for (const entry of ['.', 'overlays/self-managed']) {
      using dir = overlay(entry, ['pod-security-restricted']);
      const objects = kubectlKustomize(dir.path);
      for (const object of objects) await validate(object, `${entry} + pod-security-restricted`);
      const [namespace] = objects.filter((o) => o.kind === 'Namespace');
      const labels = (namespace!.metadata as unknown as { labels: Record<string, string> }).labels;
      for (const mode of ['enforce', 'audit', 'warn'])
        assert.equal(labels[`pod-security.kubernetes.io/${mode}`], 'restricted');
      // The rules of the restricted profile (Pod Security Standards) that a pod spec can break.
      const pod = (objects.find((o) => o.kind === 'Deployment')!.spec as { template: { spec: PodSpec } })
        .template.spec;
      for (const host of ['hostNetwork', 'hostPID', 'hostIPC']) assert.notEqual(pod[host], true, host);
      const allowedVolumes = [
        'configMap',
        'csi',
        'downwardAPI',
        'emptyDir',
        'ephemeral',
        'persistentVolumeClaim',
        'projected',
        'secret',
      ];
      for (const volume of pod.volumes ?? [])
        assert.ok(
          Object.keys(volume).every((k) => k === 'name' || allowedVolumes.includes(k)),
          JSON.stringify(volume),
        );
      const podSecurity = pod.securityContext ?? {};
      for (const c of [...(pod.initContainers ?? []), ...pod.containers]) {
        const sc = (c.securityContext ?? {}) as Record<string, unknown> & {
          capabilities?: { drop?: string[]; add?: string[] };
        };
        const name = String(c.name);
        assert.equal(sc.allowPrivilegeEscalation, false, `${name}: allowPrivilegeEscalation`);
        assert.ok(sc.capabilities?.drop?.includes('ALL'), `${name}: drops ALL capabilities`);
        assert.deepEqual(sc.capabilities?.add ?? [], [], `${name}: adds none`);
        assert.equal(sc.runAsNonRoot ?? podSecurity.runAsNonRoot, true, `${name}: runAsNonRoot`);
        assert.notEqual(sc.runAsUser ?? podSecurity.runAsUser, 0, `${name}: not root`);
        const seccomp = (sc.seccompProfile ?? podSecurity.seccompProfile) as { type?: string } | undefined;
        assert.ok(['RuntimeDefault', 'Localhost'].includes(seccomp?.type ?? ''), `${name}: seccomp`);
        assert.notEqual(sc.privileged, true, `${name}: privileged`);
        for (const port of (c.ports ?? []) as { hostPort?: number }[])
          assert.equal(port.hostPort, undefined, `${name}: hostPort`);
      }
    }
  });
});

describe('deploy/components/monitoring: scrapes and alerts', () => {
  type Rule = {
    alert?: string;
    expr: string;
    for?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
  type Group = { name: string; rules: Rule[] };
  const renderWith = (entry: string) => {
    using dir = tempOverlay({
      resources: [join(DEPLOY, entry)],
      namespace: 'platform-secrets',
      components: [join(DEPLOY, 'components/monitoring')],
      transformers: [join(DEPLOY, 'transformers')],
    });
    return kubectlKustomize(dir.path);
  };
  const one = (objects: KubeObject[], kind: string) => {
    const found = objects.filter((o) => o.kind === kind);
    assert.equal(found.length, 1, kind);
    return found[0]!;
  };

  it('scrapes the webhook over verified HTTPS and every opted-in pod’s agent, in any namespace', async () => {
    for (const entry of ['.', 'overlays/self-managed']) {
      const objects = renderWith(entry);
      for (const object of objects) await validate(object, `${entry} + monitoring`);
      for (const kind of ['ServiceMonitor', 'PodMonitor', 'PrometheusRule'])
        assert.equal(one(objects, kind).metadata.namespace, 'platform-secrets', kind);
      // Agents listen on the pod's loopback unless the webhook says otherwise: here, every address.
      const webhook = one(objects, 'Deployment') as KubeObject & {
        spec: { template: { spec: { containers: { env: { name: string; value?: string }[] }[] } } };
      };
      const env = webhook.spec.template.spec.containers[0]!.env;
      const addr = env.find((e) => e.name === 'AGENT_HTTP_ADDR')?.value;
      assert.equal(addr, '0.0.0.0:8099', `${entry}: the PodMonitor needs the agents on the pod's IP`);
      assert.equal(
        parseWebhookConfig({ AGENT_IMAGE: 'a', WEBHOOK_NAMESPACE: 'n', AGENT_HTTP_ADDR: addr }).injection
          .agentHttpAddr,
        addr,
      );

      const service = one(objects, 'Service') as KubeObject & {
        metadata: { labels: Record<string, string> };
        spec: { ports: { name: string }[] };
      };
      const monitor = one(objects, 'ServiceMonitor').spec as {
        selector: { matchLabels: Record<string, string> };
        endpoints: {
          port: string;
          scheme: string;
          tlsConfig: { serverName: string; ca: { secret: { name: string; key: string } } };
        }[];
      };
      for (const [k, v] of Object.entries(monitor.selector.matchLabels))
        assert.equal(service.metadata.labels[k], v, 'the ServiceMonitor selects the webhook’s Service');
      const [endpoint] = monitor.endpoints;
      assert.ok(service.spec.ports.some((p) => p.name === endpoint!.port));
      assert.equal(endpoint!.scheme, 'https');
      assert.equal(endpoint!.tlsConfig.serverName, 'secret-agent-webhook.platform-secrets.svc');
      // The Secret the webhook serves from: its mounted volume (file TLS), or the one it keeps itself.
      const podSpec = (
        one(objects, 'Deployment').spec as {
          template: {
            spec: {
              volumes?: { secret?: { secretName: string } }[];
              containers: { name: string; env: { name: string; value: string }[] }[];
            };
          };
        }
      ).template.spec;
      const selfManaged = podSpec.containers
        .find((c) => c.name === 'webhook')!
        .env.some((e) => e.name === 'TLS_MODE' && e.value === 'self-managed');
      const tlsSecret = selfManaged
        ? WEBHOOK_SETTINGS.TLS_SECRET_NAME.default
        : podSpec.volumes?.find((v) => v.secret)?.secret?.secretName;
      assert.deepEqual(endpoint!.tlsConfig.ca.secret, { name: tlsSecret, key: 'ca.crt' });
      const certificate = objects.find((o) => o.kind === 'Certificate');
      if (certificate)
        assert.ok(
          (certificate.spec as { dnsNames: string[] }).dnsNames.includes(endpoint!.tlsConfig.serverName),
          'the name checked is one the certificate carries',
        );

      const pods = one(objects, 'PodMonitor').spec as {
        namespaceSelector: { any: boolean };
        selector: { matchLabels: Record<string, string> };
        podMetricsEndpoints: { port: string; path: string }[];
      };
      assert.deepEqual(pods.namespaceSelector, { any: true });
      assert.deepEqual(pods.selector.matchLabels, { [OPT_IN_LABEL]: 'true' });
      assert.deepEqual(
        pods.podMetricsEndpoints.map((e) => [e.port, e.path]),
        [[AGENT_PORT_NAME, '/metrics']],
      );
    }
  });

  it('every alert uses metrics the code exports and says what to do; promtool checks the rules and fires each on its symptom only', () => {
    const groups = (one(renderWith('.'), 'PrometheusRule').spec as { groups: Group[] }).groups;
    const alerts = groups.flatMap((g) => g.rules).filter((r) => r.alert);
    assert.ok(alerts.length >= 10);
    const known = new Set([
      ...METRIC_DOCS.map((m) => m.name),
      ...createWebhookMetrics()
        .registry.getMetricsAsArray()
        .map((m) => (m as unknown as { name: string }).name),
    ]);
    for (const rule of alerts) {
      assert.ok(['warning', 'critical'].includes(rule.labels?.severity ?? ''), `${rule.alert}: severity`);
      assert.ok(
        rule.annotations?.summary && rule.annotations.description,
        `${rule.alert}: summary, description`,
      );
      for (const [name] of rule.expr.matchAll(/\bsecret_agent_[a-z_]+/g))
        assert.ok(
          known.has(name.replace(/_(bucket|count|sum)$/, '')),
          `${rule.alert}: ${name} is not exported`,
        );
      for (const [, names] of rule.expr.matchAll(/container=~"([^"]+)"/g))
        assert.deepEqual(
          names!.split('|').sort(),
          [AGENT_CONTAINER, AGENT_INIT_CONTAINER].sort(),
          rule.alert,
        );
    }

    const docs = readFileSync(join(ROOT, 'docs/webhook.md'), 'utf8');
    for (const name of new Set(alerts.map((r) => r.alert)))
      assert.match(
        docs,
        new RegExp(`^\\| \`${name}\` +\\|`, 'm'),
        `docs/webhook.md's alert table lacks ${name}`,
      );

    using dir = tempDir();
    const rulesFile = join(dir.path, 'rules.yaml');
    const promtool = (args: string[]) => {
      const out = spawnSync('promtool', args, { cwd: dir.path, encoding: 'utf8' });
      if (out.error) throw new Error(`promtool is not installed. ${PROMTOOL_HINT}`);
      return out;
    };
    writeFileSync(rulesFile, JSON.stringify({ groups }));
    const checked = promtool(['check', 'rules', rulesFile]);
    assert.equal(checked.status, 0, `promtool check rules: ${checked.stdout}${checked.stderr}`);
    assert.match(checked.stdout, new RegExp(`SUCCESS: ${groups.flatMap((g) => g.rules).length} rules found`));

    // promtool compares annotations verbatim; their templates were checked above.
    const bare = groups.map((g) => ({ ...g, rules: g.rules.map(({ annotations: _, ...r }) => r) }));
    writeFileSync(rulesFile, JSON.stringify({ groups: bare }));
    const testFile = join(dir.path, 'alerts.promtool.yaml');
    const tests = readFileSync(join(ROOT, 'test/webhook/alerts.promtool.yaml'), 'utf8');
    writeFileSync(testFile, tests);
    const tested = new Set([...tests.matchAll(/alertname: (\w+)/g)].map((m) => m[1]));
    assert.deepEqual(
      [...tested].sort(),
      [...new Set(alerts.map((r) => r.alert))].sort(),
      'every alert is tested',
    );
    const ran = promtool(['test', 'rules', testFile]);
    assert.equal(ran.status, 0, `promtool test rules: ${ran.stdout}${ran.stderr}`);
  });
});
