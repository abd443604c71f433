import {
  BatchGetSecretValueCommand,
  GetSecretValueCommand,
  SecretsManagerClient,
  type SecretValueEntry,
} from '@aws-sdk/client-secrets-manager';
import type { AwsReference } from '../../contract/reference.ts';
import { CarriedCredentials } from './carried-credentials.ts';
import {
  contentVersion,
  namedVersion,
  errorDetail,
  fetchEach,
  ProviderError,
  toProviderError,
  type FetchContext,
  type FetchOutcome,
  type ProviderFactory,
  type ProviderOptions,
  type SecretValue,
} from '../provider.ts';

/** BatchGetSecretValue takes at most 20 ids a call. */
const BATCH_SIZE = 20;
/** A request's limit when the caller gives no attempt budget (fetches always do). */
const REQUEST_TIMEOUT_MS = 15_000;

/**
 * AWS Secrets Manager. Credentials and endpoint come from the SDK's own chain (IRSA web identity,
 * EKS Pod Identity, env; AWS_ENDPOINT_URL_SECRETS_MANAGER / AWS_ENDPOINT_URL). Secrets read at their
 * current version are fetched 20 to a call with BatchGetSecretValue; a pinned stage or version id
 * needs GetSecretValue. The SDK's own retries are off: the agent retries with its deadline.
 */
