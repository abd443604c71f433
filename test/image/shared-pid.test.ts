/**
 * The shared-PID peek (issue 37): a pod with `shareProcessNamespace: true` and runAsUser/runAsGroup
 * set, so the agent runs as the app's uid and gid, run in podman from the webhook image's own patch
 * with the built agent image. Its apps are test/image/peek.c, one at the agent's uid and gid and one
 * as root with the runtime's default capabilities (no CAP_SYS_PTRACE): each finds every process of
 * the pod as it appears and tries what a neighbour would to read or write what the agent holds —
 * /proc/PID/{environ,mem,task/PID/mem,maps,auxv,fdinfo,exe,root,cwd}, every fd for reading and
 * writing, process_vm_readv, ptrace, pidfd_getfd. Every try on an agent process must be refused, and
 * every kind of try must reach the control, which proves the probe reaches: a deliberately dumpable
 * process in the agent's own container (the image's env-exec, readable, run as the probe's uid and
 * gid), whose environment, memory and fds it reads.
 *
 * Each Node process of the pod is also sent SIGUSR1 once (peek.c): a Node that does not refuse it opens
 * its inspector on the pod's loopback, and whoever connects runs code inside it (a fifth review: the
 * app at root, or at the agent's uid, did). No agent process may open one; a second control, the image's
 * Node without --disable-sigusr1, proves that the signal reaches and the probe finds the inspector.
 *
 * Agent processes are executed from root's execute-only files (/nodejs/bin/node, /app/resident:
 * 0511), so the kernel makes each non-dumpable at execve (fs/exec.c would_dump), whoever started it:
 * the runtime (a sidecar, an init container, the postStart hook) or the resident (every run).
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, it, type TestContext } from 'node:test';
import { runTool } from '../../images/container-engine.ts';
import { EXECUTE_ONLY_MODE, NODE_PATH } from '../../images/execute-only.ts';
import { NATIVE_CFLAGS } from '../../images/build-native.ts';
import { AGENT_CONTAINER, AGENT_INIT_CONTAINER } from '../../webhook/injected-names.ts';
import { canary } from '../support/canary.ts';
import { freePort, MOTO_ENV, motoSecrets, startMoto, type Moto, type MotoSecrets } from '../support/moto.ts';
import { eventually } from '../support/run-agent.ts';
import { basicPod, decodePatch, mutate, review, validatePod, type PodDoc } from '../webhook/fixtures.ts';
import { call } from '../webhook/https-call.ts';
import { certDir, makeServingPair, type ServingPair } from '../webhook/tls-certs.ts';
import { builtImages, runContainer, type RunningContainer } from './podman.ts';
import { runPod, type PodRun } from './run-pod.ts';
import { startWebhookImage } from './webhook-image.ts';

/** The app's (and so the agent's) uid and gid. */
const APP_UID = 1000;
const APP_GID = 1000;
const SAME = 'peek-same-uid';
const ROOT = 'peek-root';

/** Capability bits (linux/capability.h) that would let a process read another's memory or environ. */
const CAP = { DAC_OVERRIDE: 1, SYS_PTRACE: 19, SYS_ADMIN: 21, PERFMON: 38 } as const;

/** A try's outcome that is a refusal; a race with the process's end; anything else got through. */
const REFUSED = new Set(['EACCES', 'EPERM', 'no inspector']);
/** The Node control's inspector port (peek.c CONTROL_INSPECTOR_PORT); an agent's would be Node's 9229. */
const CONTROL_INSPECTOR_PORT = 9339;
const GONE = new Set(['ENOENT', 'ESRCH']);

/** What a control must give the probe: each proves that kind of try reaches a dumpable process of its uid. */
const CONTROL_MUST = [
  'environ',
  'mem',
  'mem:rw',
  'task/mem',
  'maps',
  'auxv',
  'fdinfo',
  'exe',
  'root',
  'cwd',
  'process_vm_readv',
  'ptrace',
  'pidfd_getfd',
  'sigusr1',
] as const;

