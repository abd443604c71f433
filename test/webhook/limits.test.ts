import fc from 'fast-check';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { request } from 'node:https';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { parseAgentConfig } from '../../agent/config/parse-agent-config.ts';
import { ConfigErrors } from '../../agent/contract/errors.ts';
import { MAX_SETTING_BYTES, MAX_TEMPLATE_BYTES } from '../../agent/contract/value-limits.ts';
import { MAX_SHOWN_PROBLEMS } from '../../webhook/admission/admit-pod.ts';
import {
  MAX_ANNOTATION_NAME,
  MAX_ANNOTATION_TOTAL_BYTES,
  MAX_ANNOTATIONS,
} from '../../webhook/admission/annotation-limits.ts';
import {
  checkJsonShape,
  MAX_JSON_DEPTH,
  MAX_JSON_VALUES,
  withNull,
} from '../../webhook/admission/json-limits.ts';
import { BadReviewError } from '../../webhook/admission/bad-review-error.ts';
import { decodeAdmissionReview } from '../../webhook/admission/review.ts';
import {
  BodyBudget,
  MAX_BODY_BYTES,
  MAX_LARGE_IN_FLIGHT_BYTES,
  MAX_LARGE_PER_SOURCE_BYTES,
  MAX_SLOT_BYTES,
  SLOT_BYTES,
} from '../../webhook/body-budget.ts';
import {
  AdmissionCache,
  admissionHeapBytes,
  MAX_ADMISSION_HEAP_BYTES,
  MAX_CACHE_BYTES,
} from '../../webhook/admission/admission-cache.ts';
import { CONNECTION_BYTES, MAX_CONNECTIONS } from '../../webhook/connection-limits.ts';
import { heapOptions, MEMORY_LIMIT_MIB } from '../../webhook/heap-limit.ts';
import {
  HEAP_AT_START_MIB,
  HEAP_CAP_MIB,
  WEBHOOK_LIMITS,
  WORST_CASE_MEMORY,
  WORST_CASE_MIB,
} from '../../webhook/limits.ts';
import { deployedWebhook } from './deployed-webhook.ts';
import { parseWebhookConfig } from '../../webhook/config/parse-webhook-config.ts';
import { startWebhook } from '../../webhook/start.ts';
import { assertNoCanary, canary } from '../support/canary.ts';
import { captureLog } from '../support/captured-log.ts';
import { ROOT, runAgent } from '../support/run-agent.ts';
import {
  admitThroughWebhook,
  AGENT_IMAGE,
  basicPod,
  containerEnv,
  decodePatch,
  injectionDefaults,
  mutate,
  review,
  validatePod,
} from './fixtures.ts';
import { call } from './https-call.ts';
import { certDir, makeServingPair, SERVER_NAME } from './tls-certs.ts';

const CLUSTER = { AGENT_AWS_REGION: 'eu-west-1' };

const admit = (pod: unknown) => admitThroughWebhook(pod, CLUSTER);

/** The refusal of a pod, which must be denied. */
function refusal(pod: unknown): { message: string; log: Record<string, unknown> } {
  const result = admit(pod);
  assert.equal(result.outcome, 'denied', JSON.stringify(result.review.response).slice(0, 500));
  return {
    message: result.review.response.status!.message,
    log: result.log as unknown as Record<string, unknown>,
  };
}

/** `bytes` characters of text that holds a canary, as a pasted secret would. */
function text(bytes: number, label = 'pasted'): string {
  const start = `${canary(label)} `;
  return start + 'x'.repeat(bytes - start.length);
}

