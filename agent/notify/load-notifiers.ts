import type { SidecarSettings } from '../contract/agent-config.ts';
import type { Notifier, NotifierDeps } from './notifier.ts';

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
