/**
 * Variables a secret may never set (`secret-agent.io/env-<VAR>`, docs/env.md): those whose value a
 * loader, a shell, a runtime or a launcher reads to choose what code runs, where it looks for it, or
 * whom the container's TLS trusts. A secret's value is written by whoever may write that backend
 * secret, who is not the pod's author; under one of these names that writer would run code in every
 * selected container (a library LD_PRELOAD loads, a module NODE_OPTIONS requires, a command BASH_ENV
 * expands, `-XX:OnOutOfMemoryError=` in CATALINA_OPTS). None of them is a secret: each is a path, a
 * switch, a command or a list of options, which the container's own `env` sets, where the pod's author
 * chooses it.
 *
 * No list of readers can be complete, so two kinds of rule work together:
 * - the readers' own names: exact names, and prefixes where the whole namespace is one reader's
 *   (LD_, PYTHON, NPM_CONFIG_, GIT_); where apps use a prefix for names of their own too (NODE_, KAFKA_,
 *   AWS_), the reader's names are listed one by one;
 * - conventions: a name ending in OPTS, ARGS, FLAGS, CMD, PATH, HOME, DIR, FILE, LIB… holds options, a
 *   command or a path by the convention every launcher and start script follows (CATALINA_OPTS,
 *   GUNICORN_CMD_ARGS, TCL_LIBRARY), whoever reads it, including readers no list names.
 * A secret's own names end otherwise (`_URL`, `_PASSWORD`, `_TOKEN`, `_KEY`, `_SECRET`, `_CONFIG`), and
 * stay admitted. Names are compared without regard to case: Linux's variables are case-sensitive and
 * ld.so ignores `ld_preload`, but some readers fold case (npm's `npm_config_*`, .NET's configuration),
 * and no app has a reason to name a variable like a loader's in another case.
 */
import { CONVENTION_FAMILIES, SECRET_ENDINGS } from './refused-env-conventions.ts';
import { READER_FAMILIES, type RefusedEnvFamily, type RefusedEnvRisk } from './refused-env-families.ts';

export type { RefusedEnvFamily, RefusedEnvRisk };

/** Every rule, the readers' own names first: docs/env.md's table is generated from this list. */
export const REFUSED_ENV_FAMILIES: readonly RefusedEnvFamily[] = [...READER_FAMILIES, ...CONVENTION_FAMILIES];

/** A rule a name matched: the family, the rule as docs/env.md shows it, and the refusal's words. */
export interface RefusedEnvMatch {
  readonly family: RefusedEnvFamily;
  /** As the table shows it: `PATH`, `LD_*`, `*OPTS`, `*STARTUP*`. */
  readonly rule: string;
  /** The rule in words, after the quoted name: `ends with OPTS, which by convention holds …`. */
  readonly reason: string;
  /** What whoever writes the secret could do, after "whoever writes the secret would". */
  readonly consequence: string;
}

const CONSEQUENCE: Record<RefusedEnvRisk, string> = {
  code: 'choose what code the container runs',
  trust: 'choose whom the container’s TLS trusts, and read or change its traffic',
  identity:
    'choose where the container’s clients send their requests and the pod’s credentials, and receive them',
};

const upper = (list: readonly string[]) => list.map((s) => s.toUpperCase());

const EXACT = new Map<string, RefusedEnvFamily>(
  REFUSED_ENV_FAMILIES.flatMap((f) => upper(f.names).map((n) => [n, f] as const)),
);

/** One text rule of a family, in upper case. */
interface TextRule {
  readonly text: string;
  readonly family: RefusedEnvFamily;
}
const rulesOf = (kind: 'prefixes' | 'suffixes' | 'infixes'): readonly TextRule[] =>
  REFUSED_ENV_FAMILIES.flatMap((f) => upper(f[kind]).map((text) => ({ text, family: f })));
const PREFIXES = rulesOf('prefixes');
const INFIXES = rulesOf('infixes');
const SUFFIXES = rulesOf('suffixes');

/**
 * The rule `name` matches, if any: its exact name first, then a prefix (unless the family admits the
 * name's ending), an infix, a suffix, and last a convention's word followed by more of the name (unless
 * it ends as a secret's own name does). The first match names the most specific reader. Leading
 * underscores do not hide a reader's name (`_RUNJAVA`, `_PYTHON_SYSCONFIGDATA_NAME`): scripts mark
 * their own variables so, and a preset one is kept.
 */
export function refusedEnvName(name: string): RefusedEnvMatch | undefined {
  const key = name.toUpperCase();
  const bare = key.replace(/^_+/, '');
  const exact = EXACT.get(key) ?? EXACT.get(bare);
  if (exact) return match(exact, key, `is read by ${exact.readBy}`);
  const prefix = PREFIXES.find(
    (p) =>
      (key.startsWith(p.text) || bare.startsWith(p.text)) &&
      !p.family.admittedEndings.some((e) => key.endsWith(e.toUpperCase())),
  );
  if (prefix) {
    const admitted = prefix.family.admittedEndings;
    const except = admitted.length
      ? ` (a credential’s name ending in ${admitted.slice(0, 3).join(', ')}… stays admitted: docs/env.md)`
      : '';
    return match(
      prefix.family,
      `${prefix.text}*`,
      `starts with ${prefix.text}, which marks the names read by ${prefix.family.readBy}${except}`,
    );
  }
  const infix = INFIXES.find((i) => key.includes(i.text));
  if (infix)
    return match(
      infix.family,
      `*${infix.text}*`,
      `contains ${infix.text}, which by convention marks ${infix.family.holds}`,
    );
  const suffix = SUFFIXES.find((s) => key.endsWith(s.text));
  if (suffix)
    return match(
      suffix.family,
      `*${suffix.text}`,
      `ends with ${suffix.text}, which by convention holds ${suffix.family.holds}`,
    );
  // A qualifier after the convention's word changes nothing a script does with it (JAVA_OPTS_APPEND,
  // GUNICORN_CMD_ARGS_EXTRA): the word as a whole word of the name, with more after it.
  if (SECRET_ENDINGS.some((e) => key.endsWith(e))) return undefined;
  // Every place the word appears, not the first only: `XRC_RC_Y` holds RC_ as a word after `XRC_`.
  const word = SUFFIXES.find((s) => {
    const text = s.text.replace(/^_/, '');
    for (let at = key.indexOf(`${text}_`); at >= 0; at = key.indexOf(`${text}_`, at + 1))
      if ((at === 0 || key[at - 1] === '_') && at + text.length + 1 < key.length) return true;
    return false;
  });
  if (word) {
    const text = `${word.text.replace(/^_/, '')}_`;
    return match(
      word.family,
      `*${text}*`,
      `contains ${text} followed by more of the name, which by convention holds ${word.family.holds}, whatever follows`,
    );
  }
  return undefined;
}

function match(family: RefusedEnvFamily, rule: string, reason: string): RefusedEnvMatch {
  return { family, rule, reason, consequence: CONSEQUENCE[family.risk] };
}
