import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { after, before, beforeEach, describe, it } from 'node:test';
import { pino } from 'pino';
import type { SidecarSettings } from '../../agent/contract/agent-config.ts';
import { createHttpRequestNotifier, retryAfter } from '../../agent/notify/http-request.ts';
import { createNotifiers } from '../../agent/notify/create-notifiers.ts';
import type { RotationEvent } from '../../agent/notify/notifier.ts';
import { assertNoCanary, canary } from '../support/canary.ts';

const EVENT: RotationEvent = {
  versions: { SECRET_0: 'AWSCURRENT-3f1c', SECRET_1: '7' },
  unnamed: ['SECRET_2'],
  changedFiles: ['db/password', 'api-key'],
};

function captureLog() {
  const lines: string[] = [];
  const log = pino({ level: 'trace' }, { write: (line: string) => void lines.push(line) });
  return { log, text: () => lines.join('') };
}

interface Received {
  readonly method: string;
  readonly url: string;
  readonly contentType: string | undefined;
  readonly body: string;
}

/** The app's reload endpoint: records each request and answers from a script of handlers. */
class ReloadListener {
  readonly received: Received[] = [];
  readonly script: ((res: ServerResponse) => void)[] = [];
  private server: Server;
  port = 0;

  constructor() {
    this.server = createServer((req: IncomingMessage, res) => {
      let body = '';
      req.setEncoding('utf8').on('data', (c: string) => (body += c));
      req.on('end', () => {
        this.received.push({
          method: req.method!,
          url: req.url!,
          contentType: req.headers['content-type'],
          body,
        });
        const answer = this.script.shift() ?? ((r: ServerResponse) => r.writeHead(204).end());
        answer(res);
      });
    });
  }

  async start(): Promise<void> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as { port: number }).port;
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }
}

