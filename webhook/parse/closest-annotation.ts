import { FILE_ANNOTATIONS, FILE_NAME } from '../annotations/file-annotations.ts';
import { POD_ANNOTATIONS } from '../annotations/pod-annotations.ts';

/**
 * The known annotation within two edits of a mistyped one, for the error's fix: pod-wide
 * (`moed` → `mode`) or per-file with the file name kept (`secrets-db` → `secret-db`).
 */
export function closestAnnotation(name: string): string | undefined {
  let best: { name: string; distance: number } | undefined;
  const consider = (candidate: string, d: number) => {
    if (d <= 2 && (!best || d < best.distance)) best = { name: candidate, distance: d };
  };
  for (const known of Object.keys(POD_ANNOTATIONS)) consider(known, editDistance(name, known));
  // Every `-` may end the mistyped setting: `file-mod-db` is `file-mod` + `db`.
  for (let dash = name.indexOf('-'); dash > 0; dash = name.indexOf('-', dash + 1)) {
    const [setting, file] = [name.slice(0, dash), name.slice(dash + 1)];
    if (!FILE_NAME.test(file)) continue;
    for (const known of Object.keys(FILE_ANNOTATIONS))
      consider(`${known}-${file}`, editDistance(setting, known));
  }
  return best?.name;
}

function editDistance(a: string, b: string): number {
  if (Math.abs(a.length - b.length) > 2) return 3;
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++)
      row[j] = Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    prev = row;
  }
  return prev[b.length]!;
}
