import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from '../agent/log.ts';
import type { NativeSidecarsSetting } from './config/setting-values.ts';
import {
  InClusterConfigError,
  KubernetesApiError,
  ServerVersionError,
  type KubernetesApi,
  type ServerVersion,
} from './kubernetes-api.ts';

/**
 * NATIVE_SIDECARS=auto: one GET /version at start decides whether injected agents are native
 * sidecars. Native sidecars are on by default from Kubernetes 1.29 (SidecarContainers, beta);
 * older API servers drop restartPolicy from init containers or reject it. When the version cannot be
 * read the answer is `false`: classic sidecars work on every version, and a webhook that refuses to
 * start would block every opted-in pod (failurePolicy: Fail) over a detail.
 *
 * Only the control plane is asked: kubelets may lag it by up to three minor versions, which is why
 * the docs say to set `false` while older nodes remain.
 */

export const NATIVE_SIDECARS_SINCE = { major: 1, minor: 29 } as const;

/** config: NATIVE_SIDECARS=true|false; api-server: auto, read; fallback: auto, unreadable. */
export type NativeSidecarsSource = 'config' | 'api-server' | 'fallback';

export interface NativeSidecarsDecision {
  readonly enabled: boolean;
  readonly source: NativeSidecarsSource;
  /** auto: the version the API server reported, e.g. v1.31.2-eks-adc7111. */
  readonly serverVersion?: string;
}

export interface ServerVersionProbe {
  /** Per attempt. The API server answers /version from memory: 5 s without an answer means unreachable. */
  readonly timeoutMs?: number;
  /**
   * Waits before each retry of a transient failure (refused, reset, 429, 5xx). A timeout is not
   * retried: /version is served from memory, so no answer means a NetworkPolicy or route drops the
   * packets, and retrying would only delay every start (the liveness probe is already counting).
   */
  readonly retryDelaysMs?: readonly number[];
}

const DEFAULT_TIMEOUT_MS = 5_000;
// Short: the webhook does not listen until it has decided, and the liveness probe is counting.
const DEFAULT_RETRY_DELAYS_MS = [500, 1_500];
/** Codes that mean the API server was not reached (as opposed to reached and refusing). */
const UNREACHABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
  'EPIPE',
]);
const SET_IT = 'set NATIVE_SIDECARS=true (every node ≥ 1.29) or false, which skips this check';

/**
 * Resolves NATIVE_SIDECARS and logs the decision. Never throws for `auto`: a failure is a warning
 * naming the cause and the fix, and the answer `false`. `api` is called only for `auto`.
 */
export async function decideNativeSidecars(
  setting: NativeSidecarsSetting,
  api: () => KubernetesApi,
  log: Logger,
  probe: ServerVersionProbe = {},
): Promise<NativeSidecarsDecision> {
  if (setting !== 'auto') {
    log.info(
      { nativeSidecars: setting, source: 'config' },
      `native sidecars: ${setting} (NATIVE_SIDECARS=${setting})`,
    );
    return { enabled: setting, source: 'config' };
  }
  let version: ServerVersion;
  try {
    version = await readServerVersion(api, log, probe);
  } catch (e) {
    const { problem, fix } = explain(e);
    log.warn(
      { nativeSidecars: false, source: 'fallback', err: errorFields(e), fix },
      `native sidecars: false (auto: ${problem}; classic sidecars work on every version). Fix: ${fix}`,
    );
    return { enabled: false, source: 'fallback' };
  }
  const { major, minor } = NATIVE_SIDECARS_SINCE;
  const enabled = version.major > major || (version.major === major && version.minor >= minor);
  log.info(
    { nativeSidecars: enabled, source: 'api-server', serverVersion: version.text },
    enabled
      ? `native sidecars: true (auto: API server ${version.text})`
      : `native sidecars: false (auto: API server ${version.text} is older than ${major}.${minor})`,
  );
  return { enabled, source: 'api-server', serverVersion: version.text };
}

async function readServerVersion(
  api: () => KubernetesApi,
  log: Logger,
  probe: ServerVersionProbe,
): Promise<ServerVersion> {
  const delays = probe.retryDelaysMs ?? DEFAULT_RETRY_DELAYS_MS;
  const client = api();
  for (let attempt = 1; ; attempt++) {
    try {
      return await client.serverVersion(probe.timeoutMs ?? DEFAULT_TIMEOUT_MS);
    } catch (e) {
      const delay = delays[attempt - 1];
      if (!transient(e) || delay === undefined) throw e;
      log.debug({ attempt, err: errorFields(e) }, 'GET /version failed; retrying');
      await sleep(delay);
    }
  }
}

function transient(e: unknown): boolean {
  if (e instanceof KubernetesApiError) return e.status === 429 || e.status >= 500;
  const code = String((e as NodeJS.ErrnoException | undefined)?.code);
  return code !== 'ETIMEDOUT' && UNREACHABLE_CODES.has(code);
}

/** Errors carry names and API Status messages, never request headers: the token stays out. */
function errorFields(e: unknown): { name: string; message: string } {
  return e instanceof Error ? { name: e.name, message: e.message } : { name: 'Error', message: String(e) };
}

function explain(e: unknown): { problem: string; fix: string } {
  const or = (fix: string) => `${fix}, or ${SET_IT}`;
  if (e instanceof InClusterConfigError) return { problem: e.problem, fix: or(e.fix) };
  if (e instanceof ServerVersionError) return { problem: e.message, fix: SET_IT };
  if (e instanceof KubernetesApiError) {
    if (e.status === 401)
      return {
        problem: `the API server did not accept the service-account token (${e.message})`,
        fix: or("mount the webhook's own, current service-account token"),
      };
    if (e.status === 403)
      return {
        problem: `the API server refused the request (${e.message})`,
        fix: or(
          'GET /version is allowed to everyone by the default ClusterRoleBinding system:public-info-viewer: restore it',
        ),
      };
    return { problem: `the API server answered ${e.message}`, fix: SET_IT };
  }
  const { message } = errorFields(e);
  const code = (e as NodeJS.ErrnoException | undefined)?.code;
  if (code === 'ENOENT')
    return {
      problem: `the service-account token is not mounted (${message})`,
      fix: or("set automountServiceAccountToken: true in the webhook's pod spec"),
    };
  if (code !== undefined && UNREACHABLE_CODES.has(code))
    return {
      problem: `the API server could not be reached (${message})`,
      fix: or("allow the webhook's egress to the API server (deploy/components/network-policy allows it)"),
    };
  return { problem: `GET /version failed: ${message}`, fix: SET_IT };
}
