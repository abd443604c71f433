/**
 * The siege battery (issue 30): what an attacker would send. Here, pods made to make the webhook's
 * answer large: thousands of containers, each of which the patch gives a mount and an env var holding
 * the mount path; long mount paths; templates of the characters JSON escapes; many warnings; a refusal
 * that echoes the pod's own text. The review's attack (two 0.29 MB pods of 9,000 containers at once) made
 * 27 MB answers and took the webhook past its 256 MiB limit.
 *
 * In process, through the admission code as the server calls it (AdmissionCache.admitBody: the body's
 * text in, the answer's text out); then against the built bundle (dist/webhook.js, `node images/build.ts`)
 * run with the Deployment's NODE_OPTIONS, measuring its memory from /proc.
 */
import fc from 'fast-check';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { ConfigError } from '../../agent/contract/errors.ts';
import { MAX_SETTING_BYTES, MAX_TEMPLATE_BYTES } from '../../agent/contract/value-limits.ts';
import { WARNINGS_ANNOTATION } from '../../agent/contract/product-annotations.ts';
import { AdmissionCache } from '../../webhook/admission/admission-cache.ts';
import { MAX_ANNOTATION_TOTAL_BYTES } from '../../webhook/admission/annotation-limits.ts';
import {
  MAX_ANSWER_BYTES,
  MAX_CONTAINERS,
  MAX_ENVELOPE_BYTES,
  MAX_PATCH_BYTES,
  MAX_REFUSAL_CHARS,
  MAX_WARNINGS_BYTES,
} from '../../webhook/admission/answer-limits.ts';
import { BadReviewError } from '../../webhook/admission/bad-review-error.ts';
import { MAX_JSON_VALUES } from '../../webhook/admission/json-limits.ts';
import { mountPath } from '../../webhook/annotations/values.ts';
import { AGENT_CONTAINER, AGENT_INIT_CONTAINER } from '../../webhook/injected-names.ts';
import { MAX_BODY_BYTES } from '../../webhook/body-budget.ts';
import { ROOT } from '../support/run-agent.ts';
import { deployedWebhook } from '../webhook/deployed-webhook.ts';
import {
  basicPod,
  decodePatch,
  injectionDefaults,
  mutate,
  review,
  validatePod,
  type PodDoc,
} from '../webhook/fixtures.ts';
import { hostileBody, runHostileLoad, startBundle, summarize } from '../webhook/hostile-load.ts';

const MiB = 1024 * 1024;

interface Answered {
  readonly outcome: 'injected' | 'skipped' | 'denied';
  /** The answer's text, as the server sends it. */
  readonly text: string;
  readonly bytes: number;
  readonly response: {
    allowed: boolean;
    patch?: string;
    warnings?: string[];
    status?: { message: string };
  };
}

/** The body through the admission code the server runs, its answer's text measured. */
function answer(body: string, env: Record<string, string> = {}): Answered {
  const { outcome, text } = new AdmissionCache(16).admitBody(
    body,
    injectionDefaults({ AGENT_AWS_REGION: 'eu-west-1', ...env }),
  );
  const response = (JSON.parse(text) as { response: Answered['response'] }).response;
  return { outcome, text, bytes: Buffer.byteLength(text), response };
}

const bodyOf = (pod: unknown) => JSON.stringify(review(pod));

/** `count` minimal containers (and init containers), as the review sent them. */
function containers(count: number, prefix = 'c'): Record<string, unknown>[] {
  return Array.from({ length: count }, (_, i) => ({ name: `${prefix}${i}`, image: 'x' }));
}

/** The longest mount path the webhook takes (values.ts decides; asked, not assumed). */
function longestMountPath(): string {
  const path = (n: number) => `/${'m'.repeat(n - 1)}`;
  const takes = (n: number) => {
    try {
      mountPath(path(n), 'secret-agent.io/mount-path');
      return true;
    } catch (e) {
      if (e instanceof ConfigError) return false;
      throw e;
    }
  };
  let [low, high] = [1, MAX_SETTING_BYTES + 1];
  assert.ok(!takes(high), 'a mount path is bounded');
  while (high - low > 1) {
    const mid = Math.floor((low + high) / 2);
    if (takes(mid)) low = mid;
    else high = mid;
  }
  return path(low);
}

