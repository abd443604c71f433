/**
 * The GCP provider through the real @google-cloud/secret-manager client (over REST and over gRPC) talking to
 * a local Secret Manager fake, and the built agent (dist/agent.js) end to end against the same fake.
 */
import { spawnSync } from 'node:child_process';
import { generateKeyPairSync, verify, type KeyObject } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createRequire } from 'node:module';
import assert from 'node:assert/strict';
import { selfSignedCertificate } from '../support/self-signed-cert.ts';
import { after, before, describe, it } from 'node:test';
import { SecretManagerServiceClient } from '@google-cloud/secret-manager';
import { PassThroughClient } from 'google-auth-library';
import { credentials, status } from '@grpc/grpc-js';
import { parseReference, type GcpReference } from '../../agent/contract/reference.ts';
import { crc32c } from '../../agent/providers/gcp/crc32c.ts';
import { parseEndpoint } from '../../agent/providers/gcp/endpoint.ts';
import { createGcpProvider, type GcpProvider } from '../../agent/providers/gcp/gcp-provider.ts';
import { gcpTransport, PROXY_VARIABLES } from '../../agent/providers/gcp/transport.ts';
import { ProviderError, type FetchOutcome } from '../../agent/providers/provider.ts';
import { assertNoCanary, canary } from '../support/canary.ts';
import { startConnectProxy } from '../support/connect-proxy.ts';
import { AGENT_JS, memoryDir, ROOT, runAgent } from '../support/run-agent.ts';
import { startGcpSecretManagerFake, type GcpSecretManagerFake } from '../fakes/gcp-secret-manager.ts';

const PROJECT = 'my-project';
const POD = { namespace: 'payments', name: 'api-7d9f' };

/** Every way a value could leak from an outcome: messages, fixes, and the error as a whole. */
function assertOutcomeClean(outcome: FetchOutcome, where: string): void {
  if (outcome.ok) return;
  assertNoCanary(`${outcome.error.message} ${outcome.error.fix} ${String(outcome.error.stack)}`, where);
}

function ref(text: string): GcpReference {
  const parsed = parseReference(text, 'SECRET_0_REF');
  assert.equal(parsed.provider, 'gcp');
  return parsed as GcpReference;
}

function failure(outcome: FetchOutcome | undefined): ProviderError {
  assert.ok(outcome && !outcome.ok, 'expected a failed outcome');
  assertOutcomeClean(outcome, 'a provider error');
  return outcome.error;
}

function text(outcome: FetchOutcome | undefined): { value: string; version: string } {
  assert.ok(
    outcome?.ok,
    `expected success, got ${outcome && !outcome.ok ? outcome.error.message : 'nothing'}`,
  );
  return { value: Buffer.from(outcome.value.bytes).toString('utf8'), version: outcome.value.version };
}

const ctx = () => ({ signal: AbortSignal.timeout(15_000) });

/**
 * A service-account key file for ADC. token_uri points at a closed loopback port: the client must
 * sign its own JWT, never fetch a token.
 */
function writeServiceAccountKey(path: string, privateKey: KeyObject, email: string): void {
  writeFileSync(
    path,
    JSON.stringify({
      type: 'service_account',
      project_id: PROJECT,
      private_key_id: 'test-key-1',
      private_key: privateKey.export({ type: 'pkcs8', format: 'pem' }),
      client_email: email,
      client_id: '1',
      token_uri: 'http://127.0.0.1:9/token',
    }),
  );
}

/** Every case against a fake runs over both transports: the library's REST fallback and gRPC. */
const TRANSPORTS = ['rest', 'grpc'] as const;
type Transport = (typeof TRANSPORTS)[number];

/** The fake's address for a transport: its gRPC server, or its REST one. */
function endpointOf(fake: GcpSecretManagerFake, transport: Transport): string {
  return transport === 'rest' ? fake.restEndpoint : fake.endpoint;
}

/** Builds only when there is no bundle with a gcp chunk (CI runs `npm run build` first). */
function ensureBuilt(): void {
  const chunks = join(ROOT, 'dist/agent-chunks');
  if (
    !existsSync(AGENT_JS) ||
    !existsSync(chunks) ||
    !readdirSync(chunks).some((f) => f.startsWith('gcp-'))
  ) {
    const built = spawnSync(process.execPath, ['images/build.ts'], { cwd: ROOT, encoding: 'utf8' });
    assert.equal(built.status, 0, `the build failed:\n${built.stderr}`);
  }
}

const ENDPOINT_VARIABLES = ['GCP_SECRET_MANAGER_ENDPOINT', 'GCP_SECRET_MANAGER_REGIONAL_ENDPOINT'] as const;

/** A provider made with exactly these endpoint variables (it reads them once, when made). */
function providerWith(endpoints: Partial<Record<(typeof ENDPOINT_VARIABLES)[number], string>>): GcpProvider {
  const saved = ENDPOINT_VARIABLES.map((key) => [key, process.env[key]] as const);
  for (const key of ENDPOINT_VARIABLES) {
    const value = endpoints[key];
    if (value === undefined) Reflect.deleteProperty(process.env, key);
    else process.env[key] = value;
  }
  try {
    return createGcpProvider({ pod: POD, agentVersion: '0.1.0' });
  } finally {
    for (const [key, value] of saved) {
      if (value === undefined) Reflect.deleteProperty(process.env, key);
      else process.env[key] = value;
    }
  }
}

/**
 * No test may reach past loopback or find real credentials: the metadata server is pointed at a
 * closed loopback port and ADC at a missing file, so any credential lookup fails fast and loudly.
 */
const NO_REAL_CREDENTIALS = {
  GCE_METADATA_HOST: '127.0.0.1:9',
  GCE_METADATA_IP: '127.0.0.1:9',
  GOOGLE_APPLICATION_CREDENTIALS: '/nonexistent/adc.json',
} as const;

describe('CRC32C', () => {
  it('matches the Castagnoli check value and the RFC 3720 (iSCSI) vectors', () => {
    assert.equal(crc32c(Buffer.from('123456789')), 0xe3069283);
    assert.equal(crc32c(new Uint8Array(0)), 0);
    assert.equal(crc32c(new Uint8Array(32)), 0x8a9136aa);
    assert.equal(crc32c(new Uint8Array(32).fill(0xff)), 0x62a8ab43);
    assert.equal(crc32c(Uint8Array.from({ length: 32 }, (_, i) => i)), 0x46dd794e);
    assert.equal(crc32c(Uint8Array.from({ length: 32 }, (_, i) => 31 - i)), 0x113fdb5c);
  });
});

