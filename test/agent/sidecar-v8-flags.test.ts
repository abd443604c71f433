/**
 * The V8 settings a sidecar applies to itself (agent/contract/sidecar-v8-flags.ts): this Node's V8 knows
 * every flag (an unknown one is only a line on stderr, and the memory saving would silently go), and
 * with them applied a hot function stays in the interpreter and a hot WebAssembly function at the
 * baseline compiler (Liftoff) while, without them, the same ones are optimised.
 * Each case runs in a child Node, so this test process keeps its own flags.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { SIDECAR_V8_FLAGS } from '../../agent/contract/sidecar-v8-flags.ts';

const MODULE = new URL('../../agent/contract/sidecar-v8-flags.ts', import.meta.url).href;

/** %GetOptimizationStatus bits: optimised at all, by Maglev, by TurboFan. */
const OPTIMIZED = 16 | 32 | 64;
/** ... and compiled by Sparkplug, the baseline compiler. */
const COMPILED = OPTIMIZED | (1 << 15);

/**
 * Calls a small function until V8 optimises it or 400k calls have passed (no clock involved), and
 * prints its optimisation status.
 */
function hotFunctionStatus(apply: boolean): { status: number; stderr: string } {
  const script = `
    const { applySidecarV8Flags } = await import(${JSON.stringify(MODULE)});
    ${apply ? 'applySidecarV8Flags();' : ''}
    function hot(a, b) { let s = 0; for (let i = 0; i < 10; i++) s += (a * i) ^ b; return s; }
    let sum = 0;
    for (let i = 0; i < 400_000; i++) {
      sum += hot(i, 3);
      if (i % 1000 === 0 && (%GetOptimizationStatus(hot) & ${OPTIMIZED}) !== 0) break;
    }
    process.stdout.write(String(sum > 0 ? %GetOptimizationStatus(hot) : -1));
  `;
  const run = spawnSync(process.execPath, ['--allow-natives-syntax', '--input-type=module', '-e', script], {
    encoding: 'utf8',
  });
  assert.equal(run.status, 0, run.stderr);
  return { status: Number(run.stdout), stderr: run.stderr };
}

/**
 * Runs a WebAssembly loop (spin(n): the sum n + (n-1) + … + 1) until V8 tiers it up to TurboFan or 200
 * calls have passed, and prints which compiler's code it runs: "liftoff" or "turbofan".
 */
function hotWasmTier(apply: boolean): { tier: string; stderr: string } {
  // (func (export "spin") (param i32) (result i32) (local i32)
  //   (block (loop (br_if 1 (i32.eqz (local.get 0)))
  //     (local.set 1 (i32.add (local.get 1) (local.get 0)))
  //     (local.set 0 (i32.sub (local.get 0) (i32.const 1))) (br 0))) (local.get 1))
  const wasm = [
    0, 97, 115, 109, 1, 0, 0, 0, 1, 6, 1, 0x60, 1, 0x7f, 1, 0x7f, 3, 2, 1, 0, 7, 8, 1, 4, 0x73, 0x70, 0x69,
    0x6e, 0, 0, 0x0a, 0x23, 1, 0x21, 1, 1, 0x7f, 2, 0x40, 3, 0x40, 0x20, 0, 0x45, 0x0d, 1, 0x20, 1, 0x20, 0,
    0x6a, 0x21, 1, 0x20, 0, 0x41, 1, 0x6b, 0x21, 0, 0x0c, 0, 0x0b, 0x0b, 0x20, 1, 0x0b,
  ];
  const script = `
    const { applySidecarV8Flags } = await import(${JSON.stringify(MODULE)});
    ${apply ? 'applySidecarV8Flags();' : ''}
    const { instance } = await WebAssembly.instantiate(new Uint8Array(${JSON.stringify(wasm)}));
    const spin = instance.exports.spin;
    if (spin(4) !== 10) throw new Error('spin(4) is ' + spin(4));
    // Tier-up compiles in the background: yield to the loop between calls.
    for (let i = 0; i < 200 && !%IsTurboFanFunction(spin); i++) {
      spin(1_000_000);
      await new Promise((resolve) => setImmediate(resolve));
    }
    process.stdout.write(%IsTurboFanFunction(spin) ? 'turbofan' : %IsLiftoffFunction(spin) ? 'liftoff' : 'other');
  `;
  const run = spawnSync(process.execPath, ['--allow-natives-syntax', '--input-type=module', '-e', script], {
    encoding: 'utf8',
  });
  assert.equal(run.status, 0, run.stderr);
  return { tier: run.stdout, stderr: run.stderr };
}

describe('the sidecar’s V8 flags', () => {
  it('are flags this Node knows, and they keep hot code in the interpreter', () => {
    const applied = hotFunctionStatus(true);
    assert.equal(applied.stderr, '', 'V8 reports no unrecognised flag');
    assert.ok(applied.status > 0, 'the status is read');
    assert.equal(applied.status & COMPILED, 0, `status ${applied.status.toString(2)}: not compiled`);
  });

  it('are what makes the difference: without them the same code is optimised', () => {
    const control = hotFunctionStatus(false);
    assert.notEqual(control.status & OPTIMIZED, 0, `status ${control.status.toString(2)}: optimised`);
  });

  it('keep hot WebAssembly (undici’s HTTP parser) at the baseline compiler; without them it is tiered up', () => {
    const applied = hotWasmTier(true);
    assert.equal(applied.stderr, '', 'V8 reports no unrecognised flag');
    assert.equal(applied.tier, 'liftoff');
    assert.equal(hotWasmTier(false).tier, 'turbofan');
  });

  it('keep WebAssembly, which Node’s own fetch (the GCP client’s) parses HTTP with', () => {
    // --jitless or --lite-mode would save a little more, but take WebAssembly away.
    const script = `
      const { applySidecarV8Flags } = await import(${JSON.stringify(MODULE)});
      applySidecarV8Flags();
      // (module (func (export "add") (param i32 i32) (result i32) local.get 0 local.get 1 i32.add))
      const bytes = new Uint8Array([0,97,115,109,1,0,0,0,1,7,1,96,2,127,127,1,127,3,2,1,0,7,7,1,3,97,100,100,0,0,10,9,1,7,0,32,0,32,1,106,11]);
      const { instance } = await WebAssembly.instantiate(bytes);
      process.stdout.write(String(instance.exports.add(40, 2)));
    `;
    const run = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
    assert.equal(run.stderr, '');
    assert.equal(run.stdout, '42');
  });

  it('are each named in docs/agent.md and docs/webhook.md, which tell operators what the sidecar runs with', () => {
    for (const doc of ['docs/agent.md', 'docs/webhook.md']) {
      const text = readFileSync(new URL(`../../${doc}`, import.meta.url), 'utf8');
      for (const flag of SIDECAR_V8_FLAGS) assert.ok(text.includes(flag), `${doc} names ${flag}`);
    }
  });
});