/** Config-file lines as a JSON template has them: a quote every few characters, a newline a line. */
const jsonLines = (n: number) =>
  Array.from({ length: Math.ceil(n / 20) }, (_, i) => `  "key_${i}": "value {{password}}",\n`)
    .join('')
    .slice(0, n);

/**
 * The pod's annotations filled to MAX_ANNOTATION_TOTAL_BYTES with templates of `fill` (each at most
 * MAX_TEMPLATE_BYTES): the most the agent's env can hold.
 */
function fullAnnotations(base: Record<string, string>, fill: (n: number) => string): Record<string, string> {
  const annotations: Record<string, string> = { 'secret-agent.io/inject': 'true', ...base };
  const bytes = (key: string, value: string) => Buffer.byteLength(key) + Buffer.byteLength(value);
  let total = Object.entries(annotations).reduce((sum, [k, v]) => sum + bytes(k, v), 0);
  for (let i = 0; ; i++) {
    const [secret, ref, template] = [
      `secret-agent.io/secret-t${i}`,
      `aws:prod/t${i}`,
      `secret-agent.io/template-t${i}`,
    ];
    const left = MAX_ANNOTATION_TOTAL_BYTES - total - bytes(secret, ref) - template.length;
    if (left < 64) return annotations;
    annotations[secret] = ref;
    annotations[template] = `{{password}}${fill(Math.min(MAX_TEMPLATE_BYTES, left) - 12)}`;
    total += bytes(secret, ref) + bytes(template, annotations[template]);
  }
}

/** A pod at every limit: MAX_CONTAINERS containers and init containers, the longest mount path, full annotations. */
function podAtTheLimits(fill: (n: number) => string, mode = 'init+sidecar'): PodDoc {
  const init = 8;
  const pod = basicPod(
    fullAnnotations({ 'secret-agent.io/mode': mode, 'secret-agent.io/mount-path': longestMountPath() }, fill),
    { containers: containers(MAX_CONTAINERS - init), initContainers: containers(init, 'i') },
  );
  return pod;
}

