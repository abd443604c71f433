/**
 * The small sidecar's side of the resident's handoff (agent/modes/sidecar/handoff-wire.ts): whatever
 * arrives on the state fd (it is an earlier run's, through the resident, but bytes are bytes) never
 * crashes a run nor reaches its logs; the outcome keeps within what the resident accepts.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, openSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import fc from 'fast-check';
import {
  encodeOutcome,
  MAX_METRICS_BYTES,
  MAX_STATE_BYTES,
  readHandoffState,
  type HandoffState,
} from '../../agent/modes/sidecar/handoff-wire.ts';

const dir = mkdtempSync('/dev/shm/handoff-wire-');
after(() => rmSync(dir, { recursive: true, force: true }));

/** readHandoffState over `bytes`, as a run reads fd 3 (it closes the fd). */
function read(bytes: Uint8Array): ReturnType<typeof readHandoffState> {
  const file = join(dir, 'state');
  writeFileSync(file, bytes);
  return readHandoffState(openSync(file, 'r'));
}

const STATE: HandoffState = { v: 1, failuresInARow: 2, providers: { vault: { token: 'x' } }, metrics: [] };

describe('the handoff state a run reads', () => {
  it('empty: a first run; its own JSON: the same state back', () => {
    assert.deepEqual(read(new Uint8Array()), {});
    assert.deepEqual(read(Buffer.from(JSON.stringify(STATE))), { state: STATE });
  });

  it('anything else: no state, and a problem that describes the bytes without quoting them', () => {
    const marker = 'SECRETMARKER';
    const cases: [Uint8Array, RegExp][] = [
      [Buffer.from(`{"v":1,"failuresInARow":0,"providers":{},"metrics":"${marker}"`), /is not JSON/],
      [Buffer.from(`"${marker}"`), /not of this agent's version 1 shape/],
      [Buffer.from(JSON.stringify({ ...STATE, v: 2, x: marker })), /version 1 shape/],
      [Buffer.from(JSON.stringify({ ...STATE, failuresInARow: -1, x: marker })), /version 1 shape/],
      [Buffer.from(JSON.stringify({ ...STATE, providers: null, x: marker })), /version 1 shape/],
      [Buffer.from([0xff, 0xfe, 0x00, 0x7b]), /is not JSON/],
      [Buffer.alloc(MAX_STATE_BYTES + 1, 0x20), /over 1048576 bytes/],
    ];
    for (const [bytes, problem] of cases) {
      const got = read(bytes);
      assert.equal(got.state, undefined);
      assert.match(got.problem ?? '', problem);
      assert.ok(!got.problem!.includes(marker));
    }
  });

  it('any bytes: never throws, and never quotes them (property)', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 2048 }), (bytes) => {
        const got = read(bytes);
        assert.ok(got.state !== undefined || got.problem !== undefined || bytes.length === 0);
        if (got.problem && bytes.length >= 8)
          assert.ok(!got.problem.includes(Buffer.from(bytes).toString('utf8')));
      }),
      { numRuns: 300 },
    );
  });
});

describe('the outcome a run writes', () => {
  const outcome = {
    ready: true,
    refreshed: true,
    nextMs: 300_000,
    metrics: '# TYPE a counter\na 1\n',
    state: STATE,
  };

  it('is the resident’s line protocol, next-ms within its bounds', () => {
    const text = (o: typeof outcome) => encodeOutcome(o).bytes.toString();
    assert.match(
      text(outcome),
      /^secret-agent-outcome 1\nready 1\nrefreshed 1\nnext-ms 300000\nmetrics 21\n# TYPE a counter\na 1\n\nstate \d+\n\{.*\}\nend\n$/s,
    );
    assert.match(text({ ...outcome, nextMs: -5 }), /\nnext-ms 1000\n/);
    assert.match(text({ ...outcome, nextMs: 1e12 }), /\nnext-ms 86400000\n/);
    assert.match(text({ ...outcome, ready: false }), /\nready 0\n/);
    assert.match(text({ ...outcome, refreshed: false }), /\nready 1\nrefreshed 0\n/);
  });

  it('leaves out what the resident would refuse, rather than have the run counted as failed', () => {
    const big = encodeOutcome({ ...outcome, metrics: 'a'.repeat(MAX_METRICS_BYTES + 1) });
    assert.doesNotMatch(big.bytes.toString(), /\nmetrics /);
    assert.deepEqual(big.dropped, [`metrics (${MAX_METRICS_BYTES + 1} bytes)`]);
    const heavy = encodeOutcome({
      ...outcome,
      state: { ...STATE, providers: { vault: 'a'.repeat(MAX_STATE_BYTES) } },
    });
    assert.match(heavy.dropped[0]!, /^providers' state/);
    const state = /\nstate (\d+)\n(.*)\nend\n$/s.exec(heavy.bytes.toString())!;
    assert.deepEqual(JSON.parse(state[2]!), { ...STATE, providers: {} });
    assert.equal(Number(state[1]), Buffer.byteLength(state[2]!));
  });
});
