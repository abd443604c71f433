/**
 * What the env-var tests check of an executable: its ELF header's machine and type, and its program
 * interpreter (PT_INTERP: the dynamic loader the kernel starts it with; none for a static one). Only
 * 64-bit little-endian ELF, which both platforms (x86_64, aarch64) are.
 */

export interface ElfFacts {
  /** e_machine: 62 x86_64, 183 aarch64. */
  readonly machine: number;
  /** e_type: 2 an executable, 3 a shared object (a PIE, or a loader). */
  readonly type: number;
  /** PT_INTERP's path, undefined when there is none. */
  readonly interpreter?: string;
  /** Whether it has a PT_DYNAMIC segment (a static-pie has one, a plain static executable none). */
  readonly dynamic: boolean;
}

const PT_DYNAMIC = 2;
const PT_INTERP = 3;

export function readElf(bytes: Buffer): ElfFacts {
  if (bytes.length < 64 || bytes.readUInt32BE(0) !== 0x7f454c46)
    throw new Error('not an ELF file (no \\x7fELF magic)');
  if (bytes[4] !== 2 || bytes[5] !== 1)
    throw new Error(`not 64-bit little-endian ELF (class ${bytes[4]}, data ${bytes[5]})`);
  const type = bytes.readUInt16LE(16);
  const machine = bytes.readUInt16LE(18);
  const phoff = Number(bytes.readBigUInt64LE(32));
  const phentsize = bytes.readUInt16LE(54);
  const phnum = bytes.readUInt16LE(56);
  let interpreter: string | undefined;
  let dynamic = false;
  for (let i = 0; i < phnum; i++) {
    const at = phoff + i * phentsize;
    if (at + 56 > bytes.length) throw new Error(`program header ${i} lies past the end of the file`);
    const kind = bytes.readUInt32LE(at);
    if (kind === PT_DYNAMIC) dynamic = true;
    if (kind !== PT_INTERP) continue;
    const offset = Number(bytes.readBigUInt64LE(at + 8));
    const size = Number(bytes.readBigUInt64LE(at + 32));
    // The path and its NUL.
    interpreter = bytes
      .subarray(offset, offset + size)
      .toString('latin1')
      .replace(/\0$/, '');
  }
  return { machine, type, dynamic, ...(interpreter === undefined ? {} : { interpreter }) };
}
