import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startKubernetesWorkloadsFake, type KubernetesWorkloadsFake } from '../fakes/kubernetes-workloads.ts';
import { canary } from '../support/canary.ts';
import { TcpFaultProxy } from '../support/fault-injecting-proxy.ts';
import { eventually, memoryDir, startAgent } from '../support/run-agent.ts';
import { httpGet, httpPort, metric, readSecret, startBackend, waitReady, type Backend } from './backend.ts';

const NS = 'shop';
const RESTART_ANNOTATION = 'secret-agent.io/restarted-for';

describe('fault: the Kubernetes API is down when a rotation asks for a restart (RESTART_ON_CHANGE)', () => {
  let fake: KubernetesWorkloadsFake;
  let api: TcpFaultProxy;
  let work: string;
  let aws: Backend;

  before(async () => {
    // AWS names each version (VersionId): what replicas agree on a restart by.
    aws = await startBackend();
    fake = await startKubernetesWorkloadsFake({ serviceAccount: { namespace: NS, name: 'shop-api' } });
    fake.token = canary('sa-token'); // the bearer token must not reach a log or a metric either
    api = await TcpFaultProxy.start(Number(new URL(fake.url).port));
    work = mkdtempSync(join(tmpdir(), 'secret-agent-k8s-down-'));
  });
  after(async () => {
    await api?.close();
    await fake?.stop();
    await aws?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  it('writes the rotation, counts the failed restart with its reason, keeps running, and restarts on the next rotation once the API is back', async () => {
    using dir = memoryDir();
    const [pod] = fake.addDeployment(NS, 'web', 2);
    const saDir = fake.serviceAccountDir(work, NS);
    const rotate = (value: string) => aws.put('shop/db-password', value);
    await rotate(canary('v1'));

    const agent = startAgent({
      ...aws.env(dir.path, {}),
      AGENT_MODE: 'sidecar',
      AGENT_HTTP_ADDR: '127.0.0.1:0',
      REFRESH_INTERVAL: '1s',
      SECRET_0_REF: 'aws:shop/db-password',
      SECRET_0_FILENAME: 'db-password',
      RESTART_ON_CHANGE: 'true',
      POD_NAME: pod!,
      POD_NAMESPACE: NS,
      KUBERNETES_SERVICE_HOST: '127.0.0.1',
      KUBERNETES_SERVICE_PORT: String(api.port),
      SERVICE_ACCOUNT_DIR: saDir,
    });
    try {
      const port = await httpPort(agent);
      await waitReady(port);
      const series = (outcome: string) =>
        `secret_agent_notifications_total{kind="restart",outcome="${outcome}"}`;

      api.setDown(true);
      const v2 = canary('v2');
      await rotate(v2);
      await eventually(
        () => (readSecret(dir.path, 'db-password') === v2 ? true : undefined),
        'the rotation written',
      );
      const failed = await agent.waitForLog(
        (l) => l.msg === 'restart-on-change: the Kubernetes API could not be reached',
      );
      assert.equal(failed.reason, 'network');
      assert.ok(api.connections >= 1, 'the agent did try the API');
      let metrics = (await httpGet(port, '/metrics')).body;
      assert.equal(metric(metrics, series('network')), 1, 'the failure is counted with its reason');
      assert.equal(metric(metrics, series('ok')), 0);
      assert.equal(fake.rollouts('deployments', NS, 'web'), 0);
      assert.equal((await httpGet(port, '/healthz')).status, 200, 'the agent keeps running');
      assert.equal((await httpGet(port, '/readyz')).status, 200);
      assert.equal(readSecret(dir.path, 'db-password'), v2, 'the files are kept');

      api.setDown(false);
      const v3 = canary('v3');
      await rotate(v3);
      await eventually(
        () => (fake.rollouts('deployments', NS, 'web') === 1 ? true : undefined),
        'the restart',
      );
      assert.equal(readSecret(dir.path, 'db-password'), v3);
      const template = (
        fake.object('deployments', NS, 'web')!.spec as {
          template: { metadata: { annotations?: Record<string, string> } };
        }
      ).template;
      assert.match(template.metadata.annotations?.[RESTART_ANNOTATION] ?? '', /^[0-9a-f]{16}$/);
      metrics = (await httpGet(port, '/metrics')).body;
      assert.equal(metric(metrics, series('ok')), 1);
      assert.equal(metric(metrics, series('network')), 1);
    } finally {
      api.setDown(false);
      assert.equal((await agent.stop()).code, 0);
    }
  });
});