describe('the JSON shape of a body, checked before it is parsed', () => {
  it('takes a real pod, and text whose brackets and commas are inside strings', () => {
    checkJsonShape(JSON.stringify(review(basicPod({ 'secret-agent.io/secret-db': 'aws:db' }))));
    const quoted = JSON.stringify({ a: `${'[{,'.repeat(MAX_JSON_VALUES)}\\"[` });
    checkJsonShape(quoted);
    assert.equal((JSON.parse(quoted) as { a: string }).a.length, 3 * MAX_JSON_VALUES + 3);
  });

  it(`refuses nesting deeper than ${MAX_JSON_DEPTH} levels, and takes ${MAX_JSON_DEPTH}`, () => {
    checkJsonShape(`${'['.repeat(MAX_JSON_DEPTH)}${']'.repeat(MAX_JSON_DEPTH)}`);
    checkJsonShape(`${'{"a":'.repeat(MAX_JSON_DEPTH)}1${'}'.repeat(MAX_JSON_DEPTH)}`);
    for (const deep of [
      `${'['.repeat(MAX_JSON_DEPTH + 1)}${']'.repeat(MAX_JSON_DEPTH + 1)}`,
      `{"a":${'['.repeat(1_400_000)}`,
    ])
      assert.throws(
        () => checkJsonShape(deep),
        (e: unknown) =>
          e instanceof BadReviewError &&
          e.message === `the body nests deeper than ${MAX_JSON_DEPTH} levels, which no Pod does`,
      );
  });

  it(`refuses more than ${MAX_JSON_VALUES} values, and takes ${MAX_JSON_VALUES}`, () => {
    checkJsonShape(`[${Array(MAX_JSON_VALUES).fill('0').join(',')}]`);
    for (const wide of [
      `[${Array(MAX_JSON_VALUES + 1)
        .fill('0')
        .join(',')}]`,
      `[${Array(1_000_000).fill('{}').join(',')}]`,
    ])
      assert.throws(() => checkJsonShape(wide), new RegExp(`holds more than ${MAX_JSON_VALUES} JSON values`));
  });
  it('finds every request.oldObject, which is never made into objects, as JSON.parse reads the text: any spacing, escaped names, names given twice', () => {
    const space = fc.constantFrom('', ' ', '\n  ', '\t');
    // Names as they may be written: plain, escaped, or near misses that are other names.
    const name = fc.constantFrom(
      '"request"',
      '"oldObject"',
      '"object"',
      '"uid"',
      '"\\u0072equest"',
      '"old\\u004Fbject"',
      '"oldObject "',
      '"__proto__"',
    );
    const leaf = fc.constantFrom(
      'null',
      'true',
      '-1.5e3',
      '7',
      '"x"',
      '"a\\"b,"',
      '"{[:,]}"',
      '"\\\\"',
      '"é’"',
    );
    const { value } = fc.letrec<{ value: string; list: string; object: string }>((tie) => ({
      value: fc.oneof({ depthSize: 'small', withCrossShrink: true }, leaf, tie('list'), tie('object')),
      list: fc
        .tuple(fc.array(fc.tuple(space, tie('value')), { maxLength: 4 }), space)
        .map(([items, end]) => `[${items.map(([s, v]) => `${s}${v}`).join(',')}${end}]`),
      object: fc
        .tuple(fc.array(fc.tuple(space, name, space, tie('value')), { maxLength: 5 }), space)
        .map(
          ([members, end]) => `{${members.map(([s, n, t, v]) => `${s}${n}${t}:${s}${v}`).join(',')}${end}}`,
        ),
    }));
    const reviews = fc
      .array(fc.tuple(space, name, value, space), { maxLength: 5 })
      .map((members) => `{${members.map(([s, n, v, t]) => `${s}${n}:${t}${v}${s}`).join(',')}}`);
    let nulled = 0;
    fc.assert(
      fc.property(fc.oneof(reviews, value), (text) => {
        const expected = JSON.parse(text) as unknown;
        const request = (expected as { request?: unknown } | null)?.request;
        if (
          typeof request === 'object' &&
          request !== null &&
          !Array.isArray(request) &&
          Object.hasOwn(request, 'oldObject')
        ) {
          (request as Record<string, unknown>).oldObject = null;
          nulled++;
        }
        assert.deepEqual(JSON.parse(withNull(text, checkJsonShape(text).unread)), expected, text);
      }),
      { numRuns: 3000 },
    );
    assert.ok(nulled > 100, `${nulled} reviews had a request.oldObject`);
    // A review as the API server sends an UPDATE: its oldObject is found, whole.
    const sent = review(basicPod({}), { operation: 'UPDATE' }) as { request: Record<string, unknown> };
    sent.request.oldObject = { spec: { a: [1, 2] } };
    const update = JSON.stringify(sent);
    const [range] = checkJsonShape(update).unread;
    assert.equal(update.slice(...range!), '{"spec":{"a":[1,2]}}');
    // Its values are not counted: only what JSON.parse will build is.
    const wide = `[${Array(MAX_JSON_VALUES + 10)
      .fill('0')
      .join(',')}]`;
    const old = update.replace('{"spec":{"a":[1,2]}}', wide);
    assert.equal(checkJsonShape(old).values, checkJsonShape(update).values);
    assert.throws(() => checkJsonShape(old.replace('"oldObject"', '"olderObject"')), /JSON values/);
  });
});