type AgentKind = 'resident' | 'small-sidecar run' | 'Node sidecar' | 'init run' | 'postStart hook';

interface PeekLine {
  event: 'peek';
  pid: number;
  round: number;
  cmd: string;
  ppid?: number;
  uid?: number;
  gid?: number;
  fdList: number | string;
  tries: Record<string, string>;
}
interface SelfLine {
  event: 'self';
  uid: number;
  gid: number;
  capEff: string;
}

/** peek, compiled here (static, musl) and put alone in an image: an app image with nothing else in it. */
async function peekImage(): Promise<string> {
  const { podman } = builtImages();
  const context = mkdtempSync(join(tmpdir(), 'secret-agent-peek-'));
  try {
    runTool(
      'musl-gcc',
      [...NATIVE_CFLAGS, '-o', join(context, 'peek'), new URL('./peek.c', import.meta.url).pathname],
      { install: 'apt-get install -y musl-tools (Debian; .ci/run installs it on a fresh machine)' },
    );
    writeFileSync(join(context, 'Containerfile'), 'FROM scratch\nCOPY peek /peek\nENTRYPOINT ["/peek"]\n');
    const ref = 'localhost/secret-agent-test/peek:latest';
    await podman.runAsync(['build', '--pull=never', '-q', '-t', ref, context]);
    return ref;
  } finally {
    rmSync(context, { recursive: true, force: true });
  }
}

const hasCap = (capEff: string, bit: number) => (BigInt(`0x${capEff}`) >> BigInt(bit)) & 1n;

/** Which agent process a line is about (argv and parent), or undefined for the pod's other processes. */
function agentKind(line: PeekLine, residents: ReadonlySet<number>): AgentKind | undefined {
  const ofResident = line.ppid !== undefined && residents.has(line.ppid);
  // The resident's child between fork and execve is still /app/resident: a run about to start.
  if (line.cmd.startsWith('/app/resident ')) return ofResident ? 'small-sidecar run' : 'resident';
  if (!line.cmd.startsWith('/nodejs/bin/node ')) return undefined;
  if (line.cmd.includes('/app/wait-ready.cjs')) return 'postStart hook';
  if (line.cmd.includes('/app/agent.js')) return 'Node sidecar';
  if (line.cmd.includes('--snapshot-blob')) return ofResident ? 'small-sidecar run' : 'init run';
  throw new Error(`a Node process of the pod this test does not know: ${line.cmd}`);
}

interface Figures {
  /** Distinct processes found, per kind. */
  readonly found: Map<AgentKind, number>;
  /** Tries on agent processes: refused, gone before the try (the process had ended), got through. */
  readonly refused: number;
  readonly gone: number;
  readonly through: string[];
  /** SIGUSR1 sent to an agent's Node process, by the probe (each answered "no inspector" or got through). */
  readonly signalled: number;
  /** Kinds of try that reached the control. */
  readonly controlReached: Set<string>;
  readonly controlLines: number;
  readonly self: SelfLine;
}

