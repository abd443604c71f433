import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { Container } from 'kubernetes-models/v1';
import { parse as parseYaml } from 'yaml';
import { parseAgentConfig } from '../../agent/config/parse-agent-config.ts';
import type { AgentConfig } from '../../agent/contract/agent-config.ts';
import { SECRET_FORMATS } from '../../agent/contract/secret-settings.ts';
import type { Env } from '../../agent/contract/settings.ts';
import { ConfigError, ConfigErrors } from '../../agent/contract/errors.ts';
import { sourceKey } from '../../agent/contract/reference.ts';
import { loadFormats } from '../../agent/format/load-formats.ts';
import { renderFiles, SecretFormatError, type FileEntry } from '../../agent/format/render-files.ts';
import { formatFailureSummary, type SecretFailure } from '../../agent/modes/init.ts';
import { AGENT_CONTAINER, AGENT_INIT_CONTAINER } from '../../webhook/injected-names.ts';
import { basicPod, containerEnv, admitThroughWebhook, injectedPod } from '../webhook/fixtures.ts';

/**
 * docs/templates.md cannot drift: every example in it (between `<!-- example: NAME -->` and
 * `<!-- /example -->`) is run through the real code, and every file, refusal and error it shows must
 * come out exactly as written. The fenced blocks of an example say what they are in their info string:
 *
 *   value=REF            what the secret REF holds (REF as the references write it, without #key)
 *   pod                  a pod's metadata.annotations: admitted by the webhook, whose agent env is used
 *   container            an agent container written by hand (the env form): its env is used
 *   file=PATH [eol=no]   the file PATH in the volume; eol=no: the file has no final newline
 *   refused              the webhook's refusal message for the pod
 *   start-up             the agent's configuration errors, one per line (it exits 2)
 *   fetch                the init container's stderr when the values do not fit (it exits 1)
 */

const DOC = readFileSync(new URL('../../docs/templates.md', import.meta.url), 'utf8');

/** What a cluster's webhook sets so that aws:NAME and vault: references are admitted. */
const CLUSTER = {
  AGENT_AWS_REGION: 'eu-west-1',
  AGENT_VAULT_ADDR: 'https://vault.example:8200',
  AGENT_VAULT_ROLE: 'apps',
};

interface Block {
  readonly lang: string;
  readonly attrs: ReadonlyMap<string, string>;
  readonly body: string;
  readonly at: number;
}

interface Example {
  readonly name: string;
  readonly blocks: readonly Block[];
}

