/**
 * Issue 30 ("Siege"), paths and names: what a tenant who can create pods in its own namespace sends,
 * through the real admission code (the AdmissionReview's JSON text, decoded as the server does). Each
 * trick is refused naming the field, or provably neutralised: the patch is read back, schema-checked,
 * and the agent container is shown to mount only the webhook's volumes at the webhook's paths, with a
 * non-zero group and HOME and the SDKs' config files pointing nowhere.
 */
import fc from 'fast-check';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { SDK_CONFIG_ENV } from '../../agent/contract/sdk-config-env.ts';
import { MAX_CPU_QUANTITY, MAX_MEMORY_QUANTITY } from '../../webhook/annotations/values.ts';
import { IRSA, POD_IDENTITY } from '../../webhook/eks-identity.ts';
import { HELPERS_MOUNT_PATH } from '../../webhook/exec-helpers-volume.ts';
import { AGENT_SECRETS_DIR, VAULT_CLIENT_CERT_DIR } from '../../webhook/injected-names.ts';
import { normalPath } from '../../webhook/parse/mount-overlap.ts';
import { RESERVED_MOUNT_PATHS } from '../../webhook/parse/reserved-mount-paths.ts';
import { MOTO_ENV } from '../support/moto.ts';
import { memoryDir, ROOT, runAgent } from '../support/run-agent.ts';
import {
  admitThroughWebhook,
  AGENT_IMAGE,
  basicPod,
  containerEnv,
  injectedPod,
  type PodDoc,
} from '../webhook/fixtures.ts';

const CLUSTER = { AGENT_AWS_REGION: 'eu-west-1' };
const DB = { 'secret-agent.io/secret-db': 'aws:prod/db' };
/** Every volume the webhook may add, and where the agent container mounts each. */
const AGENT_MOUNTS: Readonly<Record<string, string>> = {
  'secret-agent-secrets': AGENT_SECRETS_DIR,
  'secret-agent-helpers': HELPERS_MOUNT_PATH,
  'secret-agent-vault-client': VAULT_CLIENT_CERT_DIR,
  [IRSA.volume]: IRSA.dir,
  [POD_IDENTITY.volume]: POD_IDENTITY.dir,
};

type Container = Record<string, unknown>;
const agentsOf = (pod: PodDoc): Container[] =>
  [...(pod.spec.initContainers ?? []), ...pod.spec.containers].filter((c) => c.image === AGENT_IMAGE);
const mountsOf = (c: Container) => (c.volumeMounts ?? []) as { name: string; mountPath: string }[];

/** What must hold of every agent container of an injected pod, whatever the pod asked for. */
function assertAgentsNeutral(pod: PodDoc): void {
  const agents = agentsOf(pod);
  assert.ok(agents.length > 0, 'the pod has an agent');
  for (const agent of agents) {
    for (const m of mountsOf(agent)) assert.equal(m.mountPath, AGENT_MOUNTS[m.name], `agent mount ${m.name}`);
    assert.ok(mountsOf(agent).some((m) => m.name === 'secret-agent-secrets'));
    const context = agent.securityContext as { runAsUser: number; runAsGroup: number };
    assert.ok(context.runAsUser > 0, 'never root');
    assert.ok(Number.isInteger(context.runAsGroup) && context.runAsGroup > 0, 'never group 0');
    const env = containerEnv(agent, pod);
    assert.equal(env.SECRETS_DIR, AGENT_SECRETS_DIR);
    for (const [name, value] of Object.entries(SDK_CONFIG_ENV)) assert.equal(env[name], value, name);
  }
}

function denial(pod: PodDoc, env: Record<string, string> = {}): string {
  const result = admitThroughWebhook(pod, { ...CLUSTER, ...env });
  assert.equal(result.outcome, 'denied', JSON.stringify(pod.metadata.annotations));
  return result.review.response.status!.message;
}

