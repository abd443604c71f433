import fc from 'fast-check';
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseAgentConfig } from '../../agent/config/parse-agent-config.ts';
import {
  ENV_EXEC_AGENT_DIR,
  ENV_EXEC_APP_DIR,
  ENV_EXEC_APP_PATH,
  MAX_ENV_VARS,
} from '../../agent/contract/env-exec.ts';
import { REFUSED_ENV_FAMILIES } from '../../agent/contract/refused-env-names.ts';
import { assertNoCanary, canary } from '../support/canary.ts';
import {
  admitThroughWebhook,
  AGENT_IMAGE,
  basicPod,
  containerEnv,
  injectedPod,
  type PodDoc,
} from './fixtures.ts';

/**
 * Secrets as env vars (`secret-agent.io/env-<VAR>`, docs/env.md): what the webhook's patch does to
 * the app containers and the agent, and what it refuses. Every pod goes through the real admission
 * code from the AdmissionReview's text, and every injected pod is checked against the Pod schema.
 */

const CLUSTER = { AGENT_AWS_REGION: 'eu-west-1' };
const CLASSIC = { ...CLUSTER, NATIVE_SIDECARS: 'false' };
const COMMAND = ['/app/server', '--listen=:8080'];
const ARGS = ['--verbose', 'two words'];
/** An app with its command in the spec, its uid named (no file-sharing warning). */
function spec(extra: Record<string, unknown> = {}): Partial<PodDoc['spec']> {
  return {
    securityContext: { runAsUser: 1000 },
    containers: [{ name: 'app', image: 'registry.example/app:1', command: COMMAND, args: ARGS, ...extra }],
  };
}

function admit(
  annotations: Record<string, string>,
  podSpec: Partial<PodDoc['spec']> = spec(),
  cluster: Record<string, string> = CLUSTER,
) {
  const pod = basicPod(annotations, podSpec);
  return { pod, result: admitThroughWebhook(pod, cluster) };
}

function inject(
  annotations: Record<string, string>,
  podSpec?: Partial<PodDoc['spec']>,
  cluster?: Record<string, string>,
) {
  const { pod, result } = admit(annotations, podSpec, cluster);
  const patched = injectedPod(pod, result);
  const all = [...(patched.spec.initContainers ?? []), ...patched.spec.containers];
  return {
    pod: patched,
    app: (name = 'app') => all.find((c) => c.name === name)!,
    agents: all.filter((c) => c.image === AGENT_IMAGE),
    warnings: result.review.response.warnings ?? [],
  };
}

function refusal(
  annotations: Record<string, string>,
  podSpec: Partial<PodDoc['spec']> = spec(),
  cluster: Record<string, string> = CLUSTER,
): string {
  const { result } = admit(annotations, podSpec, cluster);
  assert.equal(result.outcome, 'denied', 'refused');
  return result.review.response.status!.message!;
}

const ENV = { 'secret-agent.io/env-DATABASE_URL': 'aws:prod/db#url' };
const RESTART = { 'secret-agent.io/restart-on-change': 'true' };

