import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { lstatSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { createServer as createTcpServer, type AddressInfo, type Socket } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, it, type TestContext } from 'node:test';
import { cgroupLayout, readMemory } from '../../bench/memory-cgroup.ts';
import { AGENT_CONTAINER, AGENT_INIT_CONTAINER, AGENT_PORT_NAME } from '../../webhook/injected-names.ts';
import { canary } from '../support/canary.ts';
import { FaultProxy } from '../support/fault-proxy.ts';
import { freePort, MOTO_ENV, motoSecrets, startMoto, type Moto, type MotoSecrets } from '../support/moto.ts';
import { eventually, memoryDir } from '../support/run-agent.ts';
import { basicPod, decodePatch, mutate, review, validatePod, type PodDoc } from '../webhook/fixtures.ts';
import { call } from '../webhook/https-call.ts';
import { certDir, makeServingPair, type ServingPair } from '../webhook/tls-certs.ts';
import { builtImages, runContainer, type RunningContainer } from './podman.ts';
import { runPod, TRANSLATIONS, type PodRun } from './run-pod.ts';
import { sampleAppImage } from './sample-app-image.ts';
import { startWebhookImage } from './webhook-image.ts';

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');
const APP = 'app';

describe('injected pods, run in podman with both images: the webhook image patches, the agent image delivers', () => {
  let moto: Moto;
  let secrets: MotoSecrets;
  let appImage: string;
  let appImageUser1000: string;
  let agentImage: string;
  let pair: ServingPair;
  let tls: ReturnType<typeof certDir>;
  const webhooks: Record<'native' | 'classic', { port: number; container: RunningContainer }> = {} as never;

  before(async () => {
    agentImage = builtImages().manifest.images.agent.ref;
    [moto, appImage, appImageUser1000, pair] = await Promise.all([
      startMoto(),
      sampleAppImage(),
      sampleAppImage(1000),
      makeServingPair(),
    ]);
    secrets = motoSecrets(moto.endpoint);
    tls = certDir();
    tls.write(pair);
    const cluster = { AGENT_AWS_REGION: MOTO_ENV.AWS_REGION };
    webhooks.native = await startWebhookImage({ ...cluster, NATIVE_SIDECARS: 'true' }, pair, tls.dir);
    webhooks.classic = await startWebhookImage({ ...cluster, NATIVE_SIDECARS: 'false' }, pair, tls.dir);
  });
  after(async () => {
    for (const w of Object.values(webhooks)) {
      await w.container.kill('SIGTERM');
      assert.equal(await w.container.exited, 0);
    }
    tls?.[Symbol.dispose]();
    secrets?.destroy();
    await moto?.stop();
  });

  /** Sends the pod through the webhook image's /mutate and applies its patch, as the API server does. */
  async function admit(
    pod: PodDoc,
    cluster: 'native' | 'classic',
  ): Promise<{ pod: PodDoc; warnings: string[] }> {
    const reply = await call(webhooks[cluster].port, pair.ca, '/mutate', {
      body: JSON.stringify(review(pod)),
    });
    const answer = JSON.parse(reply.body) as {
      response: { allowed: boolean; patch?: string; warnings?: string[]; status?: { message: string } };
    };
    assert.equal(answer.response.allowed, true, answer.response.status?.message);
    const patched = mutate(pod, decodePatch(answer.response));
    validatePod(patched);
    return { pod: patched, warnings: answer.response.warnings ?? [] };
  }

  function appPod(
    annotations: Record<string, string>,
    app: Record<string, string>,
    spec: Partial<PodDoc['spec']> = {},
  ) {
    return basicPod(annotations, {
      containers: [
        { name: APP, image: appImage, env: Object.entries(app).map(([name, value]) => ({ name, value })) },
      ],
      ...spec,
    });
  }

  /** `backend`: where the agent's AWS SDK goes (default moto itself). */
  async function run(t: TestContext, pod: PodDoc, backend = moto.endpoint): Promise<PodRun> {
    const running = await runPod(pod, {
      agentImage,
      agentEnv: {
        AWS_ACCESS_KEY_ID: 'testing',
        AWS_SECRET_ACCESS_KEY: 'testing',
        AWS_ENDPOINT_URL_SECRETS_MANAGER: backend,
      },
    });
    t.after(() => running.remove());
    for (const translation of running.translations) t.diagnostic(`translated: ${translation}`);
    for (const { container, run: hook } of running.hooks)
      t.diagnostic(`${container} postStart: exit ${hook.code} after ${Math.round(hook.ms)} ms`);
    return running;
  }

  /** The native sidecar's postStart hook ran once, returned 0 and said why. */
  function assertHeldUntilReady(pod: PodRun) {
    assert.deepEqual(
      pod.hooks.map((h) => [h.container, h.run.code]),
      [[AGENT_CONTAINER, 0]],
      pod.hooks.map((h) => h.run.stderr).join('\n'),
    );
    assert.match(pod.hooks[0]!.run.stdout, /GET http:\/\/127\.0\.0\.1:\d+\/readyz answered 200 after \d+ ms/);
  }

  const started = (pod: PodRun, container = APP) =>
    pod.events(container).find((e) => e.event === 'started') as
      { uid: number; files: Record<string, string> } | undefined;

  /** Nothing in the volume the app may change: every write the app tried was refused. */
  async function assertAppCannotWrite(pod: PodRun) {
    // Its own line, printed after 'started': waited for, not expected at once.
    const attempts = await eventually(
      () => pod.events(APP).find((e) => e.event === 'write-attempts'),
      'the app’s report of its write attempts',
    );
    for (const [what, outcome] of Object.entries(attempts)) {
      if (what === 'event' || what === 'at') continue;
      assert.ok(['EROFS', 'EACCES', 'EPERM'].includes(outcome as string), `app: ${what}: ${String(outcome)}`);
    }
  }

  /** The agent container as the webhook rendered it, as podman ran it: read-only, no capabilities. */
  function assertAgentHardened(pod: PodRun, container: string, user: string) {
    const agent = pod.inspect(container);
    assert.equal(agent.HostConfig.ReadonlyRootfs, true, `${container}: read-only root`);
    assert.deepEqual(agent.EffectiveCaps ?? [], [], `${container}: no capabilities`);
    assert.ok(agent.HostConfig.SecurityOpt?.includes('no-new-privileges'), `${container}: no new privileges`);
    assert.equal(agent.Config.User, user, `${container}: uid:gid`);
    // Issue 30: whatever the pod says, the agent's group is never 0.
    assert.notEqual(user.split(':')[1], '0', `${container}: group 0`);
  }

  it('init: the agent runs first, as the pod’s runAsUser; the app starts with every file and can change none', async (t) => {
    const db = { username: 'app', password: canary('init-db') };
    const token = canary('init-token');
    await secrets.put('init/db', JSON.stringify(db));
    await secrets.put('init/token', token);
    const { pod } = await admit(
      appPod(
        {
          'secret-agent.io/mode': 'init',
          'secret-agent.io/secret-db-password': 'aws:init/db#password',
          'secret-agent.io/secret-api-token': 'aws:init/token',
        },
        { APP_FILES: 'db-password,api-token' },
        { securityContext: { runAsUser: 1000, runAsNonRoot: true } },
      ),
      'native',
    );
    const running = await run(t, pod);
    assert.deepEqual(running.translations, [
      TRANSLATIONS.memoryVolume,
      TRANSLATIONS.hostNetwork,
      TRANSLATIONS.downwardApi,
      TRANSLATIONS.agentEnv,
      TRANSLATIONS.initContainers,
    ]);
    assert.equal(running.failedInit, undefined);
    assert.equal(await running.waitFor(AGENT_INIT_CONTAINER), 0, running.logs(AGENT_INIT_CONTAINER).stderr);
    const app = await eventually(() => started(running), 'the app’s start report');
    assert.equal(app.uid, 1000);
    assert.deepEqual(app.files, { 'db-password': sha256(db.password), 'api-token': sha256(token) });
    await assertAppCannotWrite(running);
    assertAgentHardened(running, AGENT_INIT_CONTAINER, '1000:65532');
    const volume = [...running.volumes.values()][0]!;
    for (const entry of readdirSync(volume)) assert.equal(lstatSync(join(volume, entry)).uid, 1000, entry);
    assert.deepEqual(await running.stop(), { [APP]: 0 });
  });

  it('a secret the backend does not have: the init container fails with the reason, and the app never starts', async (t) => {
    const { pod } = await admit(
      appPod(
        { 'secret-agent.io/mode': 'init', 'secret-agent.io/secret-db': 'aws:missing/db' },
        { APP_FILES: 'db' },
      ),
      'native',
    );
    const running = await run(t, pod);
    assert.equal(running.failedInit?.name, AGENT_INIT_CONTAINER);
    assert.equal(running.failedInit?.code, 1);
    assert.match(running.failedInit!.stderr, /SECRET_0 \(aws:missing\/db\): not-found/);
    assert.equal(running.inspect(APP).State.Status, 'created', 'the app was never started');
    assert.deepEqual(readdirSync([...running.volumes.values()][0]!), [], 'nothing was written');
  });

  for (const cluster of ['native', 'classic'] as const)
    it(`${cluster === 'native' ? 'native sidecar' : 'classic init container + sidecar'}: the app starts with its files; a rotation in moto reaches the files and the app’s reload endpoint`, async (t) => {
      const [appPort, agentPort] = [await freePort(), await freePort()];
      const first = canary(`${cluster}-v1`);
      await secrets.put(`${cluster}/db`, first);
      const { pod } = await admit(
        appPod(
          {
            'secret-agent.io/secret-db': `aws:${cluster}/db`,
            'secret-agent.io/refresh-interval': '1s',
            'secret-agent.io/agent-http-addr': `0.0.0.0:${agentPort}`,
            'secret-agent.io/rotation-http-url': `POST http://127.0.0.1:${appPort}/-/reload`,
          },
          { APP_FILES: 'db', APP_PORT: String(appPort) },
        ),
        cluster,
      );
      const containers = [...(pod.spec.initContainers ?? []), ...pod.spec.containers].map((c) => c.name);
      assert.deepEqual(
        containers,
        cluster === 'native' ? [AGENT_CONTAINER, APP] : [AGENT_INIT_CONTAINER, APP, AGENT_CONTAINER],
      );
      const running = await run(t, pod);
      assert.ok(running.translations.includes(TRANSLATIONS.initContainers));
      // No probe of the agent: its port decides nothing about the pod (docs/security.md).
      assert.equal(running.translations.includes(TRANSLATIONS.probes), false);
      // The app started only once the hook had seen /readyz answer 200; classic: the init container's exit.
      assert.equal(running.translations.includes(TRANSLATIONS.postStart), cluster === 'native');
      if (cluster === 'native') assertHeldUntilReady(running);
      else assert.deepEqual(running.hooks, []);
      // What the monitoring PodMonitor scrapes: the port named secret-agent, serving the agent's metrics.
      const agent = [...(pod.spec.initContainers ?? []), ...pod.spec.containers].find(
        (c) => c.name === AGENT_CONTAINER,
      )!;
      assert.deepEqual(agent.ports, [{ name: AGENT_PORT_NAME, containerPort: agentPort, protocol: 'TCP' }]);
      assert.ok(running.translations.includes(TRANSLATIONS.ports));
      const app = await eventually(() => started(running), 'the app’s start report', 30_000);
      assert.deepEqual(app.files, { db: sha256(first) });
      await assertAppCannotWrite(running);
      // No uid in the spec: the files are shared through group 65532, the agent's own.
      assertAgentHardened(running, AGENT_CONTAINER, '65532:65532');
      await eventually(
        () => (running.events(APP).some((e) => e.event === 'listening') ? true : undefined),
        'the app listening',
      );

      const second = canary(`${cluster}-v2`);
      await secrets.put(`${cluster}/db`, second);
      const reloaded = await eventually(
        () =>
          running
            .events(APP)
            .find((e) => e.event === 'reloaded' && (e.files as Record<string, string>).db === sha256(second)),
        'the app told of the rotation, reading the new value',
        30_000,
      ).catch((e: Error) => {
        const tail = (name: string) => running.logs(name).stdout.split('\n').slice(-15).join('\n');
        throw new Error(
          `${e.message}\n--- ${AGENT_CONTAINER}:\n${tail(AGENT_CONTAINER)}\n--- ${APP}:\n${tail(APP)}`,
        );
      });
      assert.ok(reloaded);
      const metrics = await (await fetch(`http://127.0.0.1:${agentPort}/metrics`)).text();
      assert.match(metrics, /^secret_agent_refresh_interval_seconds\{file="db"\} 1$/m);
      assert.match(metrics, /^secret_agent_rotations_total 1$/m);
      const volume = [...running.volumes.values()][0]!;
      assert.equal(readFileSync(join(volume, 'db'), 'utf8'), second);

      const exitCodes = await running.stop();
      assert.equal(exitCodes[APP], 0);
      assert.equal(exitCodes[AGENT_CONTAINER], 0, running.logs(AGENT_CONTAINER).stderr);
      assert.equal(readFileSync(join(volume, 'db'), 'utf8'), second, 'the files stay after the agent stops');
    });

  it('native sidecar, as rendered by default (the small sidecar): ≤ 2 MiB between refreshes, probes and metrics answer, a rotation at a 60 s interval reaches the files', async (t) => {
    const [appPort, agentPort] = [await freePort(), await freePort()];
    const first = canary('small-v1');
    await secrets.put('small/db', first);
    const { pod } = await admit(
      appPod(
        {
          'secret-agent.io/secret-db': 'aws:small/db',
          'secret-agent.io/refresh-interval': '60s',
          'secret-agent.io/agent-http-addr': `0.0.0.0:${agentPort}`,
          'secret-agent.io/rotation-http-url': `POST http://127.0.0.1:${appPort}/-/reload`,
        },
        { APP_FILES: 'db', APP_PORT: String(appPort) },
      ),
      'native',
    );
    const agent = pod.spec.initContainers!.find((c) => c.name === AGENT_CONTAINER)!;
    assert.equal(
      (agent.command as string[] | undefined)?.[0],
      '/app/resident',
      'the default render is the small sidecar',
    );
    // Not the first agent on the node (the condition): the image's Node binary and snapshot
    // pages an agent run touches are in the page cache already, charged to an agent gone since; the
    // first agent on a node is charged for them (docs/webhook.md, What a pod costs).
    using warmDir = memoryDir(65532);
    const warm = await runContainer({
      image: agentImage,
      network: 'host',
      mounts: [{ host: warmDir.path, container: '/secrets' }],
      env: {
        AWS_ACCESS_KEY_ID: 'testing',
        AWS_SECRET_ACCESS_KEY: 'testing',
        AWS_REGION: MOTO_ENV.AWS_REGION,
        AWS_ENDPOINT_URL_SECRETS_MANAGER: moto.endpoint,
        SECRETS_DIR: '/secrets',
        SECRET_0_REF: 'aws:small/db',
        SECRET_0_FILENAME: 'db',
      },
    });
    assert.equal(warm.code, 0, warm.stderr);
    const running = await run(t, pod);
    assertHeldUntilReady(running);
    const app = await eventually(() => started(running), 'the app’s start report', 30_000);
    assert.deepEqual(app.files, { db: sha256(first) });
    assertAgentHardened(running, AGENT_CONTAINER, '65532:65532');

    // Between refreshes: the agent container's memory cgroup as the kubelet reads it.
    const layout = cgroupLayout();
    const line = readFileSync(`/proc/${running.inspect(AGENT_CONTAINER).State.Pid}/cgroup`, 'utf8')
      .split('\n')
      .find((l) => (layout.version === 1 ? /^\d+:([^:]*,)?memory(,[^:]*)?:/.test(l) : l.startsWith('0::')))!;
    const cgroup = join(layout.memoryRoot, line.slice(line.indexOf(':', line.indexOf(':') + 1) + 1));
    await new Promise((r) => setTimeout(r, 5000));
    const samples = [];
    for (let i = 0; i < 5; i++) {
      samples.push(readMemory(layout, cgroup));
      await new Promise((r) => setTimeout(r, 1000));
    }
    const median = samples.sort((a, b) => a.workingSetMiB - b.workingSetMiB)[2]!;
    t.diagnostic(
      `agent container between refreshes: working set ${median.workingSetMiB.toFixed(2)} MiB, anonymous ${median.anonMiB.toFixed(2)} MiB, kernel ${median.kernelMiB.toFixed(2)} MiB, page cache ${median.cacheMiB.toFixed(2)} MiB (tmpfs ${median.shmemMiB.toFixed(2)}, inactive ${median.inactiveFileMiB.toFixed(2)}, mapped ${median.mappedFileMiB.toFixed(2)})`,
    );
    // What the small sidecar holds itself: the resident, the kernel memory its runs left, the files.
    const own = median.anonMiB + median.kernelMiB + median.shmemMiB;
    assert.ok(own <= 2, `anonymous + kernel + tmpfs ${own.toFixed(2)} MiB between refreshes`);
    // The working set adds the image's file pages this cgroup was first to fault in. Not the first agent on
    // the node, that is none; but where the machine has dropped them from the page cache since (refaults),
    // a run reads them again and is charged as the first agent is.
    if (median.fileRefaults === 0)
      assert.ok(
        median.workingSetMiB <= 2,
        `working set ${median.workingSetMiB.toFixed(2)} MiB between refreshes`,
      );
    else
      t.diagnostic(`${median.fileRefaults} file pages refaulted: the page cache was dropped under this test`);
    for (const [path, status] of [
      ['/healthz', 200],
      ['/readyz', 200],
    ] as const)
      assert.equal((await fetch(`http://127.0.0.1:${agentPort}${path}`)).status, status, path);
    const metrics = await (await fetch(`http://127.0.0.1:${agentPort}/metrics`)).text();
    assert.match(metrics, /^secret_agent_ready 1$/m);
    assert.match(metrics, /^secret_agent_refresh_interval_seconds\{file="db"\} 60$/m);
    assert.match(metrics, /^secret_agent_resident_runs_total\{outcome="ok"\} 1$/m);

    const second = canary('small-v2');
    await secrets.put('small/db', second);
    await eventually(
      () =>
        running
          .events(APP)
          .find((e) => e.event === 'reloaded' && (e.files as Record<string, string>).db === sha256(second)),
      'the app told of the rotation at the next refresh (60 s ± 10 %)',
      90_000,
    );
    const exitCodes = await running.stop();
    assert.equal(exitCodes[AGENT_CONTAINER], 0, running.logs(AGENT_CONTAINER).stderr);
  });

  it('native sidecar, a backend that never answers: the hook gives up at INIT_DEADLINE + 15 s, the agent container is killed, and the app never starts', async (t) => {
    const sockets = new Set<Socket>();
    const silent = createTcpServer((s) => sockets.add(s.on('error', () => undefined)));
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    t.after(() => {
      for (const s of sockets) s.destroy();
      silent.close();
    });
    const { pod } = await admit(
      appPod(
        {
          'secret-agent.io/secret-db': 'aws:silent/db',
          'secret-agent.io/init-deadline': '1s',
          'secret-agent.io/agent-http-addr': `0.0.0.0:${await freePort()}`,
        },
        { APP_FILES: 'db' },
      ),
      'native',
    );
    const agent = pod.spec.initContainers!.find((c) => c.name === AGENT_CONTAINER)!;
    const hookArgs = (agent.lifecycle as { postStart: { exec: { command: string[] } } }).postStart.exec
      .command;
    assert.equal(hookArgs.at(-1), '--deadline=16s', 'INIT_DEADLINE (1s) + 15 s');

    const running = await run(t, pod, `http://127.0.0.1:${(silent.address() as AddressInfo).port}`);
    const failed = running.failedPostStart;
    assert.equal(failed?.name, AGENT_CONTAINER);
    assert.equal(failed.hook.code, 1);
    assert.ok(failed.hook.ms >= 16_000, `the hook gave up after ${failed.hook.ms} ms, before its deadline`);
    assert.match(
      failed.hook.stderr,
      /did not report its secrets written within --deadline=16s \(GET http:\/\/127\.0\.0\.1:\d+\/readyz, \d+ ms, \d+ requests; at the last, it answered 503: not every secret is written yet\)/,
    );
    assert.equal(
      running.inspect(AGENT_CONTAINER).State.Status,
      'exited',
      'killed, for the kubelet to restart',
    );
    assert.equal(running.inspect(APP).State.Status, 'created', 'the app was never started');
    assert.deepEqual(readdirSync([...running.volumes.values()][0]!), [], 'nothing was written');
    // Why, in the log the hook's message points to.
    assert.ok(
      running
        .events(AGENT_CONTAINER)
        .some((e) => e.msg === 'not every secret could be delivered yet; retrying'),
    );
  });

  it('native sidecar killed and restarted while the backend is down: its hook returns once the agent listens, with the files in place', async (t) => {
    const proxy = await FaultProxy.start(moto.endpoint);
    t.after(() => proxy.close());
    const value = canary('restart');
    await secrets.put('restart/db', value);
    const agentPort = await freePort();
    const { pod } = await admit(
      appPod(
        {
          'secret-agent.io/secret-db': 'aws:restart/db',
          'secret-agent.io/agent-http-addr': `0.0.0.0:${agentPort}`,
        },
        // A port to serve keeps the app running, as a real one does.
        { APP_FILES: 'db', APP_PORT: String(await freePort()) },
      ),
      'native',
    );
    const running = await run(t, pod, proxy.endpoint);
    assertHeldUntilReady(running);
    assert.deepEqual((await eventually(() => started(running), 'the app’s start report')).files, {
      db: sha256(value),
    });

    proxy.setDown(true);
    const asked = proxy.requests.length;
    // What the OOM killer does; the kubelet then starts the container again and runs its hook.
    await running.kill(AGENT_CONTAINER, 'SIGKILL');
    const hook = await running.restart(AGENT_CONTAINER);
    t.diagnostic(
      `${AGENT_CONTAINER} postStart after the restart: exit ${hook.code} after ${Math.round(hook.ms)} ms`,
    );
    assert.equal(hook.code, 0, hook.stderr);
    assert.equal(readFileSync(join([...running.volumes.values()][0]!, 'db'), 'utf8'), value);
    assert.equal((await fetch(`http://127.0.0.1:${agentPort}/readyz`)).status, 200);
    await eventually(
      () => (proxy.requests.length > asked ? true : undefined),
      'the restarted agent asking the backend',
    );
    assert.equal(running.inspect(APP).State.Status, 'running');
    const exitCodes = await running.stop();
    assert.equal(exitCodes[APP], 0);
  });

  // name, cluster, annotations, containers rendered, warning, how long the app runs (ms). The agent
  // samples /proc each second: a Job that needs a sidecar at all runs longer than that.
  const jobs: [string, 'native' | 'classic', Record<string, string>, string[], RegExp | undefined, number][] =
    [
      [
        'with native sidecars: the kubelet stops the sidecar once the app has ended',
        'native',
        {},
        [AGENT_CONTAINER, APP],
        undefined,
        300,
      ],
      [
        'without native sidecars: secrets are written once by an init container, and a warning says so',
        'classic',
        {},
        [AGENT_INIT_CONTAINER, APP],
        /^secret-agent: this pod runs to completion \(restartPolicy Never\) on a cluster without native sidecars/,
        300,
      ],
      [
        'without native sidecars, with exit-with-process: the sidecar sees the app end and exits by itself',
        'classic',
        { 'secret-agent.io/exit-with-process': 'sample-app' },
        [AGENT_INIT_CONTAINER, APP, AGENT_CONTAINER],
        undefined,
        3000,
      ],
    ];
  for (const [name, cluster, annotations, containers, warning, runsFor] of jobs)
    it(`a Job ${name}; the app reads its files and the pod completes`, async (t) => {
      const value = canary(`job-${containers.length}-${cluster}`);
      await secrets.put(`jobs/${cluster}-${containers.length}`, value);
      const job = appPod(
        {
          'secret-agent.io/secret-db': `aws:jobs/${cluster}-${containers.length}`,
          'secret-agent.io/agent-http-addr': `0.0.0.0:${await freePort()}`,
          ...annotations,
        },
        { APP_FILES: 'db', APP_EXIT_AFTER_MS: String(runsFor) },
        // The app's uid is named: the files are its own, and no group-sharing warning is given.
        { restartPolicy: 'Never', securityContext: { runAsUser: 1000 } },
      );
      const { pod, warnings } = await admit(job, cluster);
      assert.deepEqual(
        [...(pod.spec.initContainers ?? []), ...pod.spec.containers].map((c) => c.name),
        containers,
      );
      if (warning) assert.match(warnings.join('\n'), warning);
      else assert.deepEqual(warnings, []);
      const running = await run(t, pod);
      // complete() waits for every container: a classic sidecar that never exits fails it.
      if (cluster === 'native') assertHeldUntilReady(running);
      const { phase, exitCodes } = await running.complete(60_000);
      assert.equal(phase, 'Succeeded');
      for (const [container, code] of Object.entries(exitCodes))
        assert.equal(code, 0, `${container}: ${running.logs(container).stderr}`);
      assert.deepEqual(started(running)?.files, { db: sha256(value) });
      if (containers.includes(AGENT_CONTAINER) && cluster === 'classic')
        assert.ok(
          running.events(AGENT_CONTAINER).some((e) => e.msg === 'stopping' && e.why === 'sample-app exited'),
          'the sidecar stopped because the app ended',
        );
    });

  /**
   * Item 2 of issue 21, as a node runs it: each shape of pod whose app does not run as the pod's
   * runAsUser, run from the webhook's own patch with the real agent image. The app reports its uid
   * and what it read (by hash); the host sees the files' owner, group and mode in the volume.
   */
  describe('every pod shape reads its files as its own user, from the webhook’s patch', () => {
    type Shape = {
      name: string;
      /** A function: the app images exist only once `before` has built them. */
      spec: () => Partial<PodDoc['spec']>;
      annotations?: Record<string, string>;
      readers: Record<string, number>;
      agent: { uid: number; gid: number };
      files: { mode: number; uid?: number; gid?: number };
      warned?: RegExp;
    };
    const appContainer = (name: string, image: string, securityContext?: Record<string, unknown>) => ({
      name,
      image,
      env: [{ name: 'APP_FILES', value: 'db' }],
      ...(securityContext ? { securityContext } : {}),
    });
    const shapes: Shape[] = [
      {
        name: 'restricted-style: runAsNonRoot, runAsUser and drop ALL on the app container only',
        spec: () => ({
          containers: [
            appContainer(APP, appImage, {
              runAsNonRoot: true,
              runAsUser: 1000,
              allowPrivilegeEscalation: false,
              capabilities: { drop: ['ALL'] },
              seccompProfile: { type: 'RuntimeDefault' },
            }),
          ],
        }),
        readers: { [APP]: 1000 },
        agent: { uid: 1000, gid: 65532 },
        files: { mode: 0o400, uid: 1000 },
      },
      {
        name: 'no securityContext, an image with USER 1000',
        spec: () => ({ containers: [appContainer(APP, appImageUser1000)] }),
        readers: { [APP]: 1000 },
        agent: { uid: 65532, gid: 65532 },
        files: { mode: 0o440, uid: 65532, gid: 65532 },
        warned: /container "app" sets no runAsUser/,
      },
      {
        name: 'pod runAsUser 1000, the app container overrides it with 101',
        spec: () => ({
          securityContext: { runAsUser: 1000 },
          containers: [appContainer(APP, appImage, { runAsUser: 101 })],
        }),
        readers: { [APP]: 101 },
        agent: { uid: 101, gid: 65532 },
        files: { mode: 0o400, uid: 101 },
      },
      {
        name: 'file-mode 0440 and a pod fsGroup (the documented recipe), two apps of two uids',
        annotations: { 'secret-agent.io/file-mode': '0440' },
        spec: () => ({
          securityContext: { fsGroup: 2000 },
          containers: [
            appContainer(APP, appImageUser1000),
            appContainer('reporter', appImage, { runAsUser: 1001 }),
          ],
        }),
        readers: { [APP]: 1000, reporter: 1001 },
        agent: { uid: 65532, gid: 2000 },
        files: { mode: 0o440, uid: 65532, gid: 2000 },
        warned: /group 2000 \(the pod’s fsGroup\)/,
      },
    ];
    for (const shape of shapes)
      it(shape.name, async (t) => {
        const value = canary('shape');
        const key = `shapes/${shapes.indexOf(shape)}`;
        await secrets.put(key, value);
        const { pod, warnings } = await admit(
          basicPod(
            {
              'secret-agent.io/secret-db': `aws:${key}`,
              'secret-agent.io/agent-http-addr': `0.0.0.0:${await freePort()}`,
              ...shape.annotations,
            },
            shape.spec(),
          ),
          'native',
        );
        if (shape.warned) assert.match(warnings.join('\n'), shape.warned);
        else assert.deepEqual(warnings, []);
        const running = await run(t, pod);
        for (const [container, uid] of Object.entries(shape.readers)) {
          const app = await eventually(
            () => started(running, container),
            `${container}’s start report`,
            30_000,
          );
          assert.equal(app.uid, uid, `${container} runs as ${uid}`);
          assert.deepEqual(app.files, { db: sha256(value) }, `${container} read its file`);
        }
        const { uid, gid } = shape.agent;
        assertAgentHardened(running, AGENT_CONTAINER, `${uid}:${gid}`);
        const volume = [...running.volumes.values()][0]!;
        const file = statSync(join(volume, 'db'));
        assert.equal(file.mode & 0o777, shape.files.mode, 'mode');
        if (shape.files.uid !== undefined) assert.equal(file.uid, shape.files.uid, 'owner');
        if (shape.files.gid !== undefined) assert.equal(file.gid, shape.files.gid, 'group');
        await running.stop();
      });
  });
});
