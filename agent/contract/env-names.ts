import { ConfigError } from './errors.ts';

/**
 * Misspelt setting names. An env var the agent does not read is ignored, so `AGENT_MOD=sidecar`
 * would silently run init mode. A name is flagged when it is within a small edit distance of a
 * declared one (`known`), starts with the same letter, and is not a variable some other program in a
 * pod reads (FOREIGN_ENV, Kubernetes service links). Only the name is ever shown, never the value.
 */

/**
 * Variables an agent container commonly carries that the agent does not read: the AWS, Vault and
 * Google tools' own, Kubernetes', Node's and the shell's. Never flagged, however close to ours.
 */
export const FOREIGN_ENV: ReadonlySet<string> = new Set([
  // AWS SDKs and CLI
  'AWS_ACCESS_KEY_ID',
  'AWS_SECRET_ACCESS_KEY',
  'AWS_SESSION_TOKEN',
  'AWS_SECURITY_TOKEN',
  'AWS_CREDENTIAL_EXPIRATION',
  'AWS_PROFILE',
  'AWS_DEFAULT_PROFILE',
  'AWS_CONFIG_FILE',
  'AWS_SHARED_CREDENTIALS_FILE',
  'AWS_ROLE_ARN',
  'AWS_ROLE_SESSION_NAME',
  'AWS_WEB_IDENTITY_TOKEN_FILE',
  'AWS_CONTAINER_CREDENTIALS_FULL_URI',
  'AWS_CONTAINER_CREDENTIALS_RELATIVE_URI',
  'AWS_CONTAINER_AUTHORIZATION_TOKEN',
  'AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE',
  'AWS_EC2_METADATA_DISABLED',
  'AWS_EC2_METADATA_V1_DISABLED',
  'AWS_EC2_METADATA_SERVICE_ENDPOINT',
  'AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE',
  'AWS_METADATA_SERVICE_TIMEOUT',
  'AWS_METADATA_SERVICE_NUM_ATTEMPTS',
  'AWS_REGION',
  'AWS_DEFAULT_REGION',
  'AWS_ENDPOINT_URL',
  'AWS_ENDPOINT_URL_STS',
  'AWS_ENDPOINT_URL_SECRETS_MANAGER',
  'AWS_IGNORE_CONFIGURED_ENDPOINT_URLS',
  'AWS_USE_FIPS_ENDPOINT',
  'AWS_USE_DUALSTACK_ENDPOINT',
  'AWS_STS_REGIONAL_ENDPOINTS',
  'AWS_MAX_ATTEMPTS',
  'AWS_RETRY_MODE',
  'AWS_CA_BUNDLE',
  'AWS_SDK_LOAD_CONFIG',
  'AWS_SDK_UA_APP_ID',
  'AWS_ACCOUNT_ID',
  'AWS_ACCOUNT_ID_ENDPOINT_MODE',
  'AWS_NODEJS_CONNECTION_REUSE_ENABLED',
  'AWS_EXECUTION_ENV',
  'AWS_DEFAULT_OUTPUT',
  'AWS_PAGER',
  'AWS_REQUEST_CHECKSUM_CALCULATION',
  'AWS_RESPONSE_CHECKSUM_VALIDATION',
  'AWS_DISABLE_REQUEST_COMPRESSION',
  'AWS_REQUEST_MIN_COMPRESSION_SIZE_BYTES',
  'AWS_AUTH_SCHEME_PREFERENCE',
  'AWS_SIGV4A_SIGNING_REGION_SET',
  // Vault CLI, Agent and Proxy
  'VAULT_ADDR',
  'VAULT_AGENT_ADDR',
  'VAULT_PROXY_ADDR',
  'VAULT_API_ADDR',
  'VAULT_CLUSTER_ADDR',
  'VAULT_REDIRECT_ADDR',
  'VAULT_CACERT',
  'VAULT_CLIENT_TIMEOUT',
  'VAULT_TLS_SERVER_NAME',
  'VAULT_SKIP_VERIFY',
  'VAULT_NAMESPACE',
  'VAULT_TOKEN',
  'VAULT_FORMAT',
  'VAULT_LICENSE',
  'VAULT_LICENSE_PATH',
  'VAULT_LOG_LEVEL',
  'VAULT_LOG_FORMAT',
  'VAULT_MAX_RETRIES',
  'VAULT_MFA',
  'VAULT_RATE_LIMIT',
  'VAULT_SRV_LOOKUP',
  'VAULT_WRAP_TTL',
  'VAULT_HTTP_PROXY',
  'VAULT_DISABLE_REDIRECTS',
  'VAULT_CLI_NO_COLOR',
  'VAULT_HEADERS',
  'VAULT_PREFIX',
  'VAULT_DEV_ROOT_TOKEN_ID',
  'VAULT_DEV_LISTEN_ADDRESS',
  // Google clients
  'GOOGLE_APPLICATION_CREDENTIALS',
  'CLOUDSDK_CONFIG',
  'GOOGLE_CLOUD_PROJECT',
  'GOOGLE_CLOUD_QUOTA_PROJECT',
  'GOOGLE_CLOUD_UNIVERSE_DOMAIN',
  'GOOGLE_API_USE_CLIENT_CERTIFICATE',
  'GOOGLE_API_USE_MTLS_ENDPOINT',
  'GOOGLE_SDK_NODE_LOGGING',
  'GCLOUD_PROJECT',
  'GCE_METADATA_HOST',
  'GCE_METADATA_IP',
  'GCE_METADATA_ROOT',
  'METADATA_SERVER_DETECTION',
  'GRPC_TRACE',
  'GRPC_VERBOSITY',
  'GRPC_NODE_TRACE',
  'GRPC_NODE_VERBOSITY',
  'GRPC_DNS_RESOLVER',
  'GRPC_SSL_CIPHER_SUITES',
  'GRPC_DEFAULT_SSL_ROOTS_FILE_PATH',
  // Kubernetes and the downward API fields pods commonly name this way
  'KUBERNETES_SERVICE_HOST',
  'KUBERNETES_SERVICE_PORT',
  'KUBERNETES_SERVICE_PORT_HTTPS',
  'KUBERNETES_PORT',
  'HOSTNAME',
  'POD_IP',
  'POD_IPS',
  'HOST_IP',
  'NODE_IP',
  'NODE_NAME',
  'POD_SERVICE_ACCOUNT',
  'CONTAINER_NAME',
  'CPU_REQUEST',
  'CPU_LIMIT',
  'MEMORY_REQUEST',
  'MEMORY_LIMIT',
  // Node
  'NODE_OPTIONS',
  'NODE_ENV',
  'NODE_EXTRA_CA_CERTS',
  'NODE_DEBUG',
  'NODE_PATH',
  'NODE_TLS_REJECT_UNAUTHORIZED',
  'NODE_COMPILE_CACHE',
  'NODE_DISABLE_COMPILE_CACHE',
  'NODE_NO_WARNINGS',
  'NODE_USE_ENV_PROXY',
  'NODE_V8_COVERAGE',
  'UV_THREADPOOL_SIZE',
  'FORCE_COLOR',
  'NO_COLOR',
  'DEBUG',
  // The shell and the C library
  'PATH',
  'HOME',
  'USER',
  'PWD',
  'OLDPWD',
  'SHLVL',
  'TERM',
  'LANG',
  'LC_ALL',
  'TZ',
  'TMPDIR',
  'HTTP_PROXY',
  'HTTPS_PROXY',
  'NO_PROXY',
  'ALL_PROXY',
  'SSL_CERT_FILE',
  'SSL_CERT_DIR',
  // Apps' own names that sit within two edits of a per-secret one (SECRET_0_NAME)
  'SECRET_NAME',
]);