describe('the secret-agent.io/ annotations, measured before any is parsed', () => {
  const ok = { 'secret-agent.io/secret-db': 'aws:prod/db' };

  it(`a template of ${MAX_TEMPLATE_BYTES / 1024} KiB is injected, and the agent takes the env it gets; a byte more is refused by both, naming the field and the limit`, () => {
    const template = `{{password}}${'.'.repeat(MAX_TEMPLATE_BYTES - '{{password}}'.length)}`;
    const pod = basicPod({ ...ok, 'secret-agent.io/template-db': template });
    const result = admit(pod);
    assert.equal(result.outcome, 'injected');
    const patched = mutate(pod, decodePatch(result.review.response));
    validatePod(patched);
    const agent = [...(patched.spec.initContainers ?? []), ...patched.spec.containers].find(
      (c) => c.name === 'secret-agent',
    )!;
    const env = containerEnv(agent, patched);
    assert.equal(env.SECRET_0_TEMPLATE, template);
    parseAgentConfig(env);

    const over = `${template}.`;
    const { message } = refusal(basicPod({ ...ok, 'secret-agent.io/template-db': over }));
    assert.equal(
      message,
      `secret-agent cannot inject this pod: secret-agent.io/template-db: is ${MAX_TEMPLATE_BYTES + 1} bytes long, over its limit of 64 KiB. Fix: keep a template under 64 KiB: template only the lines that hold secrets, and keep the rest in the app's own config`,
    );
    assert.throws(
      () => parseAgentConfig({ ...env, SECRET_0_TEMPLATE: over }),
      (e: unknown) =>
        e instanceof ConfigErrors &&
        e.message ===
          `SECRET_0_TEMPLATE: is ${MAX_TEMPLATE_BYTES + 1} bytes long, over its limit of 64 KiB. Fix: keep a template under 64 KiB: template only the lines that hold secrets, and keep the rest in the app's own config`,
    );
  });

  it(`any other value over ${MAX_SETTING_BYTES / 1024} KiB is refused by its name and size, never quoted; bytes are counted as UTF-8`, () => {
    const cases: [string, string][] = [
      ['secret-agent.io/rotation-command', text(1024 * 1024)],
      ['secret-agent.io/secret-db', text(MAX_SETTING_BYTES + 1)],
      ['secret-agent.io/note', text(MAX_SETTING_BYTES + 1)],
      // 1,366 three-byte characters: under the limit in characters, over it in bytes.
      ['secret-agent.io/rotation-http-url', `POST http://127.0.0.1/${'€'.repeat(1366)}`],
    ];
    for (const [key, value] of cases) {
      const { message, log } = refusal(basicPod({ ...ok, [key]: value }));
      const bytes = Buffer.byteLength(value);
      assert.equal(
        message,
        `secret-agent cannot inject this pod: ${key}: is ${bytes} bytes long, over its limit of 4 KiB. Fix: keep it under 4 KiB`,
      );
      assert.deepEqual(log.annotations, [key]);
      assertNoCanary(JSON.stringify(log), 'the log line');
    }
    // The agent refuses the same text in the setting it becomes, before parsing anything.
    const command = text(MAX_SETTING_BYTES + 1);
    assert.throws(
      () => parseAgentConfig({ SECRET_0_REF: 'aws:db', SECRET_0_FILENAME: 'db', ROTATION_COMMAND: command }),
      (e: unknown) =>
        e instanceof ConfigErrors &&
        e.errors.length === 1 &&
        e.message ===
          `ROTATION_COMMAND: is ${MAX_SETTING_BYTES + 1} bytes long, over its limit of 4 KiB. Fix: keep it under 4 KiB`,
    );
  });

  it(`more than ${MAX_ANNOTATIONS} of them: refused with their number alone, whatever they hold`, () => {
    const many: Record<string, string> = { ...ok };
    for (let i = 0; i < 5000; i++) many[`secret-agent.io/note-${i}`] = canary(`note-${i}`);
    const started = performance.now();
    const { message, log } = refusal(basicPod(many));
    assert.equal(
      message,
      `secret-agent cannot inject this pod: secret-agent.io/*: the pod has 5002 secret-agent.io/ annotations, over their limit of ${MAX_ANNOTATIONS}. Fix: remove the ones that are no secret-agent setting; a pod needs one secret-agent.io/secret-<file> per file and a few settings`,
    );
    assert.deepEqual(log.annotations, ['secret-agent.io/*']);
    // Before: every annotation's error was redacted against every value, for seconds.
    assert.ok(performance.now() - started < 2000);
  });

  it(`a name longer than ${MAX_ANNOTATION_NAME} characters after the prefix: refused, the name cut where Kubernetes would refuse it`, () => {
    const key = `secret-agent.io/secret-${'a'.repeat(200)}`;
    const { message } = refusal(basicPod({ ...ok, [key]: 'aws:x' }));
    const shown = `${key.slice(0, 'secret-agent.io/'.length + MAX_ANNOTATION_NAME)}…`;
    assert.equal(
      message,
      `secret-agent cannot inject this pod: ${shown}: the name after secret-agent.io/ is 207 characters long, over Kubernetes' limit of ${MAX_ANNOTATION_NAME}. Fix: shorten it (for a file annotation, shorten the <file> part: the path-<file> annotation names the file on disk)`,
    );
  });

  it(`more than ${MAX_ANNOTATION_TOTAL_BYTES / 1024} KiB together: refused naming the largest three`, () => {
    const big: Record<string, string> = { ...ok };
    for (let i = 0; i < 5; i++) {
      big[`secret-agent.io/secret-f${i}`] = 'aws:prod/db';
      big[`secret-agent.io/template-f${i}`] = `{{password}}${'.'.repeat(60 * 1024 - i)}`;
    }
    const { message } = refusal(basicPod(big));
    assert.match(
      message,
      /^secret-agent cannot inject this pod: secret-agent\.io\/\*: the pod's secret-agent\.io\/ annotations hold \d+ bytes together, over their limit of 256 KiB \(the largest: secret-agent\.io\/template-f0 \d+ bytes, secret-agent\.io\/template-f1 \d+ bytes, secret-agent\.io\/template-f2 \d+ bytes\)\. Fix: make them smaller/,
    );
  });

  it(`a refusal shows ${MAX_SHOWN_PROBLEMS} problems and counts the rest, in its message and its log line`, () => {
    const bad: Record<string, string> = { ...ok };
    for (let i = 0; i < 100; i++) bad[`secret-agent.io/file-mode-f${i}`] = '0777';
    for (let i = 0; i < 100; i++) bad[`secret-agent.io/secret-f${i}`] = `aws:prod/f${i}`;
    const { message, log } = refusal(basicPod(bad));
    assert.match(
      message,
      new RegExp(
        `^secret-agent cannot inject this pod \\(100 problems, the first ${MAX_SHOWN_PROBLEMS} shown\\): `,
      ),
    );
    assert.equal(message.split(' | ').length, MAX_SHOWN_PROBLEMS);
    assert.equal((log.problems as string[]).length, MAX_SHOWN_PROBLEMS);
    assert.equal(log.problemsNotShown, 100 - MAX_SHOWN_PROBLEMS);
    assert.equal((log.annotations as string[]).length, MAX_SHOWN_PROBLEMS);
  });

  it('a pod name longer than Kubernetes allows reaches the log cut, and a namespace longer than one can be is refused', () => {
    const pod = basicPod(ok);
    pod.metadata.name = 'n'.repeat(100_000);
    assert.equal(decodeAdmissionReview(JSON.stringify(review(pod))).podName, `${'n'.repeat(253)}…`);
    assert.throws(
      () => decodeAdmissionReview(JSON.stringify(review(basicPod(ok), { namespace: 'n'.repeat(64) }))),
      /request\.namespace is longer than 63 characters/,
    );
  });

  it('a direct run of the agent gets the same error: exit 2, the variable and its limit on stderr, not the value', async () => {
    const run = await runAgent({
      SECRET_0_REF: 'aws:prod/db',
      SECRET_0_FILENAME: 'db',
      SECRET_0_FORMAT: 'template',
      SECRET_0_TEMPLATE: `{{password}} ${text(MAX_TEMPLATE_BYTES)}`,
      AWS_REGION: 'eu-west-1',
    });
    assert.equal(run.code, 2, run.stderr);
    assert.match(
      run.stderr,
      /SECRET_0_TEMPLATE: is 65549 bytes long, over its limit of 64 KiB\. Fix: keep a template under 64 KiB/,
    );
  });
});

