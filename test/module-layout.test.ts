/**
 * The house rules of the product code (agent/, webhook/, images/), read from the source (issue 24):
 * modules import one way, with no cycle (type-only and dynamic imports count: two modules that import
 * each other cannot be read or changed apart), and no module grows past MAX_LINES, where it is doing
 * more than one job.
 */
import assert from 'node:assert/strict';
import { globSync, readFileSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { describe, it } from 'node:test';
import ts from 'typescript';
import { ROOT } from './support/run-agent.ts';

const PRODUCT = ['agent', 'webhook', 'images'];
const MAX_LINES = 500;

const files = globSync(
  PRODUCT.map((dir) => `${dir}/**/*.ts`),
  { cwd: ROOT },
)
  .map((f) => f.split('\\').join('/'))
  .filter((f) => !f.endsWith('.d.ts'))
  .sort();
const sources = new Map(files.map((f) => [f, readFileSync(join(ROOT, f), 'utf8')]));

/**
 * The product modules `file` imports: `import`, `import type`, `export … from`, `import()` and
 * `typeof import()`, as TypeScript's own scanner finds them (not in comments or strings).
 */
function importsOf(file: string): string[] {
  return ts
    .preProcessFile(sources.get(file)!, true, true)
    .importedFiles.map((f) => f.fileName)
    .filter((name) => name.startsWith('.'))
    .map((name) =>
      normalize(join(dirname(file), name))
        .split('\\')
        .join('/'),
    )
    .filter((target) => sources.has(target));
}

type Graph = ReadonlyMap<string, readonly string[]>;

/**
 * Every knot of the graph (modules that all reach each other: a strongly connected component, by
 * Tarjan's algorithm), each with one cycle through it that a reader can follow.
 */
function findCycles(graph: Graph): { cycle: string[]; knot: string[] }[] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const knots: string[][] = [];
  const visit = (node: string): void => {
    index.set(node, index.size);
    low.set(node, index.get(node)!);
    stack.push(node);
    for (const next of graph.get(node) ?? []) {
      if (!index.has(next)) {
        visit(next);
        low.set(node, Math.min(low.get(node)!, low.get(next)!));
      } else if (stack.includes(next)) low.set(node, Math.min(low.get(node)!, index.get(next)!));
    }
    if (low.get(node) !== index.get(node)) return;
    const knot = stack.splice(stack.indexOf(node));
    if (knot.length > 1 || graph.get(node)?.includes(node)) knots.push(knot.sort());
  };
  for (const node of graph.keys()) if (!index.has(node)) visit(node);
  return knots.map((knot) => ({ cycle: shortestCycle(graph, knot), knot }));
}

/** The shortest way from the knot's first module back to itself, inside the knot (breadth first). */
function shortestCycle(graph: Graph, knot: readonly string[]): string[] {
  const start = knot[0]!;
  const cameFrom = new Map<string, string>();
  const queue = [start];
  for (const node of queue) {
    for (const next of graph.get(node) ?? []) {
      if (next === start) {
        const path = [node];
        while (path[0] !== start) path.unshift(cameFrom.get(path[0]!)!);
        return [...path, start];
      }
      if (knot.includes(next) && !cameFrom.has(next)) {
        cameFrom.set(next, node);
        queue.push(next);
      }
    }
  }
  throw new Error(`${start} is in a knot but no cycle leads back to it`);
}

function lineCount(text: string): number {
  return text.split('\n').length - (text.endsWith('\n') ? 1 : 0);
}

describe('module layout of agent/, webhook/ and images/', () => {
  it('reads every kind of import, and finds a cycle when there is one', () => {
    // A scanner that found nothing would pass every check below.
    assert.ok(files.length > 100, `${files.length} product modules found`);
    const registry = importsOf('agent/providers/registry.ts');
    assert.ok(registry.includes('agent/providers/vault/vault-provider.ts'), 'a dynamic import');
    assert.ok(registry.includes('agent/providers/provider.ts'), 'a type-only import');
    assert.deepEqual(
      findCycles(
        new Map([
          ['a', ['b', 'd']],
          ['b', ['c']],
          ['c', ['a', 'b']],
          ['d', ['d']],
          ['e', ['a']],
        ]),
      ),
      [
        { cycle: ['d', 'd'], knot: ['d'] },
        { cycle: ['a', 'b', 'c', 'a'], knot: ['a', 'b', 'c'] },
      ],
    );
  });

  it('has no import cycle', () => {
    const graph = new Map(files.map((f) => [f, importsOf(f)]));
    // A knot can hold more modules than its shortest cycle: name them all, the next cycle is there.
    const cycles = findCycles(graph).map(
      ({ cycle, knot }) =>
        `${cycle.join(' → ')}${knot.length >= cycle.length ? ` (a knot of ${knot.join(', ')})` : ''}`,
    );
    assert.deepEqual(cycles, [], `import cycles:\n${cycles.join('\n')}`);
  });

  it(`has no module over ${MAX_LINES} lines`, () => {
    const long = files
      .map((f) => ({ file: f, lines: lineCount(sources.get(f)!) }))
      .filter((f) => f.lines > MAX_LINES)
      .map((f) => `${f.file}: ${f.lines} lines`);
    assert.deepEqual(long, [], `split these along their jobs:\n${long.join('\n')}`);
  });
});
