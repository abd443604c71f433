import { readFile, stat } from 'node:fs/promises';
import { resolve } from 'node:path';
import type { FileReference } from '../../contract/reference.ts';
import {
  contentVersion,
  fetchEach,
  MAX_SECRET_BYTES,
  ProviderError,
  type ProviderFactory,
} from '../provider.ts';

/** Reads local files: the embedded default for demos and local runs. The version is a content hash. */
export const createFileProvider: ProviderFactory<FileReference> = () => ({
  fetch: (refs) =>
    fetchEach(refs, 8, async (ref) => {
      const path = resolve(ref.path);
      const info = await stat(path).catch((e: NodeJS.ErrnoException) => {
        if (e.code === 'ENOENT' || e.code === 'ENOTDIR')
          throw new ProviderError('not-found', `no file at ${path}`, 'check the path after file:');
        if (e.code === 'EACCES')
          throw new ProviderError(
            'permission-denied',
            `cannot read ${path}`,
            'make the file readable by the agent’s user',
          );
        throw e;
      });
      if (!info.isFile())
        throw new ProviderError('invalid', `${path} is not a regular file`, 'point file: at a file');
      if (info.size > MAX_SECRET_BYTES) {
        throw new ProviderError(
          'too-large',
          `${path} is ${info.size} bytes`,
          `keep secrets under ${MAX_SECRET_BYTES} bytes (1 MiB)`,
        );
      }
      const bytes = await readFile(path);
      return { bytes, ...contentVersion(bytes) };
    }),
});
