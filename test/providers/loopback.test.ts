import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseEndpoint } from '../../agent/providers/gcp/endpoint.ts';
import { isLoopbackHost } from '../../agent/providers/loopback.ts';
import { ProviderError } from '../../agent/providers/provider.ts';
import { openVaultProvider } from '../../agent/providers/vault/vault-provider.ts';

/**
 * Plaintext (GCP's endpoint override) and unverified TLS (VAULT_SKIP_VERIFY) are allowed only where
 * nothing leaves the node. Both providers ask one function, so they cannot disagree on a host.
 */
const LOOPBACK = ['localhost', 'LocalHost', '127.0.0.1', '127.1.2.3', '[::1]', '[0:0:0:0:0:0:0:1]'];
const ELSEWHERE = [
  'vault.example.com',
  'localhost.example.com',
  '10.0.0.1',
  '128.0.0.1',
  '[::2]',
  '[::ffff:10.0.0.1]',
  '[fe80::1]',
  '127.example.com',
];

describe('which hosts are loopback', () => {
  it('localhost, 127.0.0.0/8 and ::1 in any spelling; nothing else', () => {
    for (const host of LOOPBACK) assert.equal(isLoopbackHost(host), true, host);
    for (const host of ELSEWHERE) assert.equal(isLoopbackHost(host), false, host);
  });

  it('GCP allows plaintext, and Vault skipped verification, to exactly the same hosts', () => {
    const gcpPlaintext = (host: string) => {
      try {
        return parseEndpoint(`http://${host}:8085`)?.plaintext === true;
      } catch (e) {
        assert.ok(e instanceof ProviderError && /plaintext/.test(e.message), String(e));
        return false;
      }
    };
    const vaultSkipsVerify = (host: string) => {
      const env = { VAULT_ADDR: `https://${host}:8200`, VAULT_SKIP_VERIFY: 'true', VAULT_TOKEN: 't' };
      try {
        openVaultProvider({ pod: {}, agentVersion: '9' }, { env }).close?.();
        return true;
      } catch (e) {
        assert.ok(e instanceof ProviderError && /VAULT_SKIP_VERIFY/.test(e.message), String(e));
        return false;
      }
    };
    for (const host of [...LOOPBACK, ...ELSEWHERE]) {
      assert.equal(gcpPlaintext(host), isLoopbackHost(host), `GCP, ${host}`);
      assert.equal(vaultSkipsVerify(host), isLoopbackHost(host), `Vault, ${host}`);
    }
  });
});
