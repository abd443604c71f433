/**
 * The agent's V8 start-up snapshots (agent/snapshot.ts, built by images/build-snapshot.ts: the default
 * and the `--with-gcp` variant), built here with this Node from dist/agent-snapshot.cjs, against the
 * plain bundle: the same files from every
 * backend, the same errors, a sidecar that follows a rotation. test/image/agent.test.ts runs the
 * image's own snapshot (its entrypoint).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startGcpSecretManagerFake, type GcpSecretManagerFake } from '../fakes/gcp-secret-manager.ts';
import { FakeVault } from '../fakes/vault.ts';
import { canary } from '../support/canary.ts';
import { MOTO_ENV, motoSecrets, startMoto, type Moto, type MotoSecrets } from '../support/moto.ts';
import {
  AGENT_JS,
  eventually,
  memoryDir,
  ROOT,
  runAgent,
  startAgent,
  type AgentRun,
} from '../support/run-agent.ts';

const BUILD_SNAPSHOT = join(ROOT, 'images/build-snapshot.ts');
const SCRIPT = join(ROOT, 'dist/agent-snapshot.cjs');

describe('the start-up snapshot against the plain bundle', () => {
  let work: string;
  let blob: string;
  let gcpBlob: string;
  let moto: Moto;
  let secrets: MotoSecrets;
  let gcp: GcpSecretManagerFake;
  let vault: FakeVault;
  let env: Record<string, string>;
  const values = { aws: canary('aws'), gcp: canary('gcp'), vault: canary('vault'), file: canary('file') };

  before(async () => {
    work = mkdtempSync(join(tmpdir(), 'secret-agent-snapshot-'));
    blob = join(work, 'agent.blob');
    gcpBlob = join(work, 'agent-gcp.blob');
    for (const args of [[blob], [gcpBlob, '--with-gcp']]) {
      const build = spawnSync(process.execPath, [BUILD_SNAPSHOT, SCRIPT, ...args], { encoding: 'utf8' });
      assert.equal(build.status, 0, build.stderr);
    }
    moto = await startMoto();
    secrets = motoSecrets(moto.endpoint);
    await secrets.put('snap/db', JSON.stringify({ password: values.aws }));
    gcp = await startGcpSecretManagerFake();
    gcp.addVersion('snap-project', 'api-key', values.gcp);
    vault = await FakeVault.start();
    vault.mountKv('secret', 2);
    vault.putKv('secret/snap', { token: values.vault });
    vault.policy('snap', { 'secret/data/snap': ['read'] });
    writeFileSync(join(work, 'local'), values.file);
    env = {
      ...MOTO_ENV,
      HOME: work,
      AWS_ENDPOINT_URL_SECRETS_MANAGER: moto.endpoint,
      // Init reads GCP over REST by default (GCP_TRANSPORT); the sidecar test below over gRPC.
      GCP_SECRET_MANAGER_ENDPOINT: gcp.restEndpoint,
      GCE_METADATA_HOST: '127.0.0.1:9',
      GCE_METADATA_IP: '127.0.0.1:9',
      GOOGLE_APPLICATION_CREDENTIALS: '/nonexistent/adc.json',
      VAULT_ADDR: vault.addr,
      VAULT_TOKEN: vault.createToken({ policies: ['snap'], ttlSec: 3600 }),
      SECRET_0_REF: 'aws:snap/db#password',
      SECRET_0_FILENAME: 'aws',
      SECRET_1_REF: 'projects/snap-project/secrets/api-key',
      SECRET_1_FILENAME: 'gcp',
      SECRET_2_REF: 'vault:secret/data/snap#token',
      SECRET_2_FILENAME: 'vault',
      SECRET_3_REF: `file:${join(work, 'local')}`,
      SECRET_3_FILENAME: 'file',
    };
  });
  after(async () => {
    secrets?.destroy();
    await moto?.stop();
    await gcp?.stop();
    await vault?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  const fromSnapshot = () => ['--snapshot-blob', blob, '--'];
  const both = async (
    runEnv: Record<string, string>,
    args: string[] = [],
  ): Promise<{ plain: AgentRun; snapshot: AgentRun }> => ({
    plain: await runAgent(runEnv, { argv: [AGENT_JS, ...args] }),
    snapshot: await runAgent(runEnv, { argv: [...fromSnapshot(), ...args] }),
  });

  for (const variant of ['default', 'with-gcp'] as const)
    it(`init from the ${variant} snapshot: writes the same files from AWS, GCP, Vault and a file, and logs the same lines`, async () => {
      using plainDir = memoryDir();
      using snapshotDir = memoryDir();
      const argv = ['--snapshot-blob', variant === 'default' ? blob : gcpBlob, '--'];
      const plain = await runAgent({ ...env, SECRETS_DIR: plainDir.path }, { argv: [AGENT_JS] });
      const snapshot = await runAgent({ ...env, SECRETS_DIR: snapshotDir.path }, { argv });
      assert.equal(snapshot.code, 0, snapshot.stderr);
      assert.equal(plain.code, 0, plain.stderr);
      for (const [file, value] of Object.entries(values)) {
        assert.equal(readFileSync(join(snapshotDir.path, file), 'utf8'), value, file);
        assert.equal(readFileSync(join(plainDir.path, file), 'utf8'), value, file);
      }
      const shape = (run: AgentRun) =>
        run.logs.map((l) => `${String(l.level)} ${String(l.msg)} ${String(l.ref ?? '')}`);
      assert.deepEqual(shape(snapshot).sort(), shape(plain).sort());
      const visible = (path: string) =>
        readdirSync(path)
          .filter((f) => !f.startsWith('..data_'))
          .sort();
      assert.deepEqual(visible(snapshotDir.path), visible(plainDir.path));
    });

  it('a second build writes the same blob, byte for byte, on another host name, at another time, as another pid (the image’s digest depends on it)', () => {
    const first = readFileSync(gcpBlob);
    // unshare -u: a UTS namespace of its own, so the build sees another host name (a container's id, in an image build).
    const again = spawnSync(
      'unshare',
      [
        '-u',
        'sh',
        '-c',
        'hostname snapshot-rebuild && exec "$@"',
        'sh',
        process.execPath,
        BUILD_SNAPSHOT,
        SCRIPT,
        gcpBlob,
        '--with-gcp',
      ],
      { encoding: 'utf8' },
    );
    assert.equal(again.status, 0, again.stderr);
    assert.ok(readFileSync(gcpBlob).equals(first), 'the blob built again differs');
  });

  it('each blob is the variant it was built as, and --with-gcp is the one that holds more', () => {
    const check = (b: string) =>
      spawnSync(process.execPath, ['--snapshot-blob', b, '--', '--check-snapshot'], {
        encoding: 'utf8',
        env: {},
      });
    assert.equal(check(blob).stdout.trim().split(' ')[2], 'default');
    assert.equal(check(gcpBlob).stdout.trim().split(' ')[2], 'with-gcp');
    // GCP's REST client and its protobuf definitions, evaluated: the one thing the variant adds.
    assert.ok(
      statSync(gcpBlob).size > statSync(blob).size + 500_000,
      'the GCP blob holds GCP’s evaluated code',
    );
  });

  it('the environment is the pod’s, read at start, not the build’s: a bad setting fails the same way', async () => {
    using dir = memoryDir();
    const { plain, snapshot } = await both({ ...env, SECRETS_DIR: dir.path, REFRESH_INTERVAL: 'soon' });
    assert.equal(snapshot.code, 2);
    assert.equal(snapshot.stderr, plain.stderr);
    assert.match(snapshot.stderr, /REFRESH_INTERVAL/);
  });

  it('takes the same arguments: --version and --help print the same, an unknown one exits 2', () => {
    const run = (argv: string[]) => spawnSync(process.execPath, argv, { encoding: 'utf8', env: {} });
    for (const args of [['--version'], ['--help'], ['--verbose']]) {
      const plain = run([AGENT_JS, ...args]);
      const snapshot = run([...fromSnapshot(), ...args]);
      assert.equal(snapshot.status, args[0] === '--verbose' ? 2 : 0, snapshot.stderr);
      assert.equal(snapshot.status, plain.status);
      assert.equal(snapshot.stderr, plain.stderr);
      if (args[0] !== '--verbose') assert.equal(snapshot.stdout, plain.stdout);
    }
  });

  it('sidecar: starts, then follows a rotation in AWS and stops cleanly on SIGTERM', async () => {
    using dir = memoryDir();
    const rotated = canary('aws-rotated');
    const agent = startAgent(
      {
        ...env,
        GCP_SECRET_MANAGER_ENDPOINT: gcp.endpoint,
        SECRETS_DIR: dir.path,
        AGENT_MODE: 'sidecar',
        REFRESH_INTERVAL: '1s',
        AGENT_HTTP_ADDR: '127.0.0.1:0',
      },
      { argv: fromSnapshot() },
    );
    try {
      await agent.waitForLog((l) => l.msg === 'secrets written');
      await secrets.put('snap/db', JSON.stringify({ password: rotated }));
      await eventually(
        () => (readFileSync(join(dir.path, 'aws'), 'utf8') === rotated ? true : undefined),
        'the rotated value in the volume',
      );
    } finally {
      const stopped = await agent.stop();
      await secrets.put('snap/db', JSON.stringify({ password: values.aws }));
      assert.equal(stopped.code, 0, agent.output().stderr);
    }
  });
});

/**
 * Builds a snapshot with images/build-snapshot.ts from a stand-in builder that answers as the agent
 * would, with `beforeMain` run while building; asserts it is refused (exit 1, nothing left but the
 * builder) and returns its stderr.
 */