describe('GCP_SECRET_MANAGER_ENDPOINT', () => {
  it('uses plaintext only on loopback and TLS elsewhere', () => {
    assert.deepEqual(parseEndpoint('127.0.0.1:8085'), {
      servicePath: '127.0.0.1',
      port: 8085,
      plaintext: true,
    });
    assert.deepEqual(parseEndpoint('[::1]:8085'), { servicePath: '[::1]', port: 8085, plaintext: true });
    assert.deepEqual(parseEndpoint('localhost:1'), { servicePath: 'localhost', port: 1, plaintext: true });
    assert.deepEqual(parseEndpoint('https://127.0.0.1:8443'), {
      servicePath: '127.0.0.1',
      port: 8443,
      plaintext: false,
    });
    assert.deepEqual(parseEndpoint('secretmanager.example.internal'), {
      servicePath: 'secretmanager.example.internal',
      port: 443,
      plaintext: false,
    });
    assert.equal(parseEndpoint(undefined), undefined);
    assert.equal(parseEndpoint(''), undefined);
  });

  it('refuses plaintext to a host that is not loopback, and malformed values', () => {
    assert.throws(
      () => parseEndpoint('http://secretmanager.example.internal:8080'),
      (e: unknown) =>
        e instanceof ProviderError &&
        e.reason === 'invalid' &&
        !e.transient &&
        /not loopback/.test(e.message) &&
        /TLS/.test(e.fix),
    );
    assert.throws(
      () => parseEndpoint('127.0.0.1:99999'),
      (e: unknown) => e instanceof ProviderError && /not host:port/.test(e.message),
    );
    assert.throws(() => parseEndpoint('grpc://x:1/y'), ProviderError);
  });

  it('GCP_SECRET_MANAGER_REGIONAL_ENDPOINT puts the region where {location} stands, and is checked after', () => {
    const regional = 'GCP_SECRET_MANAGER_REGIONAL_ENDPOINT';
    assert.deepEqual(parseEndpoint('sm-{location}.example.internal:8443', regional, 'europe-west4'), {
      servicePath: 'sm-europe-west4.example.internal',
      port: 8443,
      plaintext: false,
    });
    assert.deepEqual(parseEndpoint('127.0.0.1:8085', regional, 'us-central1'), {
      servicePath: '127.0.0.1',
      port: 8085,
      plaintext: true,
    });
    assert.throws(
      () => parseEndpoint('http://{location}.example.internal', regional, 'us-central1'),
      (e: unknown) =>
        e instanceof ProviderError &&
        e.message ===
          `${regional} "http://{location}.example.internal" asks for plaintext to a host that is not loopback`,
    );
    assert.throws(
      () => parseEndpoint('{region}.example.internal', regional, 'us-central1'),
      (e: unknown) =>
        e instanceof ProviderError &&
        /^GCP_SECRET_MANAGER_REGIONAL_ENDPOINT .* is not host:port$/.test(e.message),
    );
    // The global variable has no region to put in: its error points at the regional one.
    assert.throws(
      () => parseEndpoint('secretmanager.{location}.rep.googleapis.com'),
      (e: unknown) =>
        e instanceof ProviderError &&
        /^GCP_SECRET_MANAGER_ENDPOINT .* is not host:port$/.test(e.message) &&
        /GCP_SECRET_MANAGER_REGIONAL_ENDPOINT/.test(e.fix),
    );
  });
});

describe('which endpoint a reference is read from', () => {
  const global = ref('projects/my-project/secrets/db');
  const regional = ref('projects/my-project/locations/europe-west4/secrets/db/versions/3');
  const other = ref('gcp:db');

  it('a global secret from secretmanager.googleapis.com, a regional one from its region’s endpoint', () => {
    const provider = providerWith({});
    assert.equal(provider.endpoint!(global), 'secretmanager.googleapis.com:443');
    assert.equal(provider.endpoint!(other), 'secretmanager.googleapis.com:443');
    assert.equal(provider.endpoint!(regional), 'secretmanager.europe-west4.rep.googleapis.com:443');
    assert.equal(
      provider.endpoint!(ref('projects/my-project/locations/us-central1/secrets/db')),
      'secretmanager.us-central1.rep.googleapis.com:443',
    );
  });

  it('each variable overrides its own kind of secret only; {location} stands for the region', () => {
    const both = providerWith({
      GCP_SECRET_MANAGER_ENDPOINT: 'psc-global.example.internal',
      GCP_SECRET_MANAGER_REGIONAL_ENDPOINT: 'https://psc-{location}.example.internal:8443',
    });
    assert.equal(both.endpoint!(global), 'psc-global.example.internal:443');
    assert.equal(both.endpoint!(regional), 'psc-europe-west4.example.internal:8443');
    const globalOnly = providerWith({ GCP_SECRET_MANAGER_ENDPOINT: '127.0.0.1:8085' });
    assert.equal(globalOnly.endpoint!(global), '127.0.0.1:8085');
    assert.equal(globalOnly.endpoint!(regional), 'secretmanager.europe-west4.rep.googleapis.com:443');
    const oneServer = providerWith({ GCP_SECRET_MANAGER_REGIONAL_ENDPOINT: '127.0.0.1:8086' });
    assert.equal(oneServer.endpoint!(regional), '127.0.0.1:8086');
    assert.equal(oneServer.endpoint!(global), 'secretmanager.googleapis.com:443');
  });

  it('names no endpoint for a malformed override (the fetch reports it), and never throws', () => {
    const provider = providerWith({ GCP_SECRET_MANAGER_REGIONAL_ENDPOINT: 'http://{location}.example' });
    assert.equal(provider.endpoint!(regional), undefined);
    assert.equal(provider.endpoint!(global), 'secretmanager.googleapis.com:443');
  });
});

