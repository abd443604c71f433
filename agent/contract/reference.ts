import { ConfigError, quote, valueShape } from './errors.ts';

/**
 * The reference grammar: how a user names a secret, in an env var or an annotation.
 * One module, imported by the agent (to fetch) and the webhook (to validate before a pod exists).
 *
 *   reference := source [ "?" option "=" value { "&" option "=" value } ] [ "#" key ]
 *
 * `text` keeps the reference as written: references name secrets, they are not secrets,
 * so it is what logs and errors show. Text that fails to parse is another matter: it may be the
 * secret itself, pasted by mistake, so every error here describes it by its shape (valueShape) and
 * says which rule it breaks, and quotes nothing the user wrote.
 */

export type ProviderName = 'aws' | 'gcp' | 'vault' | 'file' | 'exec';

interface ReferenceBase {
  /** The reference as written, safe to log. */
  readonly text: string;
  /** A top-level key of a JSON secret to pick (`#key`). */
  readonly key?: string;
}

export interface AwsReference extends ReferenceBase {
  readonly provider: 'aws';
  /** A name or an ARN, as Secrets Manager's SecretId takes it. */
  readonly secretId: string;
  /** From the ARN; a bare name uses the agent's AWS region. */
  readonly region?: string;
  readonly versionStage?: string;
  readonly versionId?: string;
}

export interface GcpReference extends ReferenceBase {
  readonly provider: 'gcp';
  /** Absent in the short form `gcp:NAME`: the agent's project applies. */
  readonly project?: string;
  /**
   * A regional secret's location (`projects/P/locations/L/…`), read from that region's endpoint;
   * absent for a global secret.
   */
  readonly location?: string;
  readonly secret: string;
  readonly version: string;
}

export interface VaultReference extends ReferenceBase {
  readonly provider: 'vault';
  /** A logical path as Vault's HTTP API takes it after /v1/, e.g. `secret/data/app`. */
  readonly path: string;
  /** KV v2 version to read; absent means the current one. */
  readonly version?: number;
  /**
   * Vault Enterprise / HCP namespace to read in (`?namespace=team-a`), instead of VAULT_NAMESPACE;
   * `''` is the root namespace (`?namespace=root`). Absent: VAULT_NAMESPACE.
   */
  readonly namespace?: string;
}

export interface FileReference extends ReferenceBase {
  readonly provider: 'file';
  readonly path: string;
}

export interface ExecReference extends ReferenceBase {
  readonly provider: 'exec';
  /** A file name in EXEC_HELPERS_DIR: the program the agent runs. */
  readonly helper: string;
  /** What the helper gets as argv[1]. */
  readonly argument: string;
}

export type SecretReference = AwsReference | GcpReference | VaultReference | FileReference | ExecReference;

/** The accepted forms, for docs and for the error a malformed reference gets. */
export const REFERENCE_FORMS: readonly { provider: ProviderName; form: string; meaning: string }[] = [
  {
    provider: 'aws',
    form: 'arn:aws:secretsmanager:REGION:ACCOUNT:secret:NAME[?versionStage=STAGE|?versionId=ID]',
    meaning: 'AWS Secrets Manager secret by ARN; the region comes from the ARN. Default stage AWSCURRENT.',
  },
  {
    provider: 'aws',
    form: 'aws:NAME[?versionStage=STAGE|?versionId=ID]',
    meaning: 'AWS Secrets Manager secret by name, in the region of AWS_REGION.',
  },
  {
    provider: 'gcp',
    form: 'projects/PROJECT/secrets/SECRET[/versions/VERSION]',
    meaning: 'GCP Secret Manager secret version; default version `latest`.',
  },
  {
    provider: 'gcp',
    form: 'projects/PROJECT/locations/LOCATION/secrets/SECRET[/versions/VERSION]',
    meaning:
      'GCP Secret Manager regional secret, read from its region’s endpoint secretmanager.LOCATION.rep.googleapis.com.',
  },
  {
    provider: 'gcp',
    form: 'gcp:SECRET[/versions/VERSION]',
    meaning: 'GCP Secret Manager secret in the project of GCP_PROJECT.',
  },
  {
    provider: 'vault',
    form: 'vault:PATH[?version=N&namespace=NS]',
    meaning:
      'HashiCorp Vault logical path, e.g. `vault:secret/data/app` (KV v2), `vault:database/creds/app`. Each option is optional: `version` picks a KV v2 version, `namespace` reads in that Vault Enterprise namespace instead of VAULT_NAMESPACE (`root` for the root namespace).',
  },
  { provider: 'file', form: 'file:PATH', meaning: 'A local file (demos, local runs, tests).' },
  {
    provider: 'exec',
    form: 'exec:HELPER/ARGUMENT',
    meaning:
      'The stdout of the program HELPER in EXEC_HELPERS_DIR, run with ARGUMENT as its one argument, e.g. `exec:az-keyvault/prod-vault/db-password` (any other backend; docs/exec-helpers.md).',
  },
];

