/**
 * Atomicity under stress: a reader in another process reads the set as documented (resolve ..data
 * once, read every file below it) while this process swaps new versions in with AtomicDir, until at
 * least READS file reads and SWAPS swaps have happened. Every read set must be whole and from one
 * version: 0 torn files, 0 mixed sets. A payload removed under a slow reader is an ENOENT retry.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import type { FileEntry } from '../agent/format/render-files.ts';
import { AtomicDir } from '../agent/write/atomic-dir.ts';

export interface AtomicityFigures {
  readonly swaps: number;
  readonly fileReads: number;
  readonly consistentSets: number;
  readonly retriedSets: number;
  readonly torn: number;
  readonly mixed: number;
  readonly versionsSeen: number;
}

const BIG = 64 * 1024;

const READER = `
import { readFileSync, readlinkSync } from 'node:fs';
const dir = process.argv[1];
let fileReads = 0, consistent = 0, retried = 0, torn = 0, mixed = 0; const seen = new Set();
const report = () => process.stdout.write(JSON.stringify({ fileReads, consistent, retried, torn, mixed, versionsSeen: seen.size }) + '\\n');
process.on('SIGTERM', () => { report(); process.exit(0); });
setInterval(report, 500);
for (;;) {
  for (let i = 0; i < 200; i++) {
    try {
      const base = dir + '/' + readlinkSync(dir + '/..data');
      const a = readFileSync(base + '/a', 'utf8');
      const b = readFileSync(base + '/nested/b', 'utf8');
      const big = readFileSync(base + '/big', 'utf8');
      fileReads += 3;
      if (big.length !== ${BIG} || !big.startsWith(a + ':')) torn++;
      else if (b !== a) mixed++;
      else { consistent++; seen.add(a); }
    } catch (e) { if (e.code === 'ENOENT') retried++; else throw e; }
  }
  await new Promise((r) => setImmediate(r));
}
`;

export async function benchAtomicity(minReads: number, minSwaps: number): Promise<AtomicityFigures> {
  const path = mkdtempSync('/dev/shm/secret-agent-atomicity-');
  try {
    const dir = await AtomicDir.open(path, { requireMemoryFs: true });
    const set = (v: number): FileEntry[] => [
      { path: 'a', bytes: Buffer.from(String(v)), mode: 0o400 },
      { path: 'nested/b', bytes: Buffer.from(String(v)), mode: 0o400 },
      { path: 'big', bytes: Buffer.from(`${v}:`.padEnd(BIG, String(v % 10))), mode: 0o400 },
    ];
    await dir.write(set(0));
    const reader = spawn(process.execPath, ['--input-type=module', '-e', READER, path], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let last = { fileReads: 0, consistent: 0, retried: 0, torn: 0, mixed: 0, versionsSeen: 0 };
    let buffered = '';
    reader.stdout.on('data', (d: Buffer) => {
      buffered += d.toString();
      const lines = buffered.split('\n');
      buffered = lines.pop()!;
      for (const line of lines) if (line) last = JSON.parse(line) as typeof last;
    });
    let swaps = 0;
    while (swaps < minSwaps || last.fileReads < minReads) {
      await dir.write(set(++swaps));
      if (swaps % 200 === 0) await new Promise((r) => setImmediate(r));
    }
    reader.kill('SIGTERM');
    await new Promise((r) => reader.once('close', r));
    return {
      swaps,
      fileReads: last.fileReads,
      consistentSets: last.consistent,
      retriedSets: last.retried,
      torn: last.torn,
      mixed: last.mixed,
      versionsSeen: last.versionsSeen,
    };
  } finally {
    rmSync(path, { recursive: true, force: true });
  }
}
