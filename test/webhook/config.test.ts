import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { ConfigErrors } from '../../agent/contract/errors.ts';
import { parseWebhookConfig } from '../../webhook/config/parse-webhook-config.ts';
import { AGENT_IMAGE } from './fixtures.ts';

function fields(fn: () => unknown): string[] {
  try {
    fn();
  } catch (e) {
    assert.ok(e instanceof ConfigErrors, String(e));
    return e.errors.map((err) => err.field);
  }
  return assert.fail('no ConfigErrors thrown');
}

describe('webhook configuration', () => {
  it('has working defaults once the agent image is set', () => {
    const config = parseWebhookConfig({ AGENT_IMAGE });
    assert.equal(config.port, 8443);
    assert.deepEqual(config.tls, {
      mode: 'file',
      certFile: '/etc/webhook/tls/tls.crt',
      keyFile: '/etc/webhook/tls/tls.key',
    });
    assert.equal(config.injection.nativeSidecars, 'auto');
    assert.equal(config.injection.runAsUser, 65532);
    assert.equal(config.injection.ownNamespace, 'secret-agent');
    assert.deepEqual(config.injection.cluster, {});
  });

  it('lists every problem at once, by variable name', () => {
    assert.deepEqual(
      fields(() =>
        parseWebhookConfig({ WEBHOOK_PORT: '99999', NATIVE_SIDECARS: 'yes', TLS_MODE: 'acme' }),
      ).sort(),
      ['AGENT_IMAGE', 'NATIVE_SIDECARS', 'TLS_MODE', 'WEBHOOK_PORT'],
    );
  });

  it('NATIVE_SIDECARS is auto, true or false', () => {
    const read = (value: string) => parseWebhookConfig({ AGENT_IMAGE, NATIVE_SIDECARS: value }).injection;
    assert.equal(read('auto').nativeSidecars, 'auto');
    assert.equal(read('true').nativeSidecars, true);
    assert.equal(read('false').nativeSidecars, false);
    for (const bad of ['AUTO', '1', ''])
      assert.deepEqual(
        fields(() => read(bad)),
        ['NATIVE_SIDECARS'],
        bad,
      );
  });

  it('ADMISSION_CACHE_SIZE is a number of entries, 0 turning the cache off', () => {
    assert.equal(parseWebhookConfig({ AGENT_IMAGE }).admissionCacheSize, 256);
    assert.equal(parseWebhookConfig({ AGENT_IMAGE, ADMISSION_CACHE_SIZE: '0' }).admissionCacheSize, 0);
    assert.equal(parseWebhookConfig({ AGENT_IMAGE, ADMISSION_CACHE_SIZE: '4096' }).admissionCacheSize, 4096);
    for (const bad of ['lots', '-1', '1.5', '', '65537', '9999999'])
      assert.deepEqual(
        fields(() => parseWebhookConfig({ AGENT_IMAGE, ADMISSION_CACHE_SIZE: bad })),
        ['ADMISSION_CACHE_SIZE'],
        bad,
      );
  });

  it('reads a YAML config file, env winning over it', () => {
    const dir = mkdtempSync(join(tmpdir(), 'webhook-config-'));
    try {
      const file = join(dir, 'config.yaml');
      writeFileSync(
        file,
        `AGENT_IMAGE: ${AGENT_IMAGE}\nWEBHOOK_PORT: 9443\nAGENT_VAULT_ADDR: https://vault.example:8200\nNATIVE_SIDECARS: false\n`,
      );
      const config = parseWebhookConfig({ WEBHOOK_CONFIG_FILE: file, WEBHOOK_PORT: '10443' });
      assert.equal(config.port, 10443);
      assert.equal(config.injection.agentImage, AGENT_IMAGE);
      assert.equal(config.injection.nativeSidecars, false);
      assert.equal(config.injection.cluster.vaultAddr, 'https://vault.example:8200');
      writeFileSync(file, 'AGENT_IMAGES: x\nLOG_LEVEL: [a]\n');
      assert.deepEqual(
        fields(() => parseWebhookConfig({ WEBHOOK_CONFIG_FILE: file })),
        ['WEBHOOK_CONFIG_FILE "AGENT_IMAGES"', 'WEBHOOK_CONFIG_FILE "LOG_LEVEL"'],
      );
      assert.deepEqual(
        fields(() => parseWebhookConfig({ WEBHOOK_CONFIG_FILE: 'relative.yaml' })),
        ['WEBHOOK_CONFIG_FILE'],
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('exec: references need both ALLOW_EXEC_REFERENCES and the helpers volume', () => {
    const read = (env: Record<string, string>) => parseWebhookConfig({ AGENT_IMAGE, ...env }).injection;
    assert.equal(read({}).execHelpers, undefined);
    assert.deepEqual(
      read({
        ALLOW_EXEC_REFERENCES: 'true',
        EXEC_HELPERS_VOLUME: '{"configMap":{"name":"secret-agent-helpers","defaultMode":493}}',
      }).execHelpers,
      { configMap: { name: 'secret-agent-helpers', defaultMode: 0o755 } },
    );
    assert.deepEqual(
      read({
        ALLOW_EXEC_REFERENCES: 'true',
        EXEC_HELPERS_VOLUME: '{"persistentVolumeClaim":{"claimName":"helpers","readOnly":true}}',
      }).execHelpers,
      { persistentVolumeClaim: { claimName: 'helpers', readOnly: true } },
    );
    const problem = (env: Record<string, string>) => {
      try {
        read(env);
      } catch (e) {
        assert.ok(e instanceof ConfigErrors);
        return e.errors.map((err) => err.message).join('\n');
      }
      return assert.fail('no ConfigErrors thrown');
    };
    assert.match(
      problem({ ALLOW_EXEC_REFERENCES: 'true' }),
      /^EXEC_HELPERS_VOLUME: is not set, but ALLOW_EXEC_REFERENCES is true/,
    );
    assert.match(
      problem({ EXEC_HELPERS_VOLUME: '{"configMap":{"name":"h"}}' }),
      /^EXEC_HELPERS_VOLUME: is set, but ALLOW_EXEC_REFERENCES is not true/,
    );
    const bad: [string, RegExp][] = [
      ['configMap: helpers', /is not JSON/],
      ['{"hostPath":{"path":"/opt/helpers"}}', /is not one configMap or persistentVolumeClaim volume source/],
      ['{"configMap":{"name":"h"},"persistentVolumeClaim":{"claimName":"h"}}', /is not one configMap/],
      ['{"configMap":{"name":"h","items":[]}}', /configMap has fields the webhook does not render: "items"/],
      ['{"configMap":{"name":"Helpers!"}}', /configMap\.name "Helpers!" is not a Kubernetes name/],
      ['{"configMap":{}}', /configMap\.name is missing or is not a Kubernetes name/],
      [
        '{"configMap":{"name":"h","defaultMode":420}}',
        /defaultMode 420 \(0644\) does not let every user read and execute/,
      ],
      ['{"configMap":{"name":"h","defaultMode":"0555"}}', /is not a file mode/],
      ['{"persistentVolumeClaim":{"claimName":"h","readOnly":false}}', /readOnly is not true/],
    ];
    for (const [text, expected] of bad)
      assert.match(problem({ ALLOW_EXEC_REFERENCES: 'true', EXEC_HELPERS_VOLUME: text }), expected, text);
  });

  it('takes the helpers volume from the YAML config file as a JSON string', () => {
    const dir = mkdtempSync(join(tmpdir(), 'webhook-config-'));
    try {
      const file = join(dir, 'config.yaml');
      writeFileSync(
        file,
        `AGENT_IMAGE: ${AGENT_IMAGE}\nALLOW_EXEC_REFERENCES: true\nEXEC_HELPERS_VOLUME: '{"configMap":{"name":"secret-agent-helpers"}}'\n`,
      );
      assert.deepEqual(parseWebhookConfig({ WEBHOOK_CONFIG_FILE: file }).injection.execHelpers, {
        configMap: { name: 'secret-agent-helpers', defaultMode: 0o555 },
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