/** `#key` at the end of any form picks one top-level key of a JSON secret. */
export const KEY_SUFFIX_DOC = 'Append `#KEY` to any form to pick one top-level key of a JSON secret.';

const AWS_NAME = /^[A-Za-z0-9/_+=.@-]{1,512}$/;
const AWS_ARN =
  /^arn:(aws|aws-cn|aws-us-gov|aws-iso|aws-iso-[a-z])(?::secretsmanager:)([a-z]{2}(?:-[a-z]+)+-\d{1,2}):(\d{12}):secret:([A-Za-z0-9/_+=.@-]{1,512})$/;
const AWS_STAGE = /^[A-Za-z0-9_+=.@-]{1,256}$/;
const AWS_VERSION_ID = /^[A-Za-z0-9-]{32,64}$/;
const GCP_PROJECT = /^(?:[a-z][a-z0-9-]{4,28}[a-z0-9]|\d{1,20})$/;
const GCP_SECRET = /^[A-Za-z0-9_-]{1,255}$/;
const GCP_VERSION = /^(?:latest|\d{1,19}|[A-Za-z][A-Za-z0-9_-]{0,62})$/;
/**
 * A GCP region, as regional secrets and their endpoints name it: `us-central1`, `europe-west4`. It
 * becomes a label of the endpoint's host name, so it is kept to one DNS label.
 */
const GCP_LOCATION = /^(?=.{1,63}$)[a-z]+(?:-[a-z]+)+\d{1,2}$/;
const GCP_FULL = /^projects\/([^/]+)(?:\/locations\/([^/]+))?\/secrets\/([^/]+)(?:\/versions\/([^/]+))?$/;
const GCP_SHORT = /^([^/]+)(?:\/versions\/([^/]+))?$/;
const VAULT_SEGMENT = /^[A-Za-z0-9_.@+=:-]+$/;
/** A plain file name: no directory, no `..`, nothing a shell or a path could read differently. */
const EXEC_HELPER = /^[A-Za-z0-9._-]{1,255}$/;
const MAX_REFERENCE = 2048;
/** Every option any form takes: only these names are ever quoted back (they are our words). */
const OPTION_NAMES = ['versionStage', 'versionId', 'version', 'namespace'];
/** How each form starts, for the error of a text that starts with none of them. */
const PREFIXES = 'arn:, aws:, projects/, gcp:, vault:, file: or exec:';

function allowedForms(): string {
  return REFERENCE_FORMS.map((f) => f.form).join(' | ');
}

/** Why a name fails a character-class and length rule, in words that do not repeat it. */
function whyNot(text: string, maxLength: number, allowed: string): string {
  if (text === '') return 'it is empty';
  if (text.length > maxLength) return `it is over ${maxLength} characters`;
  return `it has characters other than ${allowed}`;
}

/**
 * Parses a reference; throws ConfigError naming `field` (the env var or annotation it came from).
 */
