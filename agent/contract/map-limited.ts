/**
 * `one` over every item, at most `limit` at a time, the results in the items' order: for calls a
 * remote end should not get all at once (a backend without a batch call, an API server's logs).
 */
export async function mapLimited<T, R>(
  items: readonly T[],
  limit: number,
  one: (item: T, index: number) => Promise<R>,
): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const i = next++;
      out[i] = await one(items[i]!, i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}