function refusedBuild(
  beforeMain: string,
  options: string[] = [],
  printed = 'process.pid + " " + process.arch + " " + Date.now()',
): string {
  const work = mkdtempSync(join(tmpdir(), 'secret-agent-snapshot-refused-'));
  try {
    const script = join(work, 'builder.cjs');
    writeFileSync(
      script,
      `const v8 = require('node:v8'); const crypto = require('node:crypto');
       ${beforeMain}
       v8.startupSnapshot.setDeserializeMainFunction(() => {
         const arg = process.argv[1];
         if (arg === '--version') console.log('secret-agent 0.0.0');
         else console.log(crypto.randomUUID() + ' ' + crypto.randomInt(2 ** 47) + ' default ' + Math.random() + ' ' + ${printed});
       });`,
    );
    const run = spawnSync(process.execPath, [BUILD_SNAPSHOT, script, join(work, 'agent.blob'), ...options], {
      encoding: 'utf8',
    });
    assert.equal(run.status, 1, run.stderr);
    assert.deepEqual(readdirSync(work), ['builder.cjs'], 'no blob is left');
    return run.stderr;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

describe('images/build-snapshot.ts refuses a snapshot', () => {
  it('that froze a random pool: two runs draw the same', () => {
    // The builder fills randomUUID's pool while building.
    assert.match(refusedBuild('crypto.randomUUID();'), /drew the same from crypto\.randomUUID/);
  });

  it('that is not the variant asked for: --with-gcp built a default snapshot', () => {
    // The builder ignores --with-gcp: fresh randomness, but always the default variant.
    assert.match(refusedBuild('', ['--with-gcp']), /the snapshot is the variant "default", not "with-gcp"/);
  });

  it('that kept the build’s clock or pid (agent/snapshot-reproducible.ts fixes both while building)', () => {
    const keptClock = refusedBuild(
      'const built = Date.now();',
      [],
      'process.pid + " " + process.arch + " " + built',
    );
    assert.match(keptClock, /read the clock as \d+: the build's stopped clock stayed/);
    const keptPid = refusedBuild(
      'const pid = process.pid;',
      [],
      'pid + " " + process.arch + " " + Date.now()',
    );
    assert.match(keptPid, /says its pid is \d+, not \d+: the build's stayed/);
  });
});