for (const transport of TRANSPORTS) {
  describe(`GCP provider against the Secret Manager fake (${transport})`, () => {
    let fake: GcpSecretManagerFake;
    let provider: GcpProvider;
    const touched = [
      ...Object.keys(NO_REAL_CREDENTIALS),
      'GCP_SECRET_MANAGER_ENDPOINT',
      'GCP_TRANSPORT',
      'GCP_PROJECT',
      'GOOGLE_CLOUD_PROJECT',
    ];
    const saved = new Map(touched.map((key) => [key, process.env[key]]));
    const values = { v1: canary('gcp-v1'), v2: canary('gcp-v2'), short: canary('gcp-short') };

    before(async () => {
      fake = await startGcpSecretManagerFake();
      fake.addVersion(PROJECT, 'db-password', values.v1);
      fake.addVersion(PROJECT, 'db-password', values.v2);
      fake.addVersion('other-project', 'api-key', values.short);
      Object.assign(process.env, NO_REAL_CREDENTIALS, {
        GCP_SECRET_MANAGER_ENDPOINT: endpointOf(fake, transport),
        GCP_TRANSPORT: transport,
      });
      delete process.env.GCP_PROJECT;
      delete process.env.GOOGLE_CLOUD_PROJECT;
      provider = createGcpProvider({ pod: POD, agentVersion: '0.1.0' });
    });

    after(async () => {
      provider.close();
      await fake.stop();
      for (const [key, value] of saved) {
        if (value === undefined) Reflect.deleteProperty(process.env, key);
        else process.env[key] = value;
      }
    });

    it('reads `latest` and returns the version number from the name the API answers with', async () => {
      const [out] = await provider.fetch([ref(`projects/${PROJECT}/secrets/db-password`)], ctx());
      assert.deepEqual(text(out), { value: values.v2, version: '2' });
      const call = fake.seen.at(-1)!;
      assert.equal(call.name, `projects/${PROJECT}/secrets/db-password/versions/latest`);
    });

    it('reads an explicit version, by project id or by project number', async () => {
      const number = fake.projectNumber(PROJECT);
      const out = await provider.fetch(
        [
          ref(`projects/${PROJECT}/secrets/db-password/versions/1`),
          ref(`projects/${number}/secrets/db-password/versions/2`),
        ],
        ctx(),
      );
      assert.deepEqual(text(out[0]), { value: values.v1, version: '1' });
      assert.deepEqual(text(out[1]), { value: values.v2, version: '2' });
    });

    it('reads a version alias', async () => {
      fake.setAlias(PROJECT, 'db-password', 'stable', '1');
      const [out] = await provider.fetch(
        [ref(`projects/${PROJECT}/secrets/db-password/versions/stable`)],
        ctx(),
      );
      assert.deepEqual(text(out), { value: values.v1, version: '1' });
    });

    it('takes the short form’s project from GCP_PROJECT, else GOOGLE_CLOUD_PROJECT', async () => {
      process.env.GCP_PROJECT = 'other-project';
      process.env.GOOGLE_CLOUD_PROJECT = PROJECT;
      const first = createGcpProvider({ pod: POD, agentVersion: '0.1.0' });
      delete process.env.GCP_PROJECT;
      process.env.GOOGLE_CLOUD_PROJECT = 'other-project';
      const second = createGcpProvider({ pod: POD, agentVersion: '0.1.0' });
      delete process.env.GOOGLE_CLOUD_PROJECT;
      try {
        const [a] = await first.fetch([ref('gcp:api-key')], ctx());
        assert.deepEqual(text(a), { value: values.short, version: '1' });
        assert.equal(fake.seen.at(-1)!.name, 'projects/other-project/secrets/api-key/versions/latest');
        const [b] = await second.fetch([ref('gcp:api-key/versions/1')], ctx());
        assert.deepEqual(text(b), { value: values.short, version: '1' });
      } finally {
        first.close();
        second.close();
      }
    });

    it('fails a short form without a project before any call, naming the fix', async () => {
      const before = fake.calls('AccessSecretVersion');
      const [out] = await provider.fetch([ref('gcp:api-key')], ctx());
      const error = failure(out);
      assert.equal(error.reason, 'invalid');
      assert.equal(error.transient, false);
      assert.match(error.fix, /GCP_PROJECT/);
      assert.equal(fake.calls('AccessSecretVersion'), before);
    });

    it('maps NOT_FOUND for a missing secret and a missing version', async () => {
      const out = await provider.fetch(
        [
          ref(`projects/${PROJECT}/secrets/missing`),
          ref(`projects/${PROJECT}/secrets/db-password/versions/9`),
        ],
        ctx(),
      );
      for (const o of out) {
        const error = failure(o);
        assert.equal(error.reason, 'not-found');
        assert.equal(error.transient, false);
      }
      assert.match(
        failure(out[0]).message,
        /^NOT_FOUND: Secret \[projects\/\d+\/secrets\/missing\] not found/,
      );
      assert.match(failure(out[1]).message, /versions\/9\] not found/);
    });

    it('maps PERMISSION_DENIED to the accessor role fix', async () => {
      fake.inject('AccessSecretVersion', {
        code: status.PERMISSION_DENIED,
        details: `Permission 'secretmanager.versions.access' denied for resource 'projects/${PROJECT}/secrets/db-password/versions/latest' (or it may not exist).`,
      });
      const [out] = await provider.fetch([ref(`projects/${PROJECT}/secrets/db-password`)], ctx());
      const error = failure(out);
      assert.equal(error.reason, 'permission-denied');
      assert.equal(error.transient, false);
      assert.match(error.message, /secretmanager\.versions\.access/);
      assert.match(error.fix, /roles\/secretmanager\.secretAccessor/);
      assert.match(error.fix, /Workload Identity/);
    });

    it('maps UNAUTHENTICATED to auth, INVALID_ARGUMENT to invalid', async () => {
      fake.inject(
        'AccessSecretVersion',
        { code: status.UNAUTHENTICATED, details: 'Request had invalid authentication credentials.' },
        { code: status.INVALID_ARGUMENT },
      );
      const [a] = await provider.fetch([ref(`projects/${PROJECT}/secrets/db-password`)], ctx());
      const [b] = await provider.fetch([ref(`projects/${PROJECT}/secrets/db-password`)], ctx());
      assert.equal(failure(a).reason, 'auth');
      assert.equal(failure(a).transient, false);
      assert.equal(failure(b).reason, 'invalid');
    });

    it('maps FAILED_PRECONDITION: a disabled version, a disabled newest version behind `latest`, a destroyed one', async () => {
      fake.addVersion(PROJECT, 'rotating', canary('old'));
      fake.addVersion(PROJECT, 'rotating', canary('new'), 'DISABLED');
      fake.addVersion(PROJECT, 'gone', canary('gone'), 'DESTROYED');
      const out = await provider.fetch(
        [
          ref(`projects/${PROJECT}/secrets/rotating/versions/2`),
          ref(`projects/${PROJECT}/secrets/rotating`),
          ref(`projects/${PROJECT}/secrets/gone/versions/1`),
          ref(`projects/${PROJECT}/secrets/rotating/versions/1`),
        ],
        ctx(),
      );
      for (const o of out.slice(0, 2)) {
        const error = failure(o);
        assert.equal(error.reason, 'disabled');
        assert.equal(error.transient, false);
        assert.match(
          error.message,
          /^FAILED_PRECONDITION: Secret Version \[projects\/\d+\/secrets\/rotating\/versions\/2\] is in DISABLED state\.$/,
        );
        assert.match(error.fix, /gcloud secrets versions enable/);
      }
      assert.equal(failure(out[2]).reason, 'deleted');
      assert.match(failure(out[2]).message, /DESTROYED/);
      assert.equal(text(out[3]).version, '1', 'the other secrets of the batch still succeed');
      assert.equal(
        out[3]?.ok && out[3].value.backendVersion,
        '1',
        'the version number GCP names is the one published',
      );
    });

    it('makes exactly one call per attempt: UNAVAILABLE and RESOURCE_EXHAUSTED come back transient, not retried by gax', async () => {
      const name = ref(`projects/${PROJECT}/secrets/db-password`);
      fake.inject('AccessSecretVersion', {
        code: status.UNAVAILABLE,
        details: 'The service is currently unavailable.',
      });
      let calls = fake.calls('AccessSecretVersion');
      const [a] = await provider.fetch([name], ctx());
      assert.equal(failure(a).reason, 'unavailable');
      assert.equal(failure(a).transient, true);
      assert.equal(fake.calls('AccessSecretVersion'), calls + 1);

      // The library's own config retries RESOURCE_EXHAUSTED for this method; the agent's backoff must own it.
      fake.inject('AccessSecretVersion', { code: status.RESOURCE_EXHAUSTED, details: 'Quota exceeded.' });
      calls = fake.calls('AccessSecretVersion');
      const [b] = await provider.fetch([name], ctx());
      assert.equal(failure(b).reason, 'throttled');
      assert.equal(failure(b).transient, true);
      assert.equal(fake.calls('AccessSecretVersion'), calls + 1);

      assert.equal(failure(b).retryAfterMs, undefined, 'no RetryInfo sent, none read');

      // Google's APIs say when to come back (google.rpc.RetryInfo); the agent's backoff waits that long.
      fake.inject(
        'AccessSecretVersion',
        { code: status.RESOURCE_EXHAUSTED, details: 'Quota exceeded.', retryDelayMs: 7250 },
        { code: status.UNAVAILABLE, details: 'The service is currently unavailable.', retryDelayMs: 2000 },
      );
      const [throttled] = await provider.fetch([name], ctx());
      assert.equal(failure(throttled).reason, 'throttled');
      assert.equal(failure(throttled).retryAfterMs, 7250);
      const [unavailable] = await provider.fetch([name], ctx());
      assert.equal(failure(unavailable).reason, 'unavailable');
      assert.equal(failure(unavailable).retryAfterMs, 2000);

      fake.inject('AccessSecretVersion', { code: status.INTERNAL });
      const [c] = await provider.fetch([name], ctx());
      assert.equal(failure(c).transient, true);

      const [d] = await provider.fetch([name], ctx());
      assert.equal(text(d).value, values.v2, 'the same client works after the faults');
    });

    it('fails a payload whose CRC32C does not match, as transient, without the checksums; accepts one without a checksum', async () => {
      fake.inject('AccessSecretVersion', { corruptChecksum: true }, { noChecksum: true });
      const [bad] = await provider.fetch([ref(`projects/${PROJECT}/secrets/db-password`)], ctx());
      const error = failure(bad);
      assert.equal(error.reason, 'internal');
      assert.equal(error.transient, true);
      assert.match(error.message, /CRC32C/);
      assert.doesNotMatch(error.message, new RegExp(String(crc32c(Buffer.from(values.v2)))));
      const [unchecked] = await provider.fetch([ref(`projects/${PROJECT}/secrets/db-password`)], ctx());
      assert.equal(text(unchecked).value, values.v2);
    });

    it('cancels the call when the attempt’s signal aborts', async () => {
      fake.inject('AccessSecretVersion', { hang: true });
      const controller = new AbortController();
      const calls = fake.calls('AccessSecretVersion');
      const pending = provider.fetch([ref(`projects/${PROJECT}/secrets/db-password`)], {
        signal: controller.signal,
      });
      while (fake.calls('AccessSecretVersion') === calls) await new Promise((r) => setTimeout(r, 5));
      controller.abort();
      const [out] = await pending;
      const error = failure(out);
      assert.equal(error.reason, 'timeout');
      assert.equal(error.transient, true);
    });

    it('names the agent and the pod in the user agent, and sends no credentials over plaintext loopback', async () => {
      await provider.fetch([ref(`projects/${PROJECT}/secrets/db-password`)], ctx());
      const call = fake.seen.at(-1)!;
      assert.match(call.userAgent, /^secret-agent\/0\.1\.0 k8s-pod\/payments\.api-7d9f /);
      assert.match(call.apiClient, / secret-agent\/0\.1\.0( |$)/);
      assert.equal(call.authorization, '');
      assert.equal(call.transport, transport);
    });

    it('describeVersion reads which version `latest` is, and its state, without an access', async () => {
      const access = fake.calls('AccessSecretVersion');
      const gets = fake.calls('GetSecretVersion');
      fake.addVersion(PROJECT, 'describe-me', canary('d1'));
      const latest = ref(`projects/${PROJECT}/secrets/describe-me`);
      const first = await provider.describeVersion(latest, ctx());
      assert.equal(first.version, '1');
      assert.equal(first.state, 'ENABLED');
      assert.match(first.name, /^projects\/\d+\/secrets\/describe-me\/versions\/1$/);

      fake.addVersion(PROJECT, 'describe-me', canary('d2'));
      fake.setState(PROJECT, 'describe-me', '2', 'DISABLED');
      const second = await provider.describeVersion(latest, ctx());
      assert.equal(second.version, '2');
      assert.equal(second.state, 'DISABLED');
      assert.notEqual(second.etag, first.etag);
      assert.equal(fake.calls('GetSecretVersion'), gets + 2);
      assert.equal(fake.calls('AccessSecretVersion'), access);

      await assert.rejects(
        provider.describeVersion(ref(`projects/${PROJECT}/secrets/nothing`), ctx()),
        (e: unknown) => e instanceof ProviderError && e.reason === 'not-found',
      );
      fake.inject('GetSecretVersion', { code: status.UNAVAILABLE });
      await assert.rejects(
        provider.describeVersion(latest, ctx()),
        (e: unknown) => e instanceof ProviderError && e.reason === 'unavailable' && e.transient,
      );
    });

    it('the fake lists versions newest first, in pages, filtered by state (through the real client)', async () => {
      const port = Number(endpointOf(fake, transport).split(':')[1]);
      const client = new SecretManagerServiceClient({
        apiEndpoint: '127.0.0.1',
        port,
        universeDomain: 'googleapis.com',
        ...(transport === 'rest'
          ? { fallback: true, protocol: 'http', authClient: new PassThroughClient() }
          : { sslCreds: credentials.createInsecure() }),
      });
      try {
        fake.addVersion(PROJECT, 'listed', canary('l1'));
        fake.addVersion(PROJECT, 'listed', canary('l2'), 'DISABLED');
        fake.addVersion(PROJECT, 'listed', canary('l3'));
        const parent = `projects/${PROJECT}/secrets/listed`;
        const [all] = await client.listSecretVersions({ parent, pageSize: 2 });
        assert.deepEqual(
          all.map((v) => [v.name?.split('/').at(-1), v.state]),
          [
            ['3', 'ENABLED'],
            ['2', 'DISABLED'],
            ['1', 'ENABLED'],
          ],
        );
        assert.ok(all.every((v) => v.name?.startsWith(`projects/${fake.projectNumber(PROJECT)}/`)));
        const [enabled] = await client.listSecretVersions({ parent, filter: 'state:ENABLED' });
        assert.deepEqual(
          enabled.map((v) => v.name?.split('/').at(-1)),
          ['3', '1'],
        );
        assert.equal(fake.calls('ListSecretVersions'), 3, 'two pages of two, then the filtered list');
      } finally {
        await client.close();
      }
    });
  });
}

