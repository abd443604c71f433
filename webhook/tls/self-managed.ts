import { X509Certificate } from 'node:crypto';
import { ConfigError, ConfigErrors, quote } from '../../agent/contract/errors.ts';
import type { Logger } from '../../agent/log.ts';
import { KubernetesApiError, type KubernetesApi, type SecretObject } from '../kubernetes-api.ts';
import { describePermission, MissingPermissionError, type Permission } from '../missing-permission.ts';
import { issueCertificateAuthority, issueServingCertificate, serviceDnsNames } from './issue-certificates.ts';

/**
 * Self-managed TLS for clusters without cert-manager. Every replica runs the same reconcile:
 * read the Secret; if it is missing or due for renewal, compute the next state and write it with
 * the resourceVersion it read (optimistic concurrency: one replica wins, the others get 409 and
 * read the winner's); then make the webhook configuration's caBundle equal to the Secret's bundle.
 *
 * CA rotation takes two steps so no API server ever sees a serving cert it does not trust yet:
 * a new CA first joins the bundle only (`ca-next`); it signs serving certs from the next serving
 * cert renewal on, by which time the bundle has long been patched. An old CA stays in the bundle
 * until it expires.
 */

export interface SelfManagedTlsOptions {
  readonly api: KubernetesApi;
  readonly namespace: string;
  readonly secretName: string;
  readonly serviceName: string;
  readonly webhookConfigurationName: string;
  readonly certValidityMs: number;
  readonly caValidityMs: number;
  readonly log: Logger;
  /** Injectable so tests can move time forward. */
  readonly now?: () => Date;
}

export interface ServingMaterial {
  readonly cert: string;
  readonly key: string;
  /** PEM certificates the webhook configuration trusts. */
  readonly caBundle: string;
  readonly notAfter: Date;
}

interface KeyPair {
  readonly cert: string;
  readonly key: string;
}

interface StoredState {
  readonly ca: KeyPair;
  readonly next?: KeyPair;
  readonly leaf: KeyPair;
  readonly bundle: readonly string[];
}

const KEYS = {
  leafCert: 'tls.crt',
  leafKey: 'tls.key',
  caCert: 'ca.crt',
  caKey: 'ca.key',
  nextCert: 'ca-next.crt',
  nextKey: 'ca-next.key',
  bundle: 'ca-bundle.crt',
} as const;

const MAX_ATTEMPTS = 5;

/** Where deploy/ grants what self-managed TLS calls (the overlay that sets TLS_MODE=self-managed). */
const OVERLAY = 'deploy/overlays/self-managed';
const RBAC_MANIFEST = `${OVERLAY}/rbac.yaml`;
const SECRET_GRANT = 'the Role secret-agent-webhook-tls and its RoleBinding';
const CA_BUNDLE_GRANT = 'the ClusterRole secret-agent-webhook-cabundle and its ClusterRoleBinding';

/** A 403 as the installation error it is: which permission, and which manifest grants it. */
function missingPermission(permission: Permission, e: KubernetesApiError): MissingPermissionError {
  const grant = permission.resource === 'secrets' ? SECRET_GRANT : CA_BUNDLE_GRANT;
  const names =
    permission.name === undefined ? '' : `; its resourceNames must include ${quote(permission.name)}`;
  return new MissingPermissionError(
    permission,
    `the webhook's service account may not ${describePermission(permission)}, which self-managed TLS needs (${e.message})`,
    `apply ${grant} from ${RBAC_MANIFEST} (kubectl apply -k ${OVERLAY}), bound to the webhook's ServiceAccount in its namespace${names}`,
  );
}

function splitPem(pem: string): string[] {
  return (
    pem
      .match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----\n?/g)
      ?.map((c) => c.trimEnd() + '\n') ?? []
  );
}

function decode(data: Record<string, string> | undefined, key: string): string | undefined {
  const v = data?.[key];
  return v === undefined ? undefined : Buffer.from(v, 'base64').toString('utf8');
}

/** The Secret's state, or undefined when it is unusable (then it is replaced). */
function readState(secret: SecretObject): StoredState | undefined {
  const d = secret.data;
  const get = (k: string) => decode(d, k);
  const [caCert, caKey, leafCert, leafKey, bundle] = [
    get(KEYS.caCert),
    get(KEYS.caKey),
    get(KEYS.leafCert),
    get(KEYS.leafKey),
    get(KEYS.bundle),
  ];
  if (!caCert || !caKey || !leafCert || !leafKey || !bundle) return undefined;
  const nextCert = get(KEYS.nextCert);
  const nextKey = get(KEYS.nextKey);
  try {
    new X509Certificate(caCert);
    new X509Certificate(leafCert);
  } catch {
    return undefined;
  }
  return {
    ca: { cert: caCert, key: caKey },
    ...(nextCert && nextKey ? { next: { cert: nextCert, key: nextKey } } : {}),
    leaf: { cert: leafCert, key: leafKey },
    bundle: splitPem(bundle),
  };
}