describe('answers are bounded, whatever the pod (in process, as the server calls admission)', () => {
  it('the limits add up: a patch at its limit in base64, the warnings and the envelope fit the answer ceiling', () => {
    const base64 = 4 * Math.ceil(MAX_PATCH_BYTES / 3);
    assert.ok(base64 + MAX_WARNINGS_BYTES + MAX_ENVELOPE_BYTES <= MAX_ANSWER_BYTES);
    // A refusal: its message at 6 bytes a character at most, as JSON escapes it.
    assert.ok(6 * MAX_REFUSAL_CHARS + MAX_ENVELOPE_BYTES <= MAX_ANSWER_BYTES);
    assert.equal(MAX_ANSWER_BYTES, MiB);
  });

  it('refuses the review’s pod of 9,000 containers by their number and the limit, in an answer of under 1 KiB', () => {
    const body = hostileBody('containers-9000', 0).toString();
    assert.ok(body.length > 250_000 && body.length < 300_000, `the review’s 0.29 MB: ${body.length}`);
    const { outcome, bytes, response } = answer(body);
    assert.equal(outcome, 'denied');
    assert.equal(response.allowed, false);
    assert.match(
      response.status!.message,
      new RegExp(
        `^secret-agent cannot inject this pod: spec\\.containers: the pod has 9,000 containers and init containers, over the webhook's limit of ${MAX_CONTAINERS}: .*Fix: inject pods of at most ${MAX_CONTAINERS} containers`,
      ),
    );
    assert.ok(bytes < 1024, `${bytes} bytes`);
  });

  it('refuses as many containers as a body’s JSON values allow, alike and as small', () => {
    // A name alone: a container is then two JSON values (`{` and `,`).
    const count = Math.floor(MAX_JSON_VALUES / 2) - 100;
    const pod = basicPod(
      { 'secret-agent.io/secret-db': 'aws:prod/db' },
      { containers: Array.from({ length: count }, (_, i) => ({ name: `c${i}` })) },
    );
    const body = bodyOf(pod);
    assert.ok(body.length < MAX_BODY_BYTES, `${body.length}`);
    const { outcome, bytes, response } = answer(body);
    assert.equal(outcome, 'denied');
    assert.match(
      response.status!.message,
      new RegExp(`the pod has ${count.toLocaleString('en')} containers and init containers, over`),
    );
    assert.ok(bytes < 1024, `${bytes} bytes`);
  });

  it('counts containers and init containers together: the limit is injected, one more is refused; a pod not opted in is let through', () => {
    const annotations = { 'secret-agent.io/secret-db': 'aws:prod/db' };
    const atLimit = basicPod(annotations, {
      containers: containers(MAX_CONTAINERS - 4),
      initContainers: containers(4, 'i'),
    });
    const at = answer(bodyOf(atLimit));
    assert.equal(at.outcome, 'injected', at.response.status?.message);
    const over = basicPod(annotations, {
      containers: containers(MAX_CONTAINERS - 4),
      initContainers: containers(5, 'i'),
    });
    const refused = answer(bodyOf(over));
    assert.equal(refused.outcome, 'denied');
    assert.match(
      refused.response.status!.message,
      new RegExp(`the pod has ${MAX_CONTAINERS + 1} containers and init containers, over`),
    );
    // Nothing is injected there, so nothing grows: the webhook has no say over the pod's size.
    const notOptedIn = basicPod({}, { containers: containers(9000) });
    delete notOptedIn.metadata.annotations!['secret-agent.io/inject'];
    const skipped = answer(bodyOf(notOptedIn));
    assert.equal(skipped.outcome, 'skipped');
    assert.ok(skipped.bytes < 1024);
  });

  for (const native of ['true', 'false'])
    it(`a pod at every limit (${MAX_CONTAINERS} containers, the longest mount path, 256 KiB of templates) is injected within the ceiling, native sidecars ${native}`, () => {
      for (const [kind, fill] of [
        ['plain text', (n: number) => 'x'.repeat(n)],
        ['JSON lines', jsonLines],
      ] as const) {
        const pod = podAtTheLimits(fill);
        const { outcome, bytes, response } = answer(bodyOf(pod), { NATIVE_SIDECARS: native });
        assert.equal(outcome, 'injected', `${kind}: ${response.status?.message}`);
        const patch = Buffer.from(response.patch!, 'base64');
        assert.ok(patch.length <= MAX_PATCH_BYTES, `${kind}: patch ${patch.length}`);
        assert.ok(bytes <= MAX_ANSWER_BYTES, `${kind}: answer ${bytes}`);
        // The patch applies and gives a valid pod in which every container has the secrets' mount.
        const patched = mutate(pod, decodePatch(response));
        validatePod(patched);
        const apps = [...patched.spec.containers, ...(patched.spec.initContainers ?? [])].filter(
          (c) => c.name !== AGENT_CONTAINER && c.name !== AGENT_INIT_CONTAINER,
        );
        assert.equal(apps.length, MAX_CONTAINERS);
        for (const c of apps)
          assert.ok(
            (c.volumeMounts as { mountPath: string }[]).some((m) => m.mountPath === longestMountPath()),
          );
      }
    });

  it('refuses a patch over its limit by its size, in a small answer: 256 KiB of templates JSON must escape, the env twice', () => {
    const pod = podAtTheLimits((n) => 'ab"\n'.repeat(n).slice(0, n));
    const { outcome, bytes, response } = answer(bodyOf(pod), { NATIVE_SIDECARS: 'false' });
    assert.equal(outcome, 'denied');
    assert.match(
      response.status!.message,
      new RegExp(
        `secret-agent\\.io/\\*: the patch that injects the pod would be [\\d,]+ bytes, over the webhook's limit of ${MAX_PATCH_BYTES / 1024} KiB: .* each of the ${MAX_CONTAINERS} containers that mount the secrets gets the mount path twice\\. Fix: make the templates smaller`,
      ),
    );
    assert.ok(bytes < 2048, `${bytes} bytes`);
    // With one agent container the same pod fits.
    assert.equal(answer(bodyOf(pod), { NATIVE_SIDECARS: 'true' }).outcome, 'injected');
  });

  it('warnings past their limit are counted in a last one, and the pod’s annotation keeps them all', () => {
    const annotations: Record<string, string> = { 'secret-agent.io/mode': 'sidecar' };
    const files = 200;
    for (let i = 0; i < files; i++) {
      annotations[`secret-agent.io/secret-f${i}`] = `aws:prod/f${i}`;
      annotations[`secret-agent.io/refresh-interval-f${i}`] = '1s';
    }
    const pod = basicPod(annotations);
    const { outcome, response, bytes } = answer(bodyOf(pod));
    assert.equal(outcome, 'injected', response.status?.message);
    const warnings = response.warnings!;
    assert.ok(Buffer.byteLength(JSON.stringify(warnings)) <= MAX_WARNINGS_BYTES);
    const shown = warnings.length - 1;
    const intervals = warnings.filter((w) => /refresh-interval-f\d+ is 1s/.test(w)).length;
    assert.ok(intervals > 10, `${intervals} of ${warnings.length}`);
    assert.match(
      warnings.at(-1)!,
      new RegExp(
        `^secret-agent: \\d+ more warnings not shown here; the pod's annotation ${WARNINGS_ANNOTATION} lists them all`,
      ),
    );
    const kept = decodePatch(response).find((op) => op.path.endsWith('secret-agent.io~1warnings'));
    assert.ok(kept && 'value' in kept);
    const all = (kept.value as string).split('\n');
    assert.equal(all.filter((w) => /refresh-interval-f\d+ is 1s/.test(w)).length, files);
    assert.equal(Number(/(\d+) more/.exec(warnings.at(-1)!)![1]), all.length - shown);
    assert.ok(bytes <= MAX_ANSWER_BYTES);
  });

  it('a refusal’s message is cut at its limit, whatever the pod’s own text in it', () => {
    // Container names are the pod's own (Kubernetes checks them after the webhook); a refusal that
    // lists them, 64 of 40,000 characters each, is 2.5 MB before the cut.
    const pod = basicPod(
      { 'secret-agent.io/secret-db': 'aws:prod/db', 'secret-agent.io/containers': 'nowhere' },
      {
        containers: Array.from({ length: MAX_CONTAINERS }, (_, i) => ({ name: `${i}${'n'.repeat(40_000)}` })),
      },
    );
    const body = bodyOf(pod);
    assert.ok(body.length < MAX_BODY_BYTES);
    const { outcome, response, bytes } = answer(body);
    assert.equal(outcome, 'denied');
    const message = response.status!.message;
    assert.match(message, /secret-agent\.io\/containers: names "nowhere", which the pod does not have/);
    assert.equal(message.length, MAX_REFUSAL_CHARS);
    assert.ok(message.endsWith('…'));
    assert.ok(bytes < MAX_REFUSAL_CHARS + 1024, `${bytes} bytes`);
  });

  it('property: any pod of many containers, mount paths and annotations is answered in at most 1 MiB', () => {
    // The characters that cost the most in an answer: those JSON escapes (6 bytes for a control
    // character), multi-byte ones, and plain ones.
    const char = fc.oneof(
      { weight: 6, arbitrary: fc.constant('m') },
      { weight: 3, arbitrary: fc.constantFrom('"', '\\', '\n', '\u0001', 'é', '😀', ' ') },
    );
    const text = (sizes: readonly number[]) =>
      fc.tuple(fc.constantFrom(...sizes), char).map(([n, c]) => c.repeat(n).slice(0, n));
    const weighted = (...arms: [number, fc.Arbitrary<number>][]) =>
      fc.oneof(...arms.map(([weight, arbitrary]) => ({ weight, arbitrary })));
    const containerCount = weighted(
      [3, fc.integer({ min: 1, max: 4 })],
      [3, fc.integer({ min: MAX_CONTAINERS - 8, max: MAX_CONTAINERS })],
      [1, fc.integer({ min: MAX_CONTAINERS + 1, max: MAX_CONTAINERS + 4 })],
      [1, fc.constantFrom(1000, 9000)],
    );
    const initCount = weighted([4, fc.integer({ min: 0, max: 4 })], [1, fc.constantFrom(100, 9000)]);
    fc.assert(
      fc.property(
        fc.record({
          containers: containerCount,
          initContainers: initCount,
          mountPath: text([1, 64, 255, 256, 1023, 1024, 1025, MAX_SETTING_BYTES]).map((t) => `/${t}`),
          templates: fc.array(text([1, 1024, 32 * 1024, MAX_TEMPLATE_BYTES - 12]), { maxLength: 5 }),
          intervals: fc.integer({ min: 0, max: 150 }),
          mode: fc.constantFrom('init', 'sidecar', 'init+sidecar'),
          native: fc.boolean(),
        }),
        (p) => {
          const annotations: Record<string, string> = {
            'secret-agent.io/mode': p.mode,
            'secret-agent.io/mount-path': p.mountPath,
            'secret-agent.io/secret-db': 'aws:prod/db',
          };
          p.templates.forEach((t, i) => {
            annotations[`secret-agent.io/secret-t${i}`] = `aws:prod/t${i}`;
            annotations[`secret-agent.io/template-t${i}`] = `{{password}}${t}`;
          });
          for (let i = 0; i < p.intervals; i++) {
            annotations[`secret-agent.io/secret-r${i}`] = `aws:prod/r${i}`;
            annotations[`secret-agent.io/refresh-interval-r${i}`] = '1s';
          }
          const pod = basicPod(annotations, {
            containers: containers(p.containers),
            ...(p.initContainers > 0 ? { initContainers: containers(p.initContainers, 'i') } : {}),
          });
          const body = bodyOf(pod);
          fc.pre(Buffer.byteLength(body) <= MAX_BODY_BYTES);
          let answered: Answered;
          try {
            answered = answer(body, { NATIVE_SIDECARS: String(p.native) });
          } catch (e) {
            // An HTTP 400 of a few words: a body the server refuses before admission.
            if (e instanceof BadReviewError) return;
            throw e;
          }
          assert.ok(answered.bytes <= MAX_ANSWER_BYTES, `${answered.bytes} bytes (${answered.outcome})`);
          if (answered.response.patch)
            assert.ok(Buffer.from(answered.response.patch, 'base64').length <= MAX_PATCH_BYTES);
          if (p.containers + p.initContainers > MAX_CONTAINERS) assert.equal(answered.outcome, 'denied');
        },
      ),
      { numRuns: 60 },
    );
  });
});

