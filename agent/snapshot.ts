/**
 * The entry point of the V8 start-up snapshot the agent image runs (`node --snapshot-blob`): built
 * once in the image with the image's own Node (images/build-snapshot.ts), it holds the agent's code
 * already evaluated and the AWS SDK's request path already compiled, so a pod skips most of what a
 * cold start costs. dist/agent.js, the plain bundle, stays the fallback (`node /app/agent.js`).
 *
 * What runs here runs once, at build time, and its state is frozen into every pod. So nothing here may
 * read the pod's environment, the clock or the network, and nothing may draw from a random pool
 * (crypto.randomUUID and randomInt cache random bytes: a snapshot would replay them in every pod). Node refreshes process.env and argv on start.
 */
// First: it fixes what the heap would keep of the build (clocks, host name, pid) before any module reads it.
import { releaseBuildState } from './snapshot-reproducible.ts';
import './require-node-version.ts';
import crypto from 'node:crypto';
import { startupSnapshot } from 'node:v8';
import { runAgent } from './run-agent.ts';

/**
 * The two snapshots the image holds, built from this one script: the default (`/app/agent.blob`, the
 * entrypoint) and, with `--with-gcp` at build time, one that also holds GCP's REST client
 * (`/app/agent-gcp.blob`), which the webhook runs in init containers of pods with a GCP reference.
 * Every run deserialises its whole snapshot, so GCP's code (+1.6 MB) in the default one would make
 * every AWS and Vault pod pay 7-19 ms of CPU for a saving (~100 ms) only GCP pods see.
 */
const WITH_GCP_FLAG = '--with-gcp';

/**
 * What the snapshot evaluates ahead: the code of an init container's run with each backend, GCP's
 * over REST (init's transport) only `--with-gcp`. Not gRPC's side of the GCP client (its http2 session
 * state cannot be in a snapshot) nor undici (the notifiers, Kubernetes events and the sidecar that
 * load it; its http parser cannot either): their code is in the snapshot as source, evaluated when a
 * pod uses them, as in the plain bundle.
 */
async function evaluateModules(withGcp: boolean): Promise<void> {
  await Promise.all([
    import('./providers/aws/aws-provider.ts'),
    import('./providers/file/file-provider.ts'),
    import('./providers/vault/vault-provider.ts'),
    import('./contract/config-file.ts'),
    ...(withGcp
      ? [
          import('./providers/gcp/gcp-provider.ts'),
          // What agent/providers/gcp/gcp-provider.ts loads for REST (images/build.ts makes its http Agents lazy).
          import('google-gax/fallback'),
        ]
      : []),
  ]);
}

/**
 * Runs GetSecretValue and BatchGetSecretValue through the SDK against canned answers, so the SDK's
 * middleware, signing and (de)serialisation are compiled into the snapshot. Credentials and config
 * come from env set here only, naming a file that does not exist: the SDK caches what it reads by
 * path, and no path used here can be one a pod uses. One path for both files: the SDK reads the two
 * at once, and two reads would finish in either order, leaving their results in the heap in that
 * order, so that two builds could write different blobs; one path is read once.
 */
async function warmAwsSdk(): Promise<void> {
  const warmEnv: Record<string, string> = {
    AWS_ACCESS_KEY_ID: 'snapshot-warm-up',
    AWS_SECRET_ACCESS_KEY: 'snapshot-warm-up',
    AWS_CONFIG_FILE: '/nonexistent/secret-agent-snapshot/aws-files',
    AWS_SHARED_CREDENTIALS_FILE: '/nonexistent/secret-agent-snapshot/aws-files',
    AWS_EC2_METADATA_DISABLED: 'true',
  };
  const saved = new Map(Object.keys(warmEnv).map((k) => [k, process.env[k]]));
  Object.assign(process.env, warmEnv);
  try {
    const { SecretsManagerClient, GetSecretValueCommand, BatchGetSecretValueCommand } =
      await import('@aws-sdk/client-secrets-manager');
    const arn = 'arn:aws:secretsmanager:us-east-1:123456789012:secret:warm-up-AbCdEf';
    const answers: Record<string, unknown> = {
      'secretsmanager.GetSecretValue': {
        ARN: arn,
        Name: 'warm-up',
        SecretString: '{}',
        VersionId: 'v'.repeat(32),
      },
      'secretsmanager.BatchGetSecretValue': {
        SecretValues: [{ ARN: arn, Name: 'warm-up', SecretBinary: 'AAAA', VersionId: 'v'.repeat(32) }],
        Errors: [],
      },
    };
    const client = new SecretsManagerClient({
      region: 'us-east-1',
      endpoint: 'https://secret-agent-snapshot.invalid',
      maxAttempts: 1,
      requestHandler: {
        handle: async (request: { headers: Record<string, string> }) => ({
          response: {
            statusCode: 200,
            headers: { 'content-type': 'application/x-amz-json-1.1' },
            body: new TextEncoder().encode(JSON.stringify(answers[request.headers['x-amz-target'] ?? ''])),
          },
        }),
      },
    });
    for (let i = 0; i < 3; i++) {
      await client.send(new GetSecretValueCommand({ SecretId: 'warm-up' }));
      await client.send(new BatchGetSecretValueCommand({ SecretIdList: ['warm-up'] }));
    }
    client.destroy();
  } finally {
    for (const [k, v] of saved) {
      if (v === undefined) Reflect.deleteProperty(process.env, k);
      else process.env[k] = v;
    }
  }
}

