/**
 * The dedicated fuzz run: every property of properties.ts with ≥ 10^5 cases in total.
 *
 *   node test/fuzz/run.ts                      100 000 cases, random seed (printed)
 *   FUZZ_RUNS=1000000 node test/fuzz/run.ts    more
 *   FUZZ_SEED=123 FUZZ_ONLY=parseReference node test/fuzz/run.ts
 *   FUZZ_SEED=123 FUZZ_PATH=4:1:0 FUZZ_ONLY='writer: AtomicDir.write' node test/fuzz/run.ts   replay one counterexample
 *
 * A property that fails goes on with the next seed for the rest of its budget, so one finding does
 * not hide the others: the first failure of each kind is shrunk and printed, repeats (same error
 * signature) are only counted.
 * Exit code 1 when anything was found.
 */
import {
  FINDING_KINDS,
  FuzzContext,
  PROPERTIES,
  type FindingKind,
  type PropertyOutcome,
} from './properties.ts';

/** Distinct findings per property before it stops; repeats of one are counted, not shrunk again. */
const MAX_FINDINGS_PER_PROPERTY = 5;

function integerEnv(name: string, fallback: number): number {
  const text = process.env[name];
  if (text === undefined || text === '') return fallback;
  const n = Number(text);
  if (!Number.isSafeInteger(n) || n < 0)
    throw new Error(`${name}=${JSON.stringify(text)} is not a whole number`);
  return n;
}

const totalRuns = integerEnv('FUZZ_RUNS', 100_000);
const seed = integerEnv('FUZZ_SEED', Math.floor(Math.random() * 0x7fffffff));
const only = process.env.FUZZ_ONLY;
const path = process.env.FUZZ_PATH;
const selected = PROPERTIES.filter((p) => only === undefined || p.name.includes(only));
if (selected.length === 0) throw new Error(`FUZZ_ONLY=${JSON.stringify(only)} matches no property`);
const totalWeight = selected.reduce((sum, p) => sum + p.weight, 0);

console.log(
  `fuzz: ${totalRuns} cases over ${selected.length} properties, FUZZ_SEED=${seed}${path ? ` FUZZ_PATH=${path}` : ''}`,
);

interface PropertyResult {
  readonly name: string;
  runs: number;
  ms: number;
  readonly findings: PropertyOutcome[];
  /** Failing cases per signature, the first one included. */
  readonly repeats: Map<string, number>;
}

// Library warnings are checked by the properties that provoke them; here they are only counted,
// instead of Node printing each one (with the text that provoked it) between the results.
const warnings = new Map<string, number>();
process.removeAllListeners('warning');
process.on('warning', (w) => warnings.set(w.name, (warnings.get(w.name) ?? 0) + 1));

const ctx = new FuzzContext();
const results: PropertyResult[] = [];
const started = performance.now();
try {
  for (const property of selected) {
    const budget = path ? 1 : Math.max(1, Math.round((totalRuns * property.weight) / totalWeight));
    const result: PropertyResult = { name: property.name, runs: 0, ms: 0, findings: [], repeats: new Map() };
    results.push(result);
    for (
      let attempt = 0;
      result.runs < budget && result.findings.length < MAX_FINDINGS_PER_PROPERTY;
      attempt++
    ) {
      const outcome = await property.check(ctx, {
        seed: (seed + attempt) % 0x7fffffff,
        numRuns: path ? 1 : budget - result.runs,
        ...(path ? { path } : {}),
        endOnFailure: result.findings.length > 0,
      });
      result.runs += outcome.runs;
      result.ms += outcome.ms;
      if (outcome.failed) {
        const signature = outcome.signature ?? '';
        const seen = result.repeats.get(signature);
        result.repeats.set(signature, (seen ?? 0) + 1);
        if (seen !== undefined) continue;
        // Replay a new kind of failure with shrinking on, for a small counterexample.
        const shrunk =
          result.findings.length === 0
            ? outcome
            : await property.check(ctx, { seed: outcome.seed, numRuns: outcome.runs });
        result.findings.push(shrunk);
        console.log(`\n✖ ${property.name}: ${shrunk.kind} after ${result.runs} cases`);
        console.log(
          `  replay: FUZZ_SEED=${shrunk.seed} FUZZ_PATH=${shrunk.path} FUZZ_ONLY='${property.name}' node test/fuzz/run.ts`,
        );
        console.log(shrunk.report?.replace(/^/gm, '  '));
      }
      if (path) break;
    }
    console.log(
      `${result.findings.length ? '✖' : '✔'} ${property.name}: ${result.runs} cases in ${(result.ms / 1000).toFixed(1)} s`,
    );
  }
} finally {
  await ctx.close();
}

const seconds = (performance.now() - started) / 1000;
const findings = results.flatMap((r) => r.findings);
const byKind = (kind: FindingKind) => findings.filter((f) => f.kind === kind).length;
const pad = (text: string, width: number) => text.padEnd(width);

console.log(
  `\n==== fuzz summary: FUZZ_SEED=${seed}, ${results.reduce((n, r) => n + r.runs, 0)} cases in ${seconds.toFixed(1)} s ====`,
);
console.log(`${pad('property', 38)}${pad('cases', 10)}${pad('failing', 10)}${pad('seconds', 10)}outcomes`);
for (const r of results) {
  const failing = [...r.repeats.values()].reduce((a, b) => a + b, 0);
  const outcomes = [...ctx.tally.labels(r.name)].map(([label, n]) => `${label}=${n}`).join(' ');
  console.log(
    `${pad(r.name, 38)}${pad(String(r.runs), 10)}${pad(String(failing), 10)}${pad((r.ms / 1000).toFixed(1), 10)}${outcomes}`,
  );
}
console.log('(outcomes count every execution, shrinking included)');
if (warnings.size > 0)
  console.log(`process warnings: ${[...warnings].map(([n, c]) => `${n}=${c}`).join(' ')}`);
if (findings.length > 0) {
  console.log('\ndistinct findings (failing cases):');
  for (const r of results)
    for (const f of r.findings)
      console.log(`  ${r.name}: ${f.signature} (${r.repeats.get(f.signature ?? '') ?? 1} failing cases)`);
}
console.log('');
const LABELS: Record<FindingKind, string> = {
  crash: 'crashes (unexpected exception types)',
  'server-error': '5xx answers',
  'connection-error': 'connection errors',
  'deny-without-message': 'denies without a message',
  'write-outside-volume': 'writes outside the volume',
  'foreign-entry-changed': 'foreign volume entries changed',
  'leaked-canary': 'leaked canaries',
  contract: 'other contract violations',
};
console.log('\ndistinct findings by kind:');
for (const kind of FINDING_KINDS) console.log(`${pad(LABELS[kind], 38)}${byKind(kind)}`);
process.exitCode = findings.length > 0 ? 1 : 0;