describe('ROTATION_HTTP_URL: a request to the app', () => {
  const app = new ReloadListener();
  before(() => app.start());
  after(() => app.stop());
  beforeEach(() => {
    app.received.length = 0;
    app.script.length = 0;
  });

  it('POSTs the versions, the secrets without one and the changed files as JSON (never a value), from the env setting', async () => {
    const settings: SidecarSettings = {
      refreshIntervalMs: 60_000,
      httpAddr: { host: '127.0.0.1', port: 8099 },
      debounceMs: 100,
      http: { method: 'POST', url: `http://127.0.0.1:${app.port}/-/reload` },
      restartOnChange: false,
      deleteBarePod: false,
    };
    const { log, text } = captureLog();
    const [notifier, ...rest] = createNotifiers(settings, {
      log,
      pod: {},
      serviceAccountDir: '/nonexistent',
      kubernetesApiUrl: undefined,
      secretsDir: '/nonexistent',
    });
    assert.equal(rest.length, 0);
    assert.equal(notifier!.kind, 'http');
    assert.deepEqual(await notifier!.notify(EVENT, new AbortController().signal), { ok: true });
    assert.equal(app.received.length, 1);
    const [req] = app.received;
    assert.equal(req!.method, 'POST');
    assert.equal(req!.url, '/-/reload');
    assert.equal(req!.contentType, 'application/json');
    assert.deepEqual(JSON.parse(req!.body), {
      versions: { SECRET_0: 'AWSCURRENT-3f1c', SECRET_1: '7' },
      unnamed: ['SECRET_2'],
      changedFiles: ['db/password', 'api-key'],
    });
    assert.match(text(), /"attempt":1/);
  });

  it('retries after a 503 and succeeds on the next attempt', async () => {
    app.script.push((res) => res.writeHead(503).end('warming up'));
    const { log, text } = captureLog();
    const notifier = createHttpRequestNotifier(
      { method: 'PUT', url: `http://127.0.0.1:${app.port}/reload`, retryDelayMs: 10 },
      log,
    );
    assert.deepEqual(await notifier.notify(EVENT, new AbortController().signal), { ok: true });
    assert.deepEqual(
      app.received.map((r) => [r.method, r.url]),
      [
        ['PUT', '/reload'],
        ['PUT', '/reload'],
      ],
    );
    assert.equal(app.received[0]!.body, app.received[1]!.body);
    assert.match(text(), /"reason":"http-503","willRetry":true/);
  });

  it('waits as long as a 429 or 503 Retry-After asks (seconds or an HTTP-date), at least the backoff', async () => {
    const inTwoSeconds = new Date(Date.now() + 2000).toUTCString();
    app.script.push((res) => res.writeHead(429, { 'retry-after': '3' }).end());
    app.script.push((res) => res.writeHead(503, { 'retry-after': inTwoSeconds }).end());
    app.script.push((res) => res.writeHead(503, { 'retry-after': 'soon' }).end());
    const waits: number[] = [];
    const { log, text } = captureLog();
    const notifier = createHttpRequestNotifier(
      {
        method: 'POST',
        url: `http://127.0.0.1:${app.port}/reload`,
        attempts: 4,
        retryDelayMs: 100,
        wait: async (ms) => void waits.push(ms),
      },
      log,
    );
    assert.deepEqual(await notifier.notify(EVENT, new AbortController().signal), { ok: true });
    assert.equal(app.received.length, 4);
    assert.equal(waits[0], 3000);
    // An HTTP-date has whole seconds: between 1 and 2 s from now, never less than the backoff (200 ms).
    assert.ok(waits[1]! > 200 && waits[1]! <= 2000, `waited ${waits[1]} ms for the HTTP-date`);
    // Unreadable: the backoff alone.
    assert.equal(waits[2], 400);
    assert.match(text(), /"reason":"http-429","willRetry":true,"retryAfterMs":3000/);
  });

  it('stops retrying when Retry-After is longer than a rotation allows, and says so', async () => {
    app.script.push((res) => res.writeHead(503, { 'retry-after': '120' }).end());
    const { log, text } = captureLog();
    const notifier = createHttpRequestNotifier(
      { method: 'POST', url: `http://127.0.0.1:${app.port}/reload`, retryDelayMs: 5 },
      log,
    );
    assert.deepEqual(await notifier.notify(EVENT, new AbortController().signal), {
      ok: false,
      reason: 'http-503',
    });
    assert.equal(app.received.length, 1);
    assert.match(text(), /"willRetry":false,"retryAfterMs":120000/);
    assert.match(text(), /asks to wait longer than a rotation allows/);
  });

  it('reads Retry-After as RFC 9110 has it: delay-seconds or an HTTP-date, else nothing', () => {
    const now = Date.parse('2026-11-23T10:00:00Z');
    assert.equal(retryAfter('0', now), 0);
    assert.equal(retryAfter(' 17 ', now), 17_000);
    assert.equal(retryAfter('Mon, 23 Nov 2026 10:00:30 GMT', now), 30_000);
    assert.equal(retryAfter('Mon, 23 Nov 2026 09:59:00 GMT', now), 0);
    assert.equal(retryAfter(['5', '9'], now), 5000);
    for (const bad of [undefined, '', '-1', '1.5', 'soon', '12345678901', 'Mon, 99 Foo'])
      assert.equal(retryAfter(bad, now), undefined, String(bad));
  });

  it('gives up after the bounded attempts on a persistent 5xx, with reason http-502', async () => {
    for (let i = 0; i < 5; i++) app.script.push((res) => res.writeHead(502).end());
    const notifier = createHttpRequestNotifier(
      { method: 'POST', url: `http://127.0.0.1:${app.port}/reload`, attempts: 3, retryDelayMs: 5 },
      captureLog().log,
    );
    assert.deepEqual(await notifier.notify(EVENT, new AbortController().signal), {
      ok: false,
      reason: 'http-502',
    });
    assert.equal(app.received.length, 3);
  });

  it('does not retry a 4xx answer', async () => {
    app.script.push((res) => res.writeHead(404).end());
    const notifier = createHttpRequestNotifier(
      { method: 'POST', url: `http://127.0.0.1:${app.port}/wrong`, retryDelayMs: 5 },
      captureLog().log,
    );
    assert.deepEqual(await notifier.notify(EVENT, new AbortController().signal), {
      ok: false,
      reason: 'http-404',
    });
    assert.equal(app.received.length, 1);
  });

  it('GET carries no body and no content-type', async () => {
    const notifier = createHttpRequestNotifier(
      { method: 'GET', url: `http://127.0.0.1:${app.port}/reload?x=1` },
      captureLog().log,
    );
    assert.deepEqual(await notifier.notify(EVENT, new AbortController().signal), { ok: true });
    assert.equal(app.received[0]!.method, 'GET');
    assert.equal(app.received[0]!.url, '/reload?x=1');
    assert.equal(app.received[0]!.body, '');
    assert.equal(app.received[0]!.contentType, undefined);
  });

  it('an app that never answers: timeout after each bounded attempt', async () => {
    for (let i = 0; i < 2; i++) app.script.push(() => {}); // hold the request open
    const notifier = createHttpRequestNotifier(
      {
        method: 'POST',
        url: `http://127.0.0.1:${app.port}/slow`,
        timeoutMs: 150,
        attempts: 2,
        retryDelayMs: 5,
      },
      captureLog().log,
    );
    assert.deepEqual(await notifier.notify(EVENT, new AbortController().signal), {
      ok: false,
      reason: 'timeout',
    });
    assert.equal(app.received.length, 2);
  });

  it('nobody listening: network, retried within the bound', async () => {
    const closed = new ReloadListener();
    await closed.start();
    const port = closed.port;
    await closed.stop();
    const { log, text } = captureLog();
    const notifier = createHttpRequestNotifier(
      { method: 'POST', url: `http://127.0.0.1:${port}/reload`, attempts: 2, retryDelayMs: 5 },
      log,
    );
    assert.deepEqual(await notifier.notify(EVENT, new AbortController().signal), {
      ok: false,
      reason: 'network',
    });
    assert.equal(text().match(/HTTP notification failed/g)?.length, 2);
  });

  it('the caller aborting (shutdown) stops the request and the retries: aborted', async () => {
    app.script.push(() => {}); // hold the request open until the abort
    const notifier = createHttpRequestNotifier(
      { method: 'POST', url: `http://127.0.0.1:${app.port}/reload`, timeoutMs: 60_000, attempts: 3 },
      captureLog().log,
    );
    const abort = new AbortController();
    const pending = notifier.notify(EVENT, abort.signal);
    while (app.received.length === 0) await new Promise((resolve) => setImmediate(resolve));
    abort.abort();
    assert.deepEqual(await pending, { ok: false, reason: 'aborted' });
    assert.equal(app.received.length, 1);
  });

  it('logs neither the query string (it may hold a token) nor what the app answered', async () => {
    const token = canary('reload-token');
    const echoed = canary('app-answer');
    app.script.push((res) => res.writeHead(500).end(echoed));
    const { log, text } = captureLog();
    const notifier = createHttpRequestNotifier(
      {
        method: 'POST',
        url: `http://user:${canary('pw')}@127.0.0.1:${app.port}/reload?token=${token}`,
        retryDelayMs: 5,
      },
      log,
    );
    assert.deepEqual(await notifier.notify(EVENT, new AbortController().signal), { ok: true });
    assert.equal(app.received.length, 2);
    assert.match(text(), new RegExp(`"target":"http://127.0.0.1:${app.port}/reload"`));
    assertNoCanary(text(), 'http notifier logs');
  });
});