describe('secret-agent.io/env-<VAR>: the app container runs its command through the wrapper', () => {
  it('wraps the command, keeps args, mounts the wrapper read-only; the agent writes the value and installs the wrapper', () => {
    const { pod, app, agents } = inject({
      ...ENV,
      'secret-agent.io/env-API_KEY': 'aws:prod/api',
      'secret-agent.io/secret-tls': 'aws:prod/tls',
    });
    assert.deepEqual(app().command, [
      ENV_EXEC_APP_PATH,
      '--dir=/etc/secrets',
      '--wait=75',
      '--set=API_KEY',
      '--set=DATABASE_URL',
      '--',
      ...COMMAND,
    ]);
    assert.deepEqual(app().args, ARGS, 'args unchanged: the wrapper passes them on');
    assert.deepEqual(app().volumeMounts, [
      { name: 'secret-agent-secrets', mountPath: '/etc/secrets', readOnly: true },
      { name: 'secret-agent-exec', mountPath: ENV_EXEC_APP_DIR, readOnly: true },
    ]);
    assert.deepEqual(
      (pod.spec.volumes as { name: string }[]).find((v) => v.name === 'secret-agent-exec'),
      { name: 'secret-agent-exec', emptyDir: { medium: 'Memory', sizeLimit: '1Mi' } },
    );
    // Nothing of the values in the app's env: the wrapper reads them from the volume at start.
    assert.deepEqual(
      (app().env as { name: string }[]).map((e) => e.name),
      ['SECRETS_DIR'],
    );
    assert.equal(agents.length, 1);
    const agent = agents[0]!;
    assert.ok(
      (agent.volumeMounts as { name: string; mountPath: string; readOnly?: boolean }[]).some(
        (m) => m.name === 'secret-agent-exec' && m.mountPath === ENV_EXEC_AGENT_DIR && m.readOnly !== true,
      ),
      'the agent mounts the wrapper volume writable',
    );
    // The agent's env, parsed by the agent's own parser: two values and one file.
    const config = parseAgentConfig(containerEnv(agent, pod));
    assert.deepEqual(config.envExec, { dir: ENV_EXEC_AGENT_DIR, program: '/app/env-exec' });
    assert.deepEqual(
      config.secrets.map((s) => [s.ref.provider, s.filename, s.format]),
      [
        ['aws', 'tls', 'raw'],
        ['aws', '.secret-agent-env/API_KEY', 'raw'],
        ['aws', '.secret-agent-env/DATABASE_URL', 'raw'],
      ],
    );
  });

  it('variables alone, without files, are a request', () => {
    const { app } = inject(ENV);
    assert.equal((app().command as string[])[0], ENV_EXEC_APP_PATH);
  });

  it('only the containers secret-agent.io/containers selects, init containers included; the others keep their command', () => {
    const { app } = inject(
      { ...ENV, 'secret-agent.io/containers': 'migrate,app' },
      {
        securityContext: { runAsUser: 1000 },
        initContainers: [{ name: 'migrate', image: 'registry.example/migrate:1', command: ['/migrate'] }],
        containers: [
          { name: 'app', image: 'registry.example/app:1', command: COMMAND },
          // No command: fine, it is not selected.
          { name: 'proxy', image: 'registry.example/proxy:1' },
        ],
      },
    );
    assert.deepEqual((app('migrate').command as string[]).slice(-2), ['--', '/migrate']);
    assert.equal((app('app').command as string[])[0], ENV_EXEC_APP_PATH);
    assert.equal(app('proxy').command, undefined);
    assert.equal(app('proxy').volumeMounts, undefined);
  });

  it('without restart-on-change, a sidecar pod is warned that a rotation reaches the app at its next start', () => {
    const { warnings } = inject(ENV);
    assert.equal(warnings.length, 1);
    assert.match(
      warnings[0]!,
      /secret-agent\.io\/env-DATABASE_URL: .*next starts.*restart-on-change: "true"/,
    );
    assert.deepEqual(inject({ ...ENV, ...RESTART }).warnings, [], 'restart-on-change: nothing to tell');
    assert.deepEqual(
      inject({ ...ENV, 'secret-agent.io/mode': 'init' }).warnings,
      [],
      'mode init: nothing rotates',
    );
  });

  it('the wrapper waits as long as the agent retries, plus 15 s', () => {
    const { app } = inject({ ...ENV, 'secret-agent.io/init-deadline': '2m' });
    assert.ok((app().command as string[]).includes('--wait=135'));
  });
});

