/**
 * The env-exec wrapper (agent/native/env-exec.c) for an app image's platform, and the secrets volume it
 * reads, for running it in the app images (env-exec-in-apps.test.ts) as the webhook's patch runs it.
 * This machine's platform: the tests' own build (test/env-exec/wrapper.ts, images/build-native.ts).
 * Another: compiled by images/build-native.ts itself in that platform's native build base under QEMU,
 * as Dockerfile.agent's native stage compiles the agent's native programs (same flags, same compiler).
 */
import { chmodSync, lchownSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { requirePodman } from '../../images/container-engine.ts';
import { nativeBuildBase } from '../../images/offline-bases.ts';
import { hostPlatform, requireEmulation, type Platform } from '../../images/platforms.ts';
import { envExecBinary, envVolume } from '../env-exec/wrapper.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const built = new Map<Platform, string>();

/** The wrapper built for `platform`, once per test process; removed at exit. */
export function envExecFor(platform: Platform): string {
  const known = built.get(platform);
  if (known) return known;
  if (platform === hostPlatform()) {
    built.set(platform, envExecBinary());
    return envExecBinary();
  }
  requireEmulation(platform);
  const podman = requirePodman();
  const base = nativeBuildBase(platform);
  base.ensure(podman);
  const out = mkdtempSync(join(tmpdir(), 'secret-agent-env-exec-'));
  process.on('exit', () => rmSync(out, { recursive: true, force: true }));
  // Only what Dockerfile.agent's native stage copies in; its output into `out`.
  const ro = (path: string) => ['--mount', `type=bind,src=${join(ROOT, path)},dst=/src/${path},ro=true`];
  podman.run(
    [
      'run',
      '--rm',
      '--platform',
      platform,
      '--network',
      'none',
      ...ro('images/build-native.ts'),
      ...ro('images/container-engine.ts'),
      ...ro('agent/native'),
      '--mount',
      `type=bind,src=${out},dst=/src/dist/native`,
      '--workdir',
      '/src',
      base.ref,
      'node',
      'images/build-native.ts',
    ],
    { timeoutMs: 10 * 60_000 },
  );
  const wrapper = join(out, 'env-exec');
  built.set(platform, wrapper);
  return wrapper;
}

/**
 * Writes `vars` into `dir` with the agent's own writer (AtomicDir, files 0400), then hands the set to
 * `uid`: the agent runs as the app's user (the webhook renders it so), which these tests' writer, root,
 * stands in for.
 */
export async function writeEnvSet(dir: string, vars: Record<string, string>, uid: number): Promise<void> {
  await (await envVolume(dir)).write(vars);
  const own = (path: string) => {
    lchownSync(path, uid, uid);
    for (const entry of readdirSync(path, { withFileTypes: true })) {
      const child = join(path, entry.name);
      if (entry.isDirectory()) own(child);
      else lchownSync(child, uid, uid);
    }
  };
  own(dir);
  // The volume's own directory, as the kubelet makes an emptyDir: anyone may enter it.
  chmodSync(dir, 0o777);
}
