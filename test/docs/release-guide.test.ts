/**
 * Anti-drift checks for docs/release.md: its flags table is exactly `npm run release`'s flags, and the
 * admission policies it gives parse, name both images, and require what the release attests (the SLSA
 * provenance predicate type on the index, with the build type images/provenance.ts writes).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { parseAllDocuments } from 'yaml';
import { IMAGE_NAMES, ROOT } from '../../images/manifest.ts';
import { BUILD_TYPE } from '../../images/provenance.ts';
import { RELEASE_OPTIONS } from '../../images/release.ts';

const guide = readFileSync(join(ROOT, 'docs/release.md'), 'utf8');
/** cosign's `--type slsaprovenance1`, as the statement names it (test/image/release.test.ts checks cosign writes it). */
const SLSA_V1 = 'https://slsa.dev/provenance/v1';

type Obj = Record<string, unknown>;

const yamlBlocks = (): Obj[] =>
  [...guide.matchAll(/^```yaml\n([\s\S]*?)^```$/gm)].flatMap(([, text]) =>
    parseAllDocuments(text!).map((doc) => {
      assert.deepEqual(doc.errors, [], `docs/release.md: a YAML block does not parse`);
      return doc.toJS() as Obj;
    }),
  );

const kind = (k: string) => {
  const found = yamlBlocks().filter((o) => o.kind === k);
  assert.equal(found.length, 1, `docs/release.md gives one ${k}`);
  return found[0]!;
};

/** Each image's repository under the guide's example registry matches one of the patterns. */
function coversBothImages(patterns: readonly string[], what: string) {
  for (const name of IMAGE_NAMES) {
    const ref = `registry.internal.example/secret-agent/${name}@sha256:${'0'.repeat(64)}`;
    const glob = (p: string) => new RegExp(`^${p.replace(/[.]/g, '\\.').replace(/\*+/g, '.*')}$`);
    assert.ok(
      patterns.some((p) => glob(p).test(ref)),
      `${what}: no pattern matches the ${name} image (${patterns.join(', ')})`,
    );
  }
}

describe('docs/release.md', () => {
  it('its flags table lists exactly the flags npm run release takes', () => {
    const table = guide.slice(
      guide.indexOf('## Flags'),
      guide.indexOf('\n## ', guide.indexOf('## Flags') + 1),
    );
    const documented = [...table.matchAll(/^\| `--([a-z-]+)/gm)].map(([, flag]) => flag!).sort();
    assert.deepEqual(documented, Object.keys(RELEASE_OPTIONS).sort());
  });

  it('the Kyverno policy enforces signatures and the SLSA provenance on both images', () => {
    const policy = kind('ClusterPolicy') as {
      apiVersion: string;
      spec: { rules: { verifyImages: Obj[] }[] };
    };
    assert.equal(policy.apiVersion, 'kyverno.io/v1');
    const [verify] = policy.spec.rules.flatMap((r) => r.verifyImages);
    const v = verify as {
      imageReferences: string[];
      failureAction: string;
      required: boolean;
      attestors: { entries: { keys: { publicKeys: string } }[] }[];
      attestations: { type: string; conditions: { all: { key: string; value: string }[] }[] }[];
    };
    coversBothImages(v.imageReferences, 'Kyverno imageReferences');
    assert.equal(v.failureAction, 'Enforce');
    assert.equal(v.required, true);
    assert.match(v.attestors[0]!.entries[0]!.keys.publicKeys, /BEGIN PUBLIC KEY/);
    assert.deepEqual(
      v.attestations.map((a) => a.type),
      [SLSA_V1],
    );
    assert.deepEqual(v.attestations[0]!.conditions[0]!.all[0], {
      key: '{{ buildDefinition.buildType }}',
      operator: 'Equals',
      value: BUILD_TYPE,
    });
  });

  it('the policy-controller ClusterImagePolicy requires the key and the SLSA provenance on both images', () => {
    const policy = kind('ClusterImagePolicy') as {
      apiVersion: string;
      spec: {
        images: { glob: string }[];
        authorities: {
          key: { data: string };
          attestations: { predicateType: string; policy: { data: string } }[];
        }[];
      };
    };
    assert.equal(policy.apiVersion, 'policy.sigstore.dev/v1beta1');
    coversBothImages(
      policy.spec.images.map((i) => i.glob),
      'policy-controller images',
    );
    const [authority] = policy.spec.authorities;
    assert.match(authority!.key.data, /BEGIN PUBLIC KEY/);
    assert.deepEqual(
      authority!.attestations.map((a) => a.predicateType),
      [SLSA_V1],
    );
    assert.ok(authority!.attestations[0]!.policy.data.includes(`"${BUILD_TYPE}"`));
  });
});