describe('secret-agent.io/env-<VAR>: refused at admission, with the fix', () => {
  it('a selected container without command: names the field, the image inspect line and render', () => {
    const message = refusal(ENV, {
      securityContext: { runAsUser: 1000 },
      containers: [{ name: 'app', image: 'registry.example/app:1', args: ARGS }],
    });
    assert.match(message, /spec\.containers\[0\]\.command: container "app" has no command in the pod spec/);
    assert.match(message, /Entrypoint/);
    assert.match(message, /secret-agent render then shows the wrapped command/);
    assert.match(message, /secret-agent\.io\/containers/);
  });

  it('a name that is no shell variable, one the container sets, and SECRETS_DIR', () => {
    assert.match(
      refusal({ 'secret-agent.io/env-DB-URL': 'aws:prod/db' }),
      /secret-agent\.io\/env-DB-URL: "DB-URL" is not an environment variable name a shell can read/,
    );
    assert.match(
      refusal({ 'secret-agent.io/env-9LIVES': 'aws:prod/db' }),
      /"9LIVES" is not an environment variable name/,
    );
    assert.match(
      refusal(ENV, spec({ env: [{ name: 'DATABASE_URL', value: 'postgres://localhost' }] })),
      /secret-agent\.io\/env-DATABASE_URL: sets "DATABASE_URL", which container "app" sets already \(spec\.containers\[0\]\.env\)/,
    );
    // The webhook's own, which holds a path: refused as every *DIR is.
    assert.match(
      refusal({ 'secret-agent.io/env-SECRETS_DIR': 'aws:prod/db' }),
      /secret-agent\.io\/env-SECRETS_DIR: "SECRETS_DIR" ends with DIR, which by convention holds a path/,
    );
  });

  it('a name that steers a loader, a shell, a runtime or a launcher: each the issues name, refused naming the variable, the rule that matched and the fix', () => {
    const named: [string, RegExp][] = [
      ['LD_PRELOAD', /starts with LD_, which marks the names read by the dynamic loader/],
      ['LD_LIBRARY_PATH', /starts with LD_, which marks the names read by the dynamic loader/],
      ['LD_AUDIT', /starts with LD_/],
      ['GCONV_PATH', /is read by the C library/],
      ['BASH_ENV', /starts with BASH_, which marks the names read by shells/],
      ['ENV', /is read by shells/],
      ['NODE_OPTIONS', /is read by Node\.js/],
      ['PATH', /is read by the process’s command lookup/],
      ['PYTHONPATH', /starts with PYTHON, which marks the names read by Python/],
      ['JAVA_TOOL_OPTIONS', /is read by the JVM/],
      // The second review's: launchers, start scripts and conventions.
      ['npm_config_node_options', /starts with NPM_CONFIG_, which marks the names read by npm/],
      ['CATALINA_OPTS', /starts with CATALINA_, which marks the names read by the JVM/],
      ['ACME_SERVER_OPTS', /ends with OPTS, which by convention holds a program’s options or arguments/],
      ['GUNICORN_CMD_ARGS', /is read by Python and its launchers/],
      ['GIT_COMMON_DIR', /starts with GIT_, which marks the names read by git/],
      ['TCL_LIBRARY', /is read by PHP, Lua, Erlang/],
      ['ACME_PLUGIN_LIBRARY', /ends with LIBRARY, which by convention holds a path/],
      [
        'HTTPS_PROXY',
        /ends with _PROXY.*where the container’s clients send their requests and the pod’s credentials/,
      ],
      ['AWS_ENDPOINT_URL_STS', /starts with AWS_ENDPOINT_URL.*the pod’s credentials/],
      ['ASPNETCORE_HOSTINGSTARTUPASSEMBLIES', /is read by \.NET/],
      ['ACME_STARTUP_SCRIPT', /contains STARTUP, which by convention marks code/],
      [
        'ACME_SKIP_VERIFY',
        /ends with VERIFY.*whom the container’s TLS trusts, and read or change its traffic/,
      ],
      // Another case: Linux would not read it, but the rule takes every spelling.
      ['ld_preload', /starts with LD_/],
      ['Node_Options', /is read by Node\.js/],
    ];
    for (const [name, rule] of named) {
      const message = refusal({ [`secret-agent.io/env-${name}`]: 'aws:prod/db' });
      assert.ok(message.includes(`secret-agent.io/env-${name}: ${JSON.stringify(name)} `), message);
      assert.match(message, rule, name);
      assert.match(message, /: whoever writes the secret would choose /);
      assert.match(
        message,
        new RegExp(
          `Fix: give the secret a name of the app's own.*if the app needs ${name}, set it in the container's env`,
        ),
      );
    }
    // Every problem in one pass: one refusal per name, the rest of the pod still checked.
    const message = refusal({
      'secret-agent.io/env-LD_PRELOAD': 'aws:prod/a',
      'secret-agent.io/env-NODE_OPTIONS': 'aws:prod/b',
      'secret-agent.io/env-API_TOKEN': 'aws:prod/db#url',
    });
    assert.match(message, /2 problems/);
    assert.doesNotMatch(message, /env-API_TOKEN/);
  });

  it('property: any name a declared rule matches, in any case, is refused through admission; a secret’s own names are admitted', () => {
    const entries = REFUSED_ENV_FAMILIES.flatMap((f) => [
      ...f.names.map((text) => ({ text, kind: 'name' })),
      ...f.prefixes.filter(() => f.admittedEndings.length === 0).map((text) => ({ text, kind: 'prefix' })),
      ...f.infixes.map((text) => ({ text, kind: 'infix' })),
      ...f.suffixes.map((text) => ({ text, kind: 'suffix' })),
    ]);
    const recase = (text: string, flips: readonly boolean[]) =>
      [...text].map((ch, i) => (flips[i % flips.length] ? ch.toLowerCase() : ch.toUpperCase())).join('');
    const refused = fc.record({
      entry: fc.constantFrom(...entries),
      head: fc.stringMatching(/^[A-Za-z][A-Za-z0-9_]{0,10}$/),
      tail: fc.stringMatching(/^[A-Za-z0-9_]{0,10}$/),
      flips: fc.array(fc.boolean(), { minLength: 1, maxLength: 8 }),
    });
    fc.assert(
      fc.property(refused, ({ entry, head, tail, flips }) => {
        const text = recase(entry.text, flips);
        const name = {
          name: text,
          prefix: text + tail,
          infix: head + text + tail,
          suffix: head + text,
        }[entry.kind]!;
        const message = refusal({ [`secret-agent.io/env-${name}`]: 'aws:prod/db' });
        assert.match(
          message,
          new RegExp(
            `secret-agent\\.io/env-${name}: "${name}" (is read by|starts with|contains|ends with) .*: whoever writes the secret would choose `,
          ),
        );
      }),
      { numRuns: 150 },
    );
    // The other side: what apps name their secrets, the readers’ namespaces included.
    const admitted = fc.record({
      first: fc.constantFrom(
        'DATABASE',
        'STRIPE',
        'GITHUB',
        'NODE',
        'KAFKA_SASL_JAAS',
        'AWS',
        'SLACK',
        'APP',
      ),
      ending: fc.constantFrom(
        '_URL',
        '_PASSWORD',
        '_TOKEN',
        '_API_KEY',
        '_SECRET',
        '_CONFIG',
        '_DSN',
        '_KEY',
      ),
      flips: fc.array(fc.boolean(), { minLength: 1, maxLength: 8 }),
    });
    fc.assert(
      fc.property(admitted, ({ first, ending, flips }) => {
        const name = recase(first + ending, flips);
        const { app } = inject({ [`secret-agent.io/env-${name}`]: 'aws:prod/db' });
        assert.ok((app().command as string[]).includes(`--set=${name}`), name);
      }),
      { numRuns: 60 },
    );
    for (const name of [
      'NODE_ENV',
      'NODE_API_TOKEN',
      'GIT_TOKEN',
      'GITHUB_TOKEN',
      'RUBYGEMS_API_KEY',
      'LDAP_PASSWORD',
      'PATHNAME',
      'HOME_URL',
      'ENVIRONMENT',
      'SHELL_TOKEN',
      'JAVA_KEYSTORE_PASSWORD',
      'CORS_ORIGIN',
      'COREDNS_KEY',
      'KAFKA_SASL_JAAS_CONFIG',
      'SLACK_WEBHOOK_URL',
      'SECRET_KEY_BASE',
      'OPENAI_API_BASE',
    ])
      inject({ [`secret-agent.io/env-${name}`]: 'aws:prod/db' });
  });

  it('a reference the agent could not serve, described by its shape, never quoted', () => {
    const secret = canary('env-annotation');
    const message = refusal({ 'secret-agent.io/env-TOKEN': secret });
    assert.match(message, /secret-agent\.io\/env-TOKEN: \(a value of \d+ characters\) is not a reference/);
    assertNoCanary(message, 'the refusal');
    // The region this cluster lacks, named for the variable.
    assert.match(
      refusal(ENV, spec(), {}),
      /secret-agent\.io\/aws-region: is not set .* so secret-agent\.io\/env-DATABASE_URL \(aws:NAME, which has no region\) cannot be fetched/,
    );
    assert.match(
      refusal({ 'secret-agent.io/env-TOKEN': 'file:/etc/token' }),
      /secret-agent\.io\/env-TOKEN: file: references are turned off on this cluster/,
    );
  });

  it('a classic sidecar alone would start the app before its variables exist', () => {
    assert.match(
      refusal({ ...ENV, 'secret-agent.io/mode': 'sidecar' }, spec(), CLASSIC),
      /secret-agent\.io\/mode: is "sidecar" on a cluster without native sidecars.*init\+sidecar/,
    );
    // Native sidecars hold the app until the set is written: fine there.
    inject({ ...ENV, 'secret-agent.io/mode': 'sidecar' });
    inject(ENV, spec(), CLASSIC);
  });

  it('paths the wrapper or the values need: the values directory, the wrapper mount', () => {
    assert.match(
      refusal({
        ...ENV,
        'secret-agent.io/secret-x': 'aws:prod/x',
        'secret-agent.io/path-x': '.secret-agent-env/x',
      }),
      /secret-agent\.io\/secret-x: writes "\.secret-agent-env\/x", where the environment variables' values go/,
    );
    assert.match(
      refusal({ ...ENV, 'secret-agent.io/mount-path': '/.secret-agent/secrets' }),
      /secret-agent\.io\/mount-path: "\/\.secret-agent\/secrets" overlaps "\/\.secret-agent"/,
    );
    assert.match(
      refusal(ENV, spec({ volumeMounts: [{ name: 'data', mountPath: '/' }] })),
      /spec\.containers\[0\]\.volumeMounts\[0\]: "\/" of container "app" \(its mount\) overlaps "\/\.secret-agent"/,
    );
  });

  it('the wrapper’s mount: a selected container’s block device or termination log at, above or below it, however spelt, is refused; a container left out keeps them', () => {
    const raw = { volumes: [{ name: 'raw', persistentVolumeClaim: { claimName: 'raw' } }] };
    for (const devicePath of [
      '/.secret-agent/env-exec',
      '/.secret-agent',
      '//.secret-agent/',
      '.secret-agent/x',
      '/',
    ])
      assert.match(
        refusal(ENV, { ...spec({ volumeDevices: [{ name: 'raw', devicePath }] }), ...raw }),
        new RegExp(
          `spec\\.containers\\[0\\]\\.volumeDevices\\[0\\]: ${JSON.stringify(devicePath).replace(/[./]/g, '\\$&')} of container "app" \\(its device\\) overlaps "/\\.secret-agent".*Fix: put it elsewhere`,
        ),
        devicePath,
      );
    for (const terminationMessagePath of [
      '/.secret-agent/env-exec',
      '/./.secret-agent/log',
      '.secret-agent/log',
    ])
      assert.match(
        refusal(ENV, spec({ terminationMessagePath })),
        /spec\.containers\[0\]\.terminationMessagePath: ".*" of container "app" \(its termination log\) overlaps "\/\.secret-agent"/,
        terminationMessagePath,
      );
    // Left out of secret-agent.io/containers, a container gets no wrapper, so its paths are its own.
    const two = {
      securityContext: { runAsUser: 1000 },
      containers: [
        { name: 'app', image: 'registry.example/app:1', command: COMMAND },
        {
          name: 'disk',
          image: 'registry.example/disk:1',
          terminationMessagePath: '/.secret-agent/log',
          volumeDevices: [{ name: 'raw', devicePath: '/.secret-agent/dev' }],
        },
      ],
      ...raw,
    };
    inject({ ...ENV, 'secret-agent.io/containers': 'app' }, two);
  });

  it(`more than ${MAX_ENV_VARS} variables`, () => {
    const many = Object.fromEntries(
      Array.from({ length: MAX_ENV_VARS + 1 }, (_, i) => [`secret-agent.io/env-V${i}`, `aws:prod/v${i}`]),
    );
    assert.match(refusal(many), new RegExp(`names ${MAX_ENV_VARS + 1} variables, more than ${MAX_ENV_VARS}`));
  });

  it('a command that is not a list of strings', () => {
    assert.match(
      refusal(ENV, spec({ command: ['/app/server', 7] })),
      /spec\.containers\[0\]\.command: of container "app" is not a list of strings/,
    );
  });
});