describe('the webhook’s memory at worst', () => {
  const MiB = 2 ** 20;
  const deployed = deployedWebhook();
  const flag = (name: string) =>
    Number(new RegExp(`--${name}=(\\d+)(?:\\s|$)`).exec(deployed.nodeOptions)?.[1] ?? NaN);

  it('sums what tenants can make it hold, every term at its limit and V8’s heap at the cap the Deployment’s NODE_OPTIONS sets, to at most three quarters of its memory limit', () => {
    assert.equal(deployed.memoryLimitMiB, MEMORY_LIMIT_MIB);
    assert.equal(deployed.nodeOptions, heapOptions(MEMORY_LIMIT_MIB));
    // Node's term holds the heap it starts with, the next one the rest of V8's heap up to its cap.
    assert.match(WORST_CASE_MEMORY[0]!.what, new RegExp(`${HEAP_AT_START_MIB} MiB of V8 heap`));
    assert.equal(
      WORST_CASE_MEMORY[1]!.mib + HEAP_AT_START_MIB,
      flag('max-old-space-size') + 3 * flag('max-semi-space-size'),
    );
    assert.equal(HEAP_CAP_MIB, flag('max-old-space-size') + 3 * flag('max-semi-space-size'));
    const terms = new Map(WORST_CASE_MEMORY.map((t) => [t.what, t.mib]));
    assert.equal(terms.get('every request’s first bytes'), (MAX_CONNECTIONS * SLOT_BYTES) / MiB);
    assert.equal(terms.get('bytes past them'), MAX_LARGE_IN_FLIGHT_BYTES / MiB);
    assert.equal(
      terms.get(`${MAX_CONNECTIONS} connections × ${CONNECTION_BYTES / 1024} KiB`),
      (MAX_CONNECTIONS * CONNECTION_BYTES) / MiB,
    );
    assert.equal(
      WORST_CASE_MIB,
      WORST_CASE_MEMORY.reduce((sum, t) => sum + t.mib, 0),
    );
    assert.ok(WORST_CASE_MIB <= deployed.memoryLimitMiB * 0.75, `${WORST_CASE_MIB} MiB`);
    // The limits table states the sum and each term, and docs/reference/webhook.md is that table.
    const row = WEBHOOK_LIMITS.at(-1)!;
    assert.equal(row.limit, `${WORST_CASE_MIB} MiB at most`);
    for (const t of WORST_CASE_MEMORY) assert.ok(row.why.includes(`${t.mib} MiB ${t.what}`), t.what);
    const reference = readFileSync(join(ROOT, 'docs/reference/webhook.md'), 'utf8');
    assert.ok(
      reference.includes(`| ${WORST_CASE_MIB} MiB at most |`),
      'docs/reference/webhook.md: run npm run docs',
    );
  });

  it('the heap the Deployment gives holds what it starts with, the admission cache and the body being admitted: a body at the JSON limits takes the room it may need from the cache, an ordinary pod takes none', () => {
    assert.ok(
      HEAP_AT_START_MIB * MiB + MAX_ADMISSION_HEAP_BYTES <= flag('max-old-space-size') * MiB,
      `${HEAP_AT_START_MIB} MiB + ${(MAX_ADMISSION_HEAP_BYTES / MiB).toFixed(1)} MiB`,
    );
    assert.ok(MAX_CACHE_BYTES <= MAX_ADMISSION_HEAP_BYTES);
    const cache = new AdmissionCache(10_000);
    const defaults = injectionDefaults({ AGENT_AWS_REGION: 'eu-west-1' });
    const ordinary = (i: number) =>
      JSON.stringify(
        review(basicPod({ 'secret-agent.io/secret-db': `aws:prod/db-${i}` }), { uid: `u-${i}` }),
      );
    for (let i = 0; i < 100; i++) cache.admitBody(ordinary(i), defaults);
    const held = cache.bytes;
    assert.equal(cache.size, 100);
    cache.admitBody(ordinary(100), defaults);
    assert.ok(cache.bytes > held, 'an ordinary pod made no room: it was added');
    assert.equal(cache.size, 101);
    // As many values as the limit allows, in a field the webhook never reads, and as many bytes.
    const wide = basicPod({ 'secret-agent.io/secret-db': 'aws:prod/wide', note: '#' }, { tolerations: '@' });
    const values = `[${Array(MAX_JSON_VALUES - 100)
      .fill('0')
      .join(',')}]`;
    const text = JSON.stringify(review(wide, { uid: 'wide' })).replace('"@"', values);
    const body = text.replace('"#"', `"${'#'.repeat(MAX_BODY_BYTES - text.length + 1)}"`);
    assert.equal(Buffer.byteLength(body), MAX_BODY_BYTES);
    assert.ok(admissionHeapBytes(checkJsonShape(body).values, body.length) > MAX_ADMISSION_HEAP_BYTES - MiB);
    assert.equal(cache.admitBody(body, defaults).outcome, 'injected');
    // Every decision before it went to make room; its own is the one kept.
    assert.equal(cache.size, 1);
  });
});