for (const transport of TRANSPORTS) {
  describe(`GCP regional secrets: the global endpoint and a regional one, each its own fake (${transport})`, () => {
    let global: GcpSecretManagerFake;
    let europe: GcpSecretManagerFake;
    let provider: GcpProvider;
    const saved = new Map(
      [...Object.keys(NO_REAL_CREDENTIALS), 'GCP_TRANSPORT'].map((key) => [key, process.env[key]]),
    );
    const values = {
      global: canary('gcp-global'),
      r1: canary('gcp-regional-1'),
      r2: canary('gcp-regional-2'),
    };
    const regionalRef = (rest: string) => ref(`projects/${PROJECT}/locations/europe-west4/secrets/${rest}`);

    before(async () => {
      global = await startGcpSecretManagerFake();
      europe = await startGcpSecretManagerFake({ location: 'europe-west4' });
      // One id, two secrets: a global one and a regional one, as GCP allows.
      global.addVersion(PROJECT, 'db-password', values.global);
      europe.addVersion(PROJECT, 'db-password', values.r1);
      europe.addVersion(PROJECT, 'db-password', values.r2);
      Object.assign(process.env, NO_REAL_CREDENTIALS, { GCP_TRANSPORT: transport });
      provider = providerWith({
        GCP_SECRET_MANAGER_ENDPOINT: endpointOf(global, transport),
        GCP_SECRET_MANAGER_REGIONAL_ENDPOINT: endpointOf(europe, transport),
      });
    });

    after(async () => {
      await provider.close();
      await Promise.all([global.stop(), europe.stop()]);
      for (const [key, value] of saved) {
        if (value === undefined) Reflect.deleteProperty(process.env, key);
        else process.env[key] = value;
      }
    });

    it('reads a regional secret from the regional endpoint by its full name, the global one of the same id from the global endpoint', async () => {
      const [g0, e0] = [global.seen.length, europe.seen.length];
      const out = await provider.fetch(
        [
          regionalRef('db-password'),
          ref(`projects/${PROJECT}/secrets/db-password`),
          regionalRef('db-password/versions/1'),
        ],
        ctx(),
      );
      assert.deepEqual(text(out[0]), { value: values.r2, version: '2' });
      assert.deepEqual(text(out[1]), { value: values.global, version: '1' });
      assert.deepEqual(text(out[2]), { value: values.r1, version: '1' });
      assert.deepEqual(
        europe.seen
          .slice(e0)
          .map((c) => c.name)
          .sort(),
        [
          `projects/${PROJECT}/locations/europe-west4/secrets/db-password/versions/1`,
          `projects/${PROJECT}/locations/europe-west4/secrets/db-password/versions/latest`,
        ],
      );
      assert.deepEqual(
        global.seen.slice(g0).map((c) => c.name),
        [`projects/${PROJECT}/secrets/db-password/versions/latest`],
      );
      assert.match(europe.seen.at(-1)!.userAgent, /^secret-agent\/0\.1\.0 k8s-pod\/payments\.api-7d9f /);
    });

    it('describeVersion reads a regional secret’s version from its endpoint, with the location in the name', async () => {
      const v = await provider.describeVersion(regionalRef('db-password'), ctx());
      assert.equal(v.version, '2');
      assert.equal(v.state, 'ENABLED');
      assert.equal(
        v.name,
        `projects/${europe.projectNumber(PROJECT)}/locations/europe-west4/secrets/db-password/versions/2`,
      );
      assert.equal(europe.seen.at(-1)!.method, 'GetSecretVersion');
    });

    it('maps NOT_FOUND for a secret the region does not hold, though the global endpoint holds one of that id', async () => {
      global.addVersion(PROJECT, 'only-global', canary('only-global'));
      const [out] = await provider.fetch([regionalRef('only-global')], ctx());
      const error = failure(out);
      assert.equal(error.reason, 'not-found');
      assert.match(
        error.message,
        /^NOT_FOUND: Secret \[projects\/\d+\/locations\/europe-west4\/secrets\/only-global\] not found/,
      );
    });

    it('an override that sends a region’s secrets elsewhere gets INVALID_ARGUMENT, and the fix names the variable', async () => {
      // The one-server override reaches europe-west4's endpoint for a us-central1 secret…
      const [wrongRegion] = await provider.fetch(
        [ref(`projects/${PROJECT}/locations/us-central1/secrets/db-password`)],
        ctx(),
      );
      // …and an override pointing regional secrets at the global endpoint gets the global refusal.
      const misrouted = providerWith({ GCP_SECRET_MANAGER_REGIONAL_ENDPOINT: endpointOf(global, transport) });
      try {
        const [atGlobal] = await misrouted.fetch([regionalRef('db-password')], ctx());
        assert.match(
          failure(atGlobal).message,
          /^INVALID_ARGUMENT: The provided Secret ID \[projects\/my-project\/locations\/europe-west4\/secrets\/db-password\/versions\/latest\] does not match the expected format \[projects\/\*\/secrets\/\*\/versions\/\*\]$/,
        );
        for (const error of [failure(wrongRegion), failure(atGlobal)]) {
          assert.equal(error.reason, 'invalid');
          assert.equal(error.transient, false);
          assert.match(error.fix, /GCP_SECRET_MANAGER_REGIONAL_ENDPOINT/);
        }
      } finally {
        await misrouted.close();
      }
    });

    it('a malformed regional override fails the regional secrets only, before any call, naming the variable', async () => {
      const bad = providerWith({
        GCP_SECRET_MANAGER_ENDPOINT: endpointOf(global, transport),
        GCP_SECRET_MANAGER_REGIONAL_ENDPOINT: 'http://secretmanager.{location}.example.internal',
      });
      const calls = europe.seen.length + global.seen.length;
      try {
        const [regional, globalOne] = await bad.fetch(
          [regionalRef('db-password'), ref(`projects/${PROJECT}/secrets/db-password`)],
          ctx(),
        );
        const error = failure(regional);
        assert.equal(error.reason, 'invalid');
        assert.equal(error.transient, false);
        assert.match(
          error.message,
          /^GCP_SECRET_MANAGER_REGIONAL_ENDPOINT ".*" asks for plaintext to a host that is not loopback$/,
        );
        assert.equal(text(globalOne).value, values.global);
        assert.equal(
          europe.seen.length + global.seen.length,
          calls + 1,
          'only the global secret was asked for',
        );
      } finally {
        await bad.close();
      }
    });
  });
}