describe('siege: mount-path tricks', () => {
  // Admitted tricks land in the app containers only, in their normal form; the agent keeps its own path.
  const neutralised = [
    '/./app',
    '//app',
    '//nodejs',
    '/app/',
    '/app/.',
    '/app//',
    '/home/nonroot/.aws',
    '/nonexistent/.aws',
    '/secret-agent',
    '/secret-agent/secrets',
    '/var//run/secrets/app',
    `/${'a'.repeat(254)}`,
  ];
  for (const mountPath of neutralised)
    it(`${JSON.stringify(mountPath.slice(0, 60))}: the app sees ${JSON.stringify(normalPath(mountPath).slice(0, 60))}, the agent its own path`, () => {
      const pod = basicPod(
        { ...DB, 'secret-agent.io/mount-path': mountPath },
        { automountServiceAccountToken: false },
      );
      const patched = injectedPod(pod, admitThroughWebhook(pod, CLUSTER));
      assertAgentsNeutral(patched);
      const app = patched.spec.containers.find((c) => c.name === 'app')!;
      assert.deepEqual(mountsOf(app), [
        { name: 'secret-agent-secrets', mountPath: normalPath(mountPath), readOnly: true },
      ]);
      assert.equal(containerEnv(app, patched).SECRETS_DIR, normalPath(mountPath));
    });

  const refused: [string, RegExp][] = [
    ['/', /is the container’s root/],
    ['///', /is the container’s root/],
    ['/app/../app', /is not an absolute path without \.\. segments/],
    ['app', /is not an absolute path/],
    ['/app ', /has a character other than ASCII letters/],
    ['/app\t', /has a character other than ASCII letters/],
    ['/app\u200b', /has a character other than ASCII letters/],
    ['\uff0fapp', /has a character other than ASCII letters/],
    ['/ap\u0070\u0301', /has a character other than ASCII letters/],
    ['/app:/x', /has a character other than ASCII letters/],
    [`/${'a'.repeat(256)}`, /is 257 bytes long, over the 256 a mount path may have/],
    [`/${'é'.repeat(200)}`, /bytes long, over the 256 a mount path may have/],
  ];
  for (const [mountPath, problem] of refused)
    it(`${JSON.stringify(mountPath.slice(0, 40))} is refused naming secret-agent.io/mount-path`, () => {
      const message = denial(basicPod({ ...DB, 'secret-agent.io/mount-path': mountPath }));
      assert.match(message, new RegExp(`secret-agent\\.io/mount-path: .*${problem.source}`));
      // Bounded: a long path is described by its length, never echoed whole.
      assert.ok(message.length < 1000, `${message.length} characters`);
    });

  it('the app’s own mounts are compared in their normal form: //etc/secrets/ clashes with /etc/secrets, and the other way round', () => {
    for (const [own, mountPath] of [
      ['//etc/secrets/', '/etc/secrets'],
      ['/etc/./secrets', '/etc//secrets/'],
      ['/etc/x/../secrets', '/etc/secrets/sub'],
      ['/srv/x/../app', '/srv//app/'],
    ] as const) {
      const pod = basicPod(
        { ...DB, 'secret-agent.io/mount-path': mountPath },
        {
          containers: [
            { name: 'app', image: 'app:1', volumeMounts: [{ name: 'kube-api-access-x1', mountPath: own }] },
          ],
          volumes: [{ name: 'kube-api-access-x1', emptyDir: {} }],
        },
      );
      assert.match(
        denial(pod),
        /secret-agent\.io\/mount-path: .* overlaps the mount .* of container "app"/,
        own,
      );
    }
  });

  it('/var/run is the link to /run it is in most images: the app’s own mount or termination log under one spelling clashes with a mount path under the other, and a `..` after it climbs from /run', () => {
    for (const [own, mountPath, how] of [
      ['/var/run/data', '/run/data', 'mount'],
      ['/run/app', '/var/run/app/sub', 'mount'],
      ['/var/run/../srv/app', '/srv/app', 'mount'],
      ['/var/run/app/termination-log', '/run/app', 'termination'],
    ] as const) {
      const app =
        how === 'mount'
          ? { name: 'app', image: 'app:1', volumeMounts: [{ name: 'data', mountPath: own }] }
          : { name: 'app', image: 'app:1', terminationMessagePath: own };
      const pod = basicPod(
        { ...DB, 'secret-agent.io/mount-path': mountPath },
        { containers: [app], volumes: [{ name: 'data', emptyDir: {} }] },
      );
      assert.match(
        denial(pod),
        /secret-agent\.io\/mount-path: .* overlaps .* container "app"/,
        `${own} ~ ${mountPath}`,
      );
    }
    // The wrapper's own directory, through the link and back up: refused like /.secret-agent itself.
    const wrapped = basicPod(
      { ...DB, 'secret-agent.io/env-DB_PASSWORD': 'aws:prod/db' },
      {
        containers: [
          {
            name: 'app',
            image: 'app:1',
            command: ['/app/run'],
            volumeMounts: [{ name: 'data', mountPath: '/var/run/../.secret-agent' }],
          },
        ],
        volumes: [{ name: 'data', emptyDir: {} }],
      },
    );
    assert.match(denial(wrapped), /\.secret-agent/);
  });

  it('property: any spelling of an agent’s own path is refused or reaches the app containers only', () => {
    const own = [
      '/app',
      '/nodejs',
      '/secret-agent',
      '/secret-agent/secrets',
      '/home/nonroot/.aws',
      '/nonexistent',
    ];
    const segment = fc.constantFrom('', '.', 'x/..');
    const spelling = fc.record({
      path: fc.constantFrom(...own),
      insert: fc.array(segment, { maxLength: 4 }),
      trailing: fc.constantFrom('', '/', '/.', '//'),
      doubled: fc.boolean(),
    });
    fc.assert(
      fc.property(spelling, ({ path, insert, trailing, doubled }) => {
        const parts = path.split('/').filter((p) => p !== '');
        const spelt = `/${insert.join('/')}${insert.length ? '/' : ''}${parts.join(doubled ? '//' : '/')}${trailing}`;
        const pod = basicPod(
          { ...DB, 'secret-agent.io/mount-path': spelt },
          { automountServiceAccountToken: false },
        );
        const result = admitThroughWebhook(pod, CLUSTER);
        if (spelt.split('/').includes('..')) {
          assert.equal(result.outcome, 'denied', spelt);
          assert.match(result.review.response.status!.message, /secret-agent\.io\/mount-path: /);
          return;
        }
        const patched = injectedPod(pod, result);
        assertAgentsNeutral(patched);
        const app = patched.spec.containers.find((c) => c.name === 'app')!;
        assert.deepEqual(
          mountsOf(app),
          [{ name: 'secret-agent-secrets', mountPath: path, readOnly: true }],
          spelt,
        );
      }),
      { numRuns: 300 },
    );
  });
});

