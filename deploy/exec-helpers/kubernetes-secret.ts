#!/nodejs/bin/node
/**
 * An exec: helper (docs/exec-helpers.md) that reads a Kubernetes Secret of the pod's own namespace
 * through the API server, as the pod's service account: a migration path from Kubernetes Secrets,
 * and the example of the protocol. `node images/build.ts helpers` builds it into
 * dist/helpers/kubernetes-secret, one file with Node's built-in modules only, for the agent image's
 * Node (/nodejs/bin/node); put that file in the helpers volume.
 *
 *   exec:kubernetes-secret/NAME        the Secret's data as a JSON object of strings (#key, split, dotenv…)
 *   exec:kubernetes-secret/NAME/KEY    one key's bytes as stored (binary values too)
 *
 * The pod's service account needs `get` on that Secret (a Role with resourceNames). The version is
 * the Secret's resourceVersion. Exit codes: 64 a bad argument, 66 no such Secret or key, 77 the API
 * server refused the token or the access, 75 it could not answer now (429, 5xx, network, timeout),
 * 1 anything else. Errors name the Secret and the key, never a value.
 */
import { readFileSync } from 'node:fs';
import { request } from 'node:https';
import { dirname, join } from 'node:path';

/** sysexits(3), as the agent reads them. */
const EX_USAGE = 64;
const EX_NOINPUT = 66;
const EX_TEMPFAIL = 75;
const EX_NOPERM = 77;
const EX_SOFTWARE = 1;

/** Well under the agent's default EXEC_TIMEOUT (10 s), so a slow API server is a 75, not a kill. */
const REQUEST_TIMEOUT_MS = 5000;
const DNS_SUBDOMAIN = /^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const SECRET_KEY = /^[-._a-zA-Z0-9]{1,253}$/;

class HelperError extends Error {
  readonly exitCode: number;
  constructor(exitCode: number, message: string) {
    super(message);
    this.exitCode = exitCode;
  }
}

interface Answer {
  readonly status: number;
  readonly body: string;
}

function parseArgument(argument: string | undefined): { name: string; key?: string } {
  const [name, key, ...rest] = (argument ?? '').split('/');
  if (!name || !DNS_SUBDOMAIN.test(name) || rest.length > 0 || (key !== undefined && !SECRET_KEY.test(key)))
    throw new HelperError(
      EX_USAGE,
      'the argument is not NAME or NAME/KEY (a Secret name, then optionally one of its keys)',
    );
  return key === undefined ? { name } : { name, key };
}

function required(name: string): string {
  const value = process.env[name];
  if (!value)
    throw new HelperError(EX_SOFTWARE, `${name} is not set: this runs as a secret-agent exec: helper`);
  return value;
}

function readFile(path: string, what: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (e) {
    throw new HelperError(
      EX_NOPERM,
      `cannot read the ${what} ${path} (${(e as NodeJS.ErrnoException).code ?? 'error'}): is the service-account token mounted?`,
    );
  }
}

function get(url: URL, token: string, ca: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method: 'GET',
        ca,
        headers: { authorization: `Bearer ${token}`, accept: 'application/json' },
        timeout: REQUEST_TIMEOUT_MS,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }),
        );
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer within ${REQUEST_TIMEOUT_MS} ms`)));
    req.on('error', reject);
    req.end();
  });
}

/** The API server's own words for a failure (a metav1.Status); they name objects, never data. */
function statusMessage(answer: Answer): string {
  try {
    const status = JSON.parse(answer.body) as { kind?: unknown; message?: unknown };
    if (status.kind === 'Status' && typeof status.message === 'string') return status.message;
  } catch {
    // Not a Status: the code alone says enough.
  }
  return `HTTP ${answer.status}`;
}

async function main(): Promise<{ value: Buffer; version?: string }> {
  const { name, key } = parseArgument(process.argv[2]);
  const host = required('KUBERNETES_SERVICE_HOST');
  const port = process.env.KUBERNETES_SERVICE_PORT ?? '443';
  const tokenFile = required('SERVICE_ACCOUNT_TOKEN_FILE');
  // The token is re-read on every run: the kubelet rotates it.
  const token = readFile(tokenFile, 'service-account token').trim();
  const ca = readFile(required('SERVICE_ACCOUNT_CA_FILE'), 'API server CA');
  const namespace =
    process.env.POD_NAMESPACE ?? readFile(join(dirname(tokenFile), 'namespace'), 'pod namespace').trim();
  const url = new URL(
    `https://${host.includes(':') ? `[${host}]` : host}:${port}/api/v1/namespaces/${encodeURIComponent(namespace)}/secrets/${encodeURIComponent(name)}`,
  );

  let answer: Answer;
  try {
    answer = await get(url, token, ca);
  } catch (e) {
    throw new HelperError(
      EX_TEMPFAIL,
      `the API server at ${url.host} did not answer: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`,
    );
  }
  if (answer.status === 401)
    throw new HelperError(EX_NOPERM, 'the API server refused the service-account token (401 Unauthorized)');
  if (answer.status === 403) throw new HelperError(EX_NOPERM, statusMessage(answer));
  if (answer.status === 404) throw new HelperError(EX_NOINPUT, statusMessage(answer));
  if (answer.status === 429 || answer.status >= 500)
    throw new HelperError(EX_TEMPFAIL, statusMessage(answer));
  if (answer.status !== 200) throw new HelperError(EX_SOFTWARE, statusMessage(answer));

  let secret: { data?: Record<string, string>; metadata?: { resourceVersion?: string } };
  try {
    secret = JSON.parse(answer.body) as typeof secret;
  } catch {
    // Never quote the body: it is the Secret.
    throw new HelperError(EX_SOFTWARE, `the API server's answer for secrets "${name}" is not JSON`);
  }
  const data = secret.data ?? {};
  const version = secret.metadata?.resourceVersion;
  if (key !== undefined) {
    if (!Object.hasOwn(data, key))
      throw new HelperError(EX_NOINPUT, `secrets "${name}" has no key "${key}" in namespace "${namespace}"`);
    return { value: Buffer.from(data[key]!, 'base64'), ...(version ? { version } : {}) };
  }
  const decoder = new TextDecoder('utf-8', { fatal: true });
  const text: Record<string, string> = {};
  for (const [k, b64] of Object.entries(data)) {
    try {
      text[k] = decoder.decode(Buffer.from(b64, 'base64'));
    } catch {
      throw new HelperError(
        EX_USAGE,
        `key "${k}" of secrets "${name}" is binary, which JSON cannot hold: read it alone (exec:kubernetes-secret/${name}/${k})`,
      );
    }
  }
  return { value: Buffer.from(JSON.stringify(text)), ...(version ? { version } : {}) };
}

main().then(
  ({ value, version }) => {
    // The version line first: the agent reads it from stderr, the value from stdout.
    if (version) process.stderr.write(`secret-agent-version: ${version}\n`);
    process.stdout.write(value);
  },
  (e: unknown) => {
    const known = e instanceof HelperError;
    process.stderr.write(
      `kubernetes-secret: ${known ? e.message : `internal error: ${(e as Error).name}`}\n`,
    );
    process.exitCode = known ? e.exitCode : EX_SOFTWARE;
  },
);
