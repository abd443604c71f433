import { format, resolveConfig } from 'prettier';
import { type FigureBook, renderInline } from './figure-format.ts';
import { PERFORMANCE_TABLES } from './performance-tables.ts';

/** The documents whose figures `npm run docs` renders from the last bench run, and where its charts go. */
export const FIGURE_DOCS = ['README.md', 'docs/performance.md'] as const;
export const CHART_DIR = 'docs/figures';

const BLOCK = /<!-- figures:([a-z-]+) -->\n[\s\S]*?<!-- \/figures:\1 -->/g;

/**
 * A document with every `<!-- figures:NAME -->` block and inline figure rendered from `book`, then
 * formatted as `npm run format` would: the document is prettier-checked like any other, and a table
 * rendered unformatted would differ from the committed one after every format.
 */
export async function renderFigureDoc(text: string, path: string, book: FigureBook): Promise<string> {
  const blocks = text.replace(BLOCK, (_, name: string) => {
    const render = PERFORMANCE_TABLES[name];
    if (!render)
      throw new Error(`${path}: a figures block "${name}" that docs/performance-tables.ts does not know`);
    return `<!-- figures:${name} -->\n\n${render(book)}\n\n<!-- /figures:${name} -->`;
  });
  const config = (await resolveConfig(path)) ?? {};
  return format(renderInline(blocks, book), { ...config, filepath: path });
}