describe('siege: mount paths over what every container has mounted already', () => {
  /** Refused naming the annotation, the path as written, the reserved path it overlaps, and the fix. */
  function assertReserved(mountPath: string, reserved: string): void {
    const message = denial(basicPod({ ...DB, 'secret-agent.io/mount-path': mountPath }));
    assert.ok(
      message.includes(
        `secret-agent.io/mount-path: ${JSON.stringify(mountPath)} overlaps ${JSON.stringify(reserved)}, where app containers have `,
      ),
      message,
    );
    assert.match(
      message,
      /Fix: use a directory of its own such as \/etc\/secrets \(the default\) or \/var\/run\/secret-agent/,
    );
  }

  it('the issue’s paths, and each one’s parents: refused naming secret-agent.io/mount-path, the path it overlaps and the fix', () => {
    const cases: [string, string][] = [
      ['/proc', '/proc'],
      ['/proc/self', '/proc'],
      ['/dev', '/dev'],
      ['/dev/shm', '/dev'],
      ['/dev/termination-log', '/dev'],
      ['/sys', '/sys'],
      ['/sys/fs/cgroup', '/sys'],
      ['/etc/hosts', '/etc/hosts'],
      ['/etc/hostname', '/etc/hostname'],
      ['/etc/resolv.conf', '/etc/resolv.conf'],
      // A link into /proc in Debian, Ubuntu and Alpine images: runc refuses the mount.
      ['/etc/mtab', '/etc/mtab'],
      ['/etc/mtab/x', '/etc/mtab'],
      // Above: the runtime would have to create the kubelet's mount points inside the read-only volume.
      ['/etc', '/etc/hosts'],
      ['/var/run/secrets/kubernetes.io/serviceaccount', '/var/run/secrets/kubernetes.io/serviceaccount'],
      [
        '/var/run/secrets/kubernetes.io/serviceaccount/token',
        '/var/run/secrets/kubernetes.io/serviceaccount',
      ],
      ['/var/run/secrets/kubernetes.io', '/var/run/secrets/kubernetes.io/serviceaccount'],
      ['/var/run/secrets', '/var/run/secrets/kubernetes.io/serviceaccount'],
      ['/var/run', '/var/run/secrets/kubernetes.io/serviceaccount'],
      ['/var', '/var/run/secrets/kubernetes.io/serviceaccount'],
      ['/var/run/secrets/azure/tokens', '/var/run/secrets/azure/tokens'],
      ['/var/run/secrets/azure', '/var/run/secrets/azure/tokens'],
      // /var/run is a link to /run in most images, and the runtime follows it.
      ['/run/secrets/kubernetes.io/serviceaccount', '/run/secrets/kubernetes.io/serviceaccount'],
      ['/run', '/run/secrets/kubernetes.io/serviceaccount'],
      [IRSA.dir, IRSA.dir],
      ['/run/secrets/eks.amazonaws.com/serviceaccount', '/run/secrets/eks.amazonaws.com/serviceaccount'],
      [POD_IDENTITY.dir, POD_IDENTITY.dir],
      ['/var/run/secrets/pods.eks.amazonaws.com', POD_IDENTITY.dir],
      ['/.secret-agent', '/.secret-agent'],
      ['/.secret-agent/secrets', '/.secret-agent'],
    ];
    for (const [mountPath, reserved] of cases) assertReserved(mountPath, reserved);
  });

  it('neighbours that only share a prefix of characters are admitted, in the app containers only', () => {
    for (const mountPath of [
      '/procs',
      '/devices',
      '/system',
      '/etc/hosts.d',
      '/etc/mtab.d',
      '/etc/secrets',
      '/etc/resolv',
      '/var/run/secrets/app',
      '/var/run/secret-agent',
      '/run/secrets/db',
      '/.secret-agent2',
      '/srv/proc',
    ]) {
      const pod = basicPod({ ...DB, 'secret-agent.io/mount-path': mountPath });
      const patched = injectedPod(pod, admitThroughWebhook(pod, CLUSTER));
      assertAgentsNeutral(patched);
      const app = patched.spec.containers.find((c) => c.name === 'app')!;
      assert.ok(
        mountsOf(app).some((m) => m.name === 'secret-agent-secrets' && m.mountPath === mountPath),
        mountPath,
      );
    }
  });

  it('property: any spelling of a reserved path, of a path below it or of its parents is refused naming the annotation', () => {
    const segment = fc.constantFrom('', '.', 'x/..');
    const spelling = fc.record({
      path: fc.constantFrom(...RESERVED_MOUNT_PATHS.map((r) => r.path)),
      // 0: the path itself; below it (a few segments more); above it (a few segments fewer, never /).
      where: fc.constantFrom('at', 'below', 'above'),
      depth: fc.integer({ min: 1, max: 3 }),
      insert: fc.array(segment, { maxLength: 3 }),
      trailing: fc.constantFrom('', '/', '/.', '//'),
      doubled: fc.boolean(),
    });
    fc.assert(
      fc.property(spelling, ({ path, where, depth, insert, trailing, doubled }) => {
        let parts = path.split('/').filter((p) => p !== '');
        if (where === 'below') parts = [...parts, ...Array.from({ length: depth }, (_, i) => `d${i}`)];
        if (where === 'above') parts = parts.slice(0, Math.max(1, parts.length - depth));
        const spelt = `/${insert.join('/')}${insert.length ? '/' : ''}${parts.join(doubled ? '//' : '/')}${trailing}`;
        const result = admitThroughWebhook(basicPod({ ...DB, 'secret-agent.io/mount-path': spelt }), CLUSTER);
        assert.equal(result.outcome, 'denied', spelt);
        const message = result.review.response.status!.message;
        // Quoted as written (cut past 80 characters, as every quoted path is).
        assert.ok(message.includes(`secret-agent.io/mount-path: "${spelt.slice(0, 60)}`), message);
        if (!spelt.split('/').includes('..'))
          assert.match(message, / overlaps "[^"]+", where app containers have /, spelt);
      }),
      { numRuns: 300 },
    );
  });

  it('a selected container’s own terminationMessagePath, absolute or not, however spelt: refused naming the container; a container left out keeps it', () => {
    for (const terminationMessagePath of [
      '/var/log/app/termination',
      'var/log/app/termination',
      '/var//log/./app/termination',
      './var/log/app/termination',
    ]) {
      const spec = {
        containers: [
          { name: 'app', image: 'app:1' },
          { name: 'logger', image: 'logger:1', terminationMessagePath },
        ],
      };
      for (const mountPath of ['/var/log/app', '/var/log', '/var/log/app/termination'])
        assert.ok(
          denial(basicPod({ ...DB, 'secret-agent.io/mount-path': mountPath }, spec)).includes(
            `secret-agent.io/mount-path: "${mountPath}" overlaps ${JSON.stringify(terminationMessagePath)}, the terminationMessagePath of container "logger"`,
          ),
          `${terminationMessagePath} under ${mountPath}`,
        );
      // logger does not get the volume, so its termination log is no concern.
      const pod = basicPod(
        { ...DB, 'secret-agent.io/mount-path': '/var/log/app', 'secret-agent.io/containers': 'app' },
        spec,
      );
      assertAgentsNeutral(injectedPod(pod, admitThroughWebhook(pod, CLUSTER)));
    }
  });

  it('a selected container’s block device (volumeDevices[].devicePath) at, above or below the mount path, however spelt: refused naming the container, the device and the fix; a container left out keeps it', () => {
    const spec = (devicePath: string) => ({
      containers: [
        { name: 'app', image: 'app:1' },
        { name: 'disk', image: 'disk:1', volumeDevices: [{ name: 'raw', devicePath }] },
      ],
      volumes: [{ name: 'raw', persistentVolumeClaim: { claimName: 'raw' } }],
    });
    for (const [mountPath, devicePath] of [
      ['/etc/secrets', '/etc/secrets'],
      ['/etc/secrets', '/etc/secrets/disk'],
      ['/etc/secrets', '/etc'],
      ['/etc/secrets', '//etc/./secrets/'],
      ['/etc/secrets', 'etc/secrets/disk'],
      ['/var/run/secret-agent', '/var/run/secret-agent/x/../disk'],
    ] as const)
      assert.match(
        denial(basicPod({ ...DB, 'secret-agent.io/mount-path': mountPath }, spec(devicePath))),
        new RegExp(
          `secret-agent\\.io/mount-path: "${mountPath}" overlaps ${JSON.stringify(devicePath).replace(/[./]/g, '\\$&')}, where container "disk" has a block device \\(volumeDevices\\[0\\]\\).*Fix: choose another mount path, e\\.g\\. /var/run/secret-agent, or move the devicePath out of it`,
        ),
        `${devicePath} against ${mountPath}`,
      );
    // Beside the mount path, or in a container left out: admitted, and the device stays where it was.
    for (const [annotations, devicePath] of [
      [{}, '/dev/xvdb'],
      [{}, '/etc/secrets2'],
      [{ 'secret-agent.io/containers': 'app' }, '/etc/secrets/disk'],
    ] as const) {
      const pod = basicPod({ ...DB, ...annotations }, spec(devicePath));
      const patched = injectedPod(pod, admitThroughWebhook(pod, CLUSTER));
      assertAgentsNeutral(patched);
      const disk = patched.spec.containers.find((c) => c.name === 'disk')!;
      assert.deepEqual(disk.volumeDevices, [{ name: 'raw', devicePath }]);
    }
  });
});