/**
 * What the kubelet sets for every Service in the namespace (`<SVC>_SERVICE_HOST`, `<SVC>_PORT_80_TCP`…):
 * a Service called `agent` or `vault` must not make a pod fail.
 */
const SERVICE_LINK =
  /_(?:SERVICE_HOST|SERVICE_PORT(?:_[A-Z0-9_]+)?|PORT(?:_\d+_(?:TCP|UDP|SCTP)(?:_(?:PROTO|PORT|ADDR))?)?)$/;

/**
 * Optimal string alignment distance (Damerau–Levenshtein with adjacent transpositions, the commonest
 * typing slip), or `max + 1` as soon as it must exceed `max`.
 */
export function editDistance(a: string, b: string, max: number): number {
  if (Math.abs(a.length - b.length) > max) return max + 1;
  let beforePrevious: number[] = [];
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    let best = i;
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min(previous[j]! + 1, row[j - 1]! + 1, previous[j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        d = Math.min(d, beforePrevious[j - 2]! + 1);
      row.push(d);
      best = Math.min(best, d);
    }
    if (best > max) return max + 1;
    beforePrevious = previous;
    previous = row;
  }
  return previous[b.length]!;
}

/** How many slips a name of this length may carry and still be taken for it: 1, or 2 from 10 characters. */
export function allowedDistance(name: string): number {
  return name.length >= 10 ? 2 : 1;
}

/**
 * The declared name `name` is most likely a misspelling of (case aside), or undefined. Ties go to the
 * first candidate, so callers list their names in declaration order.
 */
export function closestName(name: string, candidates: Iterable<string>): string | undefined {
  const upper = name.toUpperCase();
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const candidate of candidates) {
    if (candidate === name || candidate[0] !== upper[0]) continue;
    const max = allowedDistance(candidate);
    const d = editDistance(upper, candidate, max);
    if (d <= max && d < bestDistance) {
      best = candidate;
      bestDistance = d;
    }
  }
  return best;
}

/**
 * One ConfigError per variable in `env` that looks like a misspelling of a name in `known`, or of a
 * per-secret name (`SECRET_<N>_<suffix>`, for the secret numbers in use). Names of the per-secret
 * form itself are left to the caller, which checks their suffix.
 */
export function findMisspelledNames(
  env: Readonly<Record<string, string | undefined>>,
  known: readonly string[],
  perSecret: { readonly pattern: RegExp; readonly suffixes: readonly string[] },
): ConfigError[] {
  const knownSet = new Set(known);
  const indices = new Set([0]);
  for (const name of Object.keys(env)) {
    const m = perSecret.pattern.exec(name);
    if (m && /^\d{1,4}$/.test(m[1]!)) indices.add(Number(m[1]));
  }
  const candidates = [
    ...known,
    ...[...indices].flatMap((i) => perSecret.suffixes.map((suffix) => `SECRET_${i}_${suffix}`)),
  ];
  const errors: ConfigError[] = [];
  for (const [name, value] of Object.entries(env)) {
    if (value === undefined || knownSet.has(name) || FOREIGN_ENV.has(name)) continue;
    if (perSecret.pattern.test(name) || SERVICE_LINK.test(name)) continue;
    const meant = closestName(name, candidates);
    if (meant === undefined) continue;
    errors.push(
      new ConfigError(
        name,
        'is not a variable the agent reads, so its value would be ignored',
        `did you mean ${meant}? Rename it, or remove it`,
      ),
    );
  }
  return errors;
}
