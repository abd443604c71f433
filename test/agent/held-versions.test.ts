/**
 * Issue 39: what each secret's files hold, published as metrics, one series per secret: the version its
 * backend names (never a digest of a value), replaced when it changes, dropped with the secret, carried
 * by the small sidecar from run to run.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { SecretSpec } from '../../agent/contract/agent-config.ts';
import { parseReference } from '../../agent/contract/reference.ts';
import { carriedVersions, HeldVersions } from '../../agent/modes/sidecar/held-versions.ts';
import { AgentMetrics } from '../../agent/serve/metrics.ts';
import { namedVersion, contentVersion, type SecretValue } from '../../agent/providers/provider.ts';

function spec(id: string, ref: string, filename: string): SecretSpec {
  return {
    id,
    ref: parseReference(ref, `${id}_REF`),
    filename,
    format: 'raw',
    mode: 0o400,
    refreshIntervalMs: 300_000,
  };
}

const DB = spec('SECRET_0', 'aws:prod/db', 'db');
const PIN = spec('SECRET_1', 'file:/etc/pin', 'pin');

async function series(metrics: AgentMetrics): Promise<string[]> {
  const text = await metrics.registry.metrics();
  return text
    .split('\n')
    .filter((l) => /^secret_agent_secret_(version_info|changed_timestamp_seconds)\{/.test(l));
}

const value = (bytes: string, v: Pick<SecretValue, 'version' | 'backendVersion'>): SecretValue => ({
  bytes: Buffer.from(bytes),
  ...v,
});

describe('HeldVersions: the versions the files hold, as metrics', () => {
  it('one series per secret, the version its backend names, replaced when it changes; no version but an empty one where none is named', async () => {
    const metrics = new AgentMetrics({ processMetrics: false });
    const held = new HeldVersions(metrics);
    const values = new Map<string, SecretValue>([
      ['SECRET_0', value('a', namedVersion('v-1111'))],
      ['SECRET_1', value('1234', contentVersion(Buffer.from('1234')))],
    ]);
    assert.equal(
      held.record(
        [DB, PIN],
        (s) => values.get(s.id),
        () => true,
        1_000_000,
      ),
      true,
    );
    assert.deepEqual(await series(metrics), [
      'secret_agent_secret_version_info{secret="SECRET_0",file="db",provider="aws",version="v-1111"} 1',
      'secret_agent_secret_version_info{secret="SECRET_1",file="pin",provider="file",version=""} 1',
      'secret_agent_secret_changed_timestamp_seconds{secret="SECRET_0",file="db"} 1000',
      'secret_agent_secret_changed_timestamp_seconds{secret="SECRET_1",file="pin"} 1000',
    ]);

    // Nothing changed: nothing moves, and the time of the last change stays.
    assert.equal(
      held.record(
        [DB, PIN],
        (s) => values.get(s.id),
        () => false,
        2_000_000,
      ),
      false,
    );
    // A new version of one, a new value of the other: each series replaced, never added to.
    values.set('SECRET_0', value('b', namedVersion('v-2222')));
    values.set('SECRET_1', value('5678', contentVersion(Buffer.from('5678'))));
    assert.equal(
      held.record(
        [DB, PIN],
        (s) => values.get(s.id),
        (s) => s.id === 'SECRET_1',
        3_000_000,
      ),
      true,
    );
    assert.deepEqual(await series(metrics), [
      'secret_agent_secret_version_info{secret="SECRET_0",file="db",provider="aws",version="v-2222"} 1',
      'secret_agent_secret_version_info{secret="SECRET_1",file="pin",provider="file",version=""} 1',
      'secret_agent_secret_changed_timestamp_seconds{secret="SECRET_0",file="db"} 3000',
      'secret_agent_secret_changed_timestamp_seconds{secret="SECRET_1",file="pin"} 3000',
    ]);
    const text = await metrics.registry.metrics();
    for (const v of ['1234', '5678']) assert.ok(!text.includes(contentVersion(Buffer.from(v)).version));

    // A reloaded configuration without the second secret: its series go.
    held.retain([DB]);
    assert.deepEqual(
      (await series(metrics)).map((l) => l.split('{')[1]!.split(',')[0]),
      ['secret="SECRET_0"', 'secret="SECRET_0"'],
    );
  });

  it('carried by the next run: what it holds is published before any fetch, and a bad entry is dropped', async () => {
    const first = new HeldVersions(new AgentMetrics({ processMetrics: false }));
    first.record(
      [DB],
      () => value('a', namedVersion('v-1111')),
      () => true,
      5_000_000,
    );
    const saved = JSON.parse(JSON.stringify(first.list())) as unknown;
    const next = new AgentMetrics({ processMetrics: false });
    const carried = carriedVersions([
      ...(saved as unknown[]),
      { secret: 'SECRET_9', file: 'x', provider: 'aws', version: 'v'.repeat(129), changedAt: 1 },
      { secret: 'SECRET_8' },
      'junk',
    ]);
    assert.deepEqual(
      carried.map((h) => h.secret),
      ['SECRET_0'],
    );
    new HeldVersions(next, carried);
    assert.deepEqual(await series(next), [
      'secret_agent_secret_version_info{secret="SECRET_0",file="db",provider="aws",version="v-1111"} 1',
      'secret_agent_secret_changed_timestamp_seconds{secret="SECRET_0",file="db"} 5000',
    ]);
    assert.deepEqual(carriedVersions({ not: 'a list' }), []);
  });
});