export function parseReference(text: string, field: string): SecretReference {
  const fail = (problem: string, fix: string): never => {
    throw new ConfigError(field, problem, fix);
  };
  if (text.trim() === '') fail('the reference is empty', `set it to one of: ${allowedForms()}`);
  if (text.length > MAX_REFERENCE)
    fail(`the reference is ${text.length} characters long`, `keep it under ${MAX_REFERENCE}`);
  if (/[\s\0]/.test(text))
    fail(`the reference ${valueShape(text)} contains white space or control characters`, 'remove them');

  let rest = text;
  let key: string | undefined;
  const hash = rest.indexOf('#');
  if (hash >= 0) {
    key = rest.slice(hash + 1);
    rest = rest.slice(0, hash);
    if (key === '')
      fail(
        `the reference ${valueShape(text)} ends in an empty #key`,
        'name the JSON key after #, or drop the #',
      );
  }
  let options = new Map<string, string>();
  const question = rest.indexOf('?');
  if (question >= 0) {
    options = parseOptions(rest.slice(question + 1), fail);
    rest = rest.slice(0, question);
  }
  const base = key === undefined ? { text } : { text, key };

  const onlyOptions = (allowed: readonly string[]): void => {
    for (const name of options.keys()) {
      if (!allowed.includes(name)) {
        fail(
          OPTION_NAMES.includes(name)
            ? `option ${quote(name)} is not known for this kind of reference`
            : `an option ${valueShape(name)} is not known for this kind of reference`,
          allowed.length ? `use one of: ${allowed.join(', ')}` : 'remove the ?… part',
        );
      }
    }
  };

  if (rest.startsWith('arn:')) {
    const m = AWS_ARN.exec(rest);
    if (!m) {
      const parts = rest.split(':').length;
      return fail(
        `the ARN ${valueShape(rest)} is not a Secrets Manager secret ARN (it has ${parts} colon-separated parts; one has 7)`,
        'use arn:aws:secretsmanager:REGION:ACCOUNT:secret:NAME (copy it from the console or `aws secretsmanager describe-secret`)',
      );
    }
    onlyOptions(['versionStage', 'versionId']);
    return { ...base, provider: 'aws', secretId: rest, region: m[2]!, ...awsVersion(options, fail) };
  }
  if (rest.startsWith('aws:')) {
    const name = rest.slice(4);
    if (!AWS_NAME.test(name)) {
      return fail(
        `the name after aws: ${valueShape(name)} is not a valid Secrets Manager secret name: ${whyNot(name, 512, 'letters, digits and /_+=.@-')}`,
        'use 1 to 512 characters of letters, digits and /_+=.@-, or a full ARN',
      );
    }
    onlyOptions(['versionStage', 'versionId']);
    return { ...base, provider: 'aws', secretId: name, ...awsVersion(options, fail) };
  }
  if (rest.startsWith('projects/') || rest.startsWith('gcp:')) {
    const full = rest.startsWith('projects/');
    const m = full ? GCP_FULL.exec(rest) : GCP_SHORT.exec(rest.slice(4));
    if (!m) {
      return fail(
        `${valueShape(rest)} is not a GCP Secret Manager name`,
        'use projects/PROJECT/secrets/SECRET[/versions/VERSION], projects/PROJECT/locations/LOCATION/secrets/SECRET[/versions/VERSION] or gcp:SECRET[/versions/VERSION]',
      );
    }
    const [project, location, secret, version] = full
      ? [m[1], m[2], m[3], m[4]]
      : [undefined, undefined, m[1], m[2]];
    if (project !== undefined && !GCP_PROJECT.test(project)) {
      fail(
        `the project ${valueShape(project)} is not a GCP project id or number`,
        'use the project id (e.g. my-project) or its number',
      );
    }
    if (location === 'global') {
      // Our word, not the user's: safe to quote.
      fail(
        'the location is "global", but a global secret has no /locations/ part',
        'write a global secret as projects/PROJECT/secrets/SECRET; /locations/LOCATION/ is for regional secrets',
      );
    }
    if (location !== undefined && !GCP_LOCATION.test(location)) {
      fail(
        `the location ${valueShape(location)} is not a GCP region: ${whyNotLocation(location)}`,
        'use the region the regional secret was created in, e.g. us-central1 or europe-west4 (gcloud secrets list --location LOCATION)',
      );
    }
    if (!GCP_SECRET.test(secret!)) {
      fail(
        `the secret id ${valueShape(secret!)} is not a GCP secret id: ${whyNot(secret!, 255, 'letters, digits, - and _')}`,
        'use 1 to 255 letters, digits, - and _',
      );
    }
    if (version !== undefined && !GCP_VERSION.test(version)) {
      fail(
        `the version ${valueShape(version)} is not a GCP secret version`,
        'use `latest`, a version number, or an alias',
      );
    }
    onlyOptions([]);
    return {
      ...base,
      provider: 'gcp',
      ...(project === undefined ? {} : { project }),
      ...(location === undefined ? {} : { location }),
      secret: secret!,
      version: version ?? 'latest',
    };
  }
  if (rest.startsWith('vault:')) {
    const path = rest.slice(6);
    const segments = path.split('/');
    if (path === '' || segments.some((s) => s === '' || s === '.' || s === '..' || !VAULT_SEGMENT.test(s))) {
      return fail(
        `the path after vault: ${valueShape(path)} is not a Vault path: ${vaultPathProblem(segments)}`,
        'use a path relative to /v1/ without leading or doubled slashes or dot segments, e.g. vault:secret/data/app',
      );
    }
    onlyOptions(['version', 'namespace']);
    const version = options.get('version');
    if (version !== undefined && !/^[1-9]\d{0,9}$/.test(version)) {
      fail(
        `version ${valueShape(version)} is not a positive whole number`,
        'use ?version=N with N ≥ 1, or drop it for the current one',
      );
    }
    const namespaceText = options.get('namespace');
    let namespace: string | undefined;
    if (namespaceText !== undefined) {
      const parsed = parseVaultNamespace(namespaceText);
      if (typeof parsed !== 'string')
        return fail(
          `namespace ${valueShape(namespaceText)} is not a Vault namespace: ${parsed.problem}`,
          'use the namespace path as `vault namespace list` shows it, e.g. ?namespace=team-a or ?namespace=admin/team-a (root for the root namespace)',
        );
      namespace = parsed;
    }
    return {
      ...base,
      provider: 'vault',
      path,
      ...(version === undefined ? {} : { version: Number(version) }),
      ...(namespace === undefined ? {} : { namespace }),
    };
  }
  if (rest.startsWith('file:')) {
    const path = rest.slice(5);
    if (path === '') fail('the file: reference has no path', 'use file:PATH');
    onlyOptions([]);
    return { ...base, provider: 'file', path };
  }
  if (rest.startsWith('exec:')) {
    const body = rest.slice(5);
    const slash = body.indexOf('/');
    const helper = slash < 0 ? body : body.slice(0, slash);
    const argument = slash < 0 ? '' : body.slice(slash + 1);
    if (!EXEC_HELPER.test(helper) || helper === '.' || helper === '..') {
      return fail(
        `the helper name after exec: ${valueShape(helper)} is not a plain file name: ${helper === '.' || helper === '..' ? 'it is . or ..' : whyNot(helper, 255, 'letters, digits and ._-')}`,
        'name a file in EXEC_HELPERS_DIR (letters, digits and ._-), then / and the argument, e.g. exec:az-keyvault/prod-vault/db-password',
      );
    }
    if (argument === '') {
      return fail(
        'the exec: reference has no argument after the helper name',
        'write exec:HELPER/ARGUMENT, e.g. exec:az-keyvault/prod-vault/db-password',
      );
    }
    // The argument reaches the helper as argv[1]: one starting with - could be read as an option.
    if (argument.startsWith('-')) {
      return fail(
        `the argument of the exec: reference ${valueShape(argument)} starts with -, which a helper could take for an option`,
        'name the secret without a leading -',
      );
    }
    onlyOptions([]);
    return { ...base, provider: 'exec', helper, argument };
  }
  return fail(
    `${valueShape(text)} is not a reference this agent understands: it starts with none of ${PREFIXES}`,
    `use one of: ${allowedForms()}`,
  );
}