/**
 * Makes a GCP REST client the way agent/providers/gcp/gcp-provider.ts does, so google-gax's cache of the service's
 * protobuf definitions, built from their JSON for the first client of a process (the larger part of
 * a GCP run's start), is in the snapshot: every client a pod makes takes its definitions from there.
 * No request: gax's REST stub sends through the global Headers, which loads undici (see above). The
 * auth client is a stand-in that is never asked for anything; nothing is read from the environment.
 */
async function warmGcpRest(): Promise<void> {
  const { SecretManagerServiceClient } = await import('@google-cloud/secret-manager');
  const gax = (await import('google-gax/fallback')).default;
  const unused = (): never => {
    throw new Error('the snapshot warm-up sends no GCP request');
  };
  const client = new SecretManagerServiceClient(
    {
      libName: 'secret-agent',
      enableTelemetryLogging: false,
      apiEndpoint: 'secret-agent-snapshot.invalid',
      port: 443,
      universeDomain: 'googleapis.com',
      fallback: true,
      authClient: { universeDomain: 'googleapis.com', getRequestHeaders: unused, fetch: unused } as never,
    },
    gax,
  );
  await client.initialize();
  await client.close();
}

/**
 * The SDK draws an invocation id per request from crypto.randomUUID, whose pool a snapshot would
 * freeze (see the top of this file): while building, the global one hands out fixed ids instead.
 */
function substituteRandomUUID(): () => void {
  const web = globalThis.crypto as { randomUUID: () => string };
  const original = Object.getOwnPropertyDescriptor(web, 'randomUUID');
  web.randomUUID = () => '00000000-0000-4000-8000-000000000000';
  return () => {
    if (original) Object.defineProperty(web, 'randomUUID', original);
    else delete (web as Partial<typeof web>).randomUUID;
  };
}

/** Which snapshot this is, fixed while building it: `default` or `with-gcp`. */
let variant = 'default';

/**
 * `--check-snapshot`: prints, space-separated, draws from crypto's pooled randomness (randomUUID,
 * randomInt), the variant, a draw from Math.random, the pid, the architecture and the wall clock.
 * images/build-snapshot.ts runs the new snapshot twice and refuses it if the two runs draw the same
 * (a pool or V8's random state was frozen into it), if it is not the variant it asked for, or if the
 * pid or the clock is the build's (agent/snapshot-reproducible.ts fixed them while building).
 */
function printSnapshotCheck(): void {
  const draws = [crypto.randomUUID(), crypto.randomInt(2 ** 47), variant, Math.random()];
  process.stdout.write(`${[...draws, process.pid, process.arch, Date.now()].join(' ')}\n`);
}

if (startupSnapshot.isBuildingSnapshot()) {
  const restoreRandomUUID = substituteRandomUUID();
  const restore = () => {
    restoreRandomUUID();
    releaseBuildState();
  };
  // Started from a snapshot, process.argv has no script: the arguments follow the Node binary.
  startupSnapshot.setDeserializeMainFunction(() => {
    const args = process.argv.slice(1);
    if (args[0] === '--check-snapshot') printSnapshotCheck();
    else runAgent(args);
  });
  // Building, argv is [node, script, ...the build's arguments] (images/build-snapshot.ts passes them).
  const withGcp = process.argv.slice(2).includes(WITH_GCP_FLAG);
  if (withGcp) variant = 'with-gcp';
  evaluateModules(withGcp)
    .then(warmAwsSdk)
    .then(() => (withGcp ? warmGcpRest() : undefined))
    .then(restore, (e: unknown) => {
      // A snapshot that failed to warm up must not be written: the image build stops here.
      process.stderr.write(
        `secret-agent: building the start-up snapshot failed: ${String((e as Error)?.stack ?? e)}\n`,
      );
      process.exit(1);
    });
} else {
  // Run as a plain script (`node agent-snapshot.cjs`): the same agent, without the snapshot.
  runAgent(process.argv.slice(2));
}
