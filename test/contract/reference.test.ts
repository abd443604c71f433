import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfigError } from '../../agent/contract/errors.ts';
import { assertNoCanary, canary } from '../support/canary.ts';
import { parseReference, sourceKey } from '../../agent/contract/reference.ts';

const ARN = 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:prod/db-AbCdEf';

describe('parseReference', () => {
  it('reads an ARN, its region and a #key', () => {
    assert.deepEqual(parseReference(`${ARN}#password`, 'F'), {
      text: `${ARN}#password`,
      key: 'password',
      provider: 'aws',
      secretId: ARN,
      region: 'eu-west-1',
    });
  });

  it('reads an AWS name with a stage or a version id', () => {
    assert.deepEqual(parseReference('aws:prod/db?versionStage=AWSPREVIOUS', 'F'), {
      text: 'aws:prod/db?versionStage=AWSPREVIOUS',
      provider: 'aws',
      secretId: 'prod/db',
      versionStage: 'AWSPREVIOUS',
    });
    const id = '01234567-89ab-cdef-0123-456789abcdef';
    assert.equal(parseReference(`aws:db?versionId=${id}`, 'F').provider, 'aws');
    assert.deepEqual((parseReference(`aws:db?versionId=${id}`, 'F') as { versionId?: string }).versionId, id);
  });

  it('reads GCP long and short forms, defaulting to latest', () => {
    assert.deepEqual(parseReference('projects/my-project/secrets/db/versions/3#user', 'F'), {
      text: 'projects/my-project/secrets/db/versions/3#user',
      key: 'user',
      provider: 'gcp',
      project: 'my-project',
      secret: 'db',
      version: '3',
    });
    assert.deepEqual(parseReference('gcp:db', 'F'), {
      text: 'gcp:db',
      provider: 'gcp',
      secret: 'db',
      version: 'latest',
    });
  });

  it('reads a GCP regional secret: its location, in the long form only', () => {
    assert.deepEqual(parseReference('projects/my-project/locations/europe-west4/secrets/db#user', 'F'), {
      text: 'projects/my-project/locations/europe-west4/secrets/db#user',
      key: 'user',
      provider: 'gcp',
      project: 'my-project',
      location: 'europe-west4',
      secret: 'db',
      version: 'latest',
    });
    for (const location of ['us-central1', 'northamerica-northeast2', 'me-central2', 'africa-south1']) {
      const ref = parseReference(`projects/123456/locations/${location}/secrets/db/versions/7`, 'F');
      assert.deepEqual([ref.provider, (ref as { location?: string }).location], ['gcp', location]);
    }
    assert.equal(
      (parseReference('projects/p-1234/secrets/db', 'F') as { location?: string }).location,
      undefined,
    );
    assert.notEqual(
      sourceKey(parseReference('projects/p-1234/secrets/db', 'F')),
      sourceKey(parseReference('projects/p-1234/locations/us-east1/secrets/db', 'F')),
      'a global and a regional secret of one id are two secrets',
    );
  });

  it('reads Vault and file references', () => {
    assert.deepEqual(parseReference('vault:secret/data/app?version=2#password', 'F'), {
      text: 'vault:secret/data/app?version=2#password',
      key: 'password',
      provider: 'vault',
      path: 'secret/data/app',
      version: 2,
    });
    assert.deepEqual(parseReference('file:./x.json', 'F'), {
      text: 'file:./x.json',
      provider: 'file',
      path: './x.json',
    });
  });

  it('reads an exec reference: a helper name, then everything up to # as its argument', () => {
    assert.deepEqual(parseReference('exec:az-keyvault/prod-vault/db-password#user', 'F'), {
      text: 'exec:az-keyvault/prod-vault/db-password#user',
      key: 'user',
      provider: 'exec',
      helper: 'az-keyvault',
      argument: 'prod-vault/db-password',
    });
    assert.deepEqual(parseReference('exec:kubernetes-secret.v2/db', 'F'), {
      text: 'exec:kubernetes-secret.v2/db',
      provider: 'exec',
      helper: 'kubernetes-secret.v2',
      argument: 'db',
    });
  });

  it('reads a Vault namespace option as a namespace path; root is the root namespace', () => {
    assert.deepEqual(parseReference('vault:secret/data/app?namespace=team-a/&version=3', 'F'), {
      text: 'vault:secret/data/app?namespace=team-a/&version=3',
      provider: 'vault',
      path: 'secret/data/app',
      version: 3,
      namespace: 'team-a',
    });
    const nested = parseReference('vault:secret/app?namespace=admin/team-a#k', 'F');
    assert.equal(nested.provider === 'vault' && nested.namespace, 'admin/team-a');
    const root = parseReference('vault:secret/app?namespace=root', 'F');
    assert.equal(root.provider === 'vault' && root.namespace, '');
    // Another namespace is another secret: its own fetch.
    assert.notEqual(sourceKey(nested), sourceKey(parseReference('vault:secret/app#k', 'F')));
  });

  const bad: [string, RegExp][] = [
    ['', /empty/],
    ['s3://bucket/key', /not a reference this agent understands/],
    ['arn:aws:secretsmanager:eu-west-1:12:secret:x', /not a Secrets Manager secret ARN/],
    ['aws:has space', /white space/],
    ['aws:x#', /empty #key/],
    [
      'aws:x?versionStage=A&versionId=01234567-89ab-cdef-0123-456789abcdef',
      /both versionStage and versionId/,
    ],
    ['aws:x?colour=blue', /an option \(a value of 6 characters\) is not known/],
    ['aws:x?versionId=1&versionStage=A&versionId=2', /option "versionId" is given twice/],
    ['aws:x?versionStage', /malformed/],
    ['projects/P!/secrets/x', /not a GCP project/],
    ['projects/p/secrets/x/versions/', /not a GCP Secret Manager name/],
    ['projects/p-1234/locations//secrets/x', /not a GCP Secret Manager name/],
    ['projects/p-1234/locations/us-central1/secrets', /not a GCP Secret Manager name/],
    ['gcp:locations/us-central1/secrets/x', /not a GCP Secret Manager name/],
    [
      'projects/p-1234/locations/US-CENTRAL1/secrets/x',
      /location \(a value of 11 characters\) is not a GCP region: it has characters other than lowercase/,
    ],
    ['projects/p-1234/locations/us-east-1/secrets/x', /not a GCP region: a region is lowercase words/],
    ['projects/p-1234/locations/us-central1-a/secrets/x', /not a GCP region/],
    ['projects/p-1234/locations/europe/secrets/x', /not a GCP region/],
    [`projects/p-1234/locations/${'a-'.repeat(40)}1/secrets/x`, /not a GCP region: it is over 63 characters/],
    ['projects/p-1234/locations/global/secrets/x', /"global", but a global secret has no \/locations\/ part/],
    ['vault:secret/../sys', /not a Vault path/],
    ['vault:/secret/app', /not a Vault path/],
    ['vault:secret/app?version=0', /positive whole number/],
    ['file:', /no path/],
    ['file:x?version=1', /option "version" is not known/],
    ['hunter2-CANARY', /^\(a value of 14 characters\) is not a reference this agent understands/],
    ['aws:bad|name', /name after aws: \(a value of 8 characters\).*characters other than/],
    ['vault:secret//app', /leading, trailing or doubled \//],
    ['exec:', /helper name after exec: \(a value of 0 characters\) is not a plain file name: it is empty/],
    ['exec:helper', /has no argument/],
    ['exec:helper/', /has no argument/],
    ['exec:../sh/x', /not a plain file name: it is \. or \.\./],
    ['exec:./x', /not a plain file name: it is \. or \.\./],
    ['exec:/bin/sh', /helper name after exec: \(a value of 0 characters\)/],
    ['exec:sh!/x', /characters other than letters, digits and \._-/],
    ['exec:helper/--help', /starts with -/],
    ['exec:helper/x?version=1', /option "version" is not known/],
    ['vault:secret/app?namespace=team-a//b', /not a Vault namespace: it is empty or has a doubled \//],
    ['vault:secret/app?namespace=admin/sys', /a segment is a name Vault reserves/],
    ['vault:secret/app?namespace=team%20a', /characters other than/],
    ['vault:secret/app?namespace=a&namespace=b', /option "namespace" is given twice/],
    ['aws:x?namespace=team-a', /option "namespace" is not known for this kind of reference/],
  ];
  for (const [text, problem] of bad) {
    it(`rejects ${JSON.stringify(text)} naming the field and a fix`, () => {
      assert.throws(
        () => parseReference(text, 'SECRET_3_REF'),
        (e: unknown) => {
          assert.ok(e instanceof ConfigError);
          assert.equal(e.field, 'SECRET_3_REF');
          assert.match(e.problem, problem);
          assert.ok(e.fix.length > 0);
          assert.match(e.message, /^SECRET_3_REF: .*Fix: /);
          return true;
        },
      );
    });
  }

  // Issue 10, item 1: text that failed to parse as a reference may be the secret itself, pasted.
  it('describes text it cannot parse by its shape, never echoing any part of it', () => {
    const pasted = canary('pasted');
    const texts = [
      pasted,
      `${pasted}:with:colons`,
      `arn:aws:secretsmanager:${pasted}`,
      `aws:${pasted}|bad`,
      `aws:x?${pasted}=1`,
      `aws:x?versionStage=${pasted}|`,
      `aws:x?versionId=${pasted}`,
      `aws:x?a=1&${pasted}`,
      `projects/${pasted}!/secrets/x`,
      `projects/p-1234/secrets/${pasted}!`,
      `gcp:x/versions/${pasted}!`,
      `gcp:${pasted}/x/y`,
      `projects/p-1234/locations/${pasted}/secrets/x`,
      `projects/p-1234/locations/us-central1/secrets/${pasted}!`,
      `vault:secret/${pasted}|`,
      `vault:secret/app?version=${pasted}`,
      `vault:secret/app?namespace=${pasted}|`,
      `vault:secret/app?namespace=sys/${pasted}`,
      `file:x?${pasted}=1`,
      `exec:${pasted}!/x`,
      `exec:helper/-${pasted}`,
      `exec:${pasted}`,
      `${pasted} with space`,
      `${pasted}#`,
      `${pasted}`.repeat(100),
    ];
    for (const text of texts) {
      assert.throws(
        () => parseReference(text, 'SECRET_0_REF'),
        (e: unknown) => {
          assert.ok(e instanceof ConfigError, String(e));
          assertNoCanary(e.message, `the error for ${JSON.stringify(text.slice(0, 40))}`);
          return true;
        },
      );
    }
  });

  it('gives two keys of one secret the same source', () => {
    assert.equal(
      sourceKey(parseReference('aws:db#user', 'F')),
      sourceKey(parseReference('aws:db#password', 'F')),
    );
    assert.notEqual(
      sourceKey(parseReference('aws:db', 'F')),
      sourceKey(parseReference('aws:db?versionStage=AWSPREVIOUS', 'F')),
    );
  });
});
