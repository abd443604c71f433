import fc from 'fast-check';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { AGENT_OWN_PATHS } from '../../webhook/parse/agent-container-policy.ts';
import { IRSA, POD_IDENTITY } from '../../webhook/eks-identity.ts';
import { assertNoCanary, canary } from '../support/canary.ts';
import { memoryDir, runAgent } from '../support/run-agent.ts';
import {
  admitThroughWebhook,
  AGENT_IMAGE,
  basicPod,
  containerEnv,
  injectedPod,
  type PodDoc,
} from './fixtures.ts';

/**
 * Issue 26 item 2: the agent inherits the AWS identity EKS gave the app, and only that. The app's env
 * is the pod author's: a URI, a token file or a volume of its choosing must never reach the agent.
 */

const CLUSTER = { AGENT_AWS_REGION: 'eu-west-1' };
const IRSA_FILE = `${IRSA.dir}/${IRSA.tokenPath}`;
const POD_IDENTITY_FILE = `${POD_IDENTITY.dir}/${POD_IDENTITY.tokenPath}`;
const ROLE = 'arn:aws:iam::123456789012:role/web';
const IDENTITY_VARS = [
  'AWS_ROLE_ARN',
  'AWS_WEB_IDENTITY_TOKEN_FILE',
  'AWS_CONTAINER_CREDENTIALS_FULL_URI',
  'AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE',
];

type Env = { name: string; value: string }[];

/** The values EKS writes: the only ones an agent's identity variables may hold (besides the role). */
const EKS_VALUES = new Set<string>([ROLE, IRSA_FILE, POD_IDENTITY_FILE, ...POD_IDENTITY.uris]);
type Volume = Record<string, unknown>;

const tokenVolume = (name: string, path: string, audience = 'sts.amazonaws.com'): Volume => ({
  name,
  projected: { sources: [{ serviceAccountToken: { audience, expirationSeconds: 86400, path } }] },
});

/** A pod whose app container carries `env` and `mounts`, with `volumes`. */
function appPod(
  env: Env,
  volumes: Volume[],
  mounts: { name: string; mountPath: string }[] = [],
  annotations: Record<string, string> = {},
): PodDoc {
  return basicPod(
    { 'secret-agent.io/secret-db': 'aws:prod/db', ...annotations },
    // The app's uid is named: the only warnings are about the identity.
    {
      securityContext: { runAsUser: 1000 },
      containers: [{ name: 'app', image: 'app:1', env, volumeMounts: mounts }],
      volumes,
    },
  );
}

/** What EKS writes for IRSA, then for Pod Identity (the shapes the real pod-identity-webhook produces). */
const EKS_IRSA = {
  env: [
    { name: 'AWS_STS_REGIONAL_ENDPOINTS', value: 'regional' },
    { name: 'AWS_DEFAULT_REGION', value: 'eu-central-1' },
    { name: 'AWS_REGION', value: 'eu-central-1' },
    { name: 'AWS_ROLE_ARN', value: ROLE },
    { name: 'AWS_WEB_IDENTITY_TOKEN_FILE', value: IRSA_FILE },
  ],
  volumes: [tokenVolume(IRSA.volume, IRSA.tokenPath)],
  mounts: [{ name: IRSA.volume, mountPath: IRSA.dir }],
};
const eksPodIdentity = (uri: string) => ({
  env: [
    { name: 'AWS_CONTAINER_CREDENTIALS_FULL_URI', value: uri },
    { name: 'AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE', value: POD_IDENTITY_FILE },
  ],
  volumes: [tokenVolume(POD_IDENTITY.volume, POD_IDENTITY.tokenPath, 'pods.eks.amazonaws.com')],
  mounts: [{ name: POD_IDENTITY.volume, mountPath: `${POD_IDENTITY.dir}/` }],
});

interface Admitted {
  readonly pod: PodDoc;
  readonly warnings: readonly string[];
  readonly agents: readonly {
    readonly name: string;
    readonly env: Record<string, string | undefined>;
    readonly mounts: readonly { name: string; mountPath: string; readOnly?: boolean }[];
  }[];
}

