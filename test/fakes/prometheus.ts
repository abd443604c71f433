/**
 * A Prometheus HTTP API fake for instant queries (GET /api/v1/query), answering from what it scraped:
 * each target's /metrics text, with the target labels a PodMonitor gives (namespace, pod). It knows the
 * selectors `name` and `name{label="value",…}` (equality only), and answers errors as Prometheus does
 * (`status: error`, `errorType`, 400).
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface PrometheusFake {
  readonly url: string;
  /** Replaces what was scraped from the target labelled `labels`. */
  scraped(labels: Record<string, string>, metricsText: string): void;
  readonly queries: readonly string[];
  stop(): Promise<void>;
}

interface Series {
  readonly name: string;
  readonly labels: Record<string, string>;
  readonly value: string;
}

function parseExposition(text: string): Series[] {
  const out: Series[] = [];
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) continue;
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g))
      labels[l[1]!] = JSON.parse(`"${l[2]!}"`) as string;
    out.push({ name: m[1]!, labels, value: m[3]! });
  }
  return out;
}

export async function startPrometheusFake(): Promise<PrometheusFake> {
  const targets = new Map<string, Series[]>();
  const queries: string[] = [];
  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://prometheus');
    const send = (code: number, body: unknown) => {
      res.writeHead(code, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    if (url.pathname !== '/api/v1/query')
      return send(404, { status: 'error', errorType: 'not_found', error: 'not found' });
    const q = url.searchParams.get('query') ?? '';
    queries.push(q);
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?$/.exec(q);
    if (!m)
      return send(400, {
        status: 'error',
        errorType: 'bad_data',
        error: `parse error: unexpected input in ${JSON.stringify(q)}`,
      });
    const wanted = [...(m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)].map((l) => [
      l[1]!,
      JSON.parse(`"${l[2]!}"`) as string,
    ]);
    const now = Date.now() / 1000;
    const result = [...targets.values()]
      .flat()
      .filter((s) => s.name === m[1] && wanted.every(([k, v]) => s.labels[k!] === v))
      .map((s) => ({ metric: { __name__: s.name, ...s.labels }, value: [now, s.value] }));
    send(200, { status: 'success', data: { resultType: 'vector', result } });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    scraped(labels, text) {
      targets.set(
        JSON.stringify(labels),
        parseExposition(text).map((s) => ({ ...s, labels: { ...s.labels, ...labels } })),
      );
    },
    queries,
    stop: () => new Promise<void>((r) => server.close(() => r())),
  };
}
