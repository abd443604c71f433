import type { AddressInfo } from 'node:net';
import type { Server } from 'node:https';
import { ConfigError, ConfigErrors, quote } from '../agent/contract/errors.ts';
import type { Logger } from '../agent/log.ts';
import { AdmissionCache } from './admission/admission-cache.ts';
import type { InjectionDefaults } from './config/injection-defaults.ts';
import type { WebhookConfig } from './config/parse-webhook-config.ts';
import { InClusterConfigError, KubernetesApi, type KubernetesApiOptions } from './kubernetes-api.ts';
import { heapLimitMiB } from './heap-limit.ts';
import { createWebhookMetrics, type WebhookMetrics } from './metrics.ts';
import {
  decideNativeSidecars,
  type NativeSidecarsDecision,
  type ServerVersionProbe,
} from './native-sidecars.ts';
import { createWebhookServer } from './server.ts';
import {
  readCertificateFiles,
  watchCertificateFiles,
  type CertificateWatch,
} from './tls/certificate-files.ts';
import { SelfManagedTls } from './tls/self-managed.ts';

export interface RunningWebhook {
  readonly server: Server;
  readonly port: number;
  readonly metrics: WebhookMetrics;
  /** NATIVE_SIDECARS as resolved at start; fixed for the life of the process. */
  readonly nativeSidecars: NativeSidecarsDecision;
  close(): Promise<void>;
}

export interface StartOptions {
  readonly log: Logger;
  /**
   * How to reach the API server (in-cluster settings in production), for self-managed TLS and
   * NATIVE_SIDECARS=auto. Called at most once, and only when one of them needs it.
   */
  readonly kubernetes?: () => KubernetesApiOptions;
  /** NATIVE_SIDECARS=auto: timeout and retries of GET /version (tests shorten them). */
  readonly serverVersion?: ServerVersionProbe;
  /** Self-managed mode: how often the Secret and caBundle are reconciled. */
  readonly reconcileIntervalMs?: number;
  readonly defaultMetrics?: boolean;
}

/**
 * Starts the HTTPS server with the configured TLS mode; resolves once it listens. A start-up failure
 * the operator fixes in the settings or the Deployment (certificate files, a port in use, no
 * service-account token for self-managed TLS) rejects with ConfigErrors naming the setting and the
 * fix, as parseWebhookConfig does; anything else is an unexpected fault.
 */