const FENCE = /^```([^\n`]*)\n([\s\S]*?)^```$/gm;
const ROLES = new Set(['value', 'pod', 'container', 'file', 'eol', 'refused', 'start-up', 'fetch']);
const EXPECTATIONS = ['file', 'refused', 'start-up', 'fetch'];

function blocks(text: string): Block[] {
  return [...text.matchAll(FENCE)].map((m) => {
    const [lang = '', ...words] = m[1]!.trim().split(/\s+/);
    const attrs = new Map(
      words.map((w) => {
        const eq = w.indexOf('=');
        return eq < 0 ? [w, ''] : [w.slice(0, eq), w.slice(eq + 1)];
      }),
    );
    return { lang, attrs, body: m[2]!, at: m.index };
  });
}

function examples(text: string): Example[] {
  const found: Example[] = [];
  const all = blocks(text);
  for (const m of text.matchAll(/<!-- example: ([a-z0-9-]+) -->([\s\S]*?)<!-- \/example -->/g)) {
    const start = m.index;
    const end = start + m[0].length;
    found.push({ name: m[1]!, blocks: all.filter((b) => b.at > start && b.at < end) });
  }
  return found;
}

/** The block body without the newline before the closing fence. */
function text(block: Block): string {
  return block.body.replace(/\n$/, '');
}

interface Outcome {
  readonly files?: ReadonlyMap<string, string>;
  readonly refused?: string;
  readonly startUp?: readonly string[];
  readonly fetch?: string;
}

/** Runs one example the way a pod (or a hand-written agent container) runs it. */
async function run(example: Example): Promise<Outcome> {
  const values = new Map<string, Uint8Array>();
  for (const b of example.blocks)
    if (b.attrs.has('value')) values.set(b.attrs.get('value')!, Buffer.from(b.body, 'utf8'));

  let env: Env;
  const pod = example.blocks.find((b) => b.attrs.has('pod'));
  const container = example.blocks.find((b) => b.attrs.has('container'));
  assert.ok((pod === undefined) !== (container === undefined), 'one pod or container block');
  if (pod) {
    const doc = parseYaml(pod.body) as { metadata: { annotations: Record<string, string> } };
    const annotations = doc.metadata.annotations;
    for (const key of Object.keys(annotations)) assert.ok(key.startsWith('secret-agent.io/'), key);
    const shape = basicPod(annotations);
    const result = admitThroughWebhook(shape, CLUSTER);
    if (result.outcome === 'denied') return { refused: result.review.response.status!.message };
    const mutated = injectedPod(shape, result);
    const agent = [...(mutated.spec.initContainers ?? []), ...mutated.spec.containers].find(
      (c) => c.name === AGENT_CONTAINER || c.name === AGENT_INIT_CONTAINER,
    );
    assert.ok(agent, 'the webhook added the agent');
    env = containerEnv(agent, mutated);
  } else {
    const spec = parseYaml(container!.body) as { env: { name: string; value: string }[] };
    new Container(spec as unknown as ConstructorParameters<typeof Container>[0]).validate();
    env = Object.fromEntries(spec.env.map((e) => [e.name, e.value]));
  }

  let config: AgentConfig;
  let formats: Awaited<ReturnType<typeof loadFormats>>;
  try {
    config = parseAgentConfig(env);
    formats = await loadFormats(config.secrets);
  } catch (e) {
    if (e instanceof ConfigErrors) return { startUp: e.errors.map((x) => x.message) };
    if (e instanceof ConfigError) return { startUp: [e.message] };
    throw e;
  }

  const valueOf = (spec: AgentConfig['secrets'][number]) => {
    const bytes = values.get(sourceKey(spec.ref));
    assert.ok(bytes, `the example shows no value for ${sourceKey(spec.ref)}`);
    return bytes;
  };
  const byName = new Map(config.secrets.flatMap((s) => (s.name === undefined ? [] : [[s.name, s] as const])));
  const files = new Map<string, string>();
  const failures: SecretFailure[] = [];
  for (const spec of config.secrets) {
    let entries: FileEntry[];
    try {
      entries = renderFiles(spec, valueOf(spec), formats, (name) => {
        const other = byName.get(name);
        return other && valueOf(other);
      });
    } catch (e) {
      if (!(e instanceof SecretFormatError)) throw e;
      // As agent/modes/init.ts reports a value that does not fit its format.
      failures.push({ id: spec.id, ref: spec.ref.text, reason: 'format', detail: e.message, fix: e.fix });
      continue;
    }
    for (const f of entries) files.set(f.path, Buffer.from(f.bytes).toString('utf8'));
  }
  if (failures.length > 0) {
    // What the guide shows is init mode's stderr: a sidecar logs its failures instead.
    assert.equal(config.mode, 'init', 'a fetch error is shown for an agent in init mode');
    return { fetch: formatFailureSummary(failures, config.secrets.length, config.secretsDir) };
  }
  return { files };
}

describe('docs/templates.md', () => {
  const all = examples(DOC);

  it('has its examples marked, and every template it shows is in one', () => {
    assert.ok(all.length >= 10, `only ${all.length} examples found`);
    assert.equal(new Set(all.map((e) => e.name)).size, all.length, 'example names are unique');
    const inside = new Set(all.flatMap((e) => e.blocks.map((b) => b.at)));
    for (const b of blocks(DOC)) {
      if (b.body.includes('{{') && !inside.has(b.at))
        assert.fail(`a block with a template is in no example: ${JSON.stringify(b.body.slice(0, 80))}`);
    }
    for (const e of all) {
      for (const b of e.blocks) {
        assert.ok(b.attrs.size > 0, `${e.name}: a block says nothing about what it is`);
        for (const key of b.attrs.keys()) assert.ok(ROLES.has(key), `${e.name}: unknown block role ${key}`);
      }
      assert.ok(
        e.blocks.some((b) => EXPECTATIONS.some((r) => b.attrs.has(r))),
        `${e.name} shows no outcome`,
      );
    }
  });

  it('lists every format in its formats table, and no other', () => {
    const section = DOC.slice(DOC.indexOf('## The formats'));
    const listed = [...section.matchAll(/^\| `([a-z]+)` +\|/gm)].map((m) => m[1]);
    assert.deepEqual(listed, [...SECRET_FORMATS]);
  });

  for (const example of all) {
    it(`example ${example.name} renders as the guide shows`, async () => {
      const outcome = await run(example);
      const expected = example.blocks.filter((b) => EXPECTATIONS.some((r) => b.attrs.has(r)));
      for (const b of expected) {
        if (b.attrs.has('refused')) {
          assert.equal(outcome.refused, text(b));
        } else if (b.attrs.has('start-up')) {
          assert.deepEqual(outcome.startUp, text(b).split('\n'));
        } else if (b.attrs.has('fetch')) {
          assert.equal(outcome.fetch, b.body);
        } else {
          const path = b.attrs.get('file')!;
          assert.ok(outcome.files, `${example.name} was not rendered: ${JSON.stringify(outcome)}`);
          const content = outcome.files.get(path);
          assert.ok(content !== undefined, `no file ${path}; files: ${[...outcome.files.keys()].join(', ')}`);
          // A fenced block always ends with a newline: eol=no says the file itself has none.
          const noEol = b.attrs.get('eol') === 'no';
          assert.equal(!content.endsWith('\n'), noEol, `${path}: eol=no iff the file has no final newline`);
          assert.equal(noEol ? `${content}\n` : content, b.body, path);
        }
      }
      // Every outcome the run had is one the guide shows.
      if (outcome.refused !== undefined) assert.ok(expected.some((b) => b.attrs.has('refused')));
      if (outcome.startUp !== undefined) assert.ok(expected.some((b) => b.attrs.has('start-up')));
      if (outcome.fetch !== undefined) assert.ok(expected.some((b) => b.attrs.has('fetch')));
    });
  }
});
