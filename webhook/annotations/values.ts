import { ConfigError, quote } from '../../agent/contract/errors.ts';
import { parseVaultNamespace } from '../../agent/contract/reference.ts';
import { DNS_LABEL } from '../kubernetes-names.ts';
import { normalPath } from '../parse/mount-overlap.ts';
import { reservedMountPath } from '../parse/reserved-mount-paths.ts';

/**
 * The parsers of annotation values: each checks the text and throws a ConfigError naming the
 * annotation and the fix. The webhook's own settings of the same types (paths, quantities, user and
 * group ids, Vault auth methods and namespaces) are parsed with these too (config/settings.ts).
 */

export function boolean(text: string, field: string): boolean {
  if (text === 'true') return true;
  if (text === 'false') return false;
  throw new ConfigError(field, `${quote(text)} is not a boolean`, 'set it to "true" or "false"');
}

export type InjectionMode = 'init' | 'sidecar' | 'init+sidecar';

const MODES: readonly InjectionMode[] = ['init', 'sidecar', 'init+sidecar'];

export function injectionMode(text: string, field: string): InjectionMode {
  if ((MODES as readonly string[]).includes(text)) return text as InjectionMode;
  throw new ConfigError(field, `${quote(text)} is not an injection mode`, `use one of ${MODES.join(', ')}`);
}

/**
 * What stays in a sidecar between refreshes: `small`, only /app/resident, which runs the agent for each
 * refresh; `node`, the whole Node agent (docs/webhook.md, “The small sidecar”).
 */
export const SIDECAR_PROCESSES = ['small', 'node'] as const;
export type SidecarProcessName = (typeof SIDECAR_PROCESSES)[number];

export function sidecarProcessName(text: string, field: string): SidecarProcessName {
  if ((SIDECAR_PROCESSES as readonly string[]).includes(text)) return text as SidecarProcessName;
  throw new ConfigError(
    field,
    `${quote(text)} is not a sidecar process`,
    `use one of ${SIDECAR_PROCESSES.join(', ')}`,
  );
}

/**
 * An absolute path without `..` segments, in its normal form (parse/mount-overlap.ts): `//`, `.`
 * segments and a trailing `/` mean nothing to the kernel, so nothing downstream sees them.
 */
export function absolutePath(text: string, field: string): string {
  if (!text.startsWith('/') || text.length > 1024 || /[\0\n\\:]/.test(text) || text.split('/').includes('..'))
    throw new ConfigError(
      field,
      `${quote(text)} is not an absolute path without .. segments`,
      'use an absolute path such as /etc/secrets',
    );
  return normalPath(text);
}

/**
 * The longest `secret-agent.io/mount-path` taken, in UTF-8 bytes: real mount paths are a few dozen,
 * and every refusal or warning that quotes one stays a bounded size (webhook/limits.ts).
 */
export const MAX_MOUNT_PATH_BYTES = 256;

/** What a mount path may be made of: no space, control or look-alike character to hide a path behind. */
const MOUNT_PATH_CHARS = /^[A-Za-z0-9._~+=,@/-]+$/;

/**
 * `secret-agent.io/mount-path`: an absolutePath, at most MAX_MOUNT_PATH_BYTES, of plain ASCII, not `/`
 * (the volume would cover the whole container), and not at, above or below what the runtime, the
 * kubelet, EKS or the webhook mount in every container (parse/reserved-mount-paths.ts).
 */
export function mountPath(text: string, field: string): string {
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes > MAX_MOUNT_PATH_BYTES)
    throw new ConfigError(
      field,
      `is ${bytes} bytes long, over the ${MAX_MOUNT_PATH_BYTES} a mount path may have`,
      'use a short absolute path such as /etc/secrets',
    );
  if (!MOUNT_PATH_CHARS.test(text))
    throw new ConfigError(
      field,
      `${quote(text)} has a character other than ASCII letters, digits and . _ ~ + = , @ - /`,
      'use a plain absolute path such as /etc/secrets',
    );
  const path = absolutePath(text, field);
  if (path === '/')
    throw new ConfigError(
      field,
      `${quote(text)} is the container’s root: the volume would cover everything in it`,
      'use a directory of its own such as /etc/secrets',
    );
  const reserved = reservedMountPath(path);
  if (reserved)
    throw new ConfigError(
      field,
      `${quote(text)} overlaps ${quote(reserved.path)}, where app containers have ${reserved.holds}: the read-only volume at, above or below it would hide it or stop the container from starting`,
      'use a directory of its own such as /etc/secrets (the default) or /var/run/secret-agent',
    );
  return path;
}

export function containerList(text: string, field: string): readonly string[] {
  const names = text
    .split(',')
    .map((n) => n.trim())
    .filter((n) => n !== '');
  const bad = names.find((n) => !DNS_LABEL.test(n));
  if (names.length === 0 || bad !== undefined)
    throw new ConfigError(
      field,
      bad === undefined ? 'names no container' : `${quote(bad)} is not a container name`,
      'list container names separated by commas, e.g. app,worker',
    );
  return [...new Set(names)];
}

