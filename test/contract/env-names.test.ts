import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { editDistance, FOREIGN_ENV } from '../../agent/contract/env-names.ts';
import { parseAgentConfig } from '../../agent/config/parse-agent-config.ts';
import type { Env } from '../../agent/contract/settings.ts';
import { CLIENT_ENV } from '../../agent/providers/provider-env.ts';
import { ConfigErrors } from '../../agent/contract/errors.ts';
import { EXEC_SETTINGS } from '../../agent/providers/exec/env.ts';
import { VAULT_ENV } from '../../agent/providers/vault/env.ts';

/** A configuration that parses, to which each case adds variables. */
const VALID: Env = { SECRET_0_REF: 'aws:db', SECRET_0_FILENAME: 'db', AWS_REGION: 'eu-west-1' };

function errorsOf(env: Env): { field: string; message: string }[] {
  try {
    parseAgentConfig(env);
    return [];
  } catch (e) {
    assert.ok(e instanceof ConfigErrors, String(e));
    return e.errors.map((err) => ({ field: err.field, message: err.message }));
  }
}

describe('misspelt variable names (issue 10, item 4)', () => {
  const typos: [string, string][] = [
    ['AGENT_MOD', 'AGENT_MODE'],
    ['REFRESH_INTERVALL', 'REFRESH_INTERVAL'],
    ['ROTATION_SIGNL', 'ROTATION_SIGNAL'],
    ['FILEMODE', 'FILE_MODE'],
    ['SECRET_DIR', 'SECRETS_DIR'],
    ['LOGLEVEL', 'LOG_LEVEL'],
    ['agent_mode', 'AGENT_MODE'],
    ['AGNET_MODE', 'AGENT_MODE'],
    ['INIT_DEADLIN', 'INIT_DEADLINE'],
    ['REQUIRE_MEMORYFS', 'REQUIRE_MEMORY_FS'],
    ['VAULT_TOKN', 'VAULT_TOKEN'],
    ['VAULT_ADR', 'VAULT_ADDR'],
    ['AWS_REGOIN', 'AWS_REGION'],
    ['GCP_PROJECTS', 'GCP_PROJECT'],
    ['SECRET_AR', 'SECRET_ARN'],
    ['EXEC_HELPER_DIR', 'EXEC_HELPERS_DIR'],
    ['EXEC_TIMOUT', 'EXEC_TIMEOUT'],
    // Per-secret names that do not even have the SECRET_<N>_ shape.
    ['SECRET_REF', 'SECRET_0_REF'],
    ['SECRET0_REF', 'SECRET_0_REF'],
    ['SECRETS_0_FILENAME', 'SECRET_0_FILENAME'],
    ['SECRET_O_REF', 'SECRET_0_REF'],
  ];
  for (const [typo, meant] of typos) {
    it(`flags ${typo} as a misspelling of ${meant}, without its value`, () => {
      const value = 'sidecar-value-not-shown';
      const errors = errorsOf({ ...VALID, [typo]: value });
      assert.deepEqual(
        errors.map((e) => e.field),
        [typo],
      );
      assert.match(errors[0]!.message, new RegExp(`did you mean ${meant}\\?`));
      assert.ok(!errors[0]!.message.includes(value));
    });
  }

  it('flags a per-secret setting against the secret settings, naming the full variable', () => {
    const errors = errorsOf({ ...VALID, SECRET_0_REFF: 'x', SECRET_0_FORMATT: 'raw', SECRET_0_MOD: '0400' });
    assert.deepEqual(errors.map((e) => e.field).sort(), [
      'SECRET_0_FORMATT',
      'SECRET_0_MOD',
      'SECRET_0_REFF',
    ]);
    const byField = Object.fromEntries(errors.map((e) => [e.field, e.message]));
    assert.match(byField.SECRET_0_REFF!, /did you mean SECRET_0_REF\?/);
    assert.match(byField.SECRET_0_FORMATT!, /did you mean SECRET_0_FORMAT\?/);
    assert.match(byField.SECRET_0_MOD!, /did you mean SECRET_0_MODE\?/);
    // Far from every setting: still an error, listing them.
    assert.match(errorsOf({ ...VALID, SECRET_0_COLOUR: 'x' })[0]!.message, /use one of REF, FILENAME/);
  });

  it('leaves alone what pods, SDKs and the kubelet set', () => {
    const real = [
      'AWS_PROFILE',
      'AWS_ROLE_ARN',
      'AWS_ROLE_SESSION_NAME',
      'AWS_WEB_IDENTITY_TOKEN_FILE',
      'AWS_CONTAINER_CREDENTIALS_FULL_URI',
      'AWS_CONTAINER_CREDENTIALS_RELATIVE_URI',
      'AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE',
      'AWS_DEFAULT_REGION',
      'AWS_ACCESS_KEY_ID',
      'AWS_SECRET_ACCESS_KEY',
      'AWS_SESSION_TOKEN',
      'AWS_STS_REGIONAL_ENDPOINTS',
      'AWS_ENDPOINT_URL_STS',
      'AWS_EC2_METADATA_DISABLED',
      'AWS_ACCOUNT_ID',
      'VAULT_TOKEN',
      'VAULT_CACERT',
      'VAULT_CAPATH',
      'VAULT_CLIENT_CERT',
      'VAULT_CLIENT_KEY',
      'VAULT_AGENT_ADDR',
      'VAULT_LOG_LEVEL',
      'VAULT_FORMAT',
      'VAULT_PREFIX',
      'VAULT_K8S_POD_NAME',
      'VAULT_K8S_NAMESPACE',
      'GOOGLE_APPLICATION_CREDENTIALS',
      'GOOGLE_CLOUD_PROJECT',
      'GCLOUD_PROJECT',
      'GCE_METADATA_HOST',
      'GRPC_VERBOSITY',
      'KUBERNETES_SERVICE_HOST',
      'KUBERNETES_SERVICE_PORT',
      'KUBERNETES_SERVICE_PORT_HTTPS',
      'KUBERNETES_PORT',
      'KUBERNETES_PORT_443_TCP',
      'KUBERNETES_PORT_443_TCP_ADDR',
      // Service links of Services named like our settings' families.
      'AGENT_SERVICE_HOST',
      'AGENT_PORT',
      'VAULT_PORT_8200_TCP_ADDR',
      'SECRET_AGENT_WEBHOOK_SERVICE_PORT_HTTPS',
      'HOSTNAME',
      'PATH',
      'HOME',
      'TERM',
      'NODE_OPTIONS',
      'NODE_ENV',
      'NODE_EXTRA_CA_CERTS',
      'NODE_COMPILE_CACHE',
      'NODE_NAME',
      'POD_IP',
      'HOST_IP',
      'HTTP_PROXY',
      'https_proxy',
      'no_proxy',
      // The app's own variables, when an agent shares its envFrom.
      'LOG_FORMAT',
      'SECRET_KEY',
      'SECRET_NAME',
      'SECRET_ID',
      'SECRETS_PATH',
      'FILE_PATH',
      'FILE_NAME',
      'APP_MODE',
      'API_KEY',
      'REFRESH_TOKEN',
      'RESTART_POLICY',
      'SERVICE_ACCOUNT_NAME',
      'AGENT_NAME',
      'AGENT_VERSION',
      'INIT_DELAY',
      'EXIT_CODE',
      'GCP_PROJECT_ID',
      'GCP_REGION',
    ];
    const env: Record<string, string> = { ...VALID } as Record<string, string>;
    for (const name of real) env[name] = 'x';
    env.SECRETS_DIR = '/etc/secrets';
    assert.deepEqual(errorsOf(env), []);
  });

  it('knows every variable the agent documents', () => {
    const env: Record<string, string> = { ...VALID } as Record<string, string>;
    for (const name of [...CLIENT_ENV, ...VAULT_ENV].map((v) => v.name).concat(Object.keys(EXEC_SETTINGS)))
      env[name] = 'x';
    // Values are not parsed here (VAULT_* are read by the provider): only the names are checked.
    assert.deepEqual(
      errorsOf(env).filter((e) => /did you mean/.test(e.message)),
      [],
    );
    for (const name of FOREIGN_ENV) assert.equal(name, name.trim());
  });

  it('measures transpositions as one slip', () => {
    assert.equal(editDistance('AGNET', 'AGENT', 3), 1);
    assert.equal(editDistance('AGENT_MOD', 'AGENT_MODE', 3), 1);
    assert.equal(editDistance('POD_IP', 'POD_UID', 3), 2);
    assert.equal(editDistance('abcdef', 'uvwxyz', 2), 3, 'stops counting past the limit');
  });
});
