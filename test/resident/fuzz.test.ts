/**
 * Random and near-valid bytes (fast-check) at the resident's two parsers, each checked against a model
 * written apart from the C: the outcome a run writes (run-plan.ts's outcomeVerdict) and the HTTP
 * request head (http-model.ts). The resident must never crash, must judge every input as the model
 * does, must hand each run exactly the state of the last good one, and must keep serving.
 * The seed is pinned (a red run is the same everywhere); RESIDENT_FUZZ_SEED and RESIDENT_FUZZ_RUNS
 * explore further, e.g. RESIDENT_FUZZ_RUNS=200 (outcome cases run at about one a second).
 */
import fc from 'fast-check';
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { expectedAnswer } from './http-model.ts';
import { rawRequest, startResident } from './resident-process.ts';
import { encodeOutcome, outcomeVerdict, step } from './run-plan.ts';

const SEED = Number(process.env.RESIDENT_FUZZ_SEED ?? 31);
const RUNS = Number(process.env.RESIDENT_FUZZ_RUNS ?? 24);

/** One edit of `bytes`: truncate, overwrite, insert, delete, or change a digit (lengths are digits). */
function mutations(base: fc.Arbitrary<Uint8Array>): fc.Arbitrary<Uint8Array> {
  return fc
    .tuple(
      base,
      fc.constantFrom('truncate', 'overwrite', 'insert', 'delete', 'digit'),
      fc.nat(),
      fc.uint8Array({ minLength: 1, maxLength: 8 }),
    )
    .map(([bytes, edit, at, noise]) => {
      const b = Buffer.from(bytes);
      const i = bytes.length === 0 ? 0 : at % bytes.length;
      switch (edit) {
        case 'truncate':
          return b.subarray(0, i);
        case 'overwrite':
          return Buffer.concat([b.subarray(0, i), noise, b.subarray(i + noise.length)]);
        case 'insert':
          return Buffer.concat([b.subarray(0, i), noise, b.subarray(i)]);
        case 'delete':
          return Buffer.concat([b.subarray(0, i), b.subarray(i + noise.length)]);
        case 'digit': {
          const digits = [...b.keys()].filter((k) => b[k]! >= 0x30 && b[k]! <= 0x39);
          if (digits.length > 0) b[digits[at % digits.length]!] = 0x30 + (noise[0]! % 10);
          return b;
        }
      }
    });
}

const metricsText = fc.oneof(
  fc.constant('# TYPE a_total counter\na_total 1\n'),
  fc.string({ unit: 'grapheme', maxLength: 60 }).map((s) => `x_info{v="${s}"} 1\n`),
  fc.string({ unit: 'binary', maxLength: 40 }),
);
const goodOutcome = fc
  .record({
    ready: fc.boolean(),
    refreshed: fc.option(fc.boolean()),
    metrics: fc.option(metricsText),
    state: fc.option(fc.uint8Array({ maxLength: 3000 })),
  })
  .map((o) =>
    encodeOutcome({
      ready: o.ready,
      ...(o.refreshed !== null ? { refreshed: o.refreshed } : {}),
      nextMs: 1000,
      ...(o.metrics !== null ? { metrics: o.metrics } : {}),
      ...(o.state !== null ? { state: o.state } : {}),
    }),
  );
const outcomeBytes = fc
  .oneof(
    fc.uint8Array({ maxLength: 400 }),
    goodOutcome,
    mutations(goodOutcome),
    mutations(mutations(goodOutcome)),
  )
  // A good outcome that asks to wait long or to exit would end the test, not test the parser.
  .filter((bytes) => {
    const v = outcomeVerdict(bytes);
    return !v.ok || (!v.fields.has('exit') && v.fields.get('next-ms')! <= 2000);
  });