describe('siege: env names a launcher, a start script or a convention reads', () => {
  /** The names the second review got admitted; each refused naming the annotation, the rule and the fix. */
  const attacks = [
    'NPM_CONFIG_NODE_OPTIONS',
    'npm_config_node_options',
    'CATALINA_OPTS',
    'JAVA_OPTIONS',
    'JVM_OPTS',
    'ES_JAVA_OPTS',
    'KAFKA_OPTS',
    'MAVEN_OPTS',
    'GRADLE_OPTS',
    'SBT_OPTS',
    'JAVA_ARGS',
    'CATALINA_BASE',
    'CATALINA_HOME',
    'JRE_HOME',
    'PS0',
    'GIT_COMMON_DIR',
    'GIT_OBJECT_DIRECTORY',
    'GIT_ALTERNATE_OBJECT_DIRECTORIES',
    'GIT_SSL_NO_VERIFY',
    'GIT_SSL_CAINFO',
    'GIT_SSL_CAPATH',
    'ELIXIR_ERL_OPTIONS',
    'RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS',
    'UWSGI_EXEC_AS_ROOT',
    'UWSGI_INI',
    'GUNICORN_CMD_ARGS',
    'BUN_OPTIONS',
    'LESSOPEN',
    'MANPAGER',
    'SUDO_ASKPASS',
    'RUBYGEMS_GEMDEPS',
    'BUNDLE_GEMFILE',
    'BUNDLE_PATH',
    'COREPACK_NPM_REGISTRY',
    'COREPACK_HOME',
    'NPM_CONFIG_REGISTRY',
    'NPM_CONFIG_SCRIPT_SHELL',
    'PIP_INDEX_URL',
    'PIP_EXTRA_INDEX_URL',
    'GOFLAGS',
    'GOTOOLCHAIN',
    'GOPATH',
    'LOADER_PATH',
    'OTEL_JAVAAGENT_EXTENSIONS',
    'TCL_LIBRARY',
    'SASL_PATH',
    'MAGICK_CODER_MODULE_PATH',
    'MAGICK_CONFIGURE_PATH',
    'KRB5_CONFIG',
    'WGETRC',
    'CURL_HOME',
    'R_PROFILE',
    'JULIA_LOAD_PATH',
    'ASPNETCORE_HOSTINGSTARTUPASSEMBLIES',
    'MUSL_LOCPATH',
    'AWS_CA_BUNDLE',
    'GRPC_DEFAULT_SSL_ROOTS_FILE_PATH',
  ];

  it('every name the second review got admitted: refused naming the annotation, the rule that matched and the fix', () => {
    for (const name of attacks) {
      const message = denial(basicPod({ [`secret-agent.io/env-${name}`]: 'aws:prod/db' }));
      assert.match(
        message,
        new RegExp(
          `secret-agent\\.io/env-${name}: "${name}" (is read by|starts with [A-Z0-9_]+, which marks the names read by|contains [A-Z]+, which by convention marks|ends with [A-Z_]+, which by convention holds) .*: whoever writes the secret would choose .*Fix: give the secret a name of the app's own`,
        ),
        name,
      );
    }
  });

  it('control: npm_config_node_options runs the value’s code under npm start, and the webhook refuses that name', () => {
    const npm = spawnSync('npm', ['--version'], { encoding: 'utf8' });
    assert.equal(npm.status, 0, `npm is missing: apt-get install npm (${npm.error?.message})`);
    using dir = memoryDir();
    writeFileSync(
      join(dir.path, 'package.json'),
      JSON.stringify({ name: 'app', version: '1.0.0', scripts: { start: 'node -e 0' } }),
    );
    const run = spawnSync('npm', ['start', '--silent'], {
      cwd: dir.path,
      encoding: 'utf8',
      timeout: 60_000,
      env: {
        PATH: process.env.PATH,
        HOME: dir.path,
        SIEGE_MARK: 'npm-node-options-ran',
        // What a secret's value would be: code, with no quote npm's shell could strip.
        npm_config_node_options: '--import=data:text/javascript,console.log(process.env.SIEGE_MARK)',
      },
    });
    assert.match(run.stdout, /npm-node-options-ran/, `the value's code ran: ${run.stdout}${run.stderr}`);
    assert.match(
      denial(basicPod({ 'secret-agent.io/env-npm_config_node_options': 'aws:prod/db' })),
      /secret-agent\.io\/env-npm_config_node_options: "npm_config_node_options" starts with NPM_CONFIG_/,
    );
  });
});