export async function startWebhook(config: WebhookConfig, options: StartOptions): Promise<RunningWebhook> {
  const { log } = options;
  const metrics = createWebhookMetrics({ defaultMetrics: options.defaultMetrics ?? false });
  // One client for both users; built lazily so a fixed NATIVE_SIDECARS in file mode never touches
  // the service-account files.
  let api: KubernetesApi | undefined;
  const kubernetesApi = (): KubernetesApi => {
    if (!options.kubernetes)
      throw new InClusterConfigError(
        'no Kubernetes API settings were given',
        'start it through webhook/main.ts',
      );
    return (api ??= new KubernetesApi(options.kubernetes()));
  };
  // Decided before serving: every patch depends on it, and it never changes while running.
  const nativeSidecars = await decideNativeSidecars(
    config.injection.nativeSidecars,
    kubernetesApi,
    log,
    options.serverVersion,
  );
  metrics.nativeSidecars.set({ source: nativeSidecars.source }, nativeSidecars.enabled ? 1 : 0);
  const defaults: InjectionDefaults = { ...config.injection, nativeSidecars: nativeSidecars.enabled };
  const cache = new AdmissionCache(config.admissionCacheSize);
  let ready = false;
  let server: Server;
  let stopTls: () => Promise<void>;
  const serve = (tls: { cert: string; key: string }) =>
    createWebhookServer({ tls, defaults, cache, metrics, log, isReady: () => ready });

  if (config.tls.mode === 'file') {
    const { certFile, keyFile } = config.tls;
    const first = readCertificateFiles(certFile, keyFile);
    metrics.certificateExpiry.set(first.notAfter.getTime() / 1000);
    server = serve(first);
    const watch: CertificateWatch = watchCertificateFiles(
      certFile,
      keyFile,
      (pair) => {
        server.setSecureContext({ cert: pair.cert, key: pair.key });
        metrics.tlsReloads.inc({ result: 'ok' });
        metrics.certificateExpiry.set(pair.notAfter.getTime() / 1000);
        log.info({ notAfter: pair.notAfter.toISOString() }, 'serving certificate reloaded');
      },
      (error) => {
        metrics.tlsReloads.inc({ result: 'failed' });
        log.warn(
          { err: { name: error.name, message: error.message } },
          'certificate files not usable yet; keeping the current pair',
        );
      },
      log,
    );
    await watch.ready;
    stopTls = () => watch.close();
  } else {
    if (!options.kubernetes) throw new Error('self-managed TLS needs Kubernetes API settings');
    let client: KubernetesApi;
    try {
      client = kubernetesApi();
    } catch (e) {
      if (e instanceof InClusterConfigError)
        throw new ConfigErrors([
          new ConfigError(
            'TLS_MODE',
            `self-managed needs the Kubernetes API, but ${e.problem}`,
            `${e.fix}, or use TLS_MODE=file`,
          ),
        ]);
      throw e;
    }
    const tls = new SelfManagedTls({
      api: client,
      namespace: config.injection.ownNamespace,
      secretName: config.tls.secretName,
      serviceName: config.tls.serviceName,
      webhookConfigurationName: config.tls.webhookConfigurationName,
      certValidityMs: config.tls.certValidityMs,
      caValidityMs: config.tls.caValidityMs,
      log,
    });
    const first = await tls.reconcile();
    let served = first.cert;
    metrics.certificateExpiry.set(first.notAfter.getTime() / 1000);
    server = serve(first);
    let timer: NodeJS.Timeout | undefined;
    let stopped = false;
    const schedule = (ms: number) => {
      if (stopped) return;
      timer = setTimeout(() => {
        tls.reconcile().then(
          (m) => {
            if (m.cert !== served) {
              served = m.cert;
              server.setSecureContext({ cert: m.cert, key: m.key });
              metrics.tlsReloads.inc({ result: 'ok' });
              metrics.certificateExpiry.set(m.notAfter.getTime() / 1000);
              log.info({ notAfter: m.notAfter.toISOString() }, 'serving certificate rotated');
            }
            schedule(options.reconcileIntervalMs ?? 600_000);
          },
          (e: unknown) => {
            metrics.tlsReloads.inc({ result: 'failed' });
            log.warn(
              { err: { name: (e as Error).name, message: (e as Error).message } },
              'certificate reconcile failed; retrying',
            );
            schedule(30_000);
          },
        );
      }, ms);
      timer.unref();
    };
    schedule(options.reconcileIntervalMs ?? 600_000);
    stopTls = async () => {
      stopped = true;
      if (timer) clearTimeout(timer);
    };
  }

  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(config.port, config.host, () => {
        server.off('error', reject);
        resolve();
      });
    });
  } catch (e) {
    // The certificate watch or reconcile timer would keep the process alive after the failure.
    await stopTls();
    throw listenError(e, config);
  }
  ready = true;
  const port = (server.address() as AddressInfo).port;
  log.info({ port, tls: config.tls.mode, heapLimitMiB: heapLimitMiB() }, 'webhook listening');
  return {
    server,
    port,
    metrics,
    nativeSidecars,
    close: async () => {
      ready = false;
      await stopTls();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
      });
    },
  };
}

/** A listen failure the settings can fix, as ConfigErrors; anything else unchanged. */
function listenError(e: unknown, config: WebhookConfig): unknown {
  const code = (e as NodeJS.ErrnoException).code;
  const where = `${config.host}:${config.port}`;
  const error =
    code === 'EADDRINUSE'
      ? new ConfigError(
          'WEBHOOK_PORT',
          `${config.port} is in use on ${quote(config.host)}`,
          "choose a free port (and the Service's targetPort with it), or stop what listens there",
        )
      : code === 'EACCES'
        ? new ConfigError(
            'WEBHOOK_PORT',
            `${quote(where)} may not be bound by the webhook's user (ports below 1024 need privileges)`,
            'use a port from 1024 up, e.g. the default 8443',
          )
        : code === 'EADDRNOTAVAIL'
          ? new ConfigError(
              'WEBHOOK_HOST',
              `${quote(config.host)} is not an address of this pod`,
              'use 0.0.0.0 (every address, the default) or an address the pod has',
            )
          : undefined;
  return error ? new ConfigErrors([error]) : e;
}