/** Through the real admission code: the patched pod (schema-checked), its warnings and agent containers. */
function admit(pod: PodDoc, env: Record<string, string> = CLUSTER): Admitted {
  const result = admitThroughWebhook(pod, env);
  const patched = injectedPod(pod, result);
  const agents = [...(patched.spec.initContainers ?? []), ...patched.spec.containers]
    .filter((c) => c.image === AGENT_IMAGE)
    .map((c) => ({
      name: c.name as string,
      env: containerEnv(c, patched),
      mounts: (c.volumeMounts ?? []) as { name: string; mountPath: string; readOnly?: boolean }[],
    }));
  assert.ok(agents.length > 0);
  return { pod: patched, warnings: result.review.response.warnings ?? [], agents };
}

const overlaps = (a: string, b: string) =>
  a === b || a.startsWith(`${b}/`) || b.startsWith(`${a}/`) || a === '/' || b === '/';

describe('the agent inherits the identity EKS writes, exactly', () => {
  it('IRSA: the role, EKS’s token file, and EKS’s volume at EKS’s path, read-only', () => {
    const { agents, warnings } = admit(appPod(EKS_IRSA.env, EKS_IRSA.volumes, EKS_IRSA.mounts));
    assert.deepEqual(warnings, []);
    for (const agent of agents) {
      assert.equal(agent.env.AWS_ROLE_ARN, ROLE);
      assert.equal(agent.env.AWS_WEB_IDENTITY_TOKEN_FILE, IRSA_FILE);
      assert.equal(agent.env.AWS_STS_REGIONAL_ENDPOINTS, 'regional');
      assert.equal(agent.env.AWS_DEFAULT_REGION, 'eu-central-1');
      assert.deepEqual(
        agent.mounts.filter((m) => m.name === IRSA.volume),
        [{ name: IRSA.volume, mountPath: IRSA.dir, readOnly: true }],
      );
    }
  });

  for (const uri of POD_IDENTITY.uris)
    it(`EKS Pod Identity at ${uri}: the URI, EKS’s token file and its volume`, () => {
      const eks = eksPodIdentity(uri);
      const { agents, warnings } = admit(appPod(eks.env, eks.volumes, eks.mounts));
      assert.deepEqual(warnings, []);
      const [agent] = agents;
      assert.equal(agent!.env.AWS_CONTAINER_CREDENTIALS_FULL_URI, uri);
      assert.equal(agent!.env.AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE, POD_IDENTITY_FILE);
      assert.deepEqual(
        agent!.mounts.filter((m) => m.name === POD_IDENTITY.volume),
        [{ name: POD_IDENTITY.volume, mountPath: POD_IDENTITY.dir, readOnly: true }],
      );
    });
});

/**
 * Hostile shapes: each is admitted (the app's env is the app's business), the agent gets none of it,
 * and a warning names the variable, never its value.
 */
