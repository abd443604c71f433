/**
 * What `npm run release` takes: both images pushed, signed, attested and verified, against Debian's
 * docker-registry on the loopback with a throwaway cosign key pair, beside the same two pushes by
 * `skopeo copy --all` alone (what any release pays to move the bytes), in interleaved rounds, each to
 * a fresh repository so every blob is uploaded again. Medians. The release writes its record into a
 * scratch images dir (the build's files linked in), so dist/images/release.json is left as it was.
 * `node bench/release.ts` runs it alone, after `npm run images`.
 */
import { mkdirSync, mkdtempSync, readdirSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { COSIGN_INSTALL, cosignPath } from '../images/cosign.ts';
import { IMAGE_NAMES, IMAGES_DIR, readImagesManifest, ROOT } from '../images/manifest.ts';
import { startRegistry, tool } from '../test/image/local-registry.ts';

export interface ReleaseFigures {
  readonly rounds: number;
  /** Median seconds of `npm run release` (push, sign, attest, verify both images). */
  readonly releaseSeconds: number;
  /** Median seconds of pushing both archives with `skopeo copy --all` alone. */
  readonly pushSeconds: number;
}

/** A password for the throwaway key: not a secret of anyone's. */
const PASSWORD = 'bench-release';
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

function timed(what: string, run: () => { status: number | null; stderr: string }): number {
  const began = process.hrtime.bigint();
  const r = run();
  if (r.status !== 0) throw new Error(`${what} failed (exit ${r.status}): ${r.stderr.slice(-800)}`);
  return Number(process.hrtime.bigint() - began) / 1e9;
}

export async function benchRelease(rounds = 3): Promise<ReleaseFigures> {
  const manifest = readImagesManifest();
  const cosign = cosignPath();
  const registry = await startRegistry();
  try {
    const keys = join(registry.dir, 'keys');
    mkdirSync(keys);
    const made = tool(cosign, ['generate-key-pair'], {
      cwd: keys,
      env: { ...process.env, COSIGN_PASSWORD: PASSWORD },
      install: COSIGN_INSTALL,
    });
    if (made.status !== 0) throw new Error(`cosign generate-key-pair failed: ${made.stderr}`);
    const scratch = mkdtempSync(join(registry.dir, 'images-'));
    for (const file of readdirSync(IMAGES_DIR))
      if (file !== 'release.json') symlinkSync(join(IMAGES_DIR, file), join(scratch, file));
    const release: number[] = [];
    const push: number[] = [];
    for (let round = 0; round < rounds; round++) {
      push.push(
        timed('skopeo copy --all', () => {
          for (const name of IMAGE_NAMES) {
            const r = tool('skopeo', [
              'copy',
              '--all',
              '--quiet',
              '--dest-tls-verify=false',
              `oci-archive:${join(ROOT, manifest.images[name].archive)}`,
              `docker://${registry.host}/push-${round}/${name}:${manifest.version}`,
            ]);
            if (r.status !== 0) return r;
          }
          return { status: 0, stderr: '' };
        }),
      );
      release.push(
        timed('npm run release', () =>
          tool(
            process.execPath,
            [
              join(ROOT, 'images/release.ts'),
              '--registry',
              `${registry.host}/release-${round}`,
              '--key',
              join(keys, 'cosign.key'),
              '--insecure',
              '--images-dir',
              scratch,
            ],
            { env: { ...process.env, COSIGN_PASSWORD: PASSWORD }, timeoutMs: 900_000 },
          ),
        ),
      );
    }
    return { rounds, releaseSeconds: median(release), pushSeconds: median(push) };
  } finally {
    registry.stop(); // and its dir, keys and scratch images dir with it
  }
}

export function formatRelease(f: ReleaseFigures): string {
  return [
    `release of both images to a loopback registry, median of ${f.rounds} rounds`,
    '',
    '| what | seconds |',
    '| --- | ---: |',
    `| npm run release: push, sign, attest, verify | ${f.releaseSeconds.toFixed(1)} |`,
    `| skopeo copy --all of both archives alone | ${f.pushSeconds.toFixed(1)} |`,
  ].join('\n');
}

if (process.argv[1] === fileURLToPath(import.meta.url))
  console.log(formatRelease(await benchRelease(Number(process.env.BENCH_RELEASE_ROUNDS ?? 3))));