function toSecret(name: string, state: StoredState, resourceVersion?: string): SecretObject {
  const b64 = (text: string) => Buffer.from(text).toString('base64');
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      name,
      labels: { 'app.kubernetes.io/managed-by': 'secret-agent-webhook' },
      ...(resourceVersion ? { resourceVersion } : {}),
    },
    type: 'kubernetes.io/tls',
    data: {
      [KEYS.leafCert]: b64(state.leaf.cert),
      [KEYS.leafKey]: b64(state.leaf.key),
      [KEYS.caCert]: b64(state.ca.cert),
      [KEYS.caKey]: b64(state.ca.key),
      ...(state.next ? { [KEYS.nextCert]: b64(state.next.cert), [KEYS.nextKey]: b64(state.next.key) } : {}),
      [KEYS.bundle]: b64(state.bundle.join('')),
    },
  };
}

export class SelfManagedTls {
  readonly #o: SelfManagedTlsOptions;

  constructor(options: SelfManagedTlsOptions) {
    this.#o = options;
  }

  /** Brings the Secret and the caBundle up to date; returns what this replica should serve. */
  async reconcile(): Promise<ServingMaterial> {
    const state = await this.#reconcileSecret();
    const caBundle = state.bundle.join('');
    await this.#syncCaBundle(caBundle);
    return {
      cert: state.leaf.cert,
      key: state.leaf.key,
      caBundle,
      notAfter: new Date(new X509Certificate(state.leaf.cert).validTo),
    };
  }

  async #reconcileSecret(): Promise<StoredState> {
    const { api, namespace, secretName, log } = this.#o;
    const secret = { resource: 'secrets', group: '', namespace } as const;
    for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
      const existing = await permitted({ ...secret, verb: 'get', name: secretName }, () =>
        api.getSecret(namespace, secretName),
      );
      const current = existing ? readState(existing) : undefined;
      const next = await this.#plan(current);
      if (next === current) return current!;
      try {
        if (existing) {
          await permitted({ ...secret, verb: 'update', name: secretName }, () =>
            api.replaceSecret(namespace, toSecret(secretName, next, existing.metadata.resourceVersion ?? '')),
          );
        } else {
          await permitted({ ...secret, verb: 'create' }, () =>
            api.createSecret(namespace, toSecret(secretName, next)),
          );
        }
        log.info({ secret: secretName, renewed: current !== undefined }, 'serving certificate written');
        return next;
      } catch (e) {
        // Another replica wrote first: read what it wrote on the next pass.
        if (e instanceof KubernetesApiError && e.status === 409) {
          log.debug({ reason: e.reason, attempt }, 'lost the certificate write race; reading the winner');
          continue;
        }
        throw e;
      }
    }
    throw new Error(`the Secret ${namespace}/${secretName} kept changing during ${MAX_ATTEMPTS} attempts`);
  }

  /** The state to store: `current` itself when nothing is due, else a new object. */
  async #plan(current: StoredState | undefined): Promise<StoredState> {
    const { certValidityMs, caValidityMs, serviceName, namespace } = this.#o;
    const now = (this.#o.now ?? (() => new Date()))();
    const t = now.getTime();
    const dnsNames = serviceDnsNames(serviceName, namespace);
    const notAfter = (pem: string) => new Date(new X509Certificate(pem).validTo).getTime();
    const issueLeaf = (ca: KeyPair) => issueServingCertificate(ca, dnsNames, now, certValidityMs);

    if (!current || notAfter(current.ca.cert) <= t) {
      const ca = await issueCertificateAuthority(`${serviceName}.${namespace} webhook CA`, now, caValidityMs);
      return { ca, leaf: await issueLeaf(ca), bundle: [ca.cert] };
    }
    let { ca, next, leaf } = current;
    let bundle = current.bundle.filter((pem) => notAfter(pem) > t);
    let changed = bundle.length !== current.bundle.length;
    const nextWasTrusted = next !== undefined && bundle.includes(next.cert);
    if (!next && notAfter(ca.cert) - t < caValidityMs / 3) {
      next = await issueCertificateAuthority(`${serviceName}.${namespace} webhook CA`, now, caValidityMs);
      bundle = [...bundle, next.cert];
      changed = true;
    }
    const leafCert = new X509Certificate(leaf.cert);
    const leafDue =
      notAfter(leaf.cert) - t < certValidityMs / 3 ||
      !leafCert.verify(new X509Certificate(ca.cert).publicKey) ||
      leafCert.checkHost(dnsNames[0]!) === undefined;
    if (leafDue) {
      if (next && nextWasTrusted) {
        ca = next;
        next = undefined;
      }
      leaf = await issueLeaf(ca);
      changed = true;
    }
    if (!bundle.includes(ca.cert)) {
      bundle = [ca.cert, ...bundle];
      changed = true;
    }
    if (!changed) return current;
    return { ca, ...(next ? { next } : {}), leaf, bundle };
  }

  /** Sets every webhook's caBundle in the configuration to `bundle` (base64 of the PEM list). */
  async #syncCaBundle(bundle: string): Promise<void> {
    const { api, webhookConfigurationName, log } = this.#o;
    const desired = Buffer.from(bundle).toString('base64');
    const configuration = {
      resource: 'mutatingwebhookconfigurations',
      group: 'admissionregistration.k8s.io',
      name: webhookConfigurationName,
    } as const;
    for (let attempt = 1; ; attempt++) {
      const config = await permitted({ ...configuration, verb: 'get' }, () =>
        api.getMutatingWebhookConfiguration(webhookConfigurationName),
      );
      const ops = (config.webhooks ?? []).flatMap((w, i) =>
        w.clientConfig.caBundle === desired
          ? []
          : [
              // The index must still be this webhook when the patch lands.
              { op: 'test', path: `/webhooks/${i}/name`, value: w.name },
              { op: 'add', path: `/webhooks/${i}/clientConfig/caBundle`, value: desired },
            ],
      );
      if (ops.length === 0) return;
      try {
        await permitted({ ...configuration, verb: 'patch' }, () =>
          api.patchMutatingWebhookConfiguration(webhookConfigurationName, ops),
        );
        log.info({ configuration: webhookConfigurationName }, 'caBundle updated');
        return;
      } catch (e) {
        // permitted() has turned a refused token or permission into its own error already: what is left
        // (a lost race, an index that moved, a server error) is retried.
        if (!(e instanceof KubernetesApiError) || attempt >= MAX_ATTEMPTS) throw e;
      }
    }
  }
}