for (const transport of TRANSPORTS) {
  describe(`the built agent with a GCP secret (${transport})`, () => {
    let fake: GcpSecretManagerFake;

    before(async () => {
      ensureBuilt();
      fake = await startGcpSecretManagerFake();
    });

    after(async () => {
      await fake.stop();
    });

    const agentEnv = (dir: string, reference: string) => ({
      ...NO_REAL_CREDENTIALS,
      SECRETS_DIR: dir,
      SECRET_0_REF: reference,
      SECRET_0_FILENAME: 'db/password',
      GCP_SECRET_MANAGER_ENDPOINT: endpointOf(fake, transport),
      // REST is an init run's default: left unnamed, so the default is what runs.
      ...(transport === 'grpc' ? { GCP_TRANSPORT: 'grpc' } : {}),
      POD_NAMESPACE: POD.namespace,
      POD_NAME: POD.name,
    });

    it('writes the value with its mode, reading `latest` once', async () => {
      const value = canary('e2e');
      fake.addVersion(PROJECT, 'e2e', canary('e2e-old'));
      fake.addVersion(PROJECT, 'e2e', value);
      using dir = memoryDir();
      const before = fake.calls('AccessSecretVersion');
      const run = await runAgent(agentEnv(dir.path, `projects/${PROJECT}/secrets/e2e`));
      assert.equal(run.code, 0, run.stderr);
      const file = join(dir.path, 'db/password');
      assert.equal(readFileSync(file, 'utf8'), value);
      assert.equal(statSync(file).mode & 0o777, 0o400);
      assert.equal(fake.calls('AccessSecretVersion'), before + 1);
      const fetched = run.logs.find((l) => l.msg === 'fetched');
      assert.equal(fetched?.version, '2');
      assert.match(fake.seen.at(-1)!.userAgent, /^secret-agent\/0\.1\.0 k8s-pod\/payments\.api-7d9f /);
      assert.equal(fake.seen.at(-1)!.transport, transport);
    });

    it('retries UNAVAILABLE twice with its own backoff, then succeeds', async () => {
      const value = canary('e2e-retry');
      fake.addVersion(PROJECT, 'flaky', value);
      fake.inject('AccessSecretVersion', { code: status.UNAVAILABLE }, { code: status.UNAVAILABLE });
      using dir = memoryDir();
      const before = fake.calls('AccessSecretVersion');
      const run = await runAgent(agentEnv(dir.path, `projects/${PROJECT}/secrets/flaky`));
      assert.equal(run.code, 0, run.stderr);
      assert.equal(readFileSync(join(dir.path, 'db/password'), 'utf8'), value);
      assert.equal(fake.calls('AccessSecretVersion'), before + 3);
      const retries = run.logs.filter((l) => l.msg === 'transient backend errors; retrying');
      assert.equal(retries.length, 2);
      assert.deepEqual(retries[0]!.reasons, ['unavailable']);
    });

    it('exits 1 on NOT_FOUND, names SECRET_0 and the fix on stderr, and writes nothing', async () => {
      using dir = memoryDir();
      const before = fake.calls('AccessSecretVersion');
      const run = await runAgent(agentEnv(dir.path, `projects/${PROJECT}/secrets/absent`));
      assert.equal(run.code, 1, run.stderr);
      assert.match(
        run.stderr,
        /SECRET_0 \(projects\/my-project\/secrets\/absent\): not-found: NOT_FOUND: Secret \[projects\/\d+\/secrets\/absent\]/,
      );
      assert.match(run.stderr, /fix: check the project, secret id and version/);
      assert.equal(fake.calls('AccessSecretVersion'), before + 1, 'a permanent failure is not retried');
      assert.deepEqual(readdirSync(dir.path), []);
    });

    it('exits 2 for a short form without GCP_PROJECT, naming the variable, before any call', async () => {
      using dir = memoryDir();
      const before = fake.calls('AccessSecretVersion');
      const run = await runAgent(agentEnv(dir.path, 'gcp:e2e'));
      assert.equal(run.code, 2, run.stderr);
      assert.match(run.stderr, /GCP_PROJECT: is not set, .*: SECRET_0\. Fix: set GCP_PROJECT/);
      assert.equal(fake.calls('AccessSecretVersion'), before);
      assert.deepEqual(readdirSync(dir.path), []);
    });

    it('refuses a plaintext endpoint that is not loopback', async () => {
      using dir = memoryDir();
      const run = await runAgent({
        ...agentEnv(dir.path, `projects/${PROJECT}/secrets/e2e`),
        GCP_SECRET_MANAGER_ENDPOINT: 'http://secretmanager.example.internal:8080',
      });
      assert.equal(run.code, 1, run.stderr);
      assert.match(run.stderr, /SECRET_0 .*: invalid: GCP_SECRET_MANAGER_ENDPOINT .* not loopback/);
      assert.deepEqual(readdirSync(dir.path), []);
    });

    it('never logs a payload, even with GOOGLE_SDK_NODE_LOGGING set', async () => {
      const value = canary('e2e-logging');
      fake.addVersion(PROJECT, 'logged', value);
      using dir = memoryDir();
      const run = await runAgent({
        ...agentEnv(dir.path, `projects/${PROJECT}/secrets/logged`),
        GOOGLE_SDK_NODE_LOGGING: '*',
      });
      assert.equal(run.code, 0, run.stderr);
      // The client's debug log prints a Buffer as JSON, a list of byte values: look for that form too.
      const asJsonBytes = JSON.stringify([...Buffer.from(value)]).slice(1, -1);
      for (const output of [run.stdout, run.stderr]) {
        assert.ok(!output.includes(asJsonBytes), 'the payload leaked as JSON bytes');
        assert.doesNotMatch(output, /accessSecretVersion response/);
      }
    });

    it('without credentials on a TLS endpoint, fails with `auth` and exit 1 (no crash, no metadata server beyond loopback)', async () => {
      using dir = memoryDir();
      const { GOOGLE_APPLICATION_CREDENTIALS: _, ...env } = agentEnv(
        dir.path,
        `projects/${PROJECT}/secrets/e2e`,
      );
      const run = await runAgent({
        ...env,
        GCP_SECRET_MANAGER_ENDPOINT: `https://${endpointOf(fake, transport)}`,
      });
      assert.equal(run.code, 1, run.stderr);
      assert.match(
        run.stderr,
        /SECRET_0 \(projects\/my-project\/secrets\/e2e\): auth: .*default credentials/,
      );
      assert.match(run.stderr, /fix: give the pod Google credentials: GKE Workload Identity/);
      assert.deepEqual(readdirSync(dir.path), []);
    });
  });
}

