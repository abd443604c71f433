import type { AgentConfig, SidecarSettings } from '../contract/agent-config.ts';
import type { Env } from '../contract/settings.ts';
import type { Logger } from '../log.ts';
import { kubernetesApiUrl } from './kubernetes-api-url.ts';
import type { Notifier, NotifierDeps } from './notifier.ts';

/** What the notifiers of `config` need: the pod, its service account and API server, the volume. */
export function notifierDepsOf(config: AgentConfig, log: Logger, env: Env): NotifierDeps {
  return {
    log,
    pod: config.pod,
    serviceAccountDir: config.serviceAccountDir,
    kubernetesApiUrl: kubernetesApiUrl(env),
    secretsDir: config.secretsDir,
  };
}

/**
 * The notifiers the settings ask for. Their module (most of it the HTTP client, undici) loads only
 * when at least one is configured, so a sidecar that only keeps files fresh never pays for it.
 */
export async function loadNotifiers(settings: SidecarSettings, deps: NotifierDeps): Promise<Notifier[]> {
  if (
    !settings.signal &&
    !settings.http &&
    !settings.command &&
    !settings.restartOnChange &&
    !settings.sentinel
  )
    return [];
  const { createNotifiers } = await import('./create-notifiers.ts');
  return createNotifiers(settings, deps);
}