export const createAwsProvider: ProviderFactory<AwsReference> = (options) => {
  const clients = new Map<string, SecretsManagerClient>();
  /** The endpoint each region's client last sent a request to, as the SDK resolved it. */
  const endpoints = new Map<string, string>();
  const defaultRegion = process.env.AWS_REGION ?? process.env.AWS_DEFAULT_REGION;
  // Some IAM policies grant GetSecretValue but not BatchGetSecretValue; after one denial, stop batching.
  let batchAllowed = true;
  const carried = new CarriedCredentials(process.env);

  const clientFor = (region: string): SecretsManagerClient => {
    let client = clients.get(region);
    if (!client) {
      client = new SecretsManagerClient({
        region,
        maxAttempts: 1,
        customUserAgent: userAgent(options),
        // Without throwOnRequestTimeout the SDK only warns when requestTimeout passes; each send
        // lowers it to the attempt's budget.
        requestHandler: {
          connectionTimeout: 5000,
          requestTimeout: REQUEST_TIMEOUT_MS,
          throwOnRequestTimeout: true,
        },
      });
      // Built requests carry the endpoint the SDK resolved (region, AWS_ENDPOINT_URL_*, FIPS): logs name it.
      client.middlewareStack.add(
        (next) => async (args) => {
          const request = args.request as { protocol?: string; hostname?: string; port?: number };
          if (request.hostname)
            endpoints.set(
              region,
              `${request.protocol ?? 'https:'}//${request.hostname}${request.port ? `:${request.port}` : ''}`,
            );
          return next(args);
        },
        { step: 'build', name: 'secretAgentEndpoint' },
      );
      carried.wrap(client);
      clients.set(region, client);
    }
    return client;
  };

  const getOne = async (ref: AwsReference, region: string, ctx: FetchContext): Promise<SecretValue> => {
    try {
      const out = await clientFor(region).send(
        new GetSecretValueCommand({
          SecretId: ref.secretId,
          ...(ref.versionStage ? { VersionStage: ref.versionStage } : {}),
          ...(ref.versionId ? { VersionId: ref.versionId } : {}),
        }),
        sendOptions(ctx),
      );
      return toValue(out);
    } catch (e) {
      throw awsError(e, region);
    }
  };

  const getBatch = async (
    refs: readonly AwsReference[],
    region: string,
    ctx: FetchContext,
  ): Promise<FetchOutcome[]> => {
    const entries: SecretValueEntry[] = [];
    const errors = new Map<string, ProviderError>();
    let nextToken: string | undefined;
    do {
      const out = await clientFor(region).send(
        new BatchGetSecretValueCommand({
          SecretIdList: refs.map((r) => r.secretId),
          ...(nextToken ? { NextToken: nextToken } : {}),
        }),
        sendOptions(ctx),
      );
      entries.push(...(out.SecretValues ?? []));
      for (const err of out.Errors ?? []) {
        if (err.SecretId)
          errors.set(err.SecretId, awsError({ name: err.ErrorCode, message: err.Message }, region));
      }
      nextToken = out.NextToken;
    } while (nextToken);
    return refs.map((ref): FetchOutcome => {
      const entry = entries.find((e) => matches(ref.secretId, e));
      if (entry) return { ok: true, value: toValue(entry) };
      return {
        ok: false,
        error:
          errors.get(ref.secretId) ??
          new ProviderError(
            'internal',
            'missing from the BatchGetSecretValue response',
            'report this; the secret was neither returned nor reported as an error',
          ),
      };
    });
  };

  const fetchRegion = async (
    refs: readonly AwsReference[],
    region: string,
    ctx: FetchContext,
  ): Promise<FetchOutcome[]> => {
    const current = refs.filter((r) => !r.versionStage && !r.versionId);
    const pinned = refs.filter((r) => r.versionStage || r.versionId);
    const outcomes = new Map<AwsReference, FetchOutcome>();
    const jobs: Promise<void>[] = [];
    if (current.length > 1 && batchAllowed) {
      for (let i = 0; i < current.length; i += BATCH_SIZE) {
        const chunk = current.slice(i, i + BATCH_SIZE);
        jobs.push(
          getBatch(chunk, region, ctx)
            .catch(async (e: unknown): Promise<FetchOutcome[]> => {
              const error = awsError(e, region);
              if (error.reason !== 'permission-denied') return chunk.map(() => ({ ok: false, error }));
              batchAllowed = false;
              return fetchEach(chunk, 8, (ref) => getOne(ref, region, ctx));
            })
            .then((results) => chunk.forEach((ref, j) => outcomes.set(ref, results[j]!))),
        );
      }
    } else {
      pinned.push(...current);
    }
    jobs.push(
      fetchEach(pinned, 8, (ref) => getOne(ref, region, ctx)).then((results) =>
        pinned.forEach((ref, j) => outcomes.set(ref, results[j]!)),
      ),
    );
    await Promise.all(jobs);
    return refs.map((ref) => outcomes.get(ref)!);
  };

  return {
    async fetch(refs, ctx) {
      const byRegion = new Map<string, AwsReference[]>();
      const outcomes = new Map<AwsReference, FetchOutcome>();
      for (const ref of refs) {
        const region = ref.region ?? defaultRegion;
        if (!region) {
          outcomes.set(ref, {
            ok: false,
            error: new ProviderError(
              'invalid',
              `no AWS region for secret name ${JSON.stringify(ref.secretId)}`,
              'set AWS_REGION, or reference the secret by its full ARN',
              { transient: false },
            ),
          });
          continue;
        }
        byRegion.set(region, [...(byRegion.get(region) ?? []), ref]);
      }
      await Promise.all(
        [...byRegion].map(async ([region, group]) => {
          const results = await fetchRegion(group, region, ctx);
          group.forEach((ref, i) => outcomes.set(ref, results[i]!));
        }),
      );
      return refs.map((ref) => outcomes.get(ref)!);
    },
    handOff: () => ({ state: carried.save() ?? null, dueAt: undefined }),
    async resume(state) {
      carried.restore(state);
    },
    endpoint(ref) {
      const region = ref.region ?? defaultRegion;
      if (!region) return undefined;
      return (
        endpoints.get(region) ?? configuredEndpoint() ?? `https://secretsmanager.${region}.amazonaws.com`
      );
    },
    close() {
      // destroy() closes the keep-alive sockets; the agent exits right after an init run.
      for (const client of clients.values()) client.destroy();
      clients.clear();
    },
  };
};

/** The attempt's abort signal and time budget, for one send. */
function sendOptions(ctx: FetchContext): { abortSignal: AbortSignal; requestTimeout?: number } {
  return {
    abortSignal: ctx.signal,
    ...(ctx.timeoutMs !== undefined ? { requestTimeout: Math.max(1, Math.round(ctx.timeoutMs)) } : {}),
  };
}

