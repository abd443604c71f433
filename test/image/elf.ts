/**
 * What the image tests check of a native program the agent image ships (/app/resident, /app/env-exec):
 * a static executable for the image's platform, root's, of the mode it ships with (0511 for the
 * resident, which only its process runs; 0555 for env-exec, which the agent copies), that the agent's
 * user cannot write, without build-machine paths or a build id. Read inside the image by its own Node,
 * as root (without capabilities: the owner's read bit, which 0511 keeps for root alone).
 */
import assert from 'node:assert/strict';
import type { Platform } from '../../images/platforms.ts';
import { runContainer } from './podman.ts';

/** ELF e_machine of each platform's executables. */
const ELF_MACHINE: Record<Platform, number> = { 'linux/amd64': 62, 'linux/arm64': 183 };
const PT_DYNAMIC = 2;
const PT_INTERP = 3;

interface ElfFacts {
  readonly magic: boolean;
  readonly class64: boolean;
  readonly littleEndian: boolean;
  readonly type: number;
  readonly machine: number;
  /** p_type of every program header. */
  readonly segments: readonly number[];
}

/** The ELF header and program header types of a 64-bit little-endian executable. */
function readElf(bytes: Buffer): ElfFacts {
  const phoff = Number(bytes.readBigUInt64LE(0x20));
  const phentsize = bytes.readUInt16LE(0x36);
  const phnum = bytes.readUInt16LE(0x38);
  return {
    magic: bytes.subarray(0, 4).equals(Buffer.from([0x7f, 0x45, 0x4c, 0x46])),
    class64: bytes[4] === 2,
    littleEndian: bytes[5] === 1,
    type: bytes.readUInt16LE(0x10),
    machine: bytes.readUInt16LE(0x12),
    segments: Array.from({ length: phnum }, (_, i) => bytes.readUInt32LE(phoff + i * phentsize)),
  };
}

/**
 * Asserts `path` in `image` is a static `platform` executable, root's, of `mode`, not writable by the
 * image's user (nor, where `mode` leaves others no read bit, readable by it); returns its size.
 */
export async function assertStaticExecutable(
  image: string,
  platform: Platform,
  path: string,
  mode: number,
  timeoutMs: number,
): Promise<number> {
  const asUser = await runContainer(
    {
      image,
      platform,
      entrypoint: [
        '/nodejs/bin/node',
        '-e',
        `const fs = require('node:fs');
         const tryOpen = (flags) => { try { fs.closeSync(fs.openSync(${JSON.stringify(path)}, flags)); return 'opened'; } catch (e) { return e.code; } };
         process.stdout.write(JSON.stringify({ read: tryOpen('r'), write: tryOpen('r+') }));`,
      ],
    },
    timeoutMs,
  );
  assert.equal(asUser.code, 0, asUser.stderr);
  const byUser = JSON.parse(asUser.stdout) as { read: string; write: string };
  assert.ok(
    ['EACCES', 'EROFS'].includes(byUser.write),
    `opened for writing by the image's user: ${byUser.write}`,
  );
  assert.equal(byUser.read, mode & 0o004 ? 'opened' : 'EACCES', 'read by the image’s user');
  const run = await runContainer(
    {
      image,
      platform,
      user: 0,
      entrypoint: [
        '/nodejs/bin/node',
        '-e',
        `const fs = require('node:fs');
         const path = ${JSON.stringify(path)};
         const s = fs.statSync(path);
         let write; try { fs.openSync(path, 'r+'); write = 'opened'; } catch (e) { write = e.code; }
         process.stdout.write(JSON.stringify({ file: s.isFile(), mode: s.mode & 0o7777, uid: s.uid, gid: s.gid, write,
           bytes: fs.readFileSync(path).toString('base64') }));`,
      ],
    },
    timeoutMs,
  );
  assert.equal(run.code, 0, run.stderr);
  const seen = JSON.parse(run.stdout) as {
    file: boolean;
    mode: number;
    uid: number;
    gid: number;
    write: string;
    bytes: string;
  };
  assert.deepEqual(
    [seen.file, seen.mode.toString(8), seen.uid, seen.gid],
    [true, mode.toString(8), 0, 0],
    `a regular file, mode 0${mode.toString(8)}, root:root`,
  );
  assert.ok(['EACCES', 'EROFS'].includes(seen.write), `opened for writing by root: ${seen.write}`);
  const bytes = Buffer.from(seen.bytes, 'base64');
  const elf = readElf(bytes);
  assert.ok(elf.magic && elf.class64 && elf.littleEndian, 'a 64-bit little-endian ELF file');
  assert.equal(elf.machine, ELF_MACHINE[platform], `e_machine for ${platform}`);
  assert.equal(elf.type, 2, 'ET_EXEC: an executable, not position-independent');
  assert.ok(elf.segments.length > 0);
  assert.ok(!elf.segments.includes(PT_INTERP), 'static: no program interpreter');
  assert.ok(!elf.segments.includes(PT_DYNAMIC), 'static: no dynamic section');
  // The build machine's paths were mapped away (-ffile-prefix-map) and no build id was written.
  assert.ok(!bytes.includes('/src/'), 'no build-stage path');
  assert.ok(!bytes.includes('.note.gnu.build-id'), 'no build id');
  return bytes.length;
}