/** Which rule a location breaks, without repeating it. */
function whyNotLocation(location: string): string {
  if (location.length > 63) return 'it is over 63 characters';
  if (/[^a-z0-9-]/.test(location)) return 'it has characters other than lowercase letters, digits and -';
  return 'a region is lowercase words joined by - and ending in a number, e.g. us-central1';
}

/** Which rule a Vault path breaks, without repeating it. */
function vaultPathProblem(segments: readonly string[]): string {
  if (segments.some((s) => s === '')) return 'it is empty or has a leading, trailing or doubled /';
  if (segments.some((s) => s === '.' || s === '..')) return 'it has a . or .. segment';
  return 'it has characters other than letters, digits and _.@+=:-';
}

/** Names Vault reserves, which no namespace may take (`root` alone names the root namespace). */
const RESERVED_NAMESPACE_SEGMENTS = new Set([
  '.',
  '..',
  'root',
  'sys',
  'audit',
  'auth',
  'cubbyhole',
  'identity',
]);

/**
 * A Vault Enterprise namespace path (`team-a`, `admin/team-a/`, as VAULT_NAMESPACE and
 * X-Vault-Namespace take it): the path without leading or trailing slashes, `''` for `root` (the
 * root namespace); or which rule it breaks, in words that do not repeat it.
 */
