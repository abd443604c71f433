/**
 * Runs a pod the webhook patched in podman, ordered as a kubelet orders it: init containers one
 * after the other (each must exit 0), a native sidecar (an init container with restartPolicy Always)
 * started and waited on through its postStart hook (or its startupProbe, if it has one), then the
 * pod's containers together; when the containers of a run-to-completion pod have ended, its native
 * sidecars get SIGTERM.
 *
 * A postStart exec hook runs as the kubelet runs it (kuberuntime's startContainer, step 4): inside
 * the container just started (`podman exec`: its user, its env), with no timeout of the kubelet's
 * own, and the next container starts only once it has returned; one that fails gets its container
 * killed, and the pod goes no further (a kubelet would then restart a native sidecar with back-off).
 *
 * `podman kube play --start=false` creates the containers from the pod's own spec (image, command,
 * env, mounts, securityContext, resources); the harness starts them. Where podman 4.3 cannot express
 * a field, the pod is translated and `translations` says how, so each test can name them.
 */
import { randomUUID } from 'node:crypto';
import { chmodSync, chownSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { stringify } from 'yaml';
import { assertNoCanary } from '../support/canary.ts';
import type { PodDoc } from '../webhook/fixtures.ts';
import { builtImages } from './podman.ts';

type Container = Record<string, unknown> & { name: string; image: string };

interface HttpProbe {
  readonly httpGet: { readonly path: string; readonly port: number };
  readonly periodSeconds?: number;
  readonly failureThreshold?: number;
  readonly timeoutSeconds?: number;
}

export const TRANSLATIONS = {
  memoryVolume:
    'emptyDir medium Memory → hostPath on a fresh tmpfs directory (mode 0777, like the kubelet’s): kube play would give a disk-backed volume, which the agent rightly refuses',
  hostNetwork:
    'hostNetwork: true: a podman pod reaches this machine’s loopback (moto) only through host networking',
  downwardApi:
    'downward-API env (metadata.name, metadata.namespace, metadata.uid) → the values the API server would fill in: kube play does not resolve metadata.namespace',
  probes:
    'probes → run by the harness from the host, as the kubelet runs them from the node: podman turns httpGet into curl inside the container, which a distroless image cannot run',
  postStart:
    'lifecycle.postStart (exec) → run by the harness with podman exec in the started container, the next container started only once it returns, as the kubelet does: kube play ignores lifecycle hooks',
  initContainers:
    'initContainers → containers the harness starts in the kubelet’s order, pod restartPolicy Never: kube play refuses probes on init containers (so no native sidecar) and waits ~20 s after each (containers/podman#16343)',
  ports:
    'container ports → not declared to podman: with host networking (above) kube play refuses port mappings, and every port is on the host already',
  agentEnv:
    'agent containers get the AWS credentials and endpoint of moto: what IRSA or EKS Pod Identity supplies in a cluster',
  annotations:
    'annotations longer than 63 characters → left out: podman 4.3 kube play checks annotation values against the label limit (Kubernetes allows 256 KiB in all), and no container reads them',
  fsGroup:
    'fsGroup → what the kubelet does and kube play does not: each memory volume made setgid with group fsGroup (drwxrwsrwx 0:fsGroup), and fsGroup added to supplementalGroups, which every container then holds',
} as const;

export interface PodRunOptions {
  /** Env added to containers running `agentImage` (credentials a cluster's identity webhook would add). */
  readonly agentEnv?: Readonly<Record<string, string>>;
  readonly agentImage: string;
}

export interface PodRun {
  readonly name: string;
  /** Every translation applied to this pod (values of TRANSLATIONS). */
  readonly translations: readonly string[];
  /** Volume name → the host directory standing in for it. */
  readonly volumes: ReadonlyMap<string, string>;
  /** The init container that failed, if the pod never got past its init containers. */
  readonly failedInit?: { readonly name: string; readonly code: number; readonly stderr: string };
  /** The container whose postStart hook failed (and which was killed for it): the pod went no further. */
  readonly failedPostStart?: { readonly name: string; readonly hook: HookRun };
  /** Every postStart hook run so far, in order (a restart runs the hook again). */
  readonly hooks: readonly { readonly container: string; readonly run: HookRun }[];
  /** A container's output so far (canary-checked). */
  logs(container: string): { stdout: string; stderr: string };
  /** JSON lines a container printed. */
  events(container: string): Record<string, unknown>[];
  inspect(container: string): ContainerInspect;
  /** Exit code once the container has ended (fails after `timeoutMs`). */
  waitFor(container: string, timeoutMs?: number): Promise<number>;
  /**
   * A run-to-completion pod: waits for every container to end (a classic sidecar must end by
   * itself), then stops native sidecars as the kubelet does. Succeeded when the containers exit 0.
   */
  complete(timeoutMs?: number): Promise<{ phase: 'Succeeded' | 'Failed'; exitCodes: Record<string, number> }>;
  /** Pod deletion: SIGTERM to the containers, then to native sidecars (last started, first stopped). */
  stop(): Promise<Record<string, number>>;
  /** A signal to a container's process from outside the pod (SIGKILL: what the OOM killer sends). */
  kill(container: string, signal: NodeJS.Signals): Promise<void>;
  /**
   * What the kubelet does when a native sidecar's process has died: starts the container again, runs
   * its postStart hook (killing it again if the hook fails) and resolves with the hook's run.
   */
  restart(container: string): Promise<HookRun>;
  remove(): Promise<void>;
}

/** One run of a postStart exec hook: its exit code and output (canary-checked), and how long it ran. */
export interface HookRun {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
  readonly ms: number;
}

export interface ContainerInspect {
  readonly State: { readonly Status: string; readonly ExitCode: number; readonly Pid: number };
  readonly Config: { readonly User: string };
  readonly HostConfig: {
    readonly ReadonlyRootfs: boolean;
    readonly SecurityOpt: readonly string[] | null;
    readonly CapAdd: readonly string[] | null;
  };
  readonly EffectiveCaps: readonly string[] | null;
}

function translate(pod: PodDoc, name: string, options: PodRunOptions) {
  const play = structuredClone(pod) as PodDoc & { spec: Record<string, unknown> };
  const translations = new Set<string>();
  const volumes = new Map<string, string>();
  const meta = { name, namespace: pod.metadata.namespace ?? 'default', uid: randomUUID() };
  play.metadata = { ...play.metadata, name, namespace: meta.namespace };
  const annotations = Object.entries(play.metadata.annotations ?? {});
  if (annotations.some(([, v]) => v.length > 63)) {
    play.metadata.annotations = Object.fromEntries(annotations.filter(([, v]) => v.length <= 63));
    translations.add(TRANSLATIONS.annotations);
  }

  const security = play.spec.securityContext as
    { fsGroup?: number; supplementalGroups?: number[] } | undefined;
  const fsGroup = security?.fsGroup;
  if (security && fsGroup !== undefined) {
    const { fsGroup: _applied, ...rest } = security;
    const groups = rest.supplementalGroups ?? [];
    play.spec.securityContext = {
      ...rest,
      supplementalGroups: groups.includes(fsGroup) ? groups : [...groups, fsGroup],
    };
    translations.add(TRANSLATIONS.fsGroup);
  }
  const specVolumes = (play.spec.volumes ?? []) as { name: string; emptyDir?: { medium?: string } }[];
  play.spec.volumes = specVolumes.map((v) => {
    if (v.emptyDir?.medium !== 'Memory') return v;
    const dir = mkdtempSync('/dev/shm/secret-agent-pod-');
    if (fsGroup !== undefined) chownSync(dir, 0, fsGroup);
    // chmod after chown: a chown clears the setgid bit.
    chmodSync(dir, fsGroup === undefined ? 0o777 : 0o2777);
    volumes.set(v.name, dir);
    translations.add(TRANSLATIONS.memoryVolume);
    return { name: v.name, hostPath: { path: dir, type: 'Directory' } };
  });
  if (play.spec.hostNetwork !== true) translations.add(TRANSLATIONS.hostNetwork);
  play.spec.hostNetwork = true;

  type Env = { name: string; value?: string; valueFrom?: { fieldRef?: { fieldPath: string } } };
  const probes = new Map<string, HttpProbe>();
  const hooks = new Map<string, readonly string[]>();
  const fieldValues: Record<string, string> = {
    'metadata.name': meta.name,
    'metadata.namespace': meta.namespace,
    'metadata.uid': meta.uid,
  };
  /** The container as podman can run it: downward-API env resolved, probes left to the harness. */
  const translateContainer = (c: Container): Container => {
    const {
      startupProbe,
      readinessProbe,
      livenessProbe,
      restartPolicy: _native,
      ports,
      lifecycle,
      ...kept
    } = c;
    if (ports !== undefined) translations.add(TRANSLATIONS.ports);
    if (lifecycle !== undefined) {
      const { postStart, ...other } = lifecycle as { postStart?: { exec?: { command?: string[] } } };
      const command = postStart?.exec?.command;
      if (Object.keys(other).length > 0 || !command)
        throw new Error(`${c.name}: no translation for lifecycle ${JSON.stringify(lifecycle)}`);
      hooks.set(c.name, command);
      translations.add(TRANSLATIONS.postStart);
    }
    if (startupProbe) probes.set(c.name, startupProbe as HttpProbe);
    if (startupProbe || readinessProbe || livenessProbe) translations.add(TRANSLATIONS.probes);
    const env = ((c.env ?? []) as Env[]).map((e) => {
      const field = e.valueFrom?.fieldRef?.fieldPath;
      if (field === undefined) return e;
      translations.add(TRANSLATIONS.downwardApi);
      const value = fieldValues[field];
      if (value === undefined) throw new Error(`${c.name}: no translation for fieldRef ${field}`);
      return { name: e.name, value };
    });
    if (c.image === options.agentImage && options.agentEnv) {
      env.push(...Object.entries(options.agentEnv).map(([name, value]) => ({ name, value })));
      translations.add(TRANSLATIONS.agentEnv);
    }
    return { ...kept, env };
  };
  const init = (play.spec.initContainers ?? []) as Container[];
  const regular = play.spec.containers as Container[];
  const order = init.map((c) => ({ name: c.name, native: c.restartPolicy === 'Always' }));
  const { initContainers: _init, ...spec } = play.spec;
  const translated = {
    ...play,
    spec: {
      ...spec,
      containers: [...init, ...regular].map(translateContainer),
      ...(init.length > 0 ? { restartPolicy: 'Never' } : {}),
    },
  };
  if (init.length > 0) translations.add(TRANSLATIONS.initContainers);
  return {
    play: translated,
    translations: [...translations],
    volumes,
    probes,
    hooks,
    order,
    regular: regular.map((c) => c.name),
  };
}

async function probePasses(probe: HttpProbe): Promise<boolean> {
  const period = (probe.periodSeconds ?? 10) * 1000;
  for (let i = 0; i < (probe.failureThreshold ?? 3); i++) {
    try {
      const res = await fetch(`http://127.0.0.1:${probe.httpGet.port}${probe.httpGet.path}`, {
        signal: AbortSignal.timeout((probe.timeoutSeconds ?? 1) * 1000),
      });
      await res.arrayBuffer();
      if (res.status >= 200 && res.status < 400) return true;
    } catch {
      // Not listening yet: a failure, like the kubelet counts it.
    }
    await sleep(period);
  }
  return false;
}

/** Creates the pod with `podman kube play --start=false`, then starts it in the kubelet's order. */
export async function runPod(pod: PodDoc, options: PodRunOptions): Promise<PodRun> {
  const { podman } = builtImages();
  const name = `${pod.metadata.name ?? 'pod'}-${randomUUID().slice(0, 8)}`;
  const t = translate(pod, name, options);
  const manifestDir = mkdtempSync(join(tmpdir(), 'secret-agent-pod-'));
  const manifest = join(manifestDir, 'pod.yaml');
  writeFileSync(manifest, stringify(t.play));
  const remove = async () => {
    await podman.runAsync(['pod', 'rm', '--force', name], { check: false });
    for (const dir of t.volumes.values()) rmSync(dir, { recursive: true, force: true });
    rmSync(manifestDir, { recursive: true, force: true });
  };

  const ctr = (container: string) => `${name}-${container}`;
  const started: string[] = [];
  const start = async (...containers: string[]) => {
    await podman.runAsync(['start', ...containers.map(ctr)]);
    started.push(...containers);
  };
  const waitFor = async (container: string, timeoutMs = 60_000) => {
    const r = await podman.runAsync(['wait', ctr(container)], { timeoutMs, check: false });
    if (r.status !== 0) throw new Error(`${container} did not end within ${timeoutMs} ms: ${r.stderr}`);
    return Number(r.stdout.trim());
  };
  const logs = (container: string) => {
    const r = podman.run(['logs', ctr(container)], { check: false });
    assertNoCanary(r.stdout, `${container} stdout`);
    assertNoCanary(r.stderr, `${container} stderr`);
    return { stdout: r.stdout, stderr: r.stderr };
  };
  const stopContainer = async (container: string) => {
    await podman.runAsync(['kill', '--signal', 'SIGTERM', ctr(container)], { check: false });
    return waitFor(container, 30_000);
  };
  const natives = t.order.filter((o) => o.native).map((o) => o.name);
  const hooks: { container: string; run: HookRun }[] = [];
  /** The container's postStart hook, as the kubelet runs it; false when it failed and the container was killed. */
  const postStart = async (container: string): Promise<boolean> => {
    const command = t.hooks.get(container);
    if (!command) return true;
    const begin = performance.now();
    const r = await podman.runAsync(['exec', ctr(container), ...command], { check: false });
    const run = { code: r.status, stdout: r.stdout, stderr: r.stderr, ms: performance.now() - begin };
    assertNoCanary(run.stdout, `${container} postStart stdout`);
    assertNoCanary(run.stderr, `${container} postStart stderr`);
    hooks.push({ container, run });
    if (run.code === 0) return true;
    // The kubelet's killContainer: SIGTERM, then SIGKILL once the grace period (here 10 s) is over.
    await podman.runAsync(['stop', '--time', '10', ctr(container)], { check: false });
    return false;
  };

  let failedInit: PodRun['failedInit'];
  let failedPostStart: PodRun['failedPostStart'];
  try {
    await podman.runAsync(['kube', 'play', '--start=false', manifest]);
    for (const step of t.order) {
      await start(step.name);
      if (step.native) {
        if (!(await postStart(step.name))) {
          failedPostStart = { name: step.name, hook: hooks.at(-1)!.run };
          break;
        }
        const probe = t.probes.get(step.name);
        if (probe && !(await probePasses(probe)))
          throw new Error(`${step.name}: the startupProbe never passed: ${logs(step.name).stderr}`);
      } else {
        const code = await waitFor(step.name);
        if (code !== 0) {
          failedInit = { name: step.name, code, stderr: logs(step.name).stderr };
          break;
        }
      }
    }
    if (!failedInit && !failedPostStart) {
      // The kubelet starts them one by one, each after its own hook; without hooks, together.
      if (t.regular.some((c) => t.hooks.has(c)))
        for (const c of t.regular) {
          await start(c);
          if (!(await postStart(c))) {
            failedPostStart = { name: c, hook: hooks.at(-1)!.run };
            break;
          }
        }
      else await start(...t.regular);
    }
  } catch (e) {
    await remove();
    throw e;
  }

  return {
    name,
    translations: t.translations,
    volumes: t.volumes,
    ...(failedInit ? { failedInit } : {}),
    ...(failedPostStart ? { failedPostStart } : {}),
    hooks,
    logs,
    events: (container) =>
      logs(container)
        .stdout.split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as Record<string, unknown>),
    inspect: (container) =>
      (JSON.parse(podman.run(['container', 'inspect', ctr(container)]).stdout) as ContainerInspect[])[0]!,
    waitFor,
    async complete(timeoutMs = 60_000) {
      const exitCodes: Record<string, number> = {};
      for (const c of t.regular) exitCodes[c] = await waitFor(c, timeoutMs);
      for (const c of [...natives].reverse()) exitCodes[c] = await stopContainer(c);
      const phase = t.regular.every((c) => exitCodes[c] === 0) ? 'Succeeded' : 'Failed';
      return { phase, exitCodes };
    },
    async stop() {
      const exitCodes: Record<string, number> = {};
      const running = t.regular.filter((c) => started.includes(c));
      const codes = await Promise.all(running.map(stopContainer));
      running.forEach((c, i) => (exitCodes[c] = codes[i]!));
      for (const c of [...natives].reverse()) if (started.includes(c)) exitCodes[c] = await stopContainer(c);
      return exitCodes;
    },
    async kill(container, signal) {
      await podman.runAsync(['kill', '--signal', signal, ctr(container)]);
    },
    async restart(container) {
      if (!t.hooks.has(container)) throw new Error(`${container} has no postStart hook to run again`);
      await waitFor(container, 30_000);
      await podman.runAsync(['start', ctr(container)]);
      await postStart(container);
      return hooks.at(-1)!.run;
    },
    remove,
  };
}
