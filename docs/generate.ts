import { readFileSync, writeFileSync } from 'node:fs';
import { renderReadme } from './tables.ts';

const path = new URL('../README.md', import.meta.url);
writeFileSync(path, renderReadme(readFileSync(path, 'utf8')));