describe('the review’s attack on the built webhook (dist/webhook.js), with the Deployment’s NODE_OPTIONS', () => {
  it('two 9,000-container pods at a time, repeatedly, with ordinary pods between: peak RSS under 192 MiB, every answer at most 1 MiB, 95% of ordinary pods served', async (t) => {
    const webhookJs = join(ROOT, 'dist/webhook.js');
    assert.ok(
      existsSync(webhookJs),
      'dist/webhook.js is missing: build it with node_modules/.bin/node images/build.ts',
    );
    const deployed = deployedWebhook();
    assert.match(deployed.nodeOptions, /--max-old-space-size=\d+/, 'the Deployment caps the heap');
    const webhook = await startBundle(webhookJs, deployed.nodeOptions);
    let figures;
    try {
      // Two at once, as the review sent them, each a new pod (no cache answers it). Ordinary pods
      // every 100 ms, at least 50 of them during the attack.
      figures = await runHostileLoad(webhook, {
        kinds: ['containers-9000'],
        concurrency: 2,
        perKind: 24,
        ordinaryEveryMs: 100,
        minOrdinary: 50,
        deadlineMs: deployed.timeoutSeconds * 1000,
      });
    } finally {
      await webhook.stop();
    }
    const report = summarize(figures);
    t.diagnostic(report);
    assert.equal(figures.gone, false, `the webhook died:\n${report}\n${webhook.stderr()}`);
    assert.ok(figures.peakMiB < 192, `peak RSS ${figures.peakMiB} MiB:\n${report}`);
    const answers = [...figures.kinds.flatMap((k) => figures.hostile[k]), ...figures.ordinary];
    for (const a of answers)
      assert.ok(Buffer.byteLength(a.body) <= MAX_ANSWER_BYTES, `an answer of ${a.body.length}`);
    const hostile = figures.hostile['containers-9000'];
    assert.ok(hostile.length >= 24, report);
    // Each refused by its count, or (under a slow machine's load) still waiting at the deadline,
    // which failurePolicy Fail refuses too: never admitted, never a dropped connection.
    for (const a of hostile) {
      if (a.status === 0) {
        assert.equal(a.error, 'deadline', JSON.stringify(a));
        continue;
      }
      assert.equal(a.status, 200, a.body.slice(0, 300));
      const response = (JSON.parse(a.body) as { response: Answered['response'] }).response;
      assert.equal(response.allowed, false);
      assert.match(response.status!.message, /the pod has 9,000 containers and init containers, over/);
    }
    const served = figures.ordinary.filter((a) => {
      if (a.status !== 200) return false;
      const response = (JSON.parse(a.body) as { response: Answered['response'] }).response;
      return response.allowed && response.patch !== undefined;
    });
    assert.ok(figures.ordinary.length >= 50, report);
    assert.ok(
      served.length >= 0.95 * figures.ordinary.length,
      `${served.length} of ${figures.ordinary.length} served:\n${report}`,
    );
  });
});