for (const transport of TRANSPORTS) {
  describe(`the built agent over TLS with Application Default Credentials (a service-account key file) (${transport})`, () => {
    let fake: GcpSecretManagerFake;
    let work: string;
    const serviceAccount = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const email = 'secret-agent@my-project.iam.gserviceaccount.com';

    before(async () => {
      work = mkdtempSync(join(tmpdir(), 'gcp-adc-'));
      // A throwaway certificate for the fake; the agent trusts it through grpc-js's roots override.
      const ssl = selfSignedCertificate('localhost', 'DNS:localhost,IP:127.0.0.1');
      writeFileSync(join(work, 'key.pem'), ssl.key);
      writeFileSync(join(work, 'ca.pem'), ssl.cert);
      fake = await startGcpSecretManagerFake({
        tls: {
          certChain: readFileSync(join(work, 'ca.pem')),
          privateKey: readFileSync(join(work, 'key.pem')),
        },
      });
      writeServiceAccountKey(join(work, 'sa.json'), serviceAccount.privateKey, email);
    });

    after(async () => {
      await fake.stop();
      rmSync(work, { recursive: true, force: true });
    });

    it('reads the secret with a self-signed service-account JWT over TLS from the bundle', async () => {
      const value = canary('e2e-tls');
      fake.addVersion(PROJECT, 'tls', value);
      using dir = memoryDir();
      const run = await runAgent({
        GCE_METADATA_HOST: NO_REAL_CREDENTIALS.GCE_METADATA_HOST,
        GCE_METADATA_IP: NO_REAL_CREDENTIALS.GCE_METADATA_IP,
        GOOGLE_APPLICATION_CREDENTIALS: join(work, 'sa.json'),
        // gRPC trusts its own roots file; REST goes through Node's TLS, which takes extra CAs.
        GRPC_DEFAULT_SSL_ROOTS_FILE_PATH: join(work, 'ca.pem'),
        NODE_EXTRA_CA_CERTS: join(work, 'ca.pem'),
        GCP_TRANSPORT: transport,
        GCP_SECRET_MANAGER_ENDPOINT: `https://localhost:${endpointOf(fake, transport).split(':')[1]}`,
        INIT_DEADLINE: '15s',
        SECRETS_DIR: dir.path,
        SECRET_0_REF: `projects/${PROJECT}/secrets/tls`,
        SECRET_0_FILENAME: 'tls',
      });
      assert.equal(run.code, 0, run.stderr);
      assert.equal(readFileSync(join(dir.path, 'tls'), 'utf8'), value);

      const bearer = /^Bearer (.+)$/.exec(fake.seen.at(-1)!.authorization)?.[1];
      assert.ok(bearer, 'the call carried a bearer token');
      const [header, claims, signature] = bearer.split('.') as [string, string, string];
      const payload = JSON.parse(Buffer.from(claims, 'base64url').toString()) as Record<string, unknown>;
      assert.equal(payload.iss, email);
      assert.equal(payload.scope, 'https://www.googleapis.com/auth/cloud-platform');
      assert.ok(
        verify(
          'sha256',
          Buffer.from(`${header}.${claims}`),
          serviceAccount.publicKey,
          Buffer.from(signature, 'base64url'),
        ),
        'the JWT is signed by the service account key',
      );
    });
  });
}