const HOSTILE: readonly {
  readonly name: string;
  readonly env: Env;
  readonly volumes?: Volume[];
  readonly mounts?: { name: string; mountPath: string }[];
  /** The variable the warning names. */
  readonly names: string;
}[] = [
  {
    name: 'the issue’s exfiltration: an app listener as the credentials URI, any file as the token',
    env: [
      { name: 'AWS_CONTAINER_CREDENTIALS_FULL_URI', value: 'http://127.0.0.1:9999/creds' },
      { name: 'AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE', value: '/any/file' },
    ],
    names: 'AWS_CONTAINER_CREDENTIALS_FULL_URI',
  },
  {
    name: 'EKS’s URI with a token file of the app’s choosing',
    env: [
      { name: 'AWS_CONTAINER_CREDENTIALS_FULL_URI', value: POD_IDENTITY.uris[0] },
      {
        name: 'AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE',
        value: '/var/run/secrets/secret-agent/vault-client/tls.key',
      },
    ],
    volumes: [tokenVolume(POD_IDENTITY.volume, POD_IDENTITY.tokenPath)],
    names: 'AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE',
  },
  {
    name: 'a look-alike of EKS’s URI (another host, port or path)',
    env: [
      {
        name: 'AWS_CONTAINER_CREDENTIALS_FULL_URI',
        value: 'http://169.254.170.23.example.com/v1/credentials',
      },
      { name: 'AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE', value: POD_IDENTITY_FILE },
    ],
    volumes: [tokenVolume(POD_IDENTITY.volume, POD_IDENTITY.tokenPath)],
    names: 'AWS_CONTAINER_CREDENTIALS_FULL_URI',
  },
  {
    name: 'EKS’s Pod Identity env, with an app volume of EKS’s name that is no token',
    env: eksPodIdentity(POD_IDENTITY.uris[0]).env,
    volumes: [{ name: POD_IDENTITY.volume, emptyDir: {} }],
    mounts: [{ name: POD_IDENTITY.volume, mountPath: POD_IDENTITY.dir }],
    names: 'AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE',
  },
  {
    name: 'the issue’s overmount: a token file under /app, in a volume the app mounts at /app',
    env: [
      { name: 'AWS_ROLE_ARN', value: ROLE },
      { name: 'AWS_WEB_IDENTITY_TOKEN_FILE', value: '/app/agent.js' },
    ],
    volumes: [{ name: 'code', emptyDir: {} }],
    mounts: [{ name: 'code', mountPath: '/app' }],
    names: 'AWS_WEB_IDENTITY_TOKEN_FILE',
  },
  {
    name: 'EKS’s IRSA env, with the token in a volume of another name at EKS’s path',
    env: EKS_IRSA.env.filter((e) => !e.name.includes('REGION')),
    volumes: [tokenVolume('mine', IRSA.tokenPath)],
    mounts: [{ name: 'mine', mountPath: IRSA.dir }],
    names: 'AWS_WEB_IDENTITY_TOKEN_FILE',
  },
  {
    name: 'EKS’s IRSA env, with a token volume that projects more than the token',
    env: EKS_IRSA.env.filter((e) => !e.name.includes('REGION')),
    volumes: [
      {
        name: IRSA.volume,
        projected: {
          sources: [
            { serviceAccountToken: { path: IRSA.tokenPath } },
            { secret: { name: 'other-app-secret' } },
          ],
        },
      },
    ],
    names: 'AWS_WEB_IDENTITY_TOKEN_FILE',
  },
  {
    name: 'a role that is no role ARN',
    env: [
      { name: 'AWS_ROLE_ARN', value: 'arn:aws:iam::123456789012:user/admin' },
      { name: 'AWS_WEB_IDENTITY_TOKEN_FILE', value: IRSA_FILE },
    ],
    volumes: EKS_IRSA.volumes,
    names: 'AWS_ROLE_ARN',
  },
  {
    name: 'a region that is no region',
    env: [
      { name: 'AWS_ROLE_ARN', value: ROLE },
      { name: 'AWS_WEB_IDENTITY_TOKEN_FILE', value: IRSA_FILE },
      { name: 'AWS_REGION', value: 'eu-west-1.evil.example' },
    ],
    volumes: EKS_IRSA.volumes,
    names: 'AWS_REGION',
  },
  {
    name: 'an STS endpoint setting EKS never writes',
    env: [
      { name: 'AWS_ROLE_ARN', value: ROLE },
      { name: 'AWS_WEB_IDENTITY_TOKEN_FILE', value: IRSA_FILE },
      { name: 'AWS_STS_REGIONAL_ENDPOINTS', value: 'https://sts.evil.example' },
    ],
    volumes: EKS_IRSA.volumes,
    names: 'AWS_STS_REGIONAL_ENDPOINTS',
  },
];

