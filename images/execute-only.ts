/**
 * Execute-only programs (issue 37). A process whose program file its user cannot read is made
 * non-dumpable by the kernel at execve (fs/exec.c would_dump: mm->dumpable becomes fs.suid_dumpable,
 * 0 or 2, never 1), so /proc/PID/{environ,mem,maps,fd/*,root,cwd}, ptrace, process_vm_readv and
 * pidfd_getfd are refused to every other process of its uid and gid that lacks CAP_SYS_PTRACE. The
 * agent's processes are all started from two files: Node (every agent run, sidecar, init container,
 * postStart hook, `exec:` helper written for Node) and the resident. Both are root's, mode 0511:
 * root reads them (the image build, a scanner), every other uid only executes them.
 *
 * /app/resident is copied in with that mode (Dockerfile.agent). Node comes with the base, 0755, and a
 * later layer changing a file's mode carries the whole file again (121 MiB, 42 MiB compressed, pulled
 * anew with every release, since each build stamps its layers with the commit's time). So `npm run
 * images` sets the mode in the base's own layer (images/stamped-base.ts), where nothing else changes
 * and the layer is the same from release to release; Dockerfile.agent still sets it itself when built
 * on a base that has not had this done (docker buildx), at that cost.
 */
import { closeSync, openSync, readSync, writeSync } from 'node:fs';

/** The image's Node, as a layer names it (no leading slash). */
export const NODE_PATH = 'nodejs/bin/node';
/** r-x for root, --x for everyone else. */
export const EXECUTE_ONLY_MODE = 0o511;

const BLOCK = 512;

/** A tar header's numeric field: octal text, or GNU's base-256 (high bit of the first byte set). */
function numeric(header: Buffer, offset: number, length: number): number {
  const field = header.subarray(offset, offset + length);
  if (field[0]! & 0x80) {
    let n = field[0]! & 0x7f;
    for (const b of field.subarray(1)) n = n * 256 + b;
    return n;
  }
  const text = field
    .toString('latin1')
    .replace(/[\0 ].*$/s, '')
    .trim();
  return text === '' ? 0 : parseInt(text, 8);
}

const text = (header: Buffer, offset: number, length: number) =>
  header
    .subarray(offset, offset + length)
    .toString('utf8')
    .replace(/\0.*$/s, '');

/** PAX extended header records (`LEN key=value\n`…). */
function paxRecords(data: Buffer): Map<string, string> {
  const records = new Map<string, string>();
  let at = 0;
  while (at < data.length) {
    const space = data.indexOf(0x20, at);
    const length = parseInt(data.subarray(at, space).toString('latin1'), 10);
    if (space < 0 || !(length > 0)) break;
    const record = data.subarray(space + 1, at + length - 1).toString('utf8');
    const eq = record.indexOf('=');
    records.set(record.slice(0, eq), record.slice(eq + 1));
    at += length;
  }
  return records;
}

/** Writes `value` as `digits` octal digits and a NUL into the field at `offset`. */
function putOctal(header: Buffer, offset: number, digits: number, value: number): void {
  header.write(`${value.toString(8).padStart(digits, '0')}\0`, offset, digits + 1, 'latin1');
}

/** The header checksum: every byte summed, the checksum field counted as spaces; 6 digits, NUL, space. */
function setChecksum(header: Buffer): void {
  header.fill(0x20, 148, 156);
  let sum = 0;
  for (const b of header) sum += b;
  header.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 8, 'latin1');
}

/**
 * Gives the regular file `path` (as NODE_PATH: relative, no leading `./` or `/`) mode `mode` in the
 * uncompressed layer tar at `tarPath`, rewriting its header in place: contents, owner, times and every
 * other entry stay byte for byte. Returns whether the layer holds that file. Throws when the file is
 * not root's (an execute-only program must be) or when the layer is not a tar it can walk.
 */
export function setModeInLayer(tarPath: string, path: string, mode: number): boolean {
  const fd = openSync(tarPath, 'r+');
  try {
    const header = Buffer.alloc(BLOCK);
    let at = 0;
    let longName: string | undefined;
    let pax = new Map<string, string>();
    let found = false;
    for (;;) {
      if (readSync(fd, header, 0, BLOCK, at) !== BLOCK)
        throw new Error(`${tarPath}: ends inside a header at ${at}`);
      if (header.every((b) => b === 0)) return found;
      const type = String.fromCharCode(header[156]!);
      const size = pax.has('size') ? Number(pax.get('size')) : numeric(header, 124, 12);
      const dataAt = at + BLOCK;
      at = dataAt + Math.ceil(size / BLOCK) * BLOCK;
      if (type === 'L' || type === 'x') {
        const data = Buffer.alloc(size);
        readSync(fd, data, 0, size, dataAt);
        if (type === 'L') longName = data.toString('utf8').replace(/\0.*$/s, '');
        else pax = paxRecords(data);
        continue;
      }
      const prefix = text(header, 345, 155);
      const name =
        pax.get('path') ?? longName ?? (prefix ? `${prefix}/${text(header, 0, 100)}` : text(header, 0, 100));
      const records = pax;
      longName = undefined;
      pax = new Map();
      if (type === 'g' || name.replace(/^(\.\/|\/)+/, '').replace(/\/$/, '') !== path) continue;
      if (type !== '0' && type !== '\0' && type !== '7')
        throw new Error(`${tarPath}: /${path} is not a regular file (tar type ${JSON.stringify(type)})`);
      const uid = Number(records.get('uid') ?? numeric(header, 108, 8));
      const gid = Number(records.get('gid') ?? numeric(header, 116, 8));
      if (uid !== 0 || gid !== 0)
        throw new Error(
          `${tarPath}: /${path} is ${uid}:${gid}'s; an execute-only program must be root's (0:0)`,
        );
      found = true;
      if ((numeric(header, 100, 8) & 0o7777) === mode) continue;
      putOctal(header, 100, 7, mode);
      setChecksum(header);
      writeSync(fd, header, 0, BLOCK, dataAt - BLOCK);
    }
  } finally {
    closeSync(fd);
  }
}
