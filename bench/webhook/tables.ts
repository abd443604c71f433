import { MODES, type BodyMode } from './admission-request.ts';
import type { WebhookFigures } from './figures.ts';

const MODE_TITLES: Readonly<Record<BodyMode, string>> = {
  replicas: 'replicas of one pod template (cache hits)',
  distinct: 'a distinct pod per request (cache misses)',
};

/** The figures as markdown tables, for a terminal or a report. */
export function formatWebhookFigures(f: WebhookFigures): string {
  const lines = [
    `webhook admission over keep-alive HTTPS: request ${f.requestBytes} B (pod with 3 secrets), response ${f.responseBytes} B, each request its own uid;`,
    `floor and webhook alternate in ${f.rounds} rounds; load average ${f.machine.loadAverage.join(' → ')} on ${f.machine.cpus} CPUs`,
  ];
  for (const mode of MODES) {
    const r = f.modes[mode].fixedRate;
    const m = f.modes[mode].max;
    lines.push(
      '',
      `${MODE_TITLES[mode]}: fixed rate ${f.rate} req/s, open loop, ${f.seconds} s measured per server`,
      '',
      '| server | p50 ms | p99 ms | max ms | ok | errors | sent/s |',
      '| --- | ---: | ---: | ---: | ---: | ---: | ---: |',
      ...(['floor', 'webhook'] as const).map((k) => {
        const x = r[k];
        return `| ${k} | ${x.p50Ms} | ${x.p99Ms} | ${x.maxMs} | ${x.ok} | ${x.errors} | ${x.sentPerSec} |`;
      }),
      '',
      `${MODE_TITLES[mode]}: max throughput, autocannon, ${f.connections} connections, ${f.seconds} s measured per server`,
      '',
      '| server | req/s | p99 ms | errors | server CPU µs/request |',
      '| --- | ---: | ---: | ---: | ---: |',
      ...(['floor', 'webhook'] as const).map((k) => {
        const x = m[k];
        return `| ${k} | ${x.reqPerSec} | ${x.p99Ms} | ${x.errors} | ${x.cpuUsPerRequest ?? 'n/a'} |`;
      }),
    );
  }
  const cpu = (mode: BodyMode) => {
    const m = f.modes[mode].max;
    return `${m.cpuPerRequestVsFloor ?? 'n/a'} (${m.webhook.cpuUsPerRequest ?? 'n/a'} / ${m.floor.cpuUsPerRequest ?? 'n/a'} µs)`;
  };
  const p99 = (mode: BodyMode) => {
    const r = f.modes[mode].fixedRate;
    const over = r.p99OverFloorMs;
    return `${over >= 0 ? '+' : ''}${over} ms (${r.webhook.p99Ms} / ${r.floor.p99Ms} ms = ${r.p99VsFloor})`;
  };
  const row = (name: string, value: (mode: BodyMode) => string, target: string) =>
    `| ${name} | ${MODES.map(value).join(' | ')} | ${target} |`;
  lines.push(
    '',
    `| figure, against the floor in the same rounds | ${MODES.map((mode) => MODE_TITLES[mode]).join(' | ')} | target |`,
    '| --- | ---: | ---: | ---: |',
    row('webhook CPU per admission / TLS echo floor', cpu, `≤ ${f.targets.cpuPerAdmissionVsFloor}`),
    row(
      `webhook p99 at ${f.rate} req/s − floor p99 (webhook / floor)`,
      p99,
      `< ${f.targets.p99OverFloorMsAtRate} ms`,
    ),
    row(
      'max throughput (/ floor)',
      (mode) => `${f.modes[mode].max.webhook.reqPerSec} req/s (${f.modes[mode].max.throughputVsFloor})`,
      `≥ ${f.targets.minReqPerSec} req/s`,
    ),
    '',
  );
  return lines.join('\n');
}