/** Everything one probe printed, sorted into agent processes and the control. */
function figures(events: Record<string, unknown>[], marker: string): Figures {
  const self = events.find((e) => e.event === 'self') as SelfLine | undefined;
  assert.ok(self, 'the probe reported who it runs as');
  assert.ok(
    events.some((e) => e.event === 'done'),
    'the probe ran to its end',
  );
  const lines = events.filter((e): e is PeekLine & Record<string, unknown> => e.event === 'peek');
  const forks = lines.filter((l) => l.cmd.startsWith('/app/resident '));
  const residents = new Set(
    forks.filter((l) => !forks.some((parent) => parent.pid === l.ppid)).map((l) => l.pid),
  );
  const pids = new Map<AgentKind, Set<number>>();
  let refused = 0;
  let gone = 0;
  const through: string[] = [];
  const controlReached = new Set<string>();
  let controlLines = 0;
  let signalled = 0;
  for (const line of lines) {
    if (line.cmd.startsWith('/nodejs/bin/node ') && line.cmd.includes(marker)) {
      // The Node control (root's execute-only binary, so not dumpable): it proves SIGUSR1 opens an
      // inspector in a Node process that does not refuse it, and that the probe finds it.
      if (line.tries.sigusr1 === 'inspector opened') controlReached.add('sigusr1');
      continue;
    }
    if (line.cmd.startsWith('/app/env-exec ') && line.cmd.includes(marker)) {
      // Two controls run, one as each probe; this probe's is the one of its own uid and gid.
      if (line.uid !== self.uid || line.gid !== self.gid) continue;
      controlLines++;
      for (const [what, result] of Object.entries(line.tries))
        if (!REFUSED.has(result) && !GONE.has(result)) controlReached.add(what.replace(/^fd\/\d+/, 'fd'));
      continue;
    }
    const kind = agentKind(line, residents);
    if (!kind) continue;
    pids.set(kind, (pids.get(kind) ?? new Set()).add(line.pid));
    if (line.tries.sigusr1 !== undefined) signalled++;
    for (const [what, result] of Object.entries(line.tries)) {
      if (REFUSED.has(result)) refused++;
      else if (GONE.has(result)) gone++;
      else through.push(`${kind} (pid ${line.pid}, round ${line.round}): ${what} → ${result}`);
    }
  }
  return {
    found: new Map([...pids].map(([k, v]) => [k, v.size])),
    refused,
    gone,
    through,
    signalled,
    controlReached,
    controlLines,
    self,
  };
}

