/**
 * webhook/parse/risk-warnings.ts processPeekWarnings: a container of the pod that can read the agent's
 * processes is named in a warning. SYS_PTRACE needs to see them (a shared process namespace or hostPID);
 * PERFMON, SYS_ADMIN, BPF, SYS_MODULE, SYS_RAWIO, DAC_READ_SEARCH and a privileged container reach any
 * process on the node (perf, BPF, the kernel itself), shared or not. test/image/shared-pid.test.ts shows the refusal every other container meets.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { processPeekWarnings } from '../../webhook/parse/risk-warnings.ts';
import { admitThroughWebhook, basicPod, injectedPod } from './fixtures.ts';

const REF = { 'secret-agent.io/secret-db': 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:db-AbCdEf' };

const container = (name: string, securityContext?: Record<string, unknown>) => ({
  name,
  ...(securityContext ? { securityContext } : {}),
});

/** [container, what] of each warning, in order. */
const named = (warnings: readonly string[]) =>
  warnings
    .map((w) => /^secret-agent: container "([^"]+)" (is privileged|adds [A-Z_, ]+):/.exec(w)?.slice(1))
    .filter((m) => m !== undefined);

const PEEKERS = [
  container('app', { runAsUser: 1000 }),
  container('debug', { capabilities: { add: ['sys_ptrace'] } }),
  container('admin', { capabilities: { add: ['NET_ADMIN', 'CAP_SYS_ADMIN'] } }),
  container('profiler', { capabilities: { add: ['PERFMON'] } }),
  container('tracer', { capabilities: { add: ['cap_bpf'] } }),
  container('kernel', { capabilities: { add: ['SYS_MODULE'] } }),
  container('raw', { capabilities: { add: ['CAP_SYS_RAWIO', 'dac_read_search'] } }),
  container('criu', { capabilities: { add: ['CHECKPOINT_RESTORE'] } }),
  container('everything', { capabilities: { add: ['ALL'] } }),
  container('root', { privileged: true }),
  container('net', { capabilities: { add: ['NET_ADMIN', 'NET_RAW'], drop: ['ALL'] } }),
];

describe('a container that can read the agent’s processes is warned of, naming it', () => {
  it('in a pod that shares its processes: privileged, or adding SYS_PTRACE, CHECKPOINT_RESTORE, SYS_ADMIN, PERFMON, BPF, SYS_MODULE, SYS_RAWIO, DAC_READ_SEARCH or ALL (any case, with or without CAP_)', () => {
    const warnings = processPeekWarnings({ sharesProcesses: true, containers: PEEKERS });
    assert.deepEqual(named(warnings), [
      ['debug', 'adds SYS_PTRACE'],
      ['admin', 'adds SYS_ADMIN'],
      ['profiler', 'adds PERFMON'],
      ['tracer', 'adds BPF'],
      ['kernel', 'adds SYS_MODULE'],
      ['raw', 'adds SYS_RAWIO, DAC_READ_SEARCH'],
      ['criu', 'adds CHECKPOINT_RESTORE'],
      ['everything', 'adds ALL'],
      ['root', 'is privileged'],
    ]);
    for (const w of warnings)
      assert.match(w, /Drop that from the container, or keep the pod's processes apart/);
  });

  it('in a pod that does not: SYS_PTRACE and CHECKPOINT_RESTORE see nothing; perf, BPF, the kernel’s and privilege still reach the agent', () => {
    const warnings = processPeekWarnings({ sharesProcesses: false, containers: PEEKERS });
    assert.deepEqual(named(warnings), [
      ['admin', 'adds SYS_ADMIN'],
      ['profiler', 'adds PERFMON'],
      ['tracer', 'adds BPF'],
      ['kernel', 'adds SYS_MODULE'],
      ['raw', 'adds SYS_RAWIO, DAC_READ_SEARCH'],
      ['everything', 'adds ALL'],
      ['root', 'is privileged'],
    ]);
    for (const w of warnings) assert.doesNotMatch(w, /keep the pod's processes apart/);
  });

  it('nothing to warn of where no container holds such a privilege, or its spec is not one', () => {
    assert.deepEqual(
      processPeekWarnings({
        sharesProcesses: true,
        containers: [
          container('app'),
          container('odd', { privileged: 'true', capabilities: { add: 'SYS_PTRACE' } }),
          container('dropped', { capabilities: { drop: ['SYS_PTRACE'] } }),
        ],
      }),
      [],
    );
  });

  it('through admission: shareProcessNamespace or hostPID with SYS_PTRACE, an init container with PERFMON; injected, with the warning', () => {
    const shapes = [
      {
        spec: { shareProcessNamespace: true },
        at: 'containers',
        add: 'SYS_PTRACE',
        expect: 'adds SYS_PTRACE',
      },
      { spec: { hostPID: true }, at: 'containers', add: 'SYS_PTRACE', expect: 'adds SYS_PTRACE' },
      { spec: {}, at: 'initContainers', add: 'PERFMON', expect: 'adds PERFMON' },
      { spec: {}, at: 'containers', add: 'SYS_PTRACE', expect: undefined },
    ] as const;
    for (const shape of shapes) {
      const peeker = {
        name: 'peeker',
        image: 'debian:12',
        securityContext: { capabilities: { add: [shape.add] } },
      };
      const pod = basicPod(REF, {
        ...shape.spec,
        containers: [{ name: 'app', image: 'nginx:1.27' }, ...(shape.at === 'containers' ? [peeker] : [])],
        ...(shape.at === 'initContainers' ? { initContainers: [peeker] } : {}),
      });
      const result = admitThroughWebhook(pod);
      injectedPod(pod, result);
      const found = named(result.review.response.warnings ?? []);
      assert.deepEqual(found, shape.expect ? [['peeker', shape.expect]] : [], JSON.stringify(shape));
    }
  });
});