/** The endpoint override of the SDK's standard env, for a log line before any request was built. */
function configuredEndpoint(): string | undefined {
  return process.env.AWS_ENDPOINT_URL_SECRETS_MANAGER || process.env.AWS_ENDPOINT_URL || undefined;
}

/** The pod's identity rides in the user agent, so CloudTrail shows which pod read which secret. */
function userAgent(options: ProviderOptions): [string, string][] {
  const ua: [string, string][] = [['secret-agent', options.agentVersion]];
  if (options.pod.namespace && options.pod.name)
    ua.push(['k8s-pod', `${options.pod.namespace}.${options.pod.name}`]);
  return ua;
}

/** A batch entry answers a reference by ARN, by name, or by an ARN without its random suffix. */
function matches(secretId: string, entry: SecretValueEntry): boolean {
  return (
    entry.ARN === secretId ||
    entry.Name === secretId ||
    (secretId.startsWith('arn:') && !!entry.ARN?.startsWith(`${secretId}-`))
  );
}

function toValue(out: {
  SecretString?: string | undefined;
  SecretBinary?: Uint8Array | undefined;
  VersionId?: string | undefined;
}): SecretValue {
  const bytes = out.SecretString !== undefined ? Buffer.from(out.SecretString, 'utf8') : out.SecretBinary;
  if (!bytes)
    throw new ProviderError(
      'invalid',
      'the secret version has neither SecretString nor SecretBinary',
      'store a value in the secret',
    );
  return { bytes, ...(out.VersionId ? namedVersion(out.VersionId) : contentVersion(bytes)) };
}

/** Maps SDK and service errors to reasons and fixes; only names and the service's message, never a payload. */
function awsError(e: unknown, region: string): ProviderError {
  if (e instanceof ProviderError) return e;
  const err = e as {
    name?: string;
    message?: string;
    $metadata?: { httpStatusCode?: number };
    $retryable?: unknown;
  };
  const name = err?.name ?? 'Error';
  const detail = errorDetail(e);
  switch (name) {
    case 'ResourceNotFoundException':
      return new ProviderError(
        'not-found',
        detail,
        `check the secret name or ARN and that it exists in region ${region}`,
      );
    case 'InvalidRequestException':
      if (/marked (for )?delet/i.test(err.message ?? '')) {
        return new ProviderError(
          'deleted',
          detail,
          'restore the secret (aws secretsmanager restore-secret) or reference another one',
        );
      }
      return new ProviderError('invalid', detail, 'check the reference’s versionStage / versionId');
    case 'InvalidParameterException':
      return new ProviderError('invalid', detail, 'check the reference');
    case 'AccessDeniedException':
      return new ProviderError(
        'permission-denied',
        detail,
        'allow secretsmanager:GetSecretValue (and BatchGetSecretValue) on the secret for the pod’s IAM role',
      );
    case 'DecryptionFailure':
      return new ProviderError(
        'permission-denied',
        detail,
        'allow kms:Decrypt on the secret’s KMS key for the pod’s IAM role',
      );
    case 'UnrecognizedClientException':
    case 'InvalidSignatureException':
    case 'ExpiredTokenException':
    case 'CredentialsProviderError':
      return new ProviderError(
        'auth',
        detail,
        'give the pod AWS credentials: IRSA (service-account annotation), EKS Pod Identity, or env',
      );
    case 'ThrottlingException':
    case 'TooManyRequestsException':
    case 'RequestLimitExceeded':
      return new ProviderError(
        'throttled',
        detail,
        'retried with backoff; spread start-ups or raise INIT_DEADLINE',
      );
    case 'InternalServiceError':
    case 'ServiceUnavailable':
      return new ProviderError('unavailable', detail, 'a Secrets Manager fault; retried with backoff');
  }
  const status = err?.$metadata?.httpStatusCode;
  if (status !== undefined && status >= 500)
    return new ProviderError('unavailable', detail, 'a Secrets Manager fault; retried with backoff');
  if (status === 429) return new ProviderError('throttled', detail, 'retried with backoff');
  return toProviderError(e);
}