/**
 * Kubernetes resource quantity, the subset taken: plain decimal (its number in group 1) with an SI or
 * binary suffix (group 2). agent-sizing.ts reads the value of what this accepts.
 */
export const QUANTITY = /^(\d{1,15}(?:\.\d{1,6})?|\.\d{1,6})(m|k|M|G|T|Ki|Mi|Gi|Ti)?$/;

export function quantity(text: string, field: string): string {
  if (!QUANTITY.test(text))
    throw new ConfigError(
      field,
      `${quote(text)} is not a resource quantity`,
      'write it like 50m, 64Mi or 1Gi',
    );
  return text;
}

/** Kubernetes quantity suffixes, as multipliers of one unit (a byte, a core). */
const UNIT: Record<string, number> = {
  '': 1,
  m: 1e-3,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  Ki: 1024,
  Mi: 1024 ** 2,
  Gi: 1024 ** 3,
  Ti: 1024 ** 4,
};

/** A quantity (as `quantity` accepts it) in its base unit; NaN when unreadable. */
export function quantityValue(text: string): number {
  const m = QUANTITY.exec(text);
  return m ? Number(m[1]) * UNIT[m[2] ?? '']! : NaN;
}

/**
 * The most an agent's memory request or limit, or its secrets volume, may be: the agent works in
 * about 30 MiB, so past this a value is a typo or an attack, and 999999999999999Ti would render a
 * NODE_OPTIONS heap cap Node refuses to start with. 64 GiB leaves a heap cap Node takes.
 */
export const MAX_MEMORY_QUANTITY = '64Gi';
/** The most CPU an agent may request or be limited to, in cores: it uses under a millicore when idle. */
export const MAX_CPU_QUANTITY = '64';

/** A quantity no larger than `max` (a quantity itself), the fix saying what it is for. */
function boundedQuantity(max: string, what: string) {
  return (text: string, field: string): string => {
    quantity(text, field);
    if (quantityValue(text) > quantityValue(max))
      throw new ConfigError(
        field,
        `${quote(text)} is more than the ${max} ${what} may be`,
        `write at most ${max}; the agent needs a few tens of MiB and millicores (docs/webhook.md, What a pod costs)`,
      );
    return text;
  };
}

export const memoryQuantity = boundedQuantity(MAX_MEMORY_QUANTITY, 'agent memory or secrets volume');
export const cpuQuantity = boundedQuantity(MAX_CPU_QUANTITY, 'agent CPU');

/** A uid or gid other than root's: `what` names it in the error, `why` says in the fix why not 0. */
function nonRootId(what: string, why: string) {
  return (text: string, field: string): number => {
    const n = /^\d{1,10}$/.test(text) ? Number(text) : NaN;
    if (!(n >= 1 && n <= 2_147_483_647))
      throw new ConfigError(
        field,
        `${quote(text)} is not a non-root ${what} id`,
        `use a number from 1 to 2147483647 (${why})`,
      );
    return n;
  };
}

export const userId = nonRootId('user', 'the agent never runs as root');
export const groupId = nonRootId('group', 'files are never shared through the root group');

export const AWS_REGION = /^[a-z]{2}(?:-[a-z]+)+-\d{1,2}$/;
export const GCP_PROJECT = /^[a-z][a-z0-9-]{4,28}[a-z0-9]$/;

/** Text matching `re`, refused as not `what` with `example` as the fix. */
export function pattern(re: RegExp, what: string, example: string) {
  return (text: string, field: string): string => {
    if (!re.test(text))
      throw new ConfigError(field, `${quote(text)} is not ${what}`, `write it like ${example}`);
    return text;
  };
}

/**
 * Vault auth methods a webhook-injected agent can use: each logs in with what the pod already has
 * (its service-account token, its cloud identity, a TLS Secret the webhook mounts). approle and
 * token need a secret handed to the agent, which no annotation may carry.
 */
export const WEBHOOK_VAULT_AUTH_METHODS = ['kubernetes', 'jwt', 'cert', 'aws', 'gcp'] as const;
export type WebhookVaultAuthMethod = (typeof WEBHOOK_VAULT_AUTH_METHODS)[number];

export function vaultAuthMethod(text: string, field: string): WebhookVaultAuthMethod {
  if ((WEBHOOK_VAULT_AUTH_METHODS as readonly string[]).includes(text)) return text as WebhookVaultAuthMethod;
  throw new ConfigError(
    field,
    `${quote(text)} is not a Vault auth method the webhook can set up`,
    `use one of ${WEBHOOK_VAULT_AUTH_METHODS.join(', ')} (approle and token need a secret no annotation may carry)`,
  );
}

/** A Vault namespace path, validated with the agent's own rule and passed on as written. */
export function vaultNamespace(text: string, field: string): string {
  const parsed = parseVaultNamespace(text);
  if (typeof parsed !== 'string')
    throw new ConfigError(
      field,
      `${quote(text)} is not a Vault namespace: ${parsed.problem}`,
      'write it as `vault namespace list` shows it, e.g. admin/team-a (root for the root namespace)',
    );
  return text;
}