describe('the built agent dials each secret’s own endpoint by its real name (TLS, through a CONNECT proxy)', () => {
  // No endpoint override: the agent dials secretmanager.googleapis.com and
  // secretmanager.europe-west4.rep.googleapis.com itself, TLS checks the certificate against those names,
  // and a forward proxy (grpc_proxy) lands each tunnel on the fake standing for that endpoint. Which
  // host the agent chose is what the proxy was asked and the :authority each fake saw.
  const GLOBAL_HOST = 'secretmanager.googleapis.com';
  const EUROPE_HOST = 'secretmanager.europe-west4.rep.googleapis.com';
  let global: GcpSecretManagerFake;
  let europe: GcpSecretManagerFake;
  let proxy: Awaited<ReturnType<typeof startConnectProxy>>;
  let work: string;

  before(async () => {
    work = mkdtempSync(join(tmpdir(), 'gcp-regional-'));
    const ssl = selfSignedCertificate(GLOBAL_HOST, `DNS:${GLOBAL_HOST},DNS:${EUROPE_HOST}`);
    writeFileSync(join(work, 'ca.pem'), ssl.cert);
    const tls = { certChain: Buffer.from(ssl.cert), privateKey: Buffer.from(ssl.key) };
    global = await startGcpSecretManagerFake({ tls });
    europe = await startGcpSecretManagerFake({ tls, location: 'europe-west4' });
    proxy = await startConnectProxy({
      [`${GLOBAL_HOST}:443`]: global.endpoint,
      [`${EUROPE_HOST}:443`]: europe.endpoint,
    });
    const key = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey;
    writeServiceAccountKey(join(work, 'sa.json'), key, 'secret-agent@my-project.iam.gserviceaccount.com');
  });

  after(async () => {
    await Promise.all([global.stop(), europe.stop(), proxy.stop()]);
    rmSync(work, { recursive: true, force: true });
  });

  const agentEnv = (dir: string, refs: readonly string[]) => ({
    GCE_METADATA_HOST: NO_REAL_CREDENTIALS.GCE_METADATA_HOST,
    GCE_METADATA_IP: NO_REAL_CREDENTIALS.GCE_METADATA_IP,
    GOOGLE_APPLICATION_CREDENTIALS: join(work, 'sa.json'),
    GRPC_DEFAULT_SSL_ROOTS_FILE_PATH: join(work, 'ca.pem'),
    grpc_proxy: proxy.url,
    INIT_DEADLINE: '15s',
    SECRETS_DIR: dir,
    ...Object.fromEntries(
      refs.flatMap((r, i) => [
        [`SECRET_${i}_REF`, r],
        [`SECRET_${i}_FILENAME`, `s${i}`],
      ]),
    ),
  });

  it('reads a regional secret from its region’s endpoint and a global one of the same id from the global endpoint', async () => {
    const values = { global: canary('e2e-global'), europe: canary('e2e-europe') };
    global.addVersion(PROJECT, 'api-key', values.global);
    europe.addVersion(PROJECT, 'api-key', values.europe);
    using dir = memoryDir();
    const run = await runAgent(
      agentEnv(dir.path, [
        `projects/${PROJECT}/locations/europe-west4/secrets/api-key`,
        `projects/${PROJECT}/secrets/api-key`,
      ]),
    );
    assert.equal(run.code, 0, run.stderr);
    assert.equal(readFileSync(join(dir.path, 's0'), 'utf8'), values.europe);
    assert.equal(readFileSync(join(dir.path, 's1'), 'utf8'), values.global);

    assert.deepEqual([...new Set(proxy.asked)].sort(), [`${EUROPE_HOST}:443`, `${GLOBAL_HOST}:443`]);
    const regional = europe.seen.at(-1)!;
    assert.equal(regional.name, `projects/${PROJECT}/locations/europe-west4/secrets/api-key/versions/latest`);
    assert.match(regional.authority, /^secretmanager\.europe-west4\.rep\.googleapis\.com(?::443)?$/);
    assert.match(regional.authorization, /^Bearer /);
    assert.match(global.seen.at(-1)!.authority, /^secretmanager\.googleapis\.com(?::443)?$/);
    assert.equal(global.seen.at(-1)!.name, `projects/${PROJECT}/secrets/api-key/versions/latest`);
  });

  it('names the regional endpoint in a failure', async () => {
    using dir = memoryDir();
    const run = await runAgent(
      agentEnv(dir.path, [`projects/${PROJECT}/locations/europe-west4/secrets/absent`]),
    );
    assert.equal(run.code, 1, run.stderr);
    assert.match(
      run.stderr,
      /not-found: NOT_FOUND: Secret \[projects\/\d+\/locations\/europe-west4\/secrets\/absent\]/,
    );
    assert.match(run.stderr, /endpoint: secretmanager\.europe-west4\.rep\.googleapis\.com:443/);
    assert.deepEqual(readdirSync(dir.path), []);
  });

  it('talks gRPC where a proxy is set (the REST client would bypass it), and refuses REST asked for there', async () => {
    assert.equal(global.seen.at(-1)!.transport, 'grpc', 'an init run, gRPC for the proxy');
    using dir = memoryDir();
    const calls = global.seen.length + europe.seen.length;
    const run = await runAgent({
      ...agentEnv(dir.path, [`projects/${PROJECT}/secrets/api-key`]),
      GCP_TRANSPORT: 'rest',
    });
    assert.equal(run.code, 2, run.stderr);
    assert.match(
      run.stderr,
      /GCP_TRANSPORT: "rest" would not go through the proxy grpc_proxy names: the REST client ignores proxy settings\. Fix: use grpc/,
    );
    assert.equal(global.seen.length + europe.seen.length, calls, 'no call made');
  });
});

