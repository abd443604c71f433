import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { assertNoCanary, canary } from '../support/canary.ts';
import { AGENT_IMAGE, basicPod, decodePatch, review } from '../webhook/fixtures.ts';
import { certDir, makeServingPair, SERVER_NAME } from '../webhook/tls-certs.ts';
import { requestInside, startSandboxed } from './sandbox.ts';

const isRoot = process.getuid?.() === 0;

describe(
  'the webhook bundle, run as its image runs it (bubblewrap: uid 65532, read-only root, loopback only)',
  { skip: !isRoot && 'switching to uid 65532 needs root' },
  () => {
    it('serves /healthz and /mutate over TLS with the certificate files mounted read-only, and stops on SIGTERM', async () => {
      const pair = await makeServingPair();
      using tls = certDir();
      tls.write(pair);
      // Nothing writable at all: the webhook needs no volume.
      const box = startSandboxed({
        image: 'webhook',
        env: {
          AGENT_IMAGE,
          WEBHOOK_PORT: '8443',
          TLS_CERT_FILE: '/etc/webhook/tls/tls.crt',
          TLS_KEY_FILE: '/etc/webhook/tls/tls.key',
        },
        readOnly: [[tls.dir, '/etc/webhook/tls']],
      });
      try {
        const pid = await box.pid;
        const https = (path: string, body?: string) =>
          requestInside(pid, {
            url: `https://127.0.0.1:8443${path}`,
            ca: pair.ca,
            servername: SERVER_NAME,
            ...(body === undefined ? {} : { method: 'POST', body }),
          });
        let health = { status: 0, body: '' };
        for (let i = 0; i < 100 && health.status !== 200; i++) {
          health = https('/healthz');
          if (health.status !== 200) await sleep(100);
        }
        assert.equal(health.status, 200, `healthz: ${health.body}; ${box.output().stderr}`);

        const pod = basicPod(
          { 'secret-agent.io/secret-db': 'aws:prod/db' },
          {
            containers: [{ name: 'app', image: 'a', env: [{ name: 'PASSWORD', value: canary('pod-env') }] }],
          },
        );
        const reply = https('/mutate', JSON.stringify(review(pod)));
        assert.equal(reply.status, 200);
        assertNoCanary(reply.body, 'the /mutate response');
        const answer = JSON.parse(reply.body) as { response: { allowed: boolean; patch?: string } };
        assert.equal(answer.response.allowed, true);
        assert.ok(decodePatch(answer.response).some((op) => op.path === '/spec/initContainers'));

        await box.kill('SIGTERM');
        const { code } = await box.exited;
        assert.equal(code, 0, box.output().stderr);
        assert.equal(box.output().stderr, '');
        assert.ok(box.logs().some((l) => l.msg === 'webhook listening'));
      } finally {
        await box.kill('SIGKILL').catch(() => undefined);
        await box.exited.catch(() => undefined);
      }
    });
  },
);