describe('resident: fuzz', () => {
  it(`judges ${RUNS} outcomes as the model does and hands on only good state (seed ${SEED})`, async (t) => {
    const cases = fc.sample(outcomeBytes, { seed: SEED, numRuns: RUNS });
    const first = Buffer.from('first state');
    const plan = [
      step('write', encodeOutcome({ ready: true, nextMs: 1000, state: first })),
      ...cases.map((bytes) => step('write', bytes)),
      step('write', encodeOutcome({ ready: true, nextMs: 86_400_000 })),
    ];
    await using r = await startResident(plan);
    const verdicts = cases.map(outcomeVerdict);
    const good = verdicts.filter((v) => v.ok).length;
    // A good outcome that says `refreshed 0` is handed on but counted as a failed run.
    const unrefreshed = (v: (typeof verdicts)[number]) => v.ok && v.fields.get('refreshed') === 0;
    const refreshed = good - verdicts.filter(unrefreshed).length;
    t.diagnostic(`${good} good outcomes (${good - refreshed} not refreshed), ${RUNS - good} bad`);
    await r.until(
      'every case run',
      async () => (await r.sample('secret_agent_resident_runs_total{outcome="ok"}')) === refreshed + 2,
      RUNS * 3000 + 10_000,
    );
    assert.equal(await r.sample('secret_agent_resident_runs_total{outcome="failed"}'), RUNS - refreshed);
    const runs = r.runs();
    let expected: Buffer = first;
    for (const [i, bytes] of cases.entries()) {
      const why = `case ${i} (run ${i + 2}), base64 ${Buffer.from(bytes).toString('base64')}`;
      assert.ok(runs[i + 1]!.state.equals(expected), `${why}: handed the wrong state`);
      const said = new RegExp(` run ${i + 2} (.*)`).exec(r.stderr())?.[1] ?? '';
      const failed = said.includes('keeping the last good outcome');
      assert.equal(failed, !verdicts[i]!.ok, `${why}: the resident ${failed ? 'refused' : 'took'} it`);
      const verdict = verdicts[i]!;
      assert.equal(
        said.startsWith('could not refresh'),
        unrefreshed(verdict),
        `${why}: counted as refreshed?`,
      );
      if (verdict.ok) expected = verdict.state;
    }
    assert.ok(runs[cases.length + 1]!.state.equals(expected));
    assert.equal((await r.get('/healthz')).status, 200);
  });

  it(`answers ${RUNS * 20} request heads as the model does, and keeps serving (seed ${SEED})`, async () => {
    const request = fc
      .tuple(
        fc.constantFrom('GET', 'HEAD', 'POST', 'get', ''),
        fc.constantFrom('/healthz', '/readyz', '/metrics?x=1', '/', 'x'),
      )
      .map(([m, p]) => Buffer.from(`${m} ${p} HTTP/1.1\r\nHost: a\r\n\r\n`));
    const heads = fc.oneof(
      fc.uint8Array({ maxLength: 300 }),
      request,
      mutations(request),
      mutations(mutations(request)),
      fc.uint8Array({ minLength: 4000, maxLength: 5000 }).map((b) => b.map((x) => 0x41 + (x % 26))),
    );
    await using r = await startResident([step('write', encodeOutcome({ ready: true, nextMs: 86_400_000 }))]);
    await r.until('ready', async () => (await r.get('/readyz')).status === 200);
    for (const [i, bytes] of fc.sample(heads, { seed: SEED, numRuns: RUNS * 20 }).entries()) {
      const answer = await rawRequest(r.port, bytes);
      const expected = expectedAnswer(bytes);
      const why = `case ${i}, base64 ${Buffer.from(bytes).toString('base64')}: ${JSON.stringify(answer.raw.slice(0, 200))}`;
      assert.equal(answer.status ?? (answer.raw === '' ? 'closed' : answer.raw), expected, why);
      if (answer.status === undefined) continue;
      const length = Number(/Content-Length: (\d+)/.exec(answer.raw)?.[1]);
      const headOnly =
        (expected === 200 || expected === 404) && Buffer.from(bytes).toString('latin1').startsWith('HEAD ');
      assert.equal(Buffer.byteLength(answer.body, 'latin1'), headOnly ? 0 : length, why);
    }
    assert.equal((await r.get('/healthz')).status, 200);
    assert.equal(r.child.exitCode, null);
  });
});
