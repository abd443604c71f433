import { findFileClash } from '../config/file-clash.ts';
import type { AgentConfig } from '../contract/agent-config.ts';
import { ConfigError, ConfigErrors } from '../contract/errors.ts';
import { sourceKey } from '../contract/reference.ts';
import { fetchSecrets } from '../fetch/fetch-secrets.ts';
import { ProviderSet } from '../fetch/provider-set.ts';
import {
  renderFiles,
  SecretFormatError,
  valuesByName,
  type FileEntry,
  type FormatKit,
} from '../format/render-files.ts';
import type { Logger } from '../log.ts';
import { deliveredMessage } from '../notify/open-pod-events.ts';
import type { PodEventRecorder } from '../notify/pod-events.ts';
import { WriteError } from '../write/atomic-dir.ts';
import { openSecretsDir } from './open-secrets-dir.ts';

/** One secret that could not be delivered: what it was, why, and what to do. Never a value. */
export interface SecretFailure {
  /** The env prefix, e.g. SECRET_0. */
  readonly id: string;
  readonly ref: string;
  readonly reason: string;
  readonly detail: string;
  readonly fix: string;
  /** The host or URL the backend was asked at, when a backend was asked. */
  readonly endpoint?: string;
}

export type InitResult =
  | { readonly ok: true; readonly files: number }
  | { readonly ok: false; readonly failures: readonly SecretFailure[]; readonly wrote: false };

export interface InitDeps {
  readonly log: Logger;
  readonly agentVersion: string;
  /** The formats' code the secrets need (agent/format/load-formats.ts); none for raw/split/dotenv. */
  readonly formats?: FormatKit;
  /** Kubernetes Events on the pod, when KUBERNETES_EVENTS is on. */
  readonly events?: PodEventRecorder;
}

/**
 * Init mode: fetch everything, then write the whole set once, or write nothing at all.
 * The directory is checked before any backend call, so a bad volume fails fast and costs no API calls.
 */
export async function runInit(
  config: AgentConfig,
  { log, agentVersion, formats, events }: InitDeps,
): Promise<InitResult> {
  const dir = await openSecretsDir(config, log);
  const providers = new ProviderSet({
    pod: config.pod,
    agentVersion,
    serviceAccountDir: config.serviceAccountDir,
    mode: 'init',
  });
  try {
    const outcomes = await fetchSecrets(config.secrets, providers, {
      deadlineMs: config.initDeadlineMs,
      log,
    });

    const valueOf = valuesByName(config.secrets, (source) => {
      const outcome = outcomes.get(source);
      return outcome?.ok ? outcome.value.bytes : undefined;
    });
    const failures: SecretFailure[] = [];
    const files: FileEntry[] = [];
    const owners: { id: string; path: string; split: boolean }[] = [];
    for (const spec of config.secrets) {
      const outcome = outcomes.get(sourceKey(spec.ref))!;
      const base = { id: spec.id, ref: spec.ref.text };
      if (!outcome.ok) {
        failures.push({
          ...base,
          reason: outcome.error.reason,
          detail: outcome.error.message,
          fix: outcome.error.fix,
          ...(outcome.endpoint !== undefined ? { endpoint: outcome.endpoint } : {}),
        });
        continue;
      }
      try {
        const rendered = renderFiles(spec, outcome.value.bytes, formats, valueOf);
        files.push(...rendered);
        owners.push(...rendered.map((f) => ({ id: spec.id, path: f.path, split: spec.format === 'split' })));
        log.info(
          {
            id: spec.id,
            ref: spec.ref.text,
            file: spec.filename,
            // As the backend names it, or none: never the digest a value without one is compared by.
            ...(outcome.value.backendVersion !== undefined ? { version: outcome.value.backendVersion } : {}),
          },
          'fetched',
        );
      } catch (e) {
        if (!(e instanceof SecretFormatError)) throw e;
        failures.push({ ...base, reason: 'format', detail: e.message, fix: e.fix });
      }
    }
    if (failures.length > 0) {
      for (const f of failures) log.error(f, 'secret not delivered');
      return { ok: false, failures, wrote: false };
    }

    // A split secret's keys are known only now: one that is another secret's file is a configuration
    // error (exit 2, naming both secrets), like the clashes parseAgentConfig finds before fetching.
    const clash = findFileClash(owners);
    if (clash) throw new ConfigErrors([clash]);

    try {
      await dir.write(files);
    } catch (e) {
      if (!(e instanceof WriteError || e instanceof ConfigError)) throw e;
      // Logged like every other failure, as well as summarised on stderr by the caller.
      const failure = { id: '*', ref: '-', reason: 'write', detail: e.message, fix: e.fix };
      log.error(failure, 'secrets not written');
      return { ok: false, failures: [failure], wrote: false };
    }
    // Closed before the set is announced: from here on no client, socket or timer of ours is left to
    // hold the process, and the debug line below shows what still is (stdio and the log's own writes).
    await providers.close();
    log.info(
      { dir: config.secretsDir, files: files.length, secrets: config.secrets.length },
      'secrets written',
    );
    events?.record('SecretsDelivered', deliveredMessage(files));
    if (log.isLevelEnabled('debug'))
      log.debug({ resources: await activeResources() }, 'backend clients closed');
    return { ok: true, files: files.length };
  } finally {
    await providers.close();
    await events?.flush();
    await events?.close();
  }
}

/**
 * What could still keep the process alive, by type (no names or values): after one turn of the
 * event loop, so requests that already finished (the write's file calls) are no longer listed.
 * Expected: stdio (PipeWrap, TTYWrap) and the log's own pending writes (FSReqCallback).
 */
async function activeResources(): Promise<string[]> {
  await new Promise((resolve) => setImmediate(resolve));
  return process.getActiveResourcesInfo();
}

/** The stderr summary a person reads in `kubectl logs -c` or `kubectl describe pod`. */
export function formatFailureSummary(failures: readonly SecretFailure[], total: number, dir: string): string {
  const lines = [
    `secret-agent: ${failures.length} of ${total} secrets could not be delivered; nothing was written to ${dir}`,
  ];
  for (const f of failures) {
    lines.push(`  ${f.id} (${f.ref}): ${f.reason}: ${f.detail}`, `      fix: ${f.fix}`);
    if (f.endpoint !== undefined) lines.push(`      endpoint: ${f.endpoint}`);
  }
  return `${lines.join('\n')}\n`;
}