describe('siege: the webhook’s volume names', () => {
  const names = [
    'secret-agent-secrets',
    'secret-agent-helpers',
    'secret-agent-vault-client',
    'secret-agent-secrets-1',
  ];
  const shapes: Record<string, (name: string) => Partial<PodDoc['spec']>> = {
    'an init container mounts it by name': (name) => ({
      initContainers: [{ name: 'seed', image: 'busybox:1.36', volumeMounts: [{ name, mountPath: '/seed' }] }],
    }),
    'a container the pod excluded mounts it by name': (name) => ({
      containers: [
        { name: 'app', image: 'app:1' },
        { name: 'other', image: 'other:1', volumeMounts: [{ name, mountPath: '/w' }] },
      ],
    }),
    'a selected container mounts it by name, read-only': (name) => ({
      containers: [
        { name: 'app', image: 'app:1', volumeMounts: [{ name, mountPath: '/w', readOnly: true }] },
      ],
    }),
    'the pod declares a volume by that name': (name) => ({ volumes: [{ name, emptyDir: {} }] }),
  };
  it('every shape, every name: refused, naming the name and the fix', () => {
    for (const [shape, spec] of Object.entries(shapes))
      for (const name of names) {
        const pod = basicPod({ ...DB, 'secret-agent.io/containers': 'app' }, spec(name));
        const message = denial(pod);
        assert.ok(message.includes(`secret-agent.io/inject: `), `${shape}: ${message}`);
        assert.ok(message.includes(JSON.stringify(name)), `${shape}: ${message}`);
        assert.match(message, /Fix: (remove that mount|rename the volume)/, shape);
      }
  });
});