describe('GCP_TRANSPORT', () => {
  it('defaults to REST for an init run and gRPC for a sidecar, and to gRPC wherever a proxy is set', () => {
    assert.equal(gcpTransport({}), 'rest');
    assert.equal(gcpTransport({}, 'init'), 'rest');
    assert.equal(gcpTransport({}, 'sidecar'), 'grpc');
    assert.equal(gcpTransport({ GCP_TRANSPORT: '' }, 'sidecar'), 'grpc');
    for (const proxy of PROXY_VARIABLES)
      assert.equal(gcpTransport({ [proxy]: 'http://proxy:3128' }, 'init'), 'grpc');
    assert.equal(gcpTransport({ GCP_TRANSPORT: 'grpc' }, 'init'), 'grpc');
    assert.equal(gcpTransport({ GCP_TRANSPORT: 'rest' }, 'sidecar'), 'rest');
  });

  it('refuses a value that is no transport, and REST past a proxy, naming the variable', () => {
    assert.throws(
      () => gcpTransport({ GCP_TRANSPORT: 'REST' }),
      (e: unknown) =>
        e instanceof ProviderError &&
        e.reason === 'invalid' &&
        !e.transient &&
        e.message === 'GCP_TRANSPORT: "REST" is not a transport',
    );
    assert.throws(
      () => gcpTransport({ GCP_TRANSPORT: 'rest', https_proxy: 'http://proxy:3128' }),
      (e: unknown) => e instanceof ProviderError && /https_proxy/.test(e.message) && /use grpc/.test(e.fix),
    );
  });
});

describe('REST: an answer that is not Secret Manager’s JSON is never quoted', () => {
  let fake: GcpSecretManagerFake;
  let provider: GcpProvider;
  const saved = new Map(
    [...Object.keys(NO_REAL_CREDENTIALS), 'GCP_TRANSPORT'].map((key) => [key, process.env[key]]),
  );

  before(async () => {
    fake = await startGcpSecretManagerFake();
    fake.addVersion(PROJECT, 'db', canary('rest-db'));
    Object.assign(process.env, NO_REAL_CREDENTIALS, { GCP_TRANSPORT: 'rest' });
    provider = providerWith({ GCP_SECRET_MANAGER_ENDPOINT: fake.restEndpoint });
  });

  after(async () => {
    await provider.close();
    await fake.stop();
    for (const [key, value] of saved) {
      if (value === undefined) Reflect.deleteProperty(process.env, key);
      else process.env[key] = value;
    }
  });

  // What another server behind the endpoint (or a proxy) might answer, a value in it.
  const answers: [string, { rawBody: string; status?: number; contentType?: string }, RegExp][] = [
    ['a bare value, 200', { rawBody: canary('bare'), contentType: 'text/plain' }, /: the answer is not/],
    [
      'JSON of another shape, 200',
      { rawBody: JSON.stringify({ name: 'x', payload: { data: { value: canary('shape') } } }) },
      /: the answer is not/,
    ],
    ['an empty body, 200', { rawBody: '' }, /: the answer is not/],
    [
      'a front end’s HTML page, 404',
      { rawBody: `<html><p>${canary('html')}</p></html>`, status: 404, contentType: 'text/html' },
      /: the answer \(HTTP 404\) is not/,
    ],
    ['a bare value, 500', { rawBody: canary('500'), status: 500 }, /: the answer \(HTTP 500\) is not/],
    ['a bare value, 403', { rawBody: canary('403'), status: 403 }, /: the answer \(HTTP 403\) is not/],
  ];
  for (const [name, answer, shape] of answers) {
    it(name, async () => {
      fake.inject('AccessSecretVersion', answer);
      const [out] = await provider.fetch([ref(`projects/${PROJECT}/secrets/db`)], ctx());
      const error = failure(out);
      assert.equal(error.reason, 'invalid');
      assert.equal(error.transient, false);
      assert.match(error.message, shape);
      assert.match(error.message, /Secret Manager's JSON$/);
      assert.match(error.fix, /GCP_SECRET_MANAGER_ENDPOINT does not reach Secret Manager's REST API/);
    });
  }

  it('still quotes the API’s own error, and a transport failure’s code', async () => {
    const [missing] = await provider.fetch([ref(`projects/${PROJECT}/secrets/absent`)], ctx());
    assert.match(failure(missing).message, /^NOT_FOUND: Secret \[projects\/\d+\/secrets\/absent\] not found/);
    const closed = providerWith({ GCP_SECRET_MANAGER_ENDPOINT: '127.0.0.1:9' });
    try {
      const [refused] = await closed.fetch([ref(`projects/${PROJECT}/secrets/db`)], ctx());
      assert.equal(failure(refused).reason, 'unavailable');
      assert.match(failure(refused).message, /ECONNREFUSED/);
    } finally {
      await closed.close();
    }
  });
});

describe('the bundle', () => {
  it('the client reads from a bare `google-gax` only what images/build.ts gives it there', () => {
    // The build replaces the bare name with a module holding these two (gcpGaxByTransport): anything
    // else a new client version read from it would be undefined in the bundle.
    const require = createRequire(import.meta.url);
    const client = join(
      dirname(require.resolve('@google-cloud/secret-manager')),
      'v1/secret_manager_service_client.js',
    );
    const read = new Set(
      [...readFileSync(client, 'utf8').matchAll(/google_gax_1\.([A-Za-z_$][\w$]*)/g)].map((m) => m[1]),
    );
    assert.deepEqual([...read].sort(), ['decodeAnyProtosInArray', 'loggingUtils']);
  });

  it('loads @grpc/grpc-js only on the gRPC path: the gcp chunk reaches it through a dynamic import alone', () => {
    ensureBuilt();
    const meta = JSON.parse(readFileSync(join(ROOT, 'dist/agent.meta.json'), 'utf8')) as {
      outputs: Record<
        string,
        {
          entryPoint?: string;
          inputs: Record<string, unknown>;
          imports: { path: string; kind: string }[];
        }
      >;
    };
    const outputs = Object.entries(meta.outputs);
    const holding = (pkg: string) =>
      outputs
        .filter(([, o]) => Object.keys(o.inputs).some((i) => i.includes(`node_modules/${pkg}/`)))
        .map(([n]) => n);
    const gcp = outputs.find(([, o]) =>
      Object.keys(o.inputs).includes('agent/providers/gcp/gcp-provider.ts'),
    )?.[0];
    assert.ok(gcp, 'a chunk holds agent/providers/gcp/gcp-provider.ts');
    /** What loading `from` loads with it: its static imports, transitively. */
    const loadedWith = (from: string): Set<string> => {
      const seen = new Set([from]);
      for (const next of seen)
        for (const i of meta.outputs[next]?.imports ?? [])
          if (i.kind === 'import-statement' && meta.outputs[i.path]) seen.add(i.path);
      return seen;
    };
    const grpc = holding('@grpc/grpc-js');
    assert.equal(grpc.length, 1, 'one chunk holds @grpc/grpc-js');
    assert.ok(!loadedWith(gcp).has(grpc[0]!), 'loading the GCP provider does not load gRPC');
    const lazily = meta.outputs[gcp]!.imports.filter((i) => i.kind === 'dynamic-import').map((i) => i.path);
    assert.ok(
      lazily.some((chunk) => loadedWith(chunk).has(grpc[0]!)),
      'the gRPC branch loads it',
    );
    assert.ok(
      lazily.some(
        (chunk) =>
          !loadedWith(chunk).has(grpc[0]!) && holding('google-gax').some((g) => loadedWith(chunk).has(g)),
      ),
      'the REST branch loads google-gax without it',
    );
  });
});
