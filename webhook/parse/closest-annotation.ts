import { editDistance } from '../../agent/contract/env-names.ts';
import { FILE_ANNOTATIONS, FILE_NAME } from '../annotations/file-annotations.ts';
import { POD_ANNOTATIONS } from '../annotations/pod-annotations.ts';

/** Slips allowed between a mistyped name and the one suggested. */
const MAX_SLIPS = 2;

/**
 * The known annotation within two edits of a mistyped one, for the error's fix: pod-wide
 * (`moed` → `mode`) or per-file with the file name kept (`secrets-db` → `secret-db`). Edits are
 * counted as the agent counts them in its env names (a swap of two neighbours is one).
 */
export function closestAnnotation(name: string): string | undefined {
  let best: { name: string; distance: number } | undefined;
  const consider = (candidate: string, d: number) => {
    if (d <= MAX_SLIPS && (!best || d < best.distance)) best = { name: candidate, distance: d };
  };
  for (const known of Object.keys(POD_ANNOTATIONS)) consider(known, editDistance(name, known, MAX_SLIPS));
  // Every `-` may end the mistyped setting: `file-mod-db` is `file-mod` + `db`.
  for (let dash = name.indexOf('-'); dash > 0; dash = name.indexOf('-', dash + 1)) {
    const [setting, file] = [name.slice(0, dash), name.slice(dash + 1)];
    if (!FILE_NAME.test(file)) continue;
    for (const known of Object.keys(FILE_ANNOTATIONS))
      consider(`${known}-${file}`, editDistance(setting, known, MAX_SLIPS));
  }
  return best?.name;
}
