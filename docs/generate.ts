import { readFileSync, writeFileSync } from 'node:fs';
import { GENERATED_DOCS, renderGenerated } from './tables.ts';

for (const doc of GENERATED_DOCS) {
  const path = new URL(`../${doc}`, import.meta.url);
  writeFileSync(path, renderGenerated(readFileSync(path, 'utf8')));
}