describe('siege: group 0', () => {
  for (const native of ['true', 'false'])
    it(`pod runAsGroup 0, with and without runAsUser: every agent container runs with a group of its own (native sidecars ${native})`, () => {
      for (const securityContext of [
        { runAsGroup: 0 },
        { runAsUser: 1000, runAsGroup: 0 },
        { runAsUser: 0, runAsGroup: 0 },
      ]) {
        const pod = basicPod(DB, { securityContext });
        assertAgentsNeutral(
          injectedPod(pod, admitThroughWebhook(pod, { ...CLUSTER, NATIVE_SIDECARS: native })),
        );
      }
    });

  it('fsGroup 0 and supplementalGroups with 0, which no container can shed, are refused', () => {
    for (const securityContext of [
      { fsGroup: 0 },
      { supplementalGroups: [0] },
      { runAsUser: 1000, supplementalGroups: [5, 0] },
    ])
      assert.match(
        denial(basicPod(DB, { securityContext })),
        /secret-agent\.io\/inject: spec\.securityContext\.(fsGroup|supplementalGroups) gives every container, the agent included, group 0/,
      );
  });
});

describe('siege: absurd resource quantities', () => {
  const memory = ['agent-memory-limit', 'agent-memory-request', 'volume-size-limit'];
  const cpu = ['agent-cpu-request', 'agent-cpu-limit'];
  it('past the bound: refused naming the annotation, the bound and the fix', () => {
    for (const [names, values, max] of [
      [memory, ['999999999999999Ti', '65Gi', '70000000000', '1T'], MAX_MEMORY_QUANTITY],
      [cpu, ['999999999999999', '65', '64001m'], MAX_CPU_QUANTITY],
    ] as const)
      for (const name of names)
        for (const value of values) {
          const message = denial(basicPod({ ...DB, [`secret-agent.io/${name}`]: value }));
          assert.ok(
            message.includes(`secret-agent.io/${name}: ${JSON.stringify(value)} is more than the ${max}`),
            message,
          );
          assert.match(message, new RegExp(`Fix: write at most ${max}`));
        }
  });

  it('at the bound: admitted, and the heap cap it renders is one Node starts with', () => {
    const pod = basicPod({
      ...DB,
      'secret-agent.io/agent-memory-request': MAX_MEMORY_QUANTITY,
      'secret-agent.io/agent-memory-limit': MAX_MEMORY_QUANTITY,
      'secret-agent.io/agent-cpu-limit': MAX_CPU_QUANTITY,
    });
    const patched = injectedPod(pod, admitThroughWebhook(pod, CLUSTER));
    for (const agent of agentsOf(patched)) {
      const { NODE_OPTIONS } = containerEnv(agent, patched);
      const run = spawnSync(process.execPath, ['-e', 'process.exit(0)'], {
        env: { PATH: process.env.PATH, NODE_OPTIONS },
        encoding: 'utf8',
        timeout: 30_000,
      });
      assert.equal(run.status, 0, `${NODE_OPTIONS}: ${run.stderr}`);
    }
  });
});