describe('a shared-PID pod whose agent runs as the app’s uid and gid: no app opens any agent process’s environ, fds or memory', () => {
  let moto: Moto;
  let secrets: MotoSecrets;
  let peek: string;
  let pair: ServingPair;
  let tls: ReturnType<typeof certDir>;
  const webhooks: Record<'native' | 'classic', { port: number; container: RunningContainer }> = {} as never;

  before(async () => {
    [moto, peek, pair] = await Promise.all([startMoto(), peekImage(), makeServingPair()]);
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

  /** The pod through the webhook image's /mutate, its patch applied as the API server does. */
  async function admit(pod: PodDoc, cluster: 'native' | 'classic'): Promise<PodDoc> {
    const reply = await call(webhooks[cluster].port, pair.ca, '/mutate', {
      body: JSON.stringify(review(pod)),
    });
    const answer = JSON.parse(reply.body) as {
      response: { allowed: boolean; patch?: string; status?: { message: string } };
    };
    assert.equal(answer.response.allowed, true, answer.response.status?.message);
    const patched = mutate(pod, decodePatch(answer.response));
    validatePod(patched);
    return patched;
  }

  /** Two probing apps: one at the pod's uid and gid, one root with the runtime's default capabilities. */
  function peekPod(annotations: Record<string, string>, seconds: number, marker: string): PodDoc {
    const args = [`--seconds=${seconds}`, '--every-ms=1000', `--canary=${marker}`];
    // Only the app at the pod's uid mounts the secrets, so the agent runs as that uid and gid (root's
    // would make the webhook share the files through a group, with the agent at a uid of its own).
    return basicPod(
      { 'secret-agent.io/containers': SAME, ...annotations },
      {
        shareProcessNamespace: true,
        securityContext: { runAsUser: APP_UID, runAsGroup: APP_GID },
        containers: [
          { name: SAME, image: peek, args },
          {
            name: ROOT,
            image: peek,
            args,
            securityContext: { runAsUser: 0, runAsGroup: 0, runAsNonRoot: false },
          },
        ],
      },
    );
  }

  /** Sets an env var of the agent container `name` (wherever the patch put it). */
  function setAgentEnv(pod: PodDoc, name: string, env: string, value: string): void {
    const container = [...(pod.spec.initContainers ?? []), ...pod.spec.containers].find(
      (c) => c.name === name,
    )!;
    const vars = container.env as { name: string; value?: string }[];
    const entry = vars.find((e) => e.name === env);
    if (entry) entry.value = value;
    else vars.push({ name: env, value });
  }

  async function runPeekPod(t: TestContext, pod: PodDoc): Promise<PodRun> {
    const running = await runPod(pod, {
      agentImage: builtImages().manifest.images.agent.ref,
      agentEnv: {
        AWS_ACCESS_KEY_ID: 'testing',
        AWS_SECRET_ACCESS_KEY: 'testing',
        AWS_ENDPOINT_URL_SECRETS_MANAGER: moto.endpoint,
      },
    });
    t.after(() => running.remove());
    for (const translation of running.translations) t.diagnostic(`translated: ${translation}`);
    return running;
  }

  /**
   * The controls, in the agent's container, as `user`: env-exec from the agent image (0555, readable:
   * dumpable), waiting for a set that never comes, with the marker in its environment; and the image's
   * Node without --disable-sigusr1, its inspector's port set apart from the agent's, the marker in its argv.
   */
  async function startControl(running: PodRun, container: string, user: string, marker: string) {
    await builtImages().podman.runAsync([
      'exec',
      '--detach',
      '--user',
      user,
      `${running.name}-${container}`,
      '/nodejs/bin/node',
      `--inspect-port=127.0.0.1:${CONTROL_INSPECTOR_PORT}`,
      '-e',
      'setTimeout(() => {}, 60000)',
      `/control-${marker}`,
    ]);
    await builtImages().podman.runAsync([
      'exec',
      '--detach',
      '--user',
      user,
      '--env',
      `PEEK_CONTROL=${marker}`,
      `${running.name}-${container}`,
      '/app/env-exec',
      '--dir=/app',
      '--wait=60',
      '--set=PEEK_CONTROL_SET',
      '--',
      `/control-${marker}`,
    ]);
  }

  /** Every assertion on one probe's report; returns its figures for the diagnostics. */
  function assertRefused(
    t: TestContext,
    running: PodRun,
    probe: string,
    marker: string,
    want: Readonly<Partial<Record<AgentKind, number>>>,
  ) {
    const seen = figures(running.events(probe), marker);
    const { self } = seen;
    for (const [kind, n] of seen.found) t.diagnostic(`${probe}: ${kind}: ${n} process(es) found`);
    t.diagnostic(
      `${probe} (uid ${self.uid}, gid ${self.gid}, CapEff ${self.capEff}): ${seen.refused} tries on agent processes refused, ${seen.gone} after the process had ended, ${seen.through.length} got through, ${seen.signalled} SIGUSR1 to agent Node processes; the control reached: ${[...seen.controlReached].sort().join(', ')}`,
    );
    assert.deepEqual(seen.through, [], `${probe}: tries on agent processes that were not refused`);
    for (const [kind, least] of Object.entries(want))
      assert.ok(
        (seen.found.get(kind as AgentKind) ?? 0) >= least,
        `${probe} found ${seen.found.get(kind as AgentKind) ?? 0} ${kind} processes, not ${least} or more`,
      );
    assert.ok(seen.refused > 0, `${probe}: no try was made`);
    assert.ok(seen.signalled > 0, `${probe} sent SIGUSR1 to no agent Node process`);
    // A process ending under a try is a race, not a refusal: it must stay the exception.
    assert.ok(seen.gone * 10 < seen.refused, `${probe}: ${seen.gone} tries raced a process's end`);
    assert.ok(seen.controlLines > 0, `${probe} never saw the control`);
    for (const what of CONTROL_MUST)
      assert.ok(
        seen.controlReached.has(what),
        `${probe}: the control refused ${what}: the probe proves nothing`,
      );
    assert.ok(
      seen.controlReached.has('fd:r') && seen.controlReached.has('fd:w'),
      `${probe}: the control refused its fds`,
    );
    assert.equal(hasCap(self.capEff, CAP.SYS_PTRACE), 0n, `${probe} holds CAP_SYS_PTRACE`);
    assert.equal(hasCap(self.capEff, CAP.SYS_ADMIN), 0n, `${probe} holds CAP_SYS_ADMIN`);
    assert.equal(hasCap(self.capEff, CAP.PERFMON), 0n, `${probe} holds CAP_PERFMON`);
    return seen;
  }

  /** Both probes: the one at the agent's uid and gid, and root, which the control run as root proves. */
  function assertBoth(
    t: TestContext,
    running: PodRun,
    marker: string,
    want: Readonly<Partial<Record<AgentKind, number>>>,
  ) {
    const same = assertRefused(t, running, SAME, marker, want);
    assert.deepEqual(
      [same.self.uid, same.self.gid],
      [APP_UID, APP_GID],
      `${SAME} runs as the pod's uid and gid`,
    );
    const root = assertRefused(t, running, ROOT, marker, want);
    assert.deepEqual([root.self.uid, root.self.gid], [0, 0], `${ROOT} runs as root`);
    assert.equal(
      hasCap(root.self.capEff, CAP.DAC_OVERRIDE),
      1n,
      `${ROOT} has the runtime's default capabilities`,
    );
  }

  it('every program an agent process runs is root’s and execute-only (0511): any other uid runs it and cannot read it', async () => {
    const script = `const fs = require('node:fs');
      const seen = {};
      for (const p of [${JSON.stringify(`/${NODE_PATH}`)}, '/app/resident']) {
        const s = fs.statSync(p);
        let read; try { fs.closeSync(fs.openSync(p, 'r')); read = 'opened'; } catch (e) { read = e.code; }
        seen[p] = { mode: (s.mode & 0o7777).toString(8), owner: s.uid + ':' + s.gid, read };
      }
      process.stdout.write(JSON.stringify({ execPath: process.execPath, seen }));`;
    const agent = builtImages().manifest.images.agent.ref;
    for (const user of [65532, APP_UID]) {
      const run = await runContainer({ image: agent, user, entrypoint: ['/nodejs/bin/node', '-e', script] });
      assert.equal(run.code, 0, run.stderr);
      const file = { mode: EXECUTE_ONLY_MODE.toString(8), owner: '0:0', read: 'EACCES' };
      assert.deepEqual(JSON.parse(run.stdout), {
        execPath: `/${NODE_PATH}`,
        seen: { [`/${NODE_PATH}`]: file, '/app/resident': file },
      });
    }
  });

  it(
    'the small sidecar (native): the resident, every run it starts while the run holds the handed-over state, and the postStart hook',
    { timeout: 240_000 },
    async (t) => {
      await secrets.put('peek/small', canary('peek-small'));
      const marker = `peek-control-${randomBytes(6).toString('hex')}`;
      const seconds = 20;
      const unanswered = await freePort();
      const pod = await admit(
        peekPod(
          {
            'secret-agent.io/secret-db': 'aws:peek/small',
            'secret-agent.io/sidecar-process': 'small',
            'secret-agent.io/refresh-interval': '60s',
            'secret-agent.io/agent-http-addr': `0.0.0.0:${await freePort()}`,
          },
          seconds,
          marker,
        ),
        'native',
      );
      const agent = pod.spec.initContainers?.find((c) => c.name === AGENT_CONTAINER);
      assert.equal((agent?.command as string[] | undefined)?.[0], '/app/resident', 'the small sidecar');
      // A run a second instead of a minute (the webhook's floor for small): many runs in the window.
      setAgentEnv(pod, AGENT_CONTAINER, 'REFRESH_INTERVAL', '1s');
      t.diagnostic('translated: the agent’s REFRESH_INTERVAL 60s → 1s, so runs come every second');
      const running = await runPeekPod(t, pod);
      assert.deepEqual(
        running.hooks.map((h) => [h.container, h.run.code]),
        [[AGENT_CONTAINER, 0]],
      );
      await eventually(() => running.events(SAME).find((e) => e.event === 'self'), 'the probe’s start');
      await startControl(running, AGENT_CONTAINER, `${APP_UID}:${APP_GID}`, marker);
      await startControl(running, AGENT_CONTAINER, '0:0', marker);
      await sleep(2000);
      // The postStart hook as the kubelet runs it (in the agent's container, its user), as it does again
      // whenever it restarts the sidecar, now with the apps running, which can watch it. Asking a port
      // nobody answers, it waits its whole deadline: long enough to be tried many times.
      const command = (agent!.lifecycle as { postStart: { exec: { command: string[] } } }).postStart.exec
        .command;
      const hook = await builtImages().podman.runAsync(
        [
          'exec',
          `${running.name}-${AGENT_CONTAINER}`,
          ...command.map((a) =>
            a.startsWith('--url=')
              ? `--url=http://127.0.0.1:${unanswered}/readyz`
              : a.startsWith('--deadline=')
                ? '--deadline=3s'
                : a,
          ),
        ],
        { check: false },
      );
      assert.notEqual(hook.status, 0, 'the hook gave up on a port nobody answers');
      t.diagnostic('translated: a second run of the postStart hook, asking a port nobody answers for 3 s');
      for (const probe of [SAME, ROOT]) assert.equal(await running.waitFor(probe, (seconds + 30) * 1000), 0);
      // A run a second for 20 s: 3 runs is a slow machine's floor.
      assertBoth(t, running, marker, { resident: 1, 'small-sidecar run': 3, 'postStart hook': 1 });
      await running.stop();
    },
  );

  it(
    'the Node sidecar (classic) and the init run, watched while it runs',
    { timeout: 240_000 },
    async (t) => {
      await secrets.put('peek/node', canary('peek-node'));
      const marker = `peek-control-${randomBytes(6).toString('hex')}`;
      const seconds = 15;
      const pod = await admit(
        peekPod(
          {
            'secret-agent.io/secret-db': 'aws:peek/node',
            'secret-agent.io/sidecar-process': 'node',
            'secret-agent.io/agent-http-addr': `0.0.0.0:${await freePort()}`,
          },
          seconds,
          marker,
        ),
        'classic',
      );
      // A kubelet runs init containers before any app, which then cannot watch them; here the init
      // container runs beside the apps (started after them) so they can: the same process otherwise.
      const init = pod.spec.initContainers?.find((c) => c.name === AGENT_INIT_CONTAINER);
      assert.ok(init, 'an init container');
      pod.spec.initContainers = pod.spec.initContainers!.filter((c) => c !== init);
      pod.spec.containers.push(init);
      // Run once, as an init container is (the pod's restartPolicy Always would start it again).
      pod.spec.restartPolicy = 'Never';
      t.diagnostic(
        'translated: the init container runs beside the apps, started after them, so they can watch it',
      );
      const running = await runPeekPod(t, pod);
      await eventually(() => running.events(SAME).find((e) => e.event === 'self'), 'the probe’s start');
      await startControl(running, AGENT_CONTAINER, `${APP_UID}:${APP_GID}`, marker);
      await startControl(running, AGENT_CONTAINER, '0:0', marker);
      for (const probe of [SAME, ROOT]) assert.equal(await running.waitFor(probe, (seconds + 30) * 1000), 0);
      assert.equal(await running.waitFor(AGENT_INIT_CONTAINER), 0, running.logs(AGENT_INIT_CONTAINER).stderr);
      assertBoth(t, running, marker, { 'Node sidecar': 1, 'init run': 1 });
      await running.stop();
    },
  );
});