describe('a hostile identity in the app’s env never reaches the agent', () => {
  for (const hostile of HOSTILE)
    it(hostile.name, () => {
      // No AGENT_AWS_REGION: a region the app set must be a region to be inherited.
      const { agents, warnings } = admit(
        appPod(hostile.env, hostile.volumes ?? [], hostile.mounts ?? [], {
          'secret-agent.io/aws-region': 'eu-west-1',
        }),
        {},
      );
      const named = warnings.filter((w) => w.includes(` sets ${hostile.names}, but `));
      assert.equal(named.length, 1, `one warning names ${hostile.names}: ${JSON.stringify(warnings)}`);
      for (const e of hostile.env)
        if (!EKS_VALUES.has(e.value))
          for (const w of warnings)
            assert.ok(!w.includes(e.value), `a warning quotes ${e.name}'s value: ${w}`);
      for (const agent of agents) {
        const appValue = hostile.env.find((e) => e.name === hostile.names)!.value;
        assert.notEqual(
          agent.env[hostile.names],
          appValue,
          `${agent.name} got ${hostile.names} as the app set it`,
        );
        for (const name of IDENTITY_VARS) {
          const value = agent.env[name];
          assert.ok(value === undefined || EKS_VALUES.has(value), `${agent.name}: ${name}`);
        }
        for (const m of agent.mounts)
          assert.ok(
            m.name === 'secret-agent-secrets' ||
              (m.name === IRSA.volume && m.mountPath === IRSA.dir) ||
              (m.name === POD_IDENTITY.volume && m.mountPath === POD_IDENTITY.dir),
            `${agent.name} mounts ${m.name} at ${m.mountPath}`,
          );
        assert.equal(agent.env.AWS_REGION, 'eu-west-1', 'the region the pod asked for');
      }
    });

  it('any env, volumes and mounts: the agent’s credential lookup goes only where EKS puts it', () => {
    const uri = fc.constantFrom(
      ...POD_IDENTITY.uris,
      'http://127.0.0.1:9999/creds',
      'http://169.254.170.23:8080/v1/credentials',
      'https://attacker.example/creds',
      'http://[::1]/v1/credentials',
    );
    const file = fc.constantFrom(
      IRSA_FILE,
      POD_IDENTITY_FILE,
      '/app/agent.js',
      '/nodejs/bin/node',
      '/any/file',
      `${IRSA.dir}/../../kubernetes.io/serviceaccount/token`,
      '/var/run/secrets/secret-agent/vault-client/tls.key',
    );
    const volume = fc.oneof(
      fc.constantFrom(IRSA.volume, POD_IDENTITY.volume, 'code').chain((name) =>
        fc.oneof(
          fc.constant<Volume>({ name, emptyDir: {} }),
          fc.constant<Volume>({ name, hostPath: { path: '/' } }),
          fc.constantFrom(IRSA.tokenPath, POD_IDENTITY.tokenPath).map((path) => tokenVolume(name, path)),
        ),
      ),
    );
    const mountPath = fc.constantFrom(IRSA.dir, POD_IDENTITY.dir, '/app', '/nodejs', '/secret-agent', '/any');
    const envArb = fc
      .record(
        {
          AWS_ROLE_ARN: fc.constantFrom(ROLE, 'not-an-arn'),
          AWS_WEB_IDENTITY_TOKEN_FILE: file,
          AWS_CONTAINER_CREDENTIALS_FULL_URI: uri,
          AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE: file,
          AWS_REGION: fc.constantFrom('eu-west-1', 'http://evil'),
        },
        { requiredKeys: [] },
      )
      .map((r) => Object.entries(r).map(([name, value]) => ({ name, value })));
    fc.assert(
      fc.property(
        envArb,
        fc.uniqueArray(volume, { selector: (v) => v.name, maxLength: 3 }),
        fc.array(fc.record({ name: fc.constantFrom(IRSA.volume, POD_IDENTITY.volume, 'code'), mountPath }), {
          maxLength: 2,
        }),
        (env, volumes, mounts) => {
          const declared = mounts.filter(
            (m, i) => mounts.findIndex((o) => o.mountPath === m.mountPath) === i,
          );
          const { agents } = admit(
            appPod(
              env,
              volumes,
              declared.filter((m) => volumes.some((v) => v.name === m.name)),
              { 'secret-agent.io/aws-region': 'eu-west-1' },
            ),
            {},
          );
          const tokenOf = (name: string) =>
            (
              volumes.find((v) => v.name === name)?.projected as
                { sources: { serviceAccountToken?: { path: string } }[] } | undefined
            )?.sources[0]?.serviceAccountToken?.path;
          for (const agent of agents) {
            const uriSet = agent.env.AWS_CONTAINER_CREDENTIALS_FULL_URI;
            if (uriSet !== undefined)
              assert.ok((POD_IDENTITY.uris as readonly string[]).includes(uriSet), uriSet);
            const podToken = agent.env.AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE;
            if (podToken !== undefined) assert.equal(podToken, POD_IDENTITY_FILE);
            assert.equal(podToken !== undefined, uriSet !== undefined);
            const webToken = agent.env.AWS_WEB_IDENTITY_TOKEN_FILE;
            if (webToken !== undefined) assert.equal(webToken, IRSA_FILE);
            for (const m of agent.mounts) {
              if (m.name === 'secret-agent-secrets') continue;
              const kind =
                m.name === IRSA.volume ? IRSA : m.name === POD_IDENTITY.volume ? POD_IDENTITY : undefined;
              assert.ok(kind, `${agent.name} mounts the app's volume ${m.name}`);
              assert.deepEqual(m, { name: kind.volume, mountPath: kind.dir, readOnly: true });
              assert.equal(tokenOf(m.name), kind.tokenPath, 'a projected service-account token');
              for (const own of AGENT_OWN_PATHS)
                if (own.path !== kind.dir)
                  assert.ok(!overlaps(m.mountPath, own.path), `${m.mountPath} over ${own.path}`);
            }
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});

/**
 * The exfiltration of the issue, end to end: the built agent, run with the env the webhook rendered
 * for the hostile pod, against a listener standing in for the app's. The control run (the app's env as
 * it was, which the webhook used to copy) proves the listener would have caught it.
 */
describe('the rendered agent env cannot point the SDK at an app-controlled URI or file', () => {
  let listener: ReturnType<typeof createServer>;
  let port = 0;
  const seen: { url: string; authorization: string }[] = [];
  const dir = mkdtempSync(join(tmpdir(), 'secret-agent-identity-'));
  const tokenFile = join(dir, 'agent-only-file');
  const secretLine = canary('agent-only');

  before(async () => {
    writeFileSync(tokenFile, secretLine);
    listener = createServer((req: IncomingMessage, res) => {
      seen.push({ url: req.url ?? '', authorization: String(req.headers.authorization ?? '') });
      res.writeHead(500).end();
    });
    await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
    port = (listener.address() as AddressInfo).port;
  });
  after(async () => {
    await new Promise<void>((resolve) => listener.close(() => resolve()));
    rmSync(dir, { recursive: true, force: true });
  });

  /** The hostile app env: the listener as the credentials URI, a file only the agent has as the token. */
  const hostileEnv = (): Env => [
    { name: 'AWS_CONTAINER_CREDENTIALS_FULL_URI', value: `http://127.0.0.1:${port}/creds` },
    { name: 'AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE', value: tokenFile },
  ];

  /** Runs the agent (init mode) with `env`, plus what this machine needs in place of the pod's volume. */
  async function run(env: Record<string, string | undefined>): Promise<void> {
    using secrets = memoryDir();
    const values = Object.fromEntries(
      Object.entries(env).filter((e): e is [string, string] => e[1] !== undefined),
    );
    const result = await runAgent({
      ...values,
      SECRETS_DIR: secrets.path,
      HOME: secrets.path,
      INIT_DEADLINE: '2s',
      // The node's metadata server is not this machine's: without a pod identity the lookup ends here.
      AWS_EC2_METADATA_DISABLED: 'true',
    });
    assert.notEqual(result.code, 0, 'no credentials, nothing fetched');
    assertNoCanary(result.stdout + result.stderr, 'the agent’s output');
  }

  it('control: the app’s env as the old webhook copied it sends the agent-only file to the listener', async () => {
    seen.length = 0;
    const { agents } = admit(appPod([], [], [], { 'secret-agent.io/mode': 'init' }));
    const copied = Object.fromEntries(hostileEnv().map((e) => [e.name, e.value]));
    await run({ ...agents[0]!.env, ...copied });
    assert.ok(
      seen.some((r) => r.url === '/creds' && r.authorization === secretLine),
      'the listener received the file: the check below can see a leak',
    );
  });

  it('the env the webhook renders for that pod: the listener hears nothing', async () => {
    seen.length = 0;
    const { agents, warnings } = admit(appPod(hostileEnv(), [], [], { 'secret-agent.io/mode': 'init' }));
    assert.equal(agents.length, 1);
    const env = agents[0]!.env;
    for (const name of IDENTITY_VARS) assert.equal(env[name], undefined, name);
    assert.ok(warnings.some((w) => w.includes('AWS_CONTAINER_CREDENTIALS_FULL_URI')));
    await run(env);
    assert.deepEqual(seen, [], 'no request reached the app’s listener');
  });
});