describe('siege: the SDKs read no config file of their own', () => {
  it('Dockerfile.agent sets HOME and each SDK file as agent/contract/sdk-config-env.ts declares', () => {
    const dockerfile = readFileSync(join(ROOT, 'Dockerfile.agent'), 'utf8').replace(/\\\n\s*/g, ' ');
    const set: Record<string, string> = {};
    for (const line of dockerfile.split('\n').filter((l) => l.startsWith('ENV ')))
      for (const m of line.matchAll(/([A-Z_]+)=(\S+)/g)) set[m[1]!] = m[2]!;
    for (const [name, value] of Object.entries(SDK_CONFIG_ENV)) assert.equal(set[name], value, name);
  });

  it('a hostile ~/.aws/config in the agent’s HOME does not redirect its signed requests once the rendered env is set', async () => {
    // The hostile endpoint: counts what reaches it and denies it, so each run ends at once.
    let reached = 0;
    const hostile = createServer((req, res) => {
      reached++;
      req.resume();
      res.writeHead(400, { 'content-type': 'application/x-amz-json-1.1' });
      res.end(JSON.stringify({ __type: 'AccessDeniedException', message: 'hostile' }));
    });
    await new Promise<void>((resolve) => hostile.listen(0, '127.0.0.1', resolve));
    try {
      const port = (hostile.address() as AddressInfo).port;
      using home = memoryDir();
      mkdirSync(join(home.path, '.aws'));
      writeFileSync(
        join(home.path, '.aws', 'config'),
        `[default]\nendpoint_url = http://127.0.0.1:${port}\n`,
      );
      const pod = basicPod({ ...DB, 'secret-agent.io/mode': 'init' });
      const patched = injectedPod(pod, admitThroughWebhook(pod, CLUSTER));
      const rendered = containerEnv(agentsOf(patched)[0]!, patched);
      const run = async (env: Record<string, string>) => {
        using dir = memoryDir();
        return await runAgent(
          { ...env, ...MOTO_ENV, SECRETS_DIR: dir.path, INIT_DEADLINE: '2s' },
          { timeoutMs: 30_000 },
        );
      };
      // Control: HOME over the pod's files and no SDK file variables, as before: the SDK obeys the file.
      const sdkNames = new Set(Object.keys(SDK_CONFIG_ENV));
      const before = Object.fromEntries(Object.entries(rendered).filter(([k]) => !sdkNames.has(k)));
      const control = await run({ ...before, HOME: home.path });
      assert.notEqual(control.code, 0, control.stdout + control.stderr);
      assert.ok(reached > 0, 'control: the hostile config sent the request to its endpoint');
      // The rendered env, even with HOME still over the pod's files: the SDK reads no file there.
      reached = 0;
      const guarded = await run({ ...rendered, HOME: home.path });
      assert.equal(reached, 0, 'the hostile endpoint was not asked');
      assert.ok(!guarded.stdout.includes(`127.0.0.1:${port}`), 'the logs name no hostile endpoint');
      // It did ask: the SDK's own endpoint for the region, unreachable from this loopback-only machine.
      assert.match(guarded.stdout, /"endpoint":"https:\/\/secretsmanager\.us-east-1\.amazonaws\.com"/);
    } finally {
      await new Promise((resolve) => hostile.close(resolve));
    }
  });
});