export function parseVaultNamespace(text: string): string | { readonly problem: string } {
  const trimmed = text.replace(/^\/+|\/+$/g, '');
  if (trimmed === 'root') return '';
  const segments = trimmed.split('/');
  if (trimmed === '' || segments.some((s) => s === '')) return { problem: 'it is empty or has a doubled /' };
  if (segments.some((s) => RESERVED_NAMESPACE_SEGMENTS.has(s)))
    return {
      problem: 'a segment is a name Vault reserves (., .., root, sys, audit, auth, cubbyhole, identity)',
    };
  if (segments.some((s) => !VAULT_SEGMENT.test(s)))
    return { problem: 'it has characters other than letters, digits, / and _.@+=:-' };
  return trimmed;
}

function parseOptions(query: string, fail: (problem: string, fix: string) => never): Map<string, string> {
  const options = new Map<string, string>();
  for (const pair of query.split('&')) {
    const eq = pair.indexOf('=');
    const name = eq < 0 ? pair : pair.slice(0, eq);
    const value = eq < 0 ? '' : pair.slice(eq + 1);
    if (name === '' || value === '')
      fail(
        'the options after ? are malformed (a name or a value is empty)',
        'write them as ?name=value&name=value',
      );
    if (options.has(name))
      fail(
        OPTION_NAMES.includes(name)
          ? `option ${quote(name)} is given twice`
          : `an option ${valueShape(name)} is given twice`,
        'keep one',
      );
    options.set(name, value);
  }
  return options;
}

function awsVersion(
  options: ReadonlyMap<string, string>,
  fail: (problem: string, fix: string) => never,
): { versionStage?: string; versionId?: string } {
  const versionStage = options.get('versionStage');
  const versionId = options.get('versionId');
  if (versionStage !== undefined && versionId !== undefined) {
    fail('both versionStage and versionId are set', 'choose one: a stage (e.g. AWSPREVIOUS) or a version id');
  }
  if (versionStage !== undefined) {
    if (!AWS_STAGE.test(versionStage))
      fail(
        `versionStage ${valueShape(versionStage)} is malformed: ${whyNot(versionStage, 256, 'letters, digits and _+=.@-')}`,
        'use a stage label such as AWSCURRENT or AWSPREVIOUS',
      );
    return { versionStage };
  }
  if (versionId !== undefined) {
    if (!AWS_VERSION_ID.test(versionId))
      fail(
        `versionId ${valueShape(versionId)} is malformed`,
        'use the 32 to 64 character version id Secrets Manager shows',
      );
    return { versionId };
  }
  return {};
}

/**
 * Identity of the backend object a reference reads, without its `#key`: two files cut from one
 * secret share one fetch.
 */
export function sourceKey(ref: SecretReference): string {
  const hash = ref.text.indexOf('#');
  return hash < 0 ? ref.text : ref.text.slice(0, hash);
}