describe('request bodies in flight, over HTTPS', () => {
  it('counts bytes as they arrive: a request’s first bytes come from a pool no one can use up, the rest from a shared pool one source may hold half of; an answer takes its body’s place until sent', () => {
    const budget = new BodyBudget();
    // A declared length reserves nothing: a request is counted at 0 until bytes arrive.
    const slow = Array.from({ length: MAX_CONNECTIONS }, () => budget.open('10.0.0.2'));
    assert.deepEqual(budget.inFlight, { slots: 0, large: 0 });
    // Every connection with its slot full: the slot pool is exactly full, the large pool untouched.
    for (const s of slow) assert.ok(s.add(SLOT_BYTES));
    assert.deepEqual(budget.inFlight, { slots: MAX_SLOT_BYTES, large: 0 });
    // One source holds half the large pool at most, and what does not fit is not counted.
    assert.ok(slow[0]!.add(MAX_LARGE_PER_SOURCE_BYTES));
    assert.equal(slow[1]!.add(1), false);
    assert.equal(budget.inFlight.large, MAX_LARGE_PER_SOURCE_BYTES);
    // Another source gets the other half, and no more.
    const other = budget.open('10.0.0.3');
    slow.pop()!.release();
    assert.ok(other.add(SLOT_BYTES + MAX_LARGE_IN_FLIGHT_BYTES - MAX_LARGE_PER_SOURCE_BYTES));
    slow.pop()!.release();
    const third = budget.open('10.0.0.4');
    assert.ok(third.add(SLOT_BYTES));
    assert.equal(third.add(1), false);
    // An answer replaces its body: a 3 MiB body parsed into a 1 KiB answer frees its large bytes.
    assert.ok(slow[0]!.replace(1024));
    assert.equal(budget.inFlight.large, MAX_LARGE_IN_FLIGHT_BYTES - MAX_LARGE_PER_SOURCE_BYTES);
    // Released, nothing is counted; release is idempotent and what is released counts nothing more.
    for (const s of [...slow, other, third]) {
      s.release();
      s.release();
    }
    assert.equal(slow[0]!.add(1), false);
    assert.deepEqual(budget.inFlight, { slots: 0, large: 0 });
    assert.ok(budget.open('10.0.0.2').add(MAX_BODY_BYTES));
  });

  it('slow bodies that declare 3 MiB hold what arrived only; one source past its share is shed mid-body with 429 and Retry-After; ordinary pods and other large bodies are answered meanwhile', async () => {
    const pair = await makeServingPair();
    using dir = certDir();
    dir.write(pair);
    const logs = captureLog();
    const config = parseWebhookConfig({
      AGENT_IMAGE,
      ...CLUSTER,
      WEBHOOK_PORT: '0',
      WEBHOOK_HOST: '127.0.0.1',
      TLS_CERT_FILE: dir.cert,
      TLS_KEY_FILE: dir.key,
    });
    const webhook = await startWebhook(config, { log: logs.log });
    const large = Buffer.from(
      JSON.stringify(
        review(
          basicPod({
            'secret-agent.io/secret-db': 'aws:prod/db',
            padding: 'p'.repeat(MAX_BODY_BYTES - 2000),
          }),
        ),
      ),
    );
    assert.ok(large.length > MAX_BODY_BYTES - 2000 && large.length <= MAX_BODY_BYTES);
    /** A request from `from` whose body is still arriving: its headers and the first `sent` bytes. */
    const arriving = (from: string, sent: number) => {
      const req = request({
        host: '127.0.0.1',
        localAddress: from,
        port: webhook.port,
        path: '/mutate',
        method: 'POST',
        ca: pair.ca,
        servername: SERVER_NAME,
        agent: false,
        headers: { 'content-type': 'application/json', 'content-length': large.length },
      });
      const answered = new Promise<{ status: number; body: string }>((resolve, reject) => {
        req.on('response', (res) => {
          let body = '';
          res.on('data', (d: Buffer) => (body += d.toString()));
          res.on('end', () => resolve({ status: res.statusCode!, body }));
        });
        req.on('error', reject);
      });
      answered.catch(() => undefined);
      // Resolves once the bytes are handed to the socket: on a loaded machine 3 MiB through TLS takes a while.
      const flushed = new Promise<void>((resolve) => req.write(large.subarray(0, sent), () => resolve()));
      return { req, answered, flushed };
    };
    const ordinary = async () => {
      const answer = await call(webhook.port, pair.ca, '/mutate', {
        body: JSON.stringify(review(basicPod({ 'secret-agent.io/secret-api': 'aws:prod/api' }))),
      });
      assert.equal(answer.status, 200);
      assert.match(answer.body, /"allowed":true/);
    };
    try {
      // Twenty that declare 3 MiB and sent 1,000 bytes: as before the limits they would hold 60 MiB
      // of budget; counted as they arrive, they hold 20,000 bytes, and a whole 3 MiB body is read.
      const slow = Array.from({ length: 20 }, () => arriving('127.0.0.2', 1000));
      const whole = await call(webhook.port, pair.ca, '/mutate', { body: large });
      assert.equal(whole.status, 200);
      assert.match(whole.body, /"allowed":true/);
      await ordinary();
      // One from 127.0.0.3 sends all but its last 1,000 bytes: nearly all of its source's 3 MiB share.
      // Another body of 256 KiB from there is shed part-way once the first's bytes are in. Small, so
      // the tries until then take far less than the request timeout that would cut the first.
      const first = arriving('127.0.0.3', large.length - 1000);
      const medium = Buffer.from(
        JSON.stringify(
          review(basicPod({ 'secret-agent.io/secret-db': 'aws:prod/db', padding: 'p'.repeat(256 * 1024) })),
        ),
      );
      const again = () =>
        new Promise<{
          status: number;
          retryAfter?: string;
          connection?: string;
          body: string;
          closed: Promise<void>;
        }>((resolve, reject) => {
          const req = request(
            {
              host: '127.0.0.1',
              localAddress: '127.0.0.3',
              port: webhook.port,
              path: '/mutate',
              method: 'POST',
              ca: pair.ca,
              servername: SERVER_NAME,
              agent: false,
              headers: { 'content-type': 'application/json' },
            },
            (res) => {
              let body = '';
              const closed = new Promise<void>((done) => res.socket.once('close', () => done()));
              res.on('data', (d: Buffer) => (body += d.toString()));
              res.on('end', () =>
                resolve({
                  status: res.statusCode!,
                  retryAfter: res.headers['retry-after'],
                  connection: res.headers.connection,
                  body,
                  closed,
                }),
              );
            },
          );
          // The server closes a shed request's connection while its body is still being sent.
          req.on('error', () => undefined);
          req.on('close', () => reject(new Error('closed before an answer')));
          req.end(medium);
        });
      await first.flushed;
      // Until the server has read the first's bytes; tried for at most 7 s, within the 10 s request timeout.
      const until = Date.now() + 7000;
      let answer = await again();
      while (answer.status !== 429 && Date.now() < until) answer = await again();
      assert.equal(answer.status, 429);
      assert.equal(answer.retryAfter, '1');
      // Nothing more of it is read: the answer says the connection closes, and the server closes it.
      assert.equal(answer.connection, 'close');
      await answer.closed;
      assert.match(answer.body, /the webhook holds as many request bodies as it may; retry in 1 s/);
      // Other sources are not held up: an ordinary pod, and a whole 3 MiB body from 127.0.0.1.
      await ordinary();
      assert.equal((await call(webhook.port, pair.ca, '/mutate', { body: large })).status, 200);
      // The first finishes its body and is answered: its source's bytes are free again.
      first.req.end(large.subarray(large.length - 1000));
      assert.equal((await first.answered).status, 200);
      assert.equal((await again()).status, 200);
      for (const s of slow) s.req.destroy();
      const metrics = (await call(webhook.port, pair.ca, '/metrics')).body;
      assert.match(metrics, /^secret_agent_webhook_admission_requests_total\{outcome="shed"\} [1-9]/m);
    } finally {
      await webhook.close();
    }
    const shedLine = logs.lines().find((l) => l.outcome === 'shed');
    assert.equal(shedLine?.level, 40);
    assert.equal(shedLine?.at, 'body');
  });
});