/**
 * `call`'s result. What the installation must fix is told as such, not as a fault of ours (exit 70):
 * a 403 becomes the MissingPermissionError naming `permission`; a 401 (the token is not accepted) and
 * a 404 for the webhook configuration (its name is not what was applied) become ConfigErrors naming
 * the setting and the fix (exit 2).
 */
async function permitted<T>(permission: Permission, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (e) {
    if (!(e instanceof KubernetesApiError)) throw e;
    if (e.status === 403) throw missingPermission(permission, e);
    if (e.status === 401)
      throw new ConfigErrors([
        new ConfigError(
          'TLS_MODE',
          `self-managed TLS calls the Kubernetes API, which did not accept the webhook's service-account token (${e.message})`,
          "let the Deployment mount its ServiceAccount's token (automountServiceAccountToken must not be false) and check that the ServiceAccount exists, or use TLS_MODE=file",
        ),
      ]);
    // GET of a Secret in a namespace that does not exist is a plain 404 (handled as "no Secret yet");
    // the create that follows is where the API server says the namespace is missing.
    if (e.status === 404 && permission.resource === 'secrets' && permission.verb === 'create')
      throw new ConfigErrors([
        new ConfigError(
          'WEBHOOK_NAMESPACE',
          `self-managed TLS keeps its Secret in the webhook's namespace, but ${quote(permission.namespace ?? '')} does not exist (${e.message})`,
          'set WEBHOOK_NAMESPACE to the namespace the webhook runs in (deploy/base sets it from the pod: fieldRef metadata.namespace)',
        ),
      ]);
    if (e.status === 404 && permission.resource === 'mutatingwebhookconfigurations')
      throw new ConfigErrors([
        new ConfigError(
          'WEBHOOK_CONFIGURATION_NAME',
          `the MutatingWebhookConfiguration ${quote(permission.name ?? '')}, whose caBundle self-managed TLS keeps, does not exist (${e.message})`,
          `apply it (kubectl apply -k ${OVERLAY}), or set WEBHOOK_CONFIGURATION_NAME to the name of the one you applied (kubectl get mutatingwebhookconfigurations)`,
        ),
      ]);
    throw e;
  }
}
