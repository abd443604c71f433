import type { ComparedPod, Newest } from './compare-versions.ts';

/** The table a person reads: one row per file, pods behind marked. */
export function versionsTable(pods: readonly ComparedPod[], withNamespace: boolean): string {
  const header = [
    ...(withNamespace ? ['NAMESPACE'] : []),
    'POD',
    'FILE',
    'REFERENCE',
    'VERSION',
    'SINCE',
    'STATE',
  ];
  const rows: string[][] = [];
  for (const p of pods) {
    const pod = p.holding.pod;
    const note = [
      ...(pod.agent === 'init-only' ? ['init only'] : []),
      ...(pod.ready ? [] : ['not ready']),
      ...(p.holding.lastError !== undefined ? ['refresh failing'] : []),
    ];
    for (const f of p.files)
      rows.push([
        ...(withNamespace ? [pod.namespace] : []),
        pod.name,
        f.file,
        f.ref,
        f.version === '' ? '-' : f.version,
        f.since === '' ? '-' : f.since.replace(/\.\d+Z$/, 'Z'),
        [f.state, ...note].join(', '),
      ]);
    if (p.files.length === 0)
      rows.push([
        ...(withNamespace ? [pod.namespace] : []),
        pod.name,
        '-',
        '-',
        '-',
        '-',
        ['unknown', ...note].join(', '),
      ]);
  }
  const widths = header.map((h) => h.length);
  for (const r of rows) r.forEach((cell, i) => (widths[i] = Math.max(widths[i]!, cell.length)));
  const line = (cells: readonly string[]) =>
    cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!))).join('  ');
  const problems = pods
    .filter((p) => p.holding.problem !== undefined)
    .map((p) => `${p.holding.pod.namespace}/${p.holding.pod.name}: ${p.holding.problem}`);
  return (
    [line(header), ...rows.map(line), ...(problems.length > 0 ? ['', ...problems] : [])].join('\n') + '\n'
  );
}

/** The document a script reads. */
export function versionsJson(pods: readonly ComparedPod[], newest: readonly Newest[]): string {
  return (
    JSON.stringify(
      {
        pods: pods.map((p) => ({
          namespace: p.holding.pod.namespace,
          name: p.holding.pod.name,
          ready: p.holding.pod.ready,
          phase: p.holding.pod.phase,
          agent: p.holding.pod.agent,
          ...(p.holding.problem !== undefined ? { problem: p.holding.problem } : {}),
          ...(p.holding.lastError !== undefined ? { lastError: p.holding.lastError } : {}),
          files: p.files,
        })),
        references: newest,
      },
      null,
      2,
    ) + '\n'
  );
}
