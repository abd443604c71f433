import { ConfigError, ConfigErrors } from '../../agent/contract/errors.ts';
import type { Env } from '../../agent/contract/settings.ts';
import { parseWebhookConfig } from '../config/parse-webhook-config.ts';
import { WEBHOOK_SETTINGS, type WebhookSettingName } from '../config/settings.ts';
import type { InjectionDefaults } from '../config/injection-defaults.ts';
import { NATIVE_SIDECARS_SINCE } from '../native-sidecars.ts';

/**
 * The injection defaults `render` uses: the server's own settings (env and WEBHOOK_CONFIG_FILE, read
 * by parseWebhookConfig), then the flags on top. Offline, so NATIVE_SIDECARS=auto cannot ask an API
 * server: --cluster-version answers it, else native sidecars are assumed and said so.
 */

export interface KubernetesVersion {
  readonly major: number;
  readonly minor: number;
}

export interface RenderFlags {
  readonly agentImage?: string;
  readonly clusterVersion?: KubernetesVersion;
}

export interface RenderSettings {
  readonly defaults: InjectionDefaults;
  /** A one-line note for stderr about an assumption made, if any. */
  readonly note?: string;
}

/**
 * Settings of the server only (listening, TLS, logging, its cache): pinned to their defaults, in env, which wins
 * over the file, so a value meant for a pod (or a service link's WEBHOOK_PORT) cannot fail a render.
 */
const SERVER_ONLY = [
  'WEBHOOK_PORT',
  'WEBHOOK_HOST',
  'TLS_MODE',
  'TLS_CERT_FILE',
  'TLS_KEY_FILE',
  'TLS_SECRET_NAME',
  'WEBHOOK_SERVICE_NAME',
  'WEBHOOK_CONFIGURATION_NAME',
  'CERT_VALIDITY',
  'CA_VALIDITY',
  'LOG_LEVEL',
  'ADMISSION_CACHE_SIZE',
] as const satisfies readonly WebhookSettingName[];

/** Throws ConfigErrors, naming the flag where a flag set the value. */
export function renderSettings(env: Env, flags: RenderFlags): RenderSettings {
  const pinned = Object.fromEntries(SERVER_ONLY.map((name) => [name, WEBHOOK_SETTINGS[name].default]));
  let injection;
  try {
    injection = parseWebhookConfig({
      ...env,
      ...pinned,
      ...(flags.agentImage !== undefined ? { AGENT_IMAGE: flags.agentImage } : {}),
    }).injection;
  } catch (e) {
    if (!(e instanceof ConfigErrors)) throw e;
    throw new ConfigErrors(
      e.errors.map((err) => {
        if (err.field !== 'AGENT_IMAGE') return err;
        if (flags.agentImage !== undefined) return new ConfigError('--agent-image', err.problem, err.fix);
        return new ConfigError(
          'AGENT_IMAGE',
          err.problem,
          'pass --agent-image IMAGE, or set AGENT_IMAGE in the environment or WEBHOOK_CONFIG_FILE, e.g. ghcr.io/example/secret-agent:0.1.0',
        );
      }),
    );
  }
  const { major, minor } = NATIVE_SIDECARS_SINCE;
  if (flags.clusterVersion !== undefined) {
    const v = flags.clusterVersion;
    const nativeSidecars = v.major > major || (v.major === major && v.minor >= minor);
    return { defaults: { ...injection, nativeSidecars } };
  }
  if (injection.nativeSidecars !== 'auto')
    return { defaults: { ...injection, nativeSidecars: injection.nativeSidecars } };
  return {
    defaults: { ...injection, nativeSidecars: true },
    note: `note: NATIVE_SIDECARS=auto and no --cluster-version: rendering native sidecars (Kubernetes ≥ ${major}.${minor}); pass --cluster-version (e.g. 1.28) for the classic ones`,
  };
}
