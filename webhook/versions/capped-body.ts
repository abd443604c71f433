import type { Readable } from 'node:stream';

/** A body read up to `maxBytes`; past that the rest is not read (the stream is destroyed) and `cut` says so. */
export async function readCapped(body: Readable, maxBytes: number): Promise<{ text: string; cut: boolean }> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    const piece = chunk as Buffer;
    if (size + piece.length > maxBytes) {
      chunks.push(piece.subarray(0, maxBytes - size));
      body.destroy();
      return { text: Buffer.concat(chunks).toString('utf8'), cut: true };
    }
    chunks.push(piece);
    size += piece.length;
  }
  return { text: Buffer.concat(chunks).toString('utf8'), cut: false };
}
